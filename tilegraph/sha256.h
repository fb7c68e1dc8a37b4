// SHA-256 (FIPS 180-4), for what must not collide by design: the compile caches' keys and their
// entries' checksums (kernels/kernel_cache.h). Everything else hashes with FNV-1a (hash.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel {

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  Sha256& update(std::string_view data);
  /// The digest; the object is spent afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;  // bytes
};

/// The SHA-256 of `data` as 64 lowercase hex digits.
std::string sha256_hex(std::string_view data);

}  // namespace tessel
