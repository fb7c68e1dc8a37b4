// Value bounds (tilegraph/value_bounds.h) and the key ranges of an attention mask they prove
// (tilegraph/attention_pattern.h): index arithmetic over boxes, selects with a known condition,
// weights scanned, pad values, unknown inputs; causal masks built by Trilu of a constant (folded
// into a weight, or left as nodes above the fold limit), bottom-right masks of a chunk of
// queries after cached keys, masks too small to exclude anything, and input masks; the chunks
// where the mask's step is an identity (plain).
#include <doctest/doctest.h>

#include <cmath>

#include "../model_builder.h"
#include "tilegraph/attention_pattern.h"
#include "tilegraph/value_bounds.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

IndexBox box(std::vector<int64_t> lo, std::vector<int64_t> hi) { return IndexBox{std::move(lo), std::move(hi)}; }

// softmax(Q K^T * scale + mask) V over [heads, sq, skv] with the causal mask of Trilu(k).
OpGraph causal_attention(int64_t sq, int64_t skv, double fill, DType dt, const LowerOptions& options = {}) {
  ModelBuilder b(dt);
  const std::string q = b.input("q", {2, sq, 64}), k = b.input("k", {2, skv, 64}), v = b.input("v", {2, skv, 64});
  const std::string kt = b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  std::string x = b.op("Mul", {b.op("MatMul", {q, kt}), b.weight("scale", {}, 5, 0.125, 0.125)});
  const HostTensor value(TensorType{dt, {1}}, std::vector<double>{fill});
  const std::string full = b.op("ConstantOfShape", {b.weight_i64("shape", {sq, skv})}, {{"value", value}});
  x = b.op("Add", {x, b.op("Trilu", {full, b.weight_i64("mask_k", {skv - sq + 1}, true)}, {{"upper", int64_t{1}}})});
  const std::string out = b.op("MatMul", {b.op("Softmax", {x}, {{"axis", int64_t{-1}}}), v});
  ModelDef m = b.model({out});
  return lower_model(m, options);
}

AttentionPattern pattern_of(const OpGraph& g) {
  const std::optional<AttentionPattern> p = match_attention(g, g.producer(g.outputs()[0]));
  REQUIRE(p.has_value());
  return *p;
}

}  // namespace

TEST_CASE("value bounds: index arithmetic, known conditions, weights, pads and unknown inputs") {
  ModelBuilder b(DType::f32);
  const std::string x = b.input("x", {4, 6});
  // Trilu of a constant fill: 0 where column - row < 2, -100 on and above that diagonal.
  const HostTensor value(TensorType{DType::f32, {1}}, std::vector<double>{-100});
  const std::string full = b.op("ConstantOfShape", {b.weight_i64("shape", {4, 6})}, {{"value", value}});
  const std::string tri = b.op("Trilu", {full, b.weight_i64("k", {2}, true)}, {{"upper", int64_t{1}}});
  const std::string sum = b.op("Add", {x, tri});
  ModelDef m = b.model({sum, tri});
  LowerOptions keep;
  keep.fold_limit_elements = 0;  // the mask stays nodes
  const OpGraph g = lower_model(m, keep);
  const NodeId add = g.producer(g.outputs()[0]);
  const TensorId mask = g.outputs()[1];
  ValueBounds bounds(g);
  // Rows 0-1, columns 3-5: column - row >= 2 everywhere -> -100 exactly.
  Interval r = bounds.tensor(mask, box({0, 3}, {1, 5}));
  CHECK(r.lo == -100);
  CHECK(r.hi == -100);
  // Rows 2-3, columns 0-3: column - row <= 1 -> 0.
  r = bounds.tensor(mask, box({2, 0}, {3, 3}));
  CHECK(r.lo == 0);
  CHECK(r.hi == 0);
  // Straddling the diagonal: both.
  r = bounds.tensor(mask, box({0, 0}, {3, 5}));
  CHECK(r.lo == -100);
  CHECK(r.hi == 0);
  // x is a model input: unknown, so is the sum; assumed, the sum is bounded.
  CHECK_FALSE(bounds.node(add, box({0, 3}, {1, 5})).known());
  bounds.assume(g.inputs()[0], Interval{-1, 1});
  r = bounds.node(add, box({0, 3}, {1, 5}));
  CHECK(r.lo == -101);
  CHECK(r.hi == -99);

  // A weight with data is scanned over the box; a read past its edge adds the pad value.
  ModelBuilder w(DType::f32);
  const std::string in = w.input("in", {3});
  const std::string shifted = w.op("Pad", {in, w.weight_i64("pads", {2, 0})});  // [0, 0, in0, in1, in2]
  const std::string c = w.weight_i64("c", {5, -3, 7, 1});
  const std::string cf = w.op("Cast", {c}, {{"to", int64_t{1}}});
  ModelDef wm = w.model({shifted, cf});
  const OpGraph wg = lower_model(wm, keep);
  ValueBounds wb(wg);
  wb.assume(wg.inputs()[0], Interval{3, 4});
  r = wb.tensor(wg.outputs()[0], box({0}, {4}));
  CHECK(r.lo == 0);
  CHECK(r.hi == 4);
  r = wb.tensor(wg.outputs()[0], box({2}, {4}));
  CHECK(r.lo == 3);
  CHECK(r.hi == 4);
  r = wb.tensor(wg.outputs()[1], box({1}, {2}));
  CHECK(r.lo == -3);
  CHECK(r.hi == 7);
}

