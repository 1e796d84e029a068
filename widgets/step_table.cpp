#include "widgets/step_table.h"

#include "core/analysis/qt_text.h"
#include "widgets/palette.h"

#include <QApplication>
#include <QClipboard>
#include <QHeaderView>
#include <QItemSelection>
#include <QKeyEvent>
#include <QSortFilterProxyModel>

#include <algorithm>
#include <cmath>

namespace lossbound::widgets {

namespace {

int severity(StepVerdict v) {
  switch (v) {
    case StepVerdict::Rounding:
      return 0;
    case StepVerdict::NotBounded:
      return 1;
    case StepVerdict::Untrustworthy:
      return 2;
    case StepVerdict::BugLikely:
      return 3;
    case StepVerdict::BugCertain:
      return 4;
  }
  return 0;
}

QVariant number(double v) { return std::isnan(v) ? QVariant() : QVariant(v); }

}  // namespace

StepTableModel::StepTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void StepTableModel::setSession(const SessionData& session) {
  beginResetModel();
  mReference = session.reference;
  mCandidate = session.candidate;
  mRows.clear();
  mRows.reserve(session.checkpointSteps.size());
  for (std::int64_t s : session.checkpointSteps)
    mRows.push_back({s, mReference.lossAt(s), mCandidate.lossAt(s), std::nullopt});
  std::sort(mRows.begin(), mRows.end(), [](const Row& a, const Row& b) { return a.step < b.step; });
  endResetModel();
}

void StepTableModel::setResults(const std::vector<StepResult>& results) {
  beginResetModel();
  for (Row& r : mRows) r.result.reset();
  // Drop rows that existed only for results; keep the checkpoint rows.
  std::erase_if(mRows, [this](const Row& r) {
    return std::isnan(mReference.lossAt(r.step)) && std::isnan(mCandidate.lossAt(r.step)) &&
           !r.result;
  });
  endResetModel();
  for (const StepResult& r : results) updateResult(r);
}

int StepTableModel::insertRow(std::int64_t step) {
  const auto it = std::lower_bound(mRows.begin(), mRows.end(), step,
                                   [](const Row& r, std::int64_t s) { return r.step < s; });
  const int row = int(it - mRows.begin());
  if (it != mRows.end() && it->step == step) return row;
  beginInsertRows({}, row, row);
  mRows.insert(it, Row{step, mReference.lossAt(step), mCandidate.lossAt(step), std::nullopt});
  endInsertRows();
  return row;
}

void StepTableModel::updateResult(const StepResult& result) {
  const int row = insertRow(result.step);
  Row& r = mRows[std::size_t(row)];
  r.result = result;
  // The logged losses of the result are authoritative for its row (the log may lack the step).
  r.referenceLoss = result.referenceLoss;
  r.candidateLoss = result.candidateLoss;
  emit dataChanged(index(row, 0), index(row, ColumnCount - 1));
}

std::int64_t StepTableModel::stepAt(int row) const { return mRows[std::size_t(row)].step; }

int StepTableModel::rowOfStep(std::int64_t step) const {
  const auto it = std::lower_bound(mRows.begin(), mRows.end(), step,
                                   [](const Row& r, std::int64_t s) { return r.step < s; });
  return it != mRows.end() && it->step == step ? int(it - mRows.begin()) : -1;
}

const StepResult* StepTableModel::resultAt(int row) const {
  const auto& r = mRows[std::size_t(row)].result;
  return r ? &*r : nullptr;
}

int StepTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(mRows.size());
}

int StepTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant StepTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= int(mRows.size())) return {};
  const Row& row = mRows[std::size_t(index.row())];
  const StepResult* r = row.result ? &*row.result : nullptr;
  const bool bounded = r && r->verdict != StepVerdict::NotBounded;
  QVariant raw;
  switch (index.column()) {
    case StepColumn:
      raw = qint64(row.step);
      break;
    case ReferenceColumn:
      raw = number(row.referenceLoss);
      break;
    case CandidateColumn:
      raw = number(row.candidateLoss);
      break;
    case LoColumn:
      raw = bounded ? number(r->lo) : QVariant();
      break;
    case HiColumn:
      raw = bounded ? number(r->hi) : QVariant();
      break;
    case MarginColumn:
      raw = bounded ? number(r->margin) : QVariant();
      break;
    case VerdictColumn:
      raw = r ? QVariant(severity(r->verdict)) : QVariant();
      break;
    default:
      break;
  }
  switch (role) {
    case kSortRole:
      return raw;
    case Qt::DisplayRole:
    case kCopyRole: {
      const bool copy = role == kCopyRole;
      if (index.column() == VerdictColumn)
        return r ? qs(verdictName(r->verdict)) : (copy ? QString() : tr("not analysed"));
      if (!raw.isValid()) return copy ? QString() : QStringLiteral("—");
      if (index.column() == StepColumn) return QString::number(row.step);
      const int digits = copy ? 17 : (index.column() == MarginColumn ? 4 : 10);
      return qNumber(raw.toDouble(), digits);
    }
    case Qt::TextAlignmentRole:
      return index.column() == VerdictColumn ? int(Qt::AlignLeft | Qt::AlignVCenter)
                                             : int(Qt::AlignRight | Qt::AlignVCenter);
    case Qt::BackgroundRole:
      if (r && (index.column() == VerdictColumn || index.column() == MarginColumn))
        return verdictTint(r->verdict);
      return {};
    case Qt::ForegroundRole:
      if (!r) return QColor(120, 120, 120);
      if (index.column() == VerdictColumn) return verdictColor(r->verdict);
      return {};
    case Qt::ToolTipRole:
      if (r && !r->note.empty()) return QString::fromStdString(r->note);
      return {};
    default:
      return {};
  }
}

