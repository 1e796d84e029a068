#pragma once
// Sharding an analysis: how the selected steps of one analysis are dealt to N parts (the tasks of
// a job array with `lossbound-cli analyze --shard I/N`, the ranks of `analyze --mpi`), so that each
// part can be checked later against the steps it was given. Pure functions of step lists.

#include "core/analysis/analysis_types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lossbound {

/// Parses "I/N" with 1 <= I <= N (layout Blocks, no steps yet); throws std::invalid_argument
/// saying what was expected and what was found.
ShardInfo parseShard(std::string_view text);

/// Returns "blocks" or "interleaved".
std::string_view shardLayoutName(ShardLayout layout);
/// Returns the layout for a name written by shardLayoutName(), or nothing.
std::optional<ShardLayout> parseShardLayout(std::string_view name);

/// Returns the steps of part `index` (1-based) of `count` of `selected` (increasing): with Blocks
/// the index-th of `count` contiguous slices whose sizes differ by at most one (larger slices
/// last); with Interleaved the steps at positions index-1, index-1+count, ... Parts may be empty
/// when count > selected.size(). Throws std::invalid_argument unless 1 <= index <= count.
std::vector<std::int64_t> shardSteps(const std::vector<std::int64_t>& selected, int index,
                                     int count, ShardLayout layout);
/// Returns the steps of the part `shard` describes (shardSteps of its own fields).
std::vector<std::int64_t> shardSteps(const ShardInfo& shard);

/// Returns "I/N" for a shard.
std::string shardName(const ShardInfo& shard);

/// Returns a short text for a step list in messages: runs of consecutive steps as "A..B",
/// "0..16", "3, 7, 9..12", at most `shown` items before "... (n steps)"; "none" when empty.
std::string describeSteps(const std::vector<std::int64_t>& steps, std::size_t shown = 6);

}  // namespace lossbound
