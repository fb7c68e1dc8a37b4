// Block and N:M sparsity of weights (sparsity.h).
#include "tilegraph/sparsity.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tilegraph/error.h"
#include "tilegraph/host_tensor.h"

namespace tessel {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The N:M axis counted from the front of a tensor of `rank` dimensions (may lie outside
// [0, rank): check_sparsity says so).
int64_t nm_axis(int axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// A tensor seen as [outer, extent, inner] around dimension `axis` (in range).
struct AxisView {
  int64_t outer = 1, extent = 1, inner = 1;
};

AxisView view_along(const std::vector<int64_t>& shape, int64_t axis) {
  AxisView v;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) v.outer *= shape[d];
    else if (d > axis) v.inner *= shape[d];
  }
  v.extent = shape[axis];
  return v;
}

std::string check_nm(const Sparsity& s, const std::vector<int64_t>& shape) {
  if (!(s.nm_n > 0 && s.nm_n < s.nm_m)) return cat("N:M pattern ", s.nm_n, ":", s.nm_m, " needs 0 < n < m");
  const int64_t axis = nm_axis(s.axis, shape.size());
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size()))
    return cat("axis ", s.axis, " is not a dimension of a tensor of rank ", shape.size());
  if (shape[axis] % s.nm_m != 0)
    return cat("dimension ", axis, " has extent ", shape[axis], ", not a multiple of m = ", s.nm_m);
  return "";
}

// In every group of nm_m consecutive values along the axis, the nm_n of largest magnitude are
// kept (a NaN counts as the largest; ties keep the earlier), the others set to zero.
HostTensor prune_nm(HostTensor values, const Sparsity& s) {
  const std::vector<int64_t>& shape = values.shape();
  TESSEL_ASSERT(check_nm(s, shape).empty(), check_nm(s, shape));
  const AxisView view = view_along(shape, nm_axis(s.axis, shape.size()));
  double* v = values.data();
  const auto magnitude = [](double x) { return std::isnan(x) ? HUGE_VAL : std::fabs(x); };
  std::vector<int64_t> group(s.nm_m);
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t g = 0; g < view.extent; g += s.nm_m)
      for (int64_t i = 0; i < view.inner; ++i) {
        const int64_t first = (o * view.extent + g) * view.inner + i;
        // The group's positions by decreasing magnitude, the earlier first on a tie (an insertion
        // sort: stable, and m is small).
        for (int64_t j = 0; j < s.nm_m; ++j) {
          const int64_t at = first + j * view.inner;
          int64_t k = j;
          for (; k > 0 && magnitude(v[group[k - 1]]) < magnitude(v[at]); --k) group[k] = group[k - 1];
          group[k] = at;
        }
        for (int64_t j = s.nm_n; j < s.nm_m; ++j) v[group[j]] = 0.0;
      }
  return values;
}

}  // namespace

std::string print_sparsity(const Sparsity& s) {
  if (s.pattern == Sparsity::Pattern::nm) return cat(s.nm_n, ":", s.nm_m, " along dimension ", s.axis);
  std::string out = cat("block ", s.block_rows, "x", s.block_cols);
  if (s.density > 0) out += cat(", pruned to density ", s.density);
  return out;
}

std::string check_sparsity(const Sparsity& s, const std::vector<int64_t>& shape) {
  if (s.pattern == Sparsity::Pattern::nm) return check_nm(s, shape);
  if (shape.size() < 2) return cat("a block pattern needs a matrix (rank 2 or more), the tensor has rank ", shape.size());
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (s.block_rows <= 0 || s.block_cols <= 0) return cat("block ", s.block_rows, "x", s.block_cols, " is not positive");
  if (s.block_rows > std::max<int64_t>(rows, 1) || s.block_cols > std::max<int64_t>(cols, 1))
    return cat("block ", s.block_rows, "x", s.block_cols, " is larger than the ", rows, "x", cols, " matrix");
  if (!(s.density >= 0 && s.density <= 1)) return cat("density ", s.density, " is not in [0, 1]");
  return "";
}

