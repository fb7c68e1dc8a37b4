// Size limits and checked size arithmetic. Every tensor a model declares or an operator produces,
// and every node's domain, is checked against these limits when the model is lowered (lower.h,
// ops/lower_context.h), so that all later size arithmetic -- strides, byte counts, FLOPs, tile
// counts -- fits int64 and no allocation is asked for an absurd size. A model over a limit is a
// UserError naming the operator and the size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessel {

/// Elements of one tensor: 2^40 (8 TiB as f64, the host's widest storage).
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;
inline constexpr const char* kMaxTensorElementsText = "2^40";
/// Points of one node's domain (spatial and reduction axes together): 2^56, so that a FLOP count
/// (a few operations per point) stays well inside int64.
inline constexpr int64_t kMaxDomainPoints = int64_t{1} << 56;
inline constexpr const char* kMaxDomainPointsText = "2^56";

/// Bytes of a tensor or op name: longer names are refused when the model is lowered (and error
/// messages are cut at 4000 bytes, error.cpp).
inline constexpr size_t kMaxNameBytes = 4096;

/// Whether `s` is valid UTF-8 (names are written into JSON, which must be).
bool valid_utf8(const std::string& s);

/// "" when `name` may name a tensor or an op (at most kMaxNameBytes of valid UTF-8), else why not.
std::string name_problem(const std::string& name);

/// a * b and a + b, or nullopt when the result overflows int64.
std::optional<int64_t> checked_mul(int64_t a, int64_t b);
std::optional<int64_t> checked_add(int64_t a, int64_t b);

/// The product of `dims` (each >= 0), or nullopt when a factor is negative or the product
/// exceeds `limit` (never overflowing on the way).
std::optional<int64_t> checked_product(const std::vector<int64_t>& dims, int64_t limit);

/// "" when `dims` (a tensor shape) holds at most kMaxTensorElements elements, else why not.
std::string tensor_size_problem(const std::vector<int64_t>& dims);

}  // namespace tessel