TEST_CASE("attention key ranges: causal masks skip the chunks above the diagonal, and only those") {
  // 512 queries and keys, blocks of 128 rows, chunks of 64 keys: block b visits chunks 0 .. 2b + 1.
  for (bool folded : {true, false}) {
    const std::string how = folded ? "mask folded into a weight" : "mask computed by nodes";
    INFO(how);
    LowerOptions options;
    if (!folded) options.fold_limit_elements = 0;
    const OpGraph g = causal_attention(512, 512, -6e4, DType::f16, options);
    const AttentionPattern p = pattern_of(g);
    const std::optional<AttentionKeyRanges> r = attention_key_ranges(g, p, 128, 64);
    REQUIRE(r.has_value());
    CHECK(r->chunks == 8);
    REQUIRE(r->first.size() == 4);
    for (int b = 0; b < 4; ++b) {
      CHECK(r->first[b] == 0);
      CHECK(r->end[b] == 2 * b + 2);
    }
    CHECK(r->visited() == 2 + 4 + 6 + 8);
    CHECK(r->skipped() == 32 - 20);
    // Below the diagonal the mask adds 0: block b's chunks 0 .. 2b - 1 are plain (keys up to
    // 128 b - 1, every row of the block sees them), scored without the mask's step.
    REQUIRE(r->plain_steps.size() == 1);
    CHECK(g.node(r->plain_steps[0]).body().op() == ExprOp::add);
    for (int b = 0; b < 4; ++b) {
      CHECK(r->plain_first[b] == 0);
      CHECK(r->plain_end[b] == 2 * b);
    }
  }
  // 70 new queries after 450 cached keys (bottom-right): query i sees keys up to 450 + i; blocks
  // of 64 rows, chunks of 128 keys: block 0 (keys to 513) visits all 5 chunks (520 keys), block
  // 1 (rows 64-69, keys to 519) too -- nothing to skip; chunks 0-2 (keys to 383) are plain.
  {
    const OpGraph g = causal_attention(70, 520, -6e4, DType::f16);
    const std::optional<AttentionKeyRanges> all = attention_key_ranges(g, pattern_of(g), 64, 128);
    REQUIRE(all.has_value());
    CHECK(all->skipped() == 0);
    CHECK(all->plain_end[0] == 3);
    // Blocks of 16 rows, chunks of 16 keys: block 0 (keys to 465) visits chunks 0 .. 29.
    const std::optional<AttentionKeyRanges> r = attention_key_ranges(g, pattern_of(g), 16, 16);
    REQUIRE(r.has_value());
    CHECK(r->chunks == 33);
    CHECK(r->end[0] == 30);
    CHECK(r->end[4] == 33);
  }
  // A fill too small to push the masked scores 90 below any unmasked one (scores bounded by
  // 65504 * 0.125 on either side): nothing is skipped (the chunks below the diagonal are still
  // plain: the mask adds 0 there).
  {
    const OpGraph g = causal_attention(256, 256, -1e4, DType::f16);
    const std::optional<AttentionKeyRanges> r = attention_key_ranges(g, pattern_of(g), 128, 64);
    REQUIRE(r.has_value());
    CHECK(r->skipped() == 0);
    CHECK(r->plain_end[1] == 2);
  }
  // f32 with a -1e30 fill: skipped as in f16.
  {
    const OpGraph g = causal_attention(256, 256, -1e30, DType::f32);
    const std::optional<AttentionKeyRanges> r = attention_key_ranges(g, pattern_of(g), 128, 128);
    REQUIRE(r.has_value());
    CHECK(r->end[0] == 1);
    CHECK(r->end[1] == 2);
  }
}

TEST_CASE("attention key ranges: a mask given as a model input proves nothing") {
  ModelBuilder b(DType::f16);
  const std::string q = b.input("q", {1, 256, 64}), k = b.input("k", {1, 256, 64}), v = b.input("v", {1, 256, 64});
  const std::string kt = b.op("Transpose", {k}, {{"perm", std::vector<int64_t>{0, 2, 1}}});
  const std::string x = b.op("Add", {b.op("MatMul", {q, kt}), b.input("mask", {256, 256})});
  const OpGraph g = b.graph(b.op("MatMul", {b.op("Softmax", {x}, {{"axis", int64_t{-1}}}), v}));
  CHECK_FALSE(attention_key_ranges(g, pattern_of(g), 128, 64).has_value());
}
