// The on-disk cache of compiled kernels, so that compiling a model a second time skips the
// compiler: cubins from NVRTC (kernels/cuda/nvrtc_compiler.cpp) and object files from LLVM
// (kernels/cpu/cpu_backend.cpp). An entry's key hashes everything the compiled code depends on --
// for a cubin the kernel source (which embeds the device library), the target architecture, the
// NVRTC version and the compile options; for an object file the LLVM IR as emitted, the host CPU
// (name and features), the optimization level and LLVM's version.
//
// Location: CompileOptions::cache_dir, else $TESSEL_CACHE_DIR, else ~/.cache/tessel (created 0700
// on first store). A directory owned by another user or writable by group or others is not used
// (no entry loaded, nothing stored: compiling works, uncached), and only regular files are read as
// entries, so another local user cannot plant code or a FIFO in it. Keys and the entries'
// checksums are SHA-256 (tilegraph/sha256.h): two compilations cannot share an entry by accident,
// and a damaged or edited payload does not match its checksum (a writer who owns the directory
// can still write a consistent entry: the directory's owner is the trust boundary). One file per
// entry, `<key>.<kind>` (`.cubin`, `.o`; `.spec`: a machine's kept quick probe, driver/compile.h's
// machine_spec), written to a temporary file in the same
// directory and renamed into place, so a reader never sees half an entry. Each entry carries a
// header (magic, key, size, checksum of the payload); an entry that fails any check -- a truncated
// or corrupt file -- counts as a miss, and the next store replaces it.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace tessel {

class KernelCache {
 public:
  /// `dir` empty: $TESSEL_CACHE_DIR, else $HOME/.cache/tessel. `kind` names the entries' format
  /// ("cubin", "o"): the files' extension, and part of every entry's header.
  KernelCache(std::string dir, std::string kind);

  const std::string& dir() const { return dir_; }

  /// The key of a compilation from everything it depends on (each part length-prefixed, so parts
  /// cannot run into each other): 64 hex digits of SHA-256.
  static std::string key(std::initializer_list<std::string_view> parts);

  /// The compiled code stored under `key`, or nullopt when there is none or the entry is damaged.
  std::optional<std::string> load(const std::string& key) const;
  /// Stores `code` under `key` atomically; returns false (and stores nothing) when the directory
  /// cannot be written -- a cache that cannot be written is not an error.
  bool store(const std::string& key, const std::string& code) const;
  /// The file of `key`.
  std::string path(const std::string& key) const;

 private:
  std::string dir_, kind_;
};

}  // namespace tessel