HostTensor apply_sparsity(HostTensor values, const Sparsity& s) {
  if (s.pattern == Sparsity::Pattern::nm) return prune_nm(std::move(values), s);
  if (s.density <= 0) return values;
  const std::vector<int64_t>& shape = values.shape();
  TESSEL_ASSERT(check_sparsity(s, shape).empty(), check_sparsity(s, shape));
  const int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (rows == 0 || cols == 0) return values;
  const int64_t br = ceil_div(rows, s.block_rows), bc = ceil_div(cols, s.block_cols), blocks = br * bc;
  const int64_t keep = std::clamp<int64_t>(std::llround(s.density * static_cast<double>(blocks)), 1, blocks);
  double* v = values.data();
  std::vector<double> norm(blocks);
  std::vector<int64_t> order(blocks);
  for (int64_t base = 0; base < values.size(); base += rows * cols) {
    std::fill(norm.begin(), norm.end(), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) norm[(r / s.block_rows) * bc + c / s.block_cols] += std::fabs(v[base + r * cols + c]);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return norm[a] > norm[b]; });
    std::vector<uint8_t> kept(blocks, 0);
    for (int64_t i = 0; i < keep; ++i) kept[order[i]] = 1;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        if (!kept[(r / s.block_rows) * bc + c / s.block_cols]) v[base + r * cols + c] = 0.0;
  }
  return values;
}

NonzeroMap nonzero_map(const HostTensor& values, int64_t unit) {
  TESSEL_ASSERT(values.shape().size() >= 2 && unit > 0, "nonzero_map of a tensor of rank ", values.shape().size());
  NonzeroMap m;
  m.rows = values.shape()[values.shape().size() - 2];
  m.cols = values.shape().back();
  m.unit = unit;
  m.cell_rows = ceil_div(m.rows, unit);
  m.cell_cols = ceil_div(m.cols, unit);
  m.cells.assign(m.cell_rows * m.cell_cols, 0);
  const double* v = values.data();
  const int64_t matrix = m.rows * m.cols;
  for (int64_t base = 0; matrix > 0 && base < values.size(); base += matrix)
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t c = 0; c < m.cols; ++c)
        if (v[base + r * m.cols + c] != 0.0) m.cells[(r / unit) * m.cell_cols + c / unit] = 1;
  return m;
}

std::vector<uint8_t> NonzeroMap::tiles(int64_t tile_rows, int64_t tile_cols) const {
  TESSEL_ASSERT(tile_rows > 0 && tile_cols > 0 && tile_rows % unit == 0 && tile_cols % unit == 0, "tile ", tile_rows, "x",
                tile_cols, " is not a multiple of the map's unit ", unit);
  const int64_t fr = tile_rows / unit, fc = tile_cols / unit;
  const int64_t tr = ceil_div(rows, tile_rows), tc = ceil_div(cols, tile_cols);
  std::vector<uint8_t> out(tr * tc, 0);
  for (int64_t r = 0; r < cell_rows; ++r)
    for (int64_t c = 0; c < cell_cols; ++c)
      if (cells[r * cell_cols + c]) out[(r / fr) * tc + c / fc] = 1;
  return out;
}

double NonzeroMap::density(int64_t tile_rows, int64_t tile_cols) const {
  const std::vector<uint8_t> t = tiles(tile_rows, tile_cols);
  if (t.empty()) return 1.0;
  return static_cast<double>(std::count(t.begin(), t.end(), 1)) / static_cast<double>(t.size());
}

bool is_nm_sparse(const HostTensor& values, int n, int m, int axis) {
  const Sparsity s{.pattern = Sparsity::Pattern::nm, .nm_n = n, .nm_m = m, .axis = axis};
  if (!check_nm(s, values.shape()).empty()) return false;
  const AxisView view = view_along(values.shape(), nm_axis(axis, values.shape().size()));
  for (int64_t o = 0; o < view.outer; ++o)
    for (int64_t g = 0; g < view.extent; g += m)
      for (int64_t i = 0; i < view.inner; ++i) {
        const int64_t first = (o * view.extent + g) * view.inner + i;
        int nonzero = 0;
        for (int64_t j = 0; j < m; ++j) nonzero += values[first + j * view.inner] != 0.0;
        if (nonzero > n) return false;
      }
  return true;
}

}  // namespace tessel
