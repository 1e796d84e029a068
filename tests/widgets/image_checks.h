#pragma once
// Structural checks of grabbed plot images: colour classes and column scans, not pixel equality.

#include <QColor>
#include <QImage>
#include <QRect>

namespace lossbound::widgets::test {

/// Returns true for the translucent green of the envelope band (and its outline).
inline bool isBandPixel(QColor c) { return c.green() > c.red() + 30 && c.green() > c.blue() + 30; }

/// Returns true for the red of the first-exit marker and of outside points.
inline bool isExitPixel(QColor c) { return c.red() > 150 && c.green() < 100 && c.blue() < 100; }

/// Counts pixels of `area` (clipped to the image) for which `pred` holds.
template <typename Pred>
int countPixels(const QImage& image, QRect area, Pred pred) {
  area &= image.rect();
  int n = 0;
  for (int y = area.top(); y <= area.bottom(); ++y)
    for (int x = area.left(); x <= area.right(); ++x)
      if (pred(image.pixelColor(x, y))) ++n;
  return n;
}

/// Returns the fraction of rows of `area` where one of the columns x-1..x+1 satisfies `pred`.
template <typename Pred>
double columnCoverage(const QImage& image, const QRect& area, int x, Pred pred) {
  int hit = 0;
  for (int y = area.top(); y <= area.bottom(); ++y)
    for (int dx = -1; dx <= 1; ++dx)
      if (image.rect().contains(x + dx, y) && pred(image.pixelColor(x + dx, y))) {
        ++hit;
        break;
      }
  return double(hit) / std::max(1, area.height());
}

}  // namespace lossbound::widgets::test
