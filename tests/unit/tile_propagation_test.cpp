// Tile propagation: hand-checked input regions of single nodes (matmul, convolution with stride,
// dilation and padding, depthwise convolution, max pooling, transpose, broadcast), backward
// propagation through the softmax and layernorm chains and a diamond, output reinterpretation,
// and grid-consistency failures with their reasons.
#include <doctest/doctest.h>

#include "tests/test_util.h"
#include "tilegraph/tile_propagation.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

IndexSet r(int64_t b, int64_t e) { return IndexSet::range(b, e); }

Region box(std::vector<std::pair<int64_t, int64_t>> dims) {
  Region out;
  for (auto [b, e] : dims) out.dims.push_back(r(b, e));
  return out;
}

// Lowers a one-operator model (inputs listed in `weights` become weights).
OpGraph lower_one(const std::string& op, const std::vector<HostTensor>& inputs,
                  std::map<std::string, AttrValue> attrs, const std::set<int>& weights = {}) {
  return lower_model(single_op_model(op, inputs, std::move(attrs), 1, weights));
}

AttrValue ints(std::vector<int64_t> v) { return AttrValue(std::move(v)); }

DomainTile tile(std::vector<int64_t> begin, std::vector<int64_t> extent) {
  return DomainTile{std::move(begin), std::move(extent)};
}

// out[i, j] = sum_k A[i, k] * B[k, j] with A: [64, 32], B: [32, 48].
NodeRef matmul_node() {
  NodeSpec s;
  s.name = "mm";
  s.axes = {{"i", 64, AxisKind::spatial}, {"j", 48, AxisKind::spatial}, {"k", 32, AxisKind::reduction}};
  s.inputs = {Access{TensorType{DType::f32, {64, 32}}, AffineMap::select_axes(3, {0, 2})},
              Access{TensorType{DType::f32, {32, 48}}, AffineMap::select_axes(3, {2, 1})}};
  s.body = input(0, DType::f32) * input(1, DType::f32);
  s.combiner = Combiner::sum;
  return make_node(s);
}

// out[i] = in[i + shift] over `extent` points of a 1-D tensor of size `size`.
NodeRef shift_node(const std::string& name, int64_t extent, int64_t size, int64_t shift) {
  NodeSpec s;
  s.name = name;
  s.axes = {{"i", extent, AxisKind::spatial}};
  s.inputs = {Access{TensorType{DType::f32, {size}}, AffineMap(1, {AffineExpr{{1}, shift}})}};
  s.body = input(0, DType::f32);
  return make_node(s);
}

}  // namespace

namespace doctest {
template <>
struct StringMaker<Region> {
  static String convert(const Region& r) { return r.print().c_str(); }
};
}  // namespace doctest

TEST_CASE("index sets merge, clamp and print") {
  IndexSet s = IndexSet::from_intervals({{4, 6}, {0, 2}, {2, 3}, {7, 7}});
  CHECK(s.intervals == std::vector<Interval>{{0, 3}, {4, 6}});
  CHECK(s.lo() == 0);
  CHECK(s.hi() == 6);
  CHECK(s.count() == 5);
  CHECK(s.contains(4));
  CHECK_FALSE(s.contains(3));
  CHECK(s.clamp(1, 5).print() == "{[1,3) [4,5)}");
  CHECK(unite(s, r(3, 4)) == r(0, 6));
  CHECK(IndexSet{}.print() == "{}");
  CHECK_THROWS_AS(IndexSet{}.lo(), InternalError);
  // Union of products is the product of unions (a superset); bounding boxes; canonical empties.
  Region a = box({{0, 1}, {0, 1}}), b = box({{1, 2}, {1, 2}});
  CHECK(unite(a, b) == box({{0, 2}, {0, 2}}));
  CHECK(num_elements(unite(a, b)) == 4);
  CHECK(bounding_box(Region{{IndexSet::from_intervals({{0, 1}, {5, 6}})}}) == box({{0, 6}}));
  CHECK(full_region({3, 0}).empty());
  CHECK(full_region({3, 0}) == Region{{IndexSet{}, IndexSet{}}});
}

