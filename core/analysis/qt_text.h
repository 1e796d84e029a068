#pragma once
// The core's text (UTF-8 std::string, numberText) as QString, for the JSON report, the CLI and
// the widgets: one conversion instead of one per file. Qt Core only.

#include "core/interval/number_text.h"

#include <QString>

#include <string_view>

namespace lossbound {

/// Returns the UTF-8 text `s` as a QString.
inline QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

/// Returns numberText(v, digits) as a QString ("%.*g"; "nan", "inf", "-inf").
inline QString qNumber(double v, int digits = 17) { return qs(numberText(v, digits)); }

}  // namespace lossbound
