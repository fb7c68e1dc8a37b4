// The on-disk cache of compiled kernels (see kernel_cache.h).
#include "kernels/kernel_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tilegraph/error.h"
#include "tilegraph/files.h"
#include "tilegraph/hash.h"
#include "tilegraph/sha256.h"

namespace tessel {

namespace {

constexpr const char* kMagic = "TESSELKERNEL2";

std::string checksum(const std::string& payload) { return sha256_hex(payload); }

/// A cache directory another user could have filled: not a directory, owned by someone else, or
/// writable by group or others. Its entries are never loaded and nothing is stored in it.
bool untrusted(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return false;  // not there yet: store() creates it 0700
  return !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

}  // namespace

KernelCache::KernelCache(std::string dir, std::string kind) : dir_(std::move(dir)), kind_(std::move(kind)) {
  if (!dir_.empty()) return;
  if (const char* env = std::getenv("TESSEL_CACHE_DIR"); env && *env) {
    dir_ = env;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir_ = std::string(home) + "/.cache/tessel";
  } else {
    dir_ = std::filesystem::temp_directory_path().string() + "/tessel-cache";
  }
}

std::string KernelCache::key(std::initializer_list<std::string_view> parts) {
  Sha256 h;
  for (std::string_view part : parts) {
    const std::string length = std::to_string(part.size()) + ":";
    h.update(length).update(part);
  }
  const std::array<uint8_t, 32> digest = h.finish();
  std::string out;
  for (uint8_t b : digest) out += hex64(b).substr(14);
  return out;
}

std::string KernelCache::path(const std::string& key) const { return dir_ + "/" + key + "." + kind_; }

std::optional<std::string> KernelCache::load(const std::string& key) const {
  if (untrusted(dir_)) return std::nullopt;
  // A regular file only (a FIFO planted as an entry would hang an ifstream), read whole.
  std::string bytes;
  try {
    bytes = read_regular_file(path(key), (int64_t{1} << 31) + 4096, "a cache entry");
  } catch (const UserError&) {
    return std::nullopt;
  }
  std::istringstream in(bytes);
  std::string magic, stored_key, size_text, sum;
  if (!std::getline(in, magic) || magic != cat(kMagic, " ", kind_)) return std::nullopt;
  if (!std::getline(in, stored_key) || stored_key != key) return std::nullopt;
  if (!std::getline(in, size_text) || !std::getline(in, sum)) return std::nullopt;
  char* end = nullptr;
  const unsigned long long size = std::strtoull(size_text.c_str(), &end, 10);
  if (size_text.empty() || *end != '\0' || size == 0 || size > (1ull << 31)) return std::nullopt;
  std::string payload(size, '\0');
  if (!in.read(payload.data(), static_cast<std::streamsize>(size))) return std::nullopt;
  if (in.peek() != std::char_traits<char>::eof()) return std::nullopt;  // trailing bytes
  if (checksum(payload) != sum) return std::nullopt;
  return payload;
}

bool KernelCache::store(const std::string& key, const std::string& code) const {
  std::error_code ec;
  const std::filesystem::path dir(dir_);
  if (dir.has_parent_path()) std::filesystem::create_directories(dir.parent_path(), ec);
  if (::mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) return false;
  if (untrusted(dir_)) return false;
  const std::string final_path = path(key);
  // Unique per process and per store: concurrent writers (processes or threads) of one key each
  // write their own file and the last rename wins; readers see a whole entry or none.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = final_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << kMagic << " " << kind_ << "\n" << key << "\n" << code.size() << "\n" << checksum(code) << "\n";
    out.write(code.data(), static_cast<std::streamsize>(code.size()));
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, final_path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace tessel
