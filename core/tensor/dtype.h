#pragma once
// Element types of traced tensors. Every tensor is stored as binary64 values (integers and bools
// exactly: |v| < 2^53); the dtype says what the candidate stored and so how it rounds.

#include "core/interval/precision.h"

#include <optional>
#include <string_view>

namespace lossbound {

/// The torch dtypes a step program can use.
enum class DType { Float64, Float32, BFloat16, Float16, Int64, Int32, Int16, Int8, UInt8, Bool };

/// Returns the torch name of a dtype ("float32", "bfloat16", "int64", "bool", ...).
std::string_view dtypeName(DType t);

/// Returns the dtype for a torch name ("float32", "torch.float32", "half", ...), or nothing.
std::optional<DType> parseDType(std::string_view name);

/// Returns true for Float64/Float32/BFloat16/Float16.
bool isFloating(DType t);

/// Returns the storage format of a floating dtype (Float32 → Fp32, ...); nothing for integers.
std::optional<Format> storageFormat(DType t);

}  // namespace lossbound
