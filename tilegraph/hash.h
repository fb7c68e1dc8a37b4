// FNV-1a (64-bit), the one non-cryptographic hash Tessel uses for cache keys, entry checksums and
// kernel names, and its fixed-width hex form.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace tessel {

inline constexpr uint64_t kFnv1aBasis = 14695981039346656037ull;

/// FNV-1a over `data`, continuing from `hash` (the standard offset basis by default; another
/// basis gives an independent second hash).
inline uint64_t fnv1a64(std::string_view data, uint64_t hash = kFnv1aBasis) {
  for (unsigned char c : data) {
    hash ^= c;
    hash *= 1099511628211ull;  // the FNV prime
  }
  return hash;
}

/// 16 lowercase hex digits.
inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace tessel
