// Affine maps: evaluation, bounds over a box, printing.
#include <doctest/doctest.h>

#include "tilegraph/affine_map.h"
#include "tilegraph/error.h"

using namespace tessel;

TEST_CASE("a strided, padded convolution row") {
  // x index = 2*oh + kh - 1 over oh in [0, 4), kh in [0, 3)
  AffineMap m(2, {AffineExpr{{2, 1}, -1}});
  const int64_t p[] = {3, 2};
  CHECK(m.result(0).apply(p) == 7);
  CHECK(m.result(0).min_over({4, 3}) == -1);
  CHECK(m.result(0).max_over({4, 3}) == 7);
  CHECK(m.print({"oh", "kh"}) == "[2*oh + kh - 1]");
}

TEST_CASE("negative coefficients, broadcasting and constant rows") {
  AffineMap flip(2, {AffineExpr{{1, -2}, 4}, AffineExpr{{0, 0}, 0}});
  CHECK(flip.print({"o", "k"}) == "[o - 2*k + 4, 0]");
  CHECK(flip.result(0).min_over({5, 3}) == 0);
  AffineMap sel = AffineMap::select_axes(3, {2, -1, 0});
  CHECK(sel.print({"a", "b", "c"}) == "[c, 0, a]");
  CHECK_THROWS_AS(AffineMap(2, {AffineExpr{{1}, 0}}), InternalError);
}

TEST_CASE("uses_axis: a nonzero coefficient in some row, broadcast and constant rows use none") {
  // Input of a 3x3 conv over (n, co, oh, ow | ci, kh, kw): x[n, ci, oh + kh - 1, ow + kw - 1].
  const AffineMap x(7, {AffineExpr{{1, 0, 0, 0, 0, 0, 0}, 0}, AffineExpr{{0, 0, 0, 0, 1, 0, 0}, 0},
                        AffineExpr{{0, 0, 1, 0, 0, 1, 0}, -1}, AffineExpr{{0, 0, 0, 1, 0, 0, 1}, -1}});
  for (int a : {0, 2, 3, 4, 5, 6}) CHECK(x.uses_axis(a));
  CHECK_FALSE(x.uses_axis(1));  // the output channel
  CHECK_FALSE(x.uses_axis(7));  // past the domain
  const AffineMap broadcast = AffineMap::select_axes(2, {-1, 1});
  CHECK_FALSE(broadcast.uses_axis(0));
  CHECK(broadcast.uses_axis(1));
}
