// The cubin cache (kernels/kernel_cache.h) and compile_kernel's use of it, without a GPU:
// keys change with everything a cubin depends on, entries round-trip, a damaged entry is a miss
// and is rebuilt, concurrent writers and a read-only directory are safe, and rejected generated
// code is saved with a repro command.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "../temp_dir.h"
#include "kernels/kernel_cache.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "tilegraph/error.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

const char* kKernel = "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n";

}  // namespace

TEST_CASE("cuda cache: the key changes with the source, the target, the toolkit and the options") {
  const std::string k = KernelCache::key({"a", "sm_90a", "13.0", "-x"});
  CHECK(k.size() == 64);
  CHECK(k == KernelCache::key({"a", "sm_90a", "13.0", "-x"}));
  CHECK(k != KernelCache::key({"b", "sm_90a", "13.0", "-x"}));
  CHECK(k != KernelCache::key({"a", "sm_80", "13.0", "-x"}));
  CHECK(k != KernelCache::key({"a", "sm_90a", "13.1", "-x"}));
  CHECK(k != KernelCache::key({"a", "sm_90a", "13.0", "-y"}));
}

TEST_CASE("cuda cache: entries round-trip and a damaged entry is a miss") {
  TempDir dir;
  const KernelCache cache(dir.file("cache"), "cubin");
  const std::string key = KernelCache::key({"src", "sm_90a", "13.0", ""});
  CHECK_FALSE(cache.load(key).has_value());
  const std::string payload("\x7f" "ELF\0binary\n\npayload", 20);
  REQUIRE(cache.store(key, payload));
  REQUIRE(cache.load(key).has_value());
  CHECK(*cache.load(key) == payload);
  // Flip one payload byte: the checksum catches it.
  {
    std::fstream f(cache.path(key), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('#');
  }
  CHECK_FALSE(cache.load(key).has_value());
  // Truncated.
  std::filesystem::resize_file(cache.path(key), std::filesystem::file_size(cache.path(key)) - 5);
  CHECK_FALSE(cache.load(key).has_value());
  // Garbage, and an entry stored under another key.
  dir.write("cache/" + key + ".cubin", "not a cache entry");
  CHECK_FALSE(cache.load(key).has_value());
  const std::string other = KernelCache::key({"other", "sm_90a", "13.0", ""});
  std::filesystem::copy_file(cache.path(key), cache.path(other), std::filesystem::copy_options::overwrite_existing);
  REQUIRE(cache.store(key, payload));
  std::filesystem::copy_file(cache.path(key), cache.path(other), std::filesystem::copy_options::overwrite_existing);
  CHECK_FALSE(cache.load(other).has_value());
  // No temporary files are left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir.file("cache")))
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("cuda cache: a directory others can write is not used, entries are regular files") {
  TempDir dir;
  const std::string root = dir.file("cache");
  const KernelCache cache(root, "cubin");
  const std::string key = KernelCache::key({"src", "sm_90a", "13.0", ""});
  REQUIRE(cache.store(key, "payload"));
  struct stat st {};
  REQUIRE(::stat(root.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);  // created private
  REQUIRE(cache.load(key).has_value());
  // Writable by others: another user could have planted the entry; not loaded, nothing stored.
  std::filesystem::permissions(root, std::filesystem::perms::all);
  CHECK_FALSE(cache.load(key).has_value());
  CHECK_FALSE(cache.store(key, "payload"));
  std::filesystem::permissions(root, std::filesystem::perms::owner_all);
  CHECK(cache.load(key).has_value());
  // A FIFO standing as an entry is a miss at once (an ifstream would wait for a writer).
  const std::string fifo_key = KernelCache::key({"fifo", "sm_90a", "13.0", ""});
  REQUIRE(::mkfifo(cache.path(fifo_key).c_str(), 0600) == 0);
  CHECK_FALSE(cache.load(fifo_key).has_value());
}

TEST_CASE("cuda cache: compile_kernel stores, hits, and rebuilds a corrupt entry") {
  TempDir dir;
  CompileOptions options;
  options.cache_dir = dir.file("cache");
  const cuda::CompiledKernel first = cuda::compile_kernel(kKernel, "k", "sm_90a", options);
  CHECK_FALSE(first.cache_hit);
  CHECK(first.cubin.size() > 100);
  const cuda::CompiledKernel second = cuda::compile_kernel(kKernel, "k", "sm_90a", options);
  CHECK(second.cache_hit);
  CHECK(second.cubin == first.cubin);
  // Corrupt every entry: the next compile is a miss that rebuilds and rewrites it.
  for (const auto& e : std::filesystem::directory_iterator(options.cache_dir)) {
    std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "TESSELCUBIN1\ngarbage";
  }
  const cuda::CompiledKernel third = cuda::compile_kernel(kKernel, "k", "sm_90a", options);
  CHECK_FALSE(third.cache_hit);
  CHECK(third.cubin == first.cubin);
  CHECK(cuda::compile_kernel(kKernel, "k", "sm_90a", options).cache_hit);
  // Another source or another target is another entry.
  CHECK_FALSE(cuda::compile_kernel(std::string(kKernel) + "// changed\n", "k", "sm_90a", options).cache_hit);
  CHECK_FALSE(cuda::compile_kernel(kKernel, "k", "sm_80", options).cache_hit);
  options.use_cache = false;
  CHECK_FALSE(cuda::compile_kernel(kKernel, "k", "sm_90a", options).cache_hit);
}

TEST_CASE("cuda cache: rejected code is saved with a repro command") {
  TempDir dir;
  CompileOptions options;
  options.cache_dir = dir.file("cache");
  options.reject_dir = dir.file("rejected");
  try {
    cuda::compile_kernel("extern \"C\" __global__ void bad() { undeclared_thing(); }\n", "bad", "sm_90a", options);
    FAIL("NVRTC accepted broken code");
  } catch (const InternalError& e) {
    const std::string what = e.what();
    CHECK(what.find("undeclared_thing") != std::string::npos);
    CHECK(what.find("repro: nvcc") != std::string::npos);
    CHECK(what.find(options.reject_dir + "/bad.cu") != std::string::npos);
  }
  CHECK(std::filesystem::exists(options.reject_dir + "/bad.cu"));
  CHECK(std::filesystem::exists(options.reject_dir + "/bad.log"));
}

TEST_CASE("cuda cache: a spec without a CUDA target is a user error") {
  HwSpec cpu;
  cpu.name = "cpu";
  cpu.kind = "cpu";
  cpu.target.backend = "llvm";
  cpu.target.arch = "x86-64-v3";
  CHECK_THROWS_AS(cuda::cuda_arch(cpu), UserError);
}

TEST_CASE("cuda cache: two processes compiling the same kernel into one cache both succeed") {
  TempDir dir;
  CompileOptions options;
  options.cache_dir = dir.file("cache");
  // Both children start together (a pipe releases them) and compile the same source; each must
  // get the right cubin and the cache must end with one whole entry, no temporary files.
  CompileOptions uncached;
  uncached.use_cache = false;
  const std::string expected = cuda::compile_kernel(kKernel, "k", "sm_90a", uncached).cubin;
  int go[2];
  REQUIRE(::pipe(go) == 0);
  std::vector<pid_t> children;
  for (int i = 0; i < 2; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      char c;
      ::close(go[1]);
      if (::read(go[0], &c, 1) != 0) ::_exit(3);
      bool ok = false;
      try {
        ok = cuda::compile_kernel(kKernel, "k", "sm_90a", options).cubin == expected;
      } catch (...) {
      }
      ::_exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);  // EOF releases both children at once
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(options.cache_dir)) {
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
    ++entries;
  }
  CHECK(entries == 1);
  CHECK(cuda::compile_kernel(kKernel, "k", "sm_90a", options).cache_hit);
}

TEST_CASE("cuda cache: a truncated entry is rebuilt, a read-only cache directory compiles without caching") {
  TempDir dir;
  CompileOptions options;
  options.cache_dir = dir.file("cache");
  const std::string cubin = cuda::compile_kernel(kKernel, "k", "sm_90a", options).cubin;
  for (const auto& e : std::filesystem::directory_iterator(options.cache_dir))
    std::filesystem::resize_file(e.path(), std::filesystem::file_size(e.path()) / 2);
  const cuda::CompiledKernel rebuilt = cuda::compile_kernel(kKernel, "k", "sm_90a", options);
  CHECK_FALSE(rebuilt.cache_hit);
  CHECK(rebuilt.cubin == cubin);
  CHECK(cuda::compile_kernel(kKernel, "k", "sm_90a", options).cache_hit);

  // Read-only: compiling still works (every time: nothing can be stored). Root ignores
  // permissions, so a file standing where the directory should be makes it unwritable.
  CompileOptions readonly = options;
  readonly.cache_dir = dir.file("not-a-directory") + "/cache";
  std::ofstream(dir.file("not-a-directory")) << "x";
  const cuda::CompiledKernel first = cuda::compile_kernel(kKernel, "k", "sm_90a", readonly);
  CHECK_FALSE(first.cache_hit);
  CHECK(first.cubin == cubin);
  CHECK_FALSE(cuda::compile_kernel(kKernel, "k", "sm_90a", readonly).cache_hit);
}