QVariant StepTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case StepColumn:
      return tr("step");
    case ReferenceColumn:
      return tr("reference loss");
    case CandidateColumn:
      return tr("candidate loss");
    case LoColumn:
      return tr("lo");
    case HiColumn:
      return tr("hi");
    case MarginColumn:
      return tr("margin");
    case VerdictColumn:
      return tr("verdict");
    default:
      return {};
  }
}

StepTableView::StepTableView(QWidget* parent) : QTableView(parent) {
  mModel = new StepTableModel(this);
  mProxy = new QSortFilterProxyModel(this);
  mProxy->setSourceModel(mModel);
  mProxy->setSortRole(StepTableModel::kSortRole);
  setModel(mProxy);
  setSortingEnabled(true);
  sortByColumn(StepTableModel::StepColumn, Qt::AscendingOrder);
  setSelectionBehavior(QAbstractItemView::SelectRows);
  setSelectionMode(QAbstractItemView::ExtendedSelection);
  setAlternatingRowColors(true);
  verticalHeader()->setVisible(false);
  verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  horizontalHeader()->setStretchLastSection(true);
  horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  setWordWrap(false);
  connect(selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
    const auto steps = selectedSteps();
    emit selectedStepsChanged(QList<qint64>(steps.begin(), steps.end()));
  });
  connect(selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid()) return;
            emit currentStepChanged(qint64(mModel->stepAt(mProxy->mapToSource(current).row())));
          });
}

std::vector<std::int64_t> StepTableView::selectedSteps() const {
  std::vector<std::int64_t> steps;
  for (const QModelIndex& i : selectionModel()->selectedRows())
    steps.push_back(mModel->stepAt(mProxy->mapToSource(i).row()));
  std::sort(steps.begin(), steps.end());
  return steps;
}

void StepTableView::selectSteps(const std::vector<std::int64_t>& steps) {
  QItemSelection selection;
  QModelIndex first;
  for (std::int64_t s : steps) {
    const int row = mModel->rowOfStep(s);
    if (row < 0) continue;
    const QModelIndex left = mProxy->mapFromSource(mModel->index(row, 0));
    const QModelIndex right =
        mProxy->mapFromSource(mModel->index(row, StepTableModel::ColumnCount - 1));
    selection.select(left, right);
    if (!first.isValid() || left.row() < first.row()) first = left;
  }
  selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
  if (first.isValid()) {
    selectionModel()->setCurrentIndex(first, QItemSelectionModel::NoUpdate);
    scrollTo(first);
  }
}

QString StepTableView::selectionAsTsv() const {
  QModelIndexList rows = selectionModel()->selectedRows();
  std::sort(rows.begin(), rows.end(),
            [](const QModelIndex& a, const QModelIndex& b) { return a.row() < b.row(); });
  QStringList lines;
  QStringList header;
  for (int c = 0; c < StepTableModel::ColumnCount; ++c)
    header << mModel->headerData(c, Qt::Horizontal).toString();
  lines << header.join(QLatin1Char('\t'));
  for (const QModelIndex& i : rows) {
    QStringList cells;
    for (int c = 0; c < StepTableModel::ColumnCount; ++c)
      cells << mProxy->index(i.row(), c).data(StepTableModel::kCopyRole).toString();
    lines << cells.join(QLatin1Char('\t'));
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

void StepTableView::copySelection() const { QApplication::clipboard()->setText(selectionAsTsv()); }

void StepTableView::keyPressEvent(QKeyEvent* event) {
  if (event->matches(QKeySequence::Copy)) {
    copySelection();
    event->accept();
    return;
  }
  QTableView::keyPressEvent(event);
}

}  // namespace lossbound::widgets