TEST_CASE("matmul: a block tile and one reduction step") {
  NodeRef mm = matmul_node();
  const DomainTile t = tile_for_output(*mm, {16, 0}, {16, 16}, {8});
  CHECK(t == tile({16, 0, 0}, {16, 16, 8}));
  CHECK(t.print(2) == "[16:32, 0:16 | 0:8]");
  CHECK(input_region(*mm, 0, t) == box({{16, 32}, {0, 8}}));
  CHECK(input_region(*mm, 1, t) == box({{0, 8}, {0, 16}}));
  // The whole reduction, and a tile rounded up past the border is clamped.
  const DomainTile whole = tile_for_output(*mm, {48, 32}, {32, 32}, {kWholeAxis});
  CHECK(whole == tile({48, 32, 0}, {16, 16, 32}));
  CHECK(input_region(*mm, 0, whole) == box({{48, 64}, {0, 32}}));
  CHECK(tile_for_output(*mm, {0, 0}, {1, 1}) == tile({0, 0, 0}, {1, 1, 32}));
  // An empty tile reads nothing.
  CHECK(input_region(*mm, 0, tile({0, 0, 0}, {0, 4, 4})).empty());
}

TEST_CASE("conv2d with stride, dilation and padding: halo, holes and border clamping") {
  // x [1,2,8,8], w [3,2,3,3], strides 2, pads 1, dilations (1, 2): out [1,3,4,3],
  // x index = [n, c, 2*o0 + k0 - 1, 2*o1 + 2*k1 - 1].
  const OpGraph g = lower_one("Conv", {random_f32({1, 2, 8, 8}, 1), random_f32({3, 2, 3, 3}, 2)},
                              {{"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})},
                               {"dilations", ints({1, 2})}},
                              {1});
  REQUIRE(g.num_nodes() == 1);
  const TeNode& conv = g.node(0);
  REQUIRE(conv.num_spatial() == 4);
  // o0 in [1,3): rows 2*{1,2} + {0,1,2} - 1 = [1,6). o1 in [0,2): 2*{0,1} + 2*{0,1,2} - 1 =
  // {-1,1,3,5}, clamped to {1,3,5}: the dilated kernel leaves holes.
  const DomainTile t = tile_for_output(conv, {0, 0, 1, 0}, {1, 3, 2, 2});
  const Region x = input_region(conv, 0, t);
  CHECK(x.print() == "[0,1) x [0,2) x [1,6) x {[1,2) [3,4) [5,6)}");
  CHECK(num_elements(x) == 1 * 2 * 5 * 3);
  CHECK(bounding_box(x) == box({{0, 1}, {0, 2}, {1, 6}, {1, 6}}));
  CHECK(input_region(conv, 1, t) == box({{0, 3}, {0, 2}, {0, 3}, {0, 3}}));
  // The halo of the first tile row is clamped at the border (padding reads no memory).
  // (o1 = 0 reads columns 2*{0,1,2} - 1 = {-1, 1, 3}.)
  CHECK(input_region(conv, 0, tile_for_output(conv, {0, 0, 0, 0}, {1, 1, 1, 1})).print() ==
        "[0,1) x [0,2) x [0,2) x {[1,2) [3,4)}");
  // One input channel per reduction step.
  CHECK(input_region(conv, 0, tile_for_output(conv, {0, 0, 1, 0}, {1, 3, 2, 2}, {1, kWholeAxis, kWholeAxis}))
            .dims[1] == r(0, 1));
}

TEST_CASE("depthwise conv: each group reads its own channel") {
  // x [1,4,8,8], w [4,1,3,3], group 4, pads 1: x index = [n, g, o0 + k0 - 1, o1 + k1 - 1] (one
  // input and one output channel per group: no c and no m/g axis, the domain is the output's shape).
  const OpGraph g = lower_one("Conv", {random_f32({1, 4, 8, 8}, 1), random_f32({4, 1, 3, 3}, 2)},
                              {{"group", AttrValue(int64_t{4})}, {"pads", ints({1, 1, 1, 1})}}, {1});
  const TeNode& conv = g.node(0);
  REQUIRE(conv.num_spatial() == 4);  // n, g, o0, o1
  CHECK(conv.num_reduction() == 2);  // k0, k1
  const DomainTile t = tile_for_output(conv, {0, 1, 0, 4}, {1, 2, 4, 4});
  CHECK(input_region(conv, 0, t) == box({{0, 1}, {1, 3}, {0, 5}, {3, 8}}));
  CHECK(input_region(conv, 1, t) == box({{1, 3}, {0, 1}, {0, 3}, {0, 3}}));
}

TEST_CASE("max pooling: overlapping windows") {
  // 3x3 windows, stride 2, pads 1 on 8x8: out 4x4.
  const OpGraph g = lower_one("MaxPool", {random_f32({1, 2, 8, 8}, 1)},
                              {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})},
                               {"pads", ints({1, 1, 1, 1})}});
  const TeNode& pool = g.node(0);
  const DomainTile t = tile_for_output(pool, {0, 1, 2, 0}, {1, 1, 2, 2});
  CHECK(input_region(pool, 0, t) == box({{0, 1}, {1, 2}, {3, 8}, {0, 4}}));
}

