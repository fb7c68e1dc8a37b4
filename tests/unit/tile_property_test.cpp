// Property test of tile propagation against the interpreter: for random affine nodes and random
// domain tiles, input_region must equal the set of in-range elements the interpreter reads when it
// evaluates exactly that tile (InterpretOptions::read_observer + domain_tile). Rows are drawn so
// that each tensor dimension uses its own axes, where the Region is exact; a diagonal read shows
// the documented superset.
#include <doctest/doctest.h>

#include <random>
#include <set>

#include "tests/test_util.h"
#include "tilegraph/tile_propagation.h"

using namespace tessel;
using namespace tessel::testing;

namespace {

using Index = std::vector<int64_t>;

// Every element of a region (small regions only).
std::set<Index> elements(const Region& region) {
  std::set<Index> out;
  if (region.empty()) return out;
  Index idx(region.rank());
  auto rec = [&](auto&& self, int d) -> void {
    if (d == region.rank()) {
      out.insert(idx);
      return;
    }
    for (const Interval& iv : region.dims[d].intervals)
      for (int64_t v = iv.begin; v < iv.end; ++v) {
        idx[d] = v;
        self(self, d + 1);
      }
  };
  rec(rec, 0);
  return out;
}

// Per input, the elements the interpreter reads over `tile`.
std::vector<std::set<Index>> observed_reads(const TeNode& node, const DomainTile& tile) {
  std::vector<HostTensor> values;
  std::vector<const HostTensor*> ptrs;
  for (size_t i = 0; i < node.inputs().size(); ++i)
    values.push_back(random_f32(node.inputs()[i].type.shape, 7 + i));
  for (const HostTensor& v : values) ptrs.push_back(&v);
  std::vector<std::set<Index>> seen(node.inputs().size());
  InterpretOptions options;
  options.threads = 1;
  options.domain_tile = DomainBox{tile.begin, tile.extent};
  options.read_observer = [&](int input, const int64_t* index) {
    seen[input].insert(Index(index, index + node.inputs()[input].type.rank()));
  };
  evaluate_node(node, ptrs, options);
  return seen;
}

// A random node: 1-4 spatial and 0-2 reduction axes, 1-3 inputs of rank 1-3 (f32). Each axis is
// given to at most one dimension of each input, with a coefficient in [-3, 3] (0 included), and an offset.
NodeRef random_node(std::mt19937_64& rng, int serial) {
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  NodeSpec s;
  s.name = "rand" + std::to_string(serial);
  const int ns = static_cast<int>(uniform(1, 4));
  const int nr = static_cast<int>(uniform(0, 2));
  for (int a = 0; a < ns; ++a) s.axes.push_back({"s" + std::to_string(a), uniform(1, 5), AxisKind::spatial});
  for (int a = 0; a < nr; ++a) s.axes.push_back({"r" + std::to_string(a), uniform(1, 4), AxisKind::reduction});
  const int na = ns + nr;
  const int num_inputs = static_cast<int>(uniform(1, 3));
  Expr body;
  for (int i = 0; i < num_inputs; ++i) {
    const int rank = static_cast<int>(uniform(1, 3));
    std::vector<AffineExpr> rows(rank, AffineExpr{std::vector<int64_t>(na, 0), 0});
    for (int a = 0; a < na; ++a) {
      const int64_t d = uniform(-1, rank - 1);  // -1: the axis is not used by this input
      if (d >= 0) rows[d].coeffs[a] = uniform(-3, 3);
    }
    // Offsets put the smallest index of each row over the domain near 0 (-2 to +1), so that
    // tiles straddle the lower border as well as the upper one (shapes 2-12).
    std::vector<int64_t> extents;
    for (const Axis& ax : s.axes) extents.push_back(ax.extent);
    std::vector<int64_t> shape;
    for (AffineExpr& row : rows) {
      row.offset = -row.min_over(extents) + uniform(-2, 1);
      shape.push_back(uniform(2, 12));
    }
    Access acc{TensorType{DType::f32, shape}, AffineMap(na, rows)};
    acc.pad_value = 0;
    s.inputs.push_back(acc);
    body = body.valid() ? body + input(i, DType::f32) : input(i, DType::f32);
  }
  s.body = body;
  if (nr > 0) s.combiner = Combiner::sum;
  return make_node(s);
}

DomainTile random_tile(std::mt19937_64& rng, const TeNode& node) {
  DomainTile t;
  for (const Axis& ax : node.axes()) {
    const int64_t b = std::uniform_int_distribution<int64_t>(0, ax.extent - 1)(rng);
    t.begin.push_back(b);
    t.extent.push_back(std::uniform_int_distribution<int64_t>(1, ax.extent - b)(rng));
  }
  return t;
}

}  // namespace

TEST_CASE("property: propagated input regions equal the elements the interpreter reads") {
  std::mt19937_64 rng(20240611);
  int checked = 0, nonempty = 0, with_holes = 0;
  for (int trial = 0; trial < 400; ++trial) {
    NodeRef node = random_node(rng, trial);
    for (int k = 0; k < 3; ++k) {
      const DomainTile tile = random_tile(rng, *node);
      const std::vector<std::set<Index>> seen = observed_reads(*node, tile);
      for (int i = 0; i < static_cast<int>(node->inputs().size()); ++i) {
        const Region region = input_region(*node, i, tile);
        INFO(print_node(*node, {}, "out"), "tile ", tile.print(node->num_spatial()), " input ", i,
             " region ", region.print());
        CHECK(elements(region) == seen[i]);
        ++checked;
        nonempty += !region.empty();
        for (const IndexSet& s : region.dims) with_holes += s.intervals.size() > 1;
      }
    }
  }
  // The generator exercises the interesting cases (not only empty or contiguous regions).
  CHECK(checked > 1000);
  INFO(nonempty, " of ", checked, " non-empty, ", with_holes, " with holes");
  CHECK(nonempty > checked / 3);
  CHECK(with_holes > 100);
}

TEST_CASE("a diagonal read x[i, i]: the region is the product of the per-dimension sets") {
  NodeSpec s;
  s.name = "diag";
  s.axes = {{"i", 4, AxisKind::spatial}};
  s.inputs = {Access{TensorType{DType::f32, {4, 4}}, AffineMap::select_axes(1, {0, 0})}};
  s.body = input(0, DType::f32);
  NodeRef node = make_node(s);
  const DomainTile tile{{1}, {3}};
  const Region region = input_region(*node, 0, tile);
  CHECK(region.print() == "[1,4) x [1,4)");
  const std::set<Index> seen = observed_reads(*node, tile)[0];
  CHECK(seen == std::set<Index>{{1, 1}, {2, 2}, {3, 3}});
  const std::set<Index> all = elements(region);
  CHECK(all.size() == 9);  // a superset of the 3 elements read
  for (const Index& e : seen) CHECK(all.count(e) == 1);
}
