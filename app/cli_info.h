#pragma once
// `lossbound-cli info [--check-values | --value-budget MIB] FILE...`: validates run files and
// prints a summary of each, with the checkpoint tensors that hold NaN or ±inf (by dataset path and
// step). Reading values costs time on big files, so by default only the first checkpoints, up to
// kInfoValueBudgetBytes of tensor data, are checked (the summary says which); --value-budget
// sets another amount, --check-values checks all of them.

#include <QStringList>
#include <QTextStream>

#include <cstdint>

namespace lossbound::app {

/// Tensor data (as binary64 in memory) that `info` reads by default to look for NaN and ±inf:
/// 256 MiB, about a second of reading; the first checkpoint is always checked.
inline constexpr std::int64_t kInfoValueBudgetBytes = std::int64_t{256} << 20;

/// Validates and summarises each file (summary and value warnings to `out`, problems to `err`);
/// `--check-values` lifts the value budget, `--value-budget MIB` sets it. Returns 0 when all files
/// are valid run files (NaN or ±inf in a checkpoint is a warning), 2 when any is not (or no file
/// was given). Never throws.
int runInfoCommand(const QStringList& args, QTextStream& out, QTextStream& err);

/// Runs `lossbound-cli validate FILE...`: validates every file in this process (RunFile::validate:
/// the structure and every checkpoint chunk index) and prints "<file>: valid" or the reader's
/// message; returns 0 when all are valid, 2 otherwise. The GUI runs it as its child process so a
/// file that crashes libhdf5 cannot take the GUI down.
int runValidateCommand(const QStringList& files, QTextStream& out, QTextStream& err);

}  // namespace lossbound::app