TEST_CASE("transpose and broadcast") {
  // out[d0, d1, d2] = in[d1, d2, d0]
  const OpGraph tg = lower_one("Transpose", {random_f32({2, 3, 4}, 1)}, {{"perm", ints({2, 0, 1})}});
  const DomainTile t = tile_for_output(tg.node(0), {1, 0, 1}, {2, 1, 2});
  CHECK(input_region(tg.node(0), 0, t) == box({{0, 1}, {1, 3}, {1, 3}}));
  // out[d0, d1] = a[d0, d1] + b[d1]: the broadcast input follows d1 only.
  const OpGraph ag = lower_one("Add", {random_f32({4, 8}, 1), random_f32({8}, 2)}, {});
  const DomainTile u = tile_for_output(ag.node(0), {1, 2}, {2, 4});
  CHECK(input_region(ag.node(0), 0, u) == box({{1, 3}, {2, 6}}));
  CHECK(input_region(ag.node(0), 1, u) == box({{2, 6}}));
}

TEST_CASE("softmax chain: max -> sumexp -> normalize") {
  const OpGraph g = lower_one("Softmax", {random_f32({4, 8}, 1)}, {});
  REQUIRE(g.num_nodes() == 3);
  const NodeId max = 0, sumexp = 1, norm = 2;
  REQUIRE(g.node(max).name() == "op.max");
  REQUIRE(g.node(sumexp).name() == "op.sumexp");
  const GroupPropagation p =
      propagate_group(g, {norm, sumexp, max}, norm, tile_for_output(g.node(norm), {1, 0}, {2, 8}));
  REQUIRE(p.ok);
  REQUIRE(p.nodes.size() == 3);
  CHECK(p.nodes[0].node == max);
  CHECK(p.nodes[2].node == norm);
  const NodeTile& n = *p.find(norm);
  CHECK(n.output == box({{1, 3}, {0, 8}}));
  CHECK(n.inputs == std::vector<Region>{box({{1, 3}, {0, 8}}), box({{1, 3}, {0, 1}}), box({{1, 3}, {0, 1}})});
  const NodeTile& s = *p.find(sumexp);
  CHECK(s.output == box({{1, 3}, {0, 1}}));
  CHECK(s.tile == tile({1, 0, 0}, {2, 1, 8}));  // the whole reduction
  CHECK(s.inputs[0] == box({{1, 3}, {0, 8}}));
  const NodeTile& m = *p.find(max);
  CHECK(m.output == box({{1, 3}, {0, 1}}));  // union of what sumexp and normalize read
  CHECK(m.tile == tile({1, 0, 0}, {2, 1, 8}));
  CHECK(m.notes.empty());

  // Whole rows: the three nodes share a 2x1 grid.
  const GridCheck ok = check_grid(g, {max, sumexp, norm}, norm, {2, 8});
  CHECK(ok.ok);
  CHECK(ok.grid == std::vector<int64_t>{2, 1});
  CHECK(ok.num_tiles == 2);
  // Tiling the normalization along the reduced axis would recompute the row max per tile.
  const GridCheck bad = check_grid(g, {max, sumexp, norm}, norm, {2, 4});
  CHECK_FALSE(bad.ok);
  CHECK(bad.grid == std::vector<int64_t>{2, 2});
  CHECK(bad.reason ==
        "grid mismatch: sink tiles 0 and 1 along axis 'd1' of 'op' need the same tile [0:2, 0:1 | 0:8] "
        "of node 'op.max', which would be recomputed by all 2 tiles along that axis; tile 'd1' over "
        "its whole extent 8 (tile is 4) or take 'op.max' out of the group");
  // Without the reductions in the group, the elementwise node alone may be tiled freely.
  CHECK(check_grid(g, {norm}, norm, {2, 4}).ok);
}

