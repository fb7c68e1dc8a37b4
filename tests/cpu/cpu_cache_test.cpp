// The CPU backend's object cache (kernels/kernel_cache.h, cpu_backend.cpp): a second compile loads
// every kernel from the cache and runs to the same bits; a damaged entry is compiled again and
// replaced; another optimization level is another key; use_cache = false neither reads nor writes.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "../temp_dir.h"
#include "cpu_check.h"
#include "../model_builder.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

int entries(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) n += e.path().extension() == ".o";
  return n;
}

}  // namespace

TEST_CASE("cpu cache: a second compile loads every kernel and runs to the same bits, and damage is a miss") {
  // A few kernels of different families (a micro-kernel GEMM with its epilogue, a softmax, a layer
  // norm): the cache's behaviour does not depend on the model's size, and each cold compile of a
  // whole BERT layer cost 40 s under ASan.
  ModelBuilder b(DType::f32);
  const std::string h = b.op("Relu", {b.op("MatMul", {b.input("x", {16, 64}), b.weight("w1", {64, 48}, 1)})});
  const std::string p = b.op("Softmax", {b.op("MatMul", {h, b.weight("w2", {48, 40}, 2)})}, {{"axis", int64_t{-1}}});
  const OpGraph g = b.graph(b.op("LayerNormalization", {p, b.weight("g", {40}, 3), b.weight("beta", {40}, 4)}, {{"axis", int64_t{-1}}}));
  const HwSpec& spec = cpu_spec("x86-64-avx2-generic");
  const Schedule schedule = schedule_with(g, spec, "roller");  // a kernel per node or so: several entries
  const std::vector<HostTensor> inputs = random_inputs(g, 5);
  TempDir dir;
  CompileOptions options;
  options.cache_dir = dir.file("cache");
  options.threads = 2;
  const auto backend = find_backend("cpu");

  const auto first = backend->compile(g, schedule, spec, options);
  const int kernels = first->compile_stats().kernels;
  REQUIRE(kernels > 1);
  CHECK(first->compile_stats().cache_hits == 0);
  CHECK(entries(options.cache_dir) == kernels);
  const std::vector<HostTensor> expected = first->run(inputs);

  const auto second = backend->compile(g, schedule, spec, options);
  CHECK(second->compile_stats().cache_hits == kernels);
  const std::vector<HostTensor> got = second->run(inputs);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].values() == expected[i].values());

  // One entry overwritten with garbage: that kernel is compiled again (and the entry replaced).
  const auto victim = std::filesystem::directory_iterator(options.cache_dir)->path();
  std::ofstream(victim, std::ios::trunc) << "not an object file";
  const auto third = backend->compile(g, schedule, spec, options);
  CHECK(third->compile_stats().cache_hits == kernels - 1);
  const std::vector<HostTensor> again = third->run(inputs);
  for (size_t i = 0; i < again.size(); ++i) CHECK(again[i].values() == expected[i].values());
  CHECK(backend->compile(g, schedule, spec, options)->compile_stats().cache_hits == kernels);

  // Another level is another key; no cache at all reads and writes nothing.
  CompileOptions o1 = options;
  o1.opt_level = 1;
  CHECK(backend->compile(g, schedule, spec, o1)->compile_stats().cache_hits == 0);
  CHECK(entries(options.cache_dir) == 2 * kernels);
  CompileOptions none = options;
  none.use_cache = false;
  const auto uncached = backend->compile(g, schedule, spec, none);
  CHECK(uncached->compile_stats().cache_hits == 0);
  CHECK(entries(options.cache_dir) == 2 * kernels);
  const std::vector<HostTensor> fresh = uncached->run(inputs);
  for (size_t i = 0; i < fresh.size(); ++i) CHECK(fresh[i].values() == expected[i].values());
}
