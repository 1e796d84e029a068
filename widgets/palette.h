#pragma once
// The workbench's colours, in one place so that plots, table, panels and tests agree on them.

#include "core/analysis/analysis_types.h"

#include <QColor>

namespace lossbound::widgets {

/// The reference run's curve (blue).
inline const QColor kReferenceColor{31, 119, 180};
/// The candidate run's curve (orange).
inline const QColor kCandidateColor{255, 127, 14};
/// The envelope band and the ±1 margin band (green; drawn translucent).
inline const QColor kBandColor{44, 160, 44};
/// The first-exit marker and the points outside the envelope (red).
inline const QColor kExitColor{214, 39, 40};
/// Checkpoint markers (grey).
inline const QColor kCheckpointColor{110, 110, 110};

/// Returns the colour that stands for a step verdict (text and markers).
QColor verdictColor(StepVerdict verdict);
/// Returns a light background tint for a step verdict (table cells, verdict headline).
QColor verdictTint(StepVerdict verdict);

}  // namespace lossbound::widgets
