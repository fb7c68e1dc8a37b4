// Seeded random graphs (tests/differential/random_graph.h: awkward extents, broadcasting, slices,
// concats, transposes, pads, f16 islands, windows, contractions) scheduled by welder for an H100
// with the CUDA kernel families recorded, every group's kernel planned and emitted -- the vector
// kernel's recomputed reads, the row, transpose, tensor-core and flash plans included -- and every
// few graphs compiled with NVRTC. No GPU needed: the planners must not assert on what they are
// offered, and what they emit must compile. (On a GPU the differential test runs the same graphs
// against the interpreter.)
#include <doctest/doctest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "cuda_check.h"
#include "../differential/random_graph.h"
#include "tilegraph/lower.h"

namespace tessel::testing {

TEST_CASE("cuda codegen: random graphs schedule, emit their kernels and compile with NVRTC") {
  const char* env = std::getenv("TESSEL_CUDA_RANDOM_GRAPHS");
  const int64_t graphs = env ? std::atoll(env) : 150;
  const int64_t compile_every = 15;
  const HwSpec& spec = gpu_spec();
  std::map<std::string, int> paths;
  int compiled = 0;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(graphs); ++seed) {
    CAPTURE(seed);
    const OpGraph g = lower_model(random_model(seed));
    const Schedule s = with_families(g, spec, "welder");
    for (int i = 0; i < static_cast<int>(s.groups.size()); ++i) ++paths[emit_kernel(g, s, i, spec).path];
    if (seed % compile_every == 0) compiled += nvrtc_compile_all(g, s, spec);
  }
  std::string seen;
  for (const auto& [path, n] : paths) seen += cat(path, " ", n, "; ");
  MESSAGE("kernel paths over ", graphs, " random graphs: ", seen, compiled, " kernels compiled");
  CHECK(compiled > 0);
  // The graphs reach the vector and generic kernels at least (elementwise chains and the rest).
  CHECK(paths["vector"] > 0);
  CHECK(paths["generic"] > 0);
}

}  // namespace tessel::testing
