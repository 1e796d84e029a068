#include "widgets/palette.h"

namespace lossbound::widgets {

QColor verdictColor(StepVerdict verdict) {
  switch (verdict) {
    case StepVerdict::Rounding:
      return QColor(30, 120, 30);
    case StepVerdict::BugLikely:
      return QColor(200, 90, 0);
    case StepVerdict::BugCertain:
      return kExitColor;
    case StepVerdict::Untrustworthy:
      return QColor(150, 100, 0);
    case StepVerdict::NotBounded:
      return QColor(110, 110, 110);
  }
  return Qt::black;
}

QColor verdictTint(StepVerdict verdict) {
  switch (verdict) {
    case StepVerdict::Rounding:
      return QColor(223, 242, 223);
    case StepVerdict::BugLikely:
      return QColor(255, 229, 204);
    case StepVerdict::BugCertain:
      return QColor(250, 210, 210);
    case StepVerdict::Untrustworthy:
      return QColor(250, 240, 200);
    case StepVerdict::NotBounded:
      return QColor(230, 230, 230);
  }
  return Qt::white;
}

}  // namespace lossbound::widgets