TEST_CASE("layernorm chain: mean -> var -> normalize with broadcast weights") {
  const OpGraph g = lower_one("LayerNormalization",
                              {random_f32({4, 8}, 1), random_f32({8}, 2), random_f32({8}, 3)},
                              {{"epsilon", AttrValue(1e-5)}}, {1, 2});
  REQUIRE(g.num_nodes() == 3);
  const NodeId mean = 0, var = 1, norm = 2;
  const GroupPropagation p =
      propagate_group(g, {mean, var, norm}, norm, tile_for_output(g.node(norm), {2, 0}, {2, 8}));
  REQUIRE(p.ok);
  CHECK(p.find(norm)->inputs ==
        std::vector<Region>{box({{2, 4}, {0, 8}}), box({{2, 4}, {0, 1}}), box({{2, 4}, {0, 1}}),
                            box({{0, 8}}), box({{0, 8}})});
  CHECK(p.find(var)->inputs == std::vector<Region>{box({{2, 4}, {0, 8}}), box({{2, 4}, {0, 1}})});
  CHECK(p.find(mean)->output == box({{2, 4}, {0, 1}}));
  CHECK(p.find(mean)->tile == tile({2, 0, 0}, {2, 1, 8}));
  CHECK(check_grid(g, {mean, var, norm}, norm, {1, 8}).ok);
  const GridCheck bad = check_grid(g, {mean, var, norm}, norm, {1, 2});
  CHECK_FALSE(bad.ok);
  CHECK(bad.reason.find("node 'op.mean'") != std::string::npos);
}

TEST_CASE("a diamond: the shared producer computes the union of both reads") {
  // a = x; b[i] = a[i + 1]; c[i] = a[i]; d = b + c (15 points).
  OpGraph g;
  const TensorId x = g.add_input("x", TensorType{DType::f32, {16}});
  const TensorId a = g.add_node(shift_node("a", 16, 16, 0), {x}, "a");
  const TensorId b = g.add_node(shift_node("b", 15, 16, 1), {a}, "b");
  const TensorId c = g.add_node(shift_node("c", 15, 16, 0), {a}, "c");
  NodeSpec ds;
  ds.name = "d";
  ds.axes = {{"i", 15, AxisKind::spatial}};
  ds.inputs = {Access{TensorType{DType::f32, {15}}, AffineMap::select_axes(1, {0})},
               Access{TensorType{DType::f32, {15}}, AffineMap::select_axes(1, {0})}};
  ds.body = input(0, DType::f32) + input(1, DType::f32);
  g.mark_output(g.add_node(make_node(ds), {b, c}, "d"));
  const NodeId na = 0, nb = 1, nc = 2, nd = 3;

  const GroupPropagation p = propagate_group(g, {na, nb, nc, nd}, nd, tile({4}, {4}));
  REQUIRE(p.ok);
  CHECK(p.find(nb)->inputs[0] == box({{5, 9}}));
  CHECK(p.find(nc)->inputs[0] == box({{4, 8}}));
  CHECK(p.find(na)->output == box({{4, 9}}));
  CHECK(p.find(na)->tile == tile({4}, {5}));
  CHECK(p.find(na)->inputs[0] == box({{4, 9}}));
  CHECK(check_grid(g, {na, nb, nc, nd}, nd, {4}).ok);

  // Failures are values with a reason.
  CHECK(propagate_group(g, {nb, nd}, nc, tile({0}, {4})).reason ==
        "the sink (node id 2) is not in the group");
  CHECK(propagate_group(g, {na, nb, nd}, nb, tile({0}, {4})).reason ==
        "node 'd' has no consumer inside the group and is not the sink 'b'");
  CHECK(propagate_group(g, {nb, nb}, nb, tile({0}, {4})).reason == "node 'b' appears twice in the group");
  CHECK(propagate_group(g, {nb}, nb, tile({12}, {4})).reason ==
        "sink tile [12:16] leaves the domain of 'b' along axis 'i' (extent 15)");
  CHECK_FALSE(propagate_group(g, {}, nb, tile({0}, {4})).ok);
  // `a` also feeds `c` outside the group {a, b}, but the group computes only a[1:16).
  const GridCheck escape = check_grid(g, {na, nb}, nb, {4});
  CHECK_FALSE(escape.ok);
  CHECK(escape.reason ==
        "output 'a' of node 'a' is also used outside the group, but the group computes only [1:16] "
        "of its domain [0:16]");
}

