// The contraction micro-kernel's register blocking (cost_model/cpu_loops.h): FMAs per load
// over the whole task box (rows left after the full blocks counted as single-row blocks, columns
// left as one narrower block with its last vector masked), within the register budget.
#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>

#include "cost_model/cpu_loops.h"

using tessel::cpu::choose_register_blocking;
using tessel::cpu::RegisterBlocking;

namespace {

bool fits(const RegisterBlocking& b, int64_t registers) { return b.mr * b.nr + b.nr + 1 <= registers; }

}  // namespace

TEST_CASE("register blocking: the box's rows decide MR, no block wider than the box") {
  // AVX-512 (32 registers, 16 f32 lanes), rows of 56 columns: 3 whole vectors. (No L1 limit on NR
  // here: the last test case.)
  struct Case {
    int64_t registers, lanes, m, n;
    bool has_m;
    int mr, nr;
  };
  for (const Case& c : {
           // 16 rows, 56 columns (3.5 vectors): 4 x 4 vectors, the last masked (2.0 FMAs per
           // load), not 8 x 3 vectors and then a 1-vector block (1.6), nor 9 + 7 single rows.
           Case{32, 16, 16, 56, true, 4, 4},
           Case{32, 16, 64, 56, true, 6, 4},
           Case{32, 16, 4, 56, true, 4, 4},    // a 4-row box: one 4-row block
           Case{32, 16, 1, 56, false, 1, 4},   // no m axis: one row, every vector of the row
           Case{32, 16, 8, 7, true, 8, 1},     // fewer columns than lanes: one masked vector
           Case{32, 16, 512, 3072, true, 5, 5},
           Case{16, 8, 8, 56, true, 4, 3},     // AVX2 (16 registers, 8 lanes)
           Case{16, 8, 1000, 1024, true, 4, 3},
       }) {
    CAPTURE(c.registers);
    CAPTURE(c.m);
    CAPTURE(c.n);
    const RegisterBlocking b = choose_register_blocking(c.registers, c.lanes, c.m, c.n, c.has_m);
    CHECK(b.mr == c.mr);
    CHECK(b.nr == c.nr);
    CHECK(fits(b, c.registers));
  }
}

TEST_CASE("register blocking: always within the budget and the box, for every box up to 70 x 70") {
  for (int64_t registers : {8, 16, 32})
    for (int64_t lanes : {4, 8, 16})
      for (int64_t m = 1; m <= 70; ++m)
        for (int64_t n = 1; n <= 70; ++n) {
          const RegisterBlocking b = choose_register_blocking(registers, lanes, m, n, true);
          CAPTURE(registers);
          CAPTURE(lanes);
          CAPTURE(m);
          CAPTURE(n);
          REQUIRE(fits(b, registers));
          REQUIRE(b.mr >= 1);
          REQUIRE(b.mr <= m);
          REQUIRE(b.nr >= 1);
          REQUIRE(b.nr <= (n + lanes - 1) / lanes);
        }
}

TEST_CASE("register blocking: NR within the B vectors one run keeps in the first cache") {
  using tessel::cpu::run_sliver_vectors;
  // A 256-point run of 64-byte vectors is 16 KiB a vector: a 48 KiB L1d holds 3 of them, a 32 KiB
  // one 2; without a cache there is no limit, and at least one vector always streams.
  CHECK(run_sliver_vectors(48 * 1024, 64, 256) == 3);
  CHECK(run_sliver_vectors(32 * 1024, 64, 256) == 2);
  CHECK(run_sliver_vectors(0, 64, 256) == 0);
  CHECK(run_sliver_vectors(1024, 64, 256) == 1);
  CHECK(run_sliver_vectors(48 * 1024, 64, 9) == 85);  // a 9-point reduction: no limit in practice
  // Only contractions with enough rows to be compute-bound are limited: a skinny GEMM streams B
  // once and wants wide column blocks (LLaMA's M = 1 projections keep 1 x 15).
  using tessel::cpu::sliver_limit;
  CHECK(sliver_limit(64, 20, 3) == 3);
  CHECK(sliver_limit(20, 20, 3) == 3);
  CHECK(sliver_limit(8, 20, 3) == 0);
  CHECK(sliver_limit(1, 20, 3) == 0);
  CHECK(sliver_limit(4096, 0, 3) == 0);  // a spec without the balance: no limit
  CHECK(choose_register_blocking(32, 16, 1, 4096, true, sliver_limit(1, 20, 3)).nr == 15);
  // The suite's conv_bn_relu box (64 output channels x 56 columns, a 252-point run): 6 x 4 without
  // the limit (its 4-vector sliver is 63 KiB), 8 x 2 within 3 vectors (8 x 3 loads as much; ties
  // keep the smaller NR), and the limit holds for every box.
  CHECK(choose_register_blocking(32, 16, 64, 56, true).nr == 4);
  const RegisterBlocking limited = choose_register_blocking(32, 16, 64, 56, true, 3);
  CHECK(limited.mr == 8);
  CHECK(limited.nr == 2);
  for (int64_t max_nr : {1, 2, 3})
    for (int64_t m = 1; m <= 40; ++m)
      for (int64_t n = 1; n <= 100; n += 3) {
        const RegisterBlocking b = choose_register_blocking(32, 16, m, n, true, max_nr);
        CAPTURE(m);
        CAPTURE(n);
        REQUIRE(b.nr <= max_nr);
        REQUIRE(fits(b, 32));
      }
}
