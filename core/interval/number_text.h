#pragma once
// The one way numbers become text in messages, notes and reports (the CSV and JSON reports, the
// CLI, the widgets through qNumber in core/analysis/qt_text.h): printf's "%.*g", with the
// non-finite values always spelled "nan", "inf" and "-inf" (glibc would print "-nan" for a NaN
// with its sign bit set).

#include <string>

namespace lossbound {

/// Returns `v` with `digits` significant digits (1 to 17) as "%.*g" prints it; "nan", "inf" or
/// "-inf" for non-finite values. With the default 17 digits the text reads back to the same
/// double.
std::string numberText(double v, int digits = 17);

}  // namespace lossbound
