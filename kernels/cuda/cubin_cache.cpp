// The on-disk cubin cache (see cubin_cache.h).
#include "kernels/cuda/cubin_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tilegraph/hash.h"

namespace tessel::cuda {

namespace {

constexpr const char* kMagic = "TESSELCUBIN1";

std::string checksum(const std::string& payload) { return hex64(fnv1a64(payload)); }

}  // namespace

CubinCache::CubinCache(std::string dir) : dir_(std::move(dir)) {
  if (!dir_.empty()) return;
  if (const char* env = std::getenv("TESSEL_CACHE_DIR"); env && *env) {
    dir_ = env;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir_ = std::string(home) + "/.cache/tessel";
  } else {
    dir_ = std::filesystem::temp_directory_path().string() + "/tessel-cache";
  }
}

std::string CubinCache::key(const std::string& source, const std::string& arch, const std::string& toolkit,
                            const std::string& options) {
  std::string all = source;
  for (const std::string* part : {&arch, &toolkit, &options}) {
    all.push_back('\0');
    all += *part;
  }
  // Two FNV-1a passes with different offset bases: 128 bits.
  return hex64(fnv1a64(all)) + hex64(fnv1a64(all, 0x84222325cbf29ce4ull));
}

std::string CubinCache::path(const std::string& key) const { return dir_ + "/" + key + ".cubin"; }

std::optional<std::string> CubinCache::load(const std::string& key) const {
  std::ifstream in(path(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::string magic, stored_key, size_text, sum;
  if (!std::getline(in, magic) || magic != kMagic) return std::nullopt;
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

bool CubinCache::store(const std::string& key, const std::string& cubin) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return false;
  const std::string final_path = path(key);
  // Unique per process and per store: concurrent writers (processes or threads) of one key each
  // write their own file and the last rename wins; readers see a whole entry or none.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = final_path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << kMagic << "\n" << key << "\n" << cubin.size() << "\n" << checksum(cubin) << "\n";
    out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
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

}  // namespace tessel::cuda