TEST_CASE("output reinterpretation: aligned boxes stay exact, others get an enclosing box") {
  // p: domain (2, 12) whose output is viewed as [4, 6] (a Reshape); q reads column 0 of the view,
  // r reads its first two rows.
  OpGraph g;
  const TensorId x = g.add_input("x", TensorType{DType::f32, {2, 12}});
  NodeSpec ps;
  ps.name = "p";
  ps.axes = {{"a", 2, AxisKind::spatial}, {"b", 12, AxisKind::spatial}};
  ps.inputs = {Access{TensorType{DType::f32, {2, 12}}, AffineMap::select_axes(2, {0, 1})}};
  ps.body = input(0, DType::f32);
  ps.output_shape = std::vector<int64_t>{4, 6};
  const TensorId pt = g.add_node(make_node(ps), {x}, "p");
  NodeSpec qs;
  qs.name = "q";
  qs.axes = {{"i", 4, AxisKind::spatial}};
  qs.inputs = {Access{TensorType{DType::f32, {4, 6}}, AffineMap(1, {AffineExpr{{1}, 0}, AffineExpr{{0}, 0}})}};
  qs.body = input(0, DType::f32);
  g.mark_output(g.add_node(make_node(qs), {pt}, "q"));
  NodeSpec rs;
  rs.name = "r";
  rs.axes = {{"i", 2, AxisKind::spatial}, {"j", 6, AxisKind::spatial}};
  rs.inputs = {Access{TensorType{DType::f32, {4, 6}}, AffineMap::select_axes(2, {0, 1})}};
  rs.body = input(0, DType::f32);
  g.mark_output(g.add_node(make_node(rs), {pt}, "r"));

  // Rows 0..1 of the [4,6] view are elements 0..11: row 0 of the domain, exactly.
  const GroupPropagation aligned = propagate_group(g, {0, 2}, 2, tile({0, 0}, {2, 6}));
  REQUIRE(aligned.ok);
  CHECK(aligned.find(0)->output == box({{0, 2}, {0, 6}}));
  CHECK(aligned.find(0)->tile == tile({0, 0}, {1, 12}));
  CHECK(aligned.find(0)->notes.empty());
  // Column 0 of the view is elements {0, 6, 12, 18}: domain points (0,0) (0,6) (1,0) (1,6); the
  // enclosing box [0:2, 0:7] has 14 elements.
  const GroupPropagation strided = propagate_group(g, {0, 1}, 1, tile({0}, {4}));
  REQUIRE(strided.ok);
  CHECK(strided.find(0)->output == box({{0, 4}, {0, 1}}));
  CHECK(strided.find(0)->tile == tile({0, 0}, {2, 7}));
  REQUIRE(strided.find(0)->notes.size() == 1);
  CHECK(strided.find(0)->notes[0] ==
        "output f32[4,6] of 'p' reinterprets domain [2,12]: required region [0,4) x [0,1) is not a "
        "box of the domain; computing the enclosing box [0,2) x [0,7) (10 extra elements)");
  CHECK(strided.find(0)->inputs[0] == box({{0, 2}, {0, 7}}));
}

TEST_CASE("gather: the gathered dimension is read in full, and traffic counts the rows its indices name") {
  // out[i, e] = table[ids[i], e]
  NodeSpec s;
  s.name = "embed";
  s.axes = {{"i", 4, AxisKind::spatial}, {"e", 16, AxisKind::spatial}};
  Access table{TensorType{DType::f32, {100, 16}}, AffineMap::select_axes(2, {-1, 1})};
  table.gather_dim = 0;
  table.gather_index_input = 1;
  s.inputs = {table, Access{TensorType{DType::i64, {4}}, AffineMap::select_axes(2, {0})}};
  s.body = input(0, DType::f32);
  NodeRef n = make_node(s);
  const DomainTile t = tile_for_output(*n, {1, 4}, {2, 8});
  CHECK(input_region(*n, 0, t) == box({{0, 100}, {4, 12}}));
  CHECK(input_region(*n, 1, t) == box({{1, 3}}));
  // What is read, for traffic and footprints: as many rows as the tile reads indices (2 of the
  // table's 100 here, all 100 at most), counted as the first ones.
  CHECK(read_region(*n, 0, t) == box({{0, 2}, {4, 12}}));
  NodeSpec many = s;
  many.axes[0].extent = 400;
  many.inputs[1].type.shape = {400};
  NodeRef m = make_node(many);
  CHECK(read_region(*m, 0, DomainTile::whole(*m)) == box({{0, 100}, {0, 16}}));
}
