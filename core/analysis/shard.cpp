// Sharding: the part-to-steps rules behind --shard (Blocks) and --mpi (Interleaved). Blocks keep
// each job-array task on one contiguous stretch of the run; interleaving lets MPI ranks advance
// through the run together, so the first exit is known early (--stop-at-first-exit).
#include "core/analysis/shard.h"

#include <charconv>
#include <stdexcept>

namespace lossbound {

namespace {

int parsePositive(std::string_view token, std::string_view whole) {
  int v = 0;
  const char* end = token.data() + token.size();
  const auto [ptr, ec] = std::from_chars(token.data(), end, v);
  if (token.empty() || ec != std::errc() || ptr != end || v < 1)
    throw std::invalid_argument("shard: expected I/N with integers 1 <= I <= N, found '" +
                                std::string(whole) + "'");
  return v;
}

}  // namespace

ShardInfo parseShard(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos)
    throw std::invalid_argument("shard: expected I/N with integers 1 <= I <= N, found '" +
                                std::string(text) + "'");
  ShardInfo s;
  s.index = parsePositive(text.substr(0, slash), text);
  s.count = parsePositive(text.substr(slash + 1), text);
  if (s.index > s.count)
    throw std::invalid_argument("shard: expected I/N with I <= N, found '" + std::string(text) +
                                "'");
  return s;
}

std::string_view shardLayoutName(ShardLayout layout) {
  return layout == ShardLayout::Interleaved ? "interleaved" : "blocks";
}

std::optional<ShardLayout> parseShardLayout(std::string_view name) {
  if (name == "blocks") return ShardLayout::Blocks;
  if (name == "interleaved") return ShardLayout::Interleaved;
  return std::nullopt;
}

std::vector<std::int64_t> shardSteps(const std::vector<std::int64_t>& selected, int index,
                                     int count, ShardLayout layout) {
  if (count < 1 || index < 1 || index > count)
    throw std::invalid_argument("shard: expected 1 <= I <= N, found " + std::to_string(index) +
                                "/" + std::to_string(count));
  const std::size_t n = selected.size(), k = static_cast<std::size_t>(count);
  const std::size_t i = static_cast<std::size_t>(index - 1);
  std::vector<std::int64_t> out;
  if (layout == ShardLayout::Interleaved) {
    for (std::size_t p = i; p < n; p += k) out.push_back(selected[p]);
  } else {
    // Slice i is [floor(i·n/k), floor((i+1)·n/k)): sizes floor(n/k) or ceil(n/k).
    const std::size_t begin = i * n / k, end = (i + 1) * n / k;
    out.assign(selected.begin() + static_cast<std::ptrdiff_t>(begin),
               selected.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

std::vector<std::int64_t> shardSteps(const ShardInfo& shard) {
  return shardSteps(shard.selectedSteps, shard.index, shard.count, shard.layout);
}

std::string shardName(const ShardInfo& shard) {
  return std::to_string(shard.index) + "/" + std::to_string(shard.count);
}

std::string describeSteps(const std::vector<std::int64_t>& steps, std::size_t shown) {
  if (steps.empty()) return "none";
  std::string out;
  std::size_t items = 0, i = 0;
  while (i < steps.size()) {
    std::size_t j = i;
    while (j + 1 < steps.size() && steps[j + 1] == steps[j] + 1) ++j;
    if (items == shown) {
      out += ", ... (" + std::to_string(steps.size()) + " steps)";
      return out;
    }
    if (items) out += ", ";
    out += std::to_string(steps[i]);
    if (j > i) out += ".." + std::to_string(steps[j]);
    ++items;
    i = j + 1;
  }
  return out;
}

}  // namespace lossbound
