// The on-disk cache of compiled kernels (cubins), so that compiling a model a second time skips
// NVRTC. An entry's key hashes everything the cubin depends on: the kernel source (which embeds
// the device library), the target architecture, the NVRTC version and the compile options.
//
// Location: CompileOptions::cache_dir, else $TESSEL_CACHE_DIR, else ~/.cache/tessel (created 0700
// on first store). A directory owned by another user or writable by group or others is not used
// (no entry loaded, nothing stored: compiling works, uncached), and only regular files are read as
// entries, so another local user cannot plant code or a FIFO in it. (The checksum is FNV-1a, not
// a cryptographic hash: it catches damage, not a writer who owns the directory.) One file per entry, `<key>.cubin`, written to a temporary file in the same
// directory and renamed into place, so a reader never sees half an entry. Each entry carries a
// header (magic, key, size, checksum of the payload); an entry that fails any check -- a truncated
// or corrupt file -- counts as a miss, and the next store replaces it.
#pragma once

#include <optional>
#include <string>

namespace tessel::cuda {

class CubinCache {
 public:
  /// `dir` empty: $TESSEL_CACHE_DIR, else $HOME/.cache/tessel.
  explicit CubinCache(std::string dir);

  const std::string& dir() const { return dir_; }

  /// The key of a compilation: 32 hex digits.
  static std::string key(const std::string& source, const std::string& arch, const std::string& toolkit,
                         const std::string& options);

  /// The cubin stored under `key`, or nullopt when there is none or the entry is damaged.
  std::optional<std::string> load(const std::string& key) const;
  /// Stores `cubin` under `key` atomically; returns false (and stores nothing) when the directory
  /// cannot be written -- a cache that cannot be written is not an error.
  bool store(const std::string& key, const std::string& cubin) const;
  /// The file of `key`.
  std::string path(const std::string& key) const;

 private:
  std::string dir_;
};

}  // namespace tessel::cuda
