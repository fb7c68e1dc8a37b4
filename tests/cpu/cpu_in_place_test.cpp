// Executable::run_in_place on the CPU backend (kernels/backend.h, cpu_executable.cpp): the kernels
// read the caller's inputs and write the caller's outputs where the buffers are aligned, copy
// through the executable's own where not, and give the same bits as run(); an output that is also
// an input or a second output of one tensor is copied; inputs are never written.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "../model_builder.h"
#include "cpu_check.h"
#include "kernels/packed_tensor.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

struct Freed {
  void operator()(void* p) const { std::free(p); }
};
using Block = std::unique_ptr<uint8_t, Freed>;

/// `bytes` (and room for a shift) at an address aligned to `align`.
Block block(size_t bytes, size_t align) { return Block(static_cast<uint8_t*>(std::aligned_alloc(align, (bytes + 2 * align) / align * align))); }

}  // namespace

TEST_CASE("cpu run_in_place: caller's buffers in place when aligned, copied when not, same bits as run()") {
  ModelBuilder b(DType::f16);
  const std::string x = b.input("x", {12, 40});
  const std::string h = b.op("Relu", {b.op("MatMul", {x, b.weight("w", {40, 24}, 1)})});
  // Outputs: the GEMM's epilogue, a softmax of it, and the input itself (copied).
  OpGraph g = b.graph({h, b.op("Softmax", {h}, {{"axis", int64_t{-1}}}), x});
  const HwSpec& spec = cpu_spec("x86-64-avx512-server");
  CompileOptions options;
  options.threads = 2;
  const auto exe = find_backend("cpu")->compile(g, schedule_with(g, spec, "welder"), spec, options);
  const std::vector<HostTensor> inputs = random_inputs(g, 5);
  const std::vector<HostTensor> expected = exe->run(inputs);
  const int64_t align = exe->in_place_alignment();
  REQUIRE(align >= 16);

  const std::vector<uint8_t> packed = pack_tensor(inputs[0]);
  for (size_t shift : {size_t{0}, size_t{2}}) {  // aligned: in place; 2 bytes off: copied
    INFO("shift ", shift);
    Block in = block(packed.size(), static_cast<size_t>(align));
    std::memcpy(in.get() + shift, packed.data(), packed.size());
    std::vector<Block> outs;
    std::vector<void*> dst;
    for (TensorId t : g.outputs()) {
      const TensorType& type = g.tensor(t).type;
      outs.push_back(block(static_cast<size_t>(type.num_elements() * dtype_bytes(type.dtype)), static_cast<size_t>(align)));
      dst.push_back(outs.back().get() + shift);
    }
    REQUIRE(exe->run_in_place({in.get() + shift}, dst));
    CHECK(std::memcmp(in.get() + shift, packed.data(), packed.size()) == 0);  // only read
    for (size_t o = 0; o < expected.size(); ++o) {
      const HostTensor got = unpack_tensor(g.tensor(g.outputs()[o]).type, dst[o]);
      CHECK(got.values() == expected[o].values());
    }
  }
  // run() afterwards still uses the executable's own buffers.
  const std::vector<HostTensor> again = exe->run(inputs);
  for (size_t o = 0; o < again.size(); ++o) CHECK(again[o].values() == expected[o].values());
  CHECK_THROWS_AS(exe->run_in_place({}, {}), UserError);
}
