// Recognizing and planning row kernels (see row_plan.h).
#include "kernels/cuda/row_plan.h"

#include <algorithm>

#include "tilegraph/error.h"

namespace tessel::cuda {

namespace {

RowMatch fail(std::string reason) { return RowMatch{std::nullopt, std::move(reason)}; }

int64_t ceil_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

int64_t floor_pow2(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

/// Result row `r` of a map is exactly axis `axis` (coefficient 1, offset 0); axis < 0: the
/// constant 0.
bool row_is(const AffineExpr& row, int axis) {
  if (row.offset != 0) return false;
  for (size_t a = 0; a < row.coeffs.size(); ++a)
    if (row.coeffs[a] != (static_cast<int>(a) == axis ? 1 : 0)) return false;
  return true;
}

/// Result row `row` of a read by `reader` is always 0: no offset, and only spatial axes of
/// extent 1 (a keepdims axis) may appear in it.
bool row_is_zero(const AffineExpr& row, const TeNode& reader) {
  if (row.offset != 0) return false;
  for (size_t a = 0; a < row.coeffs.size(); ++a)
    if (row.coeffs[a] != 0 && (static_cast<int>(a) >= reader.num_spatial() || reader.axes()[a].extent != 1)) return false;
  return true;
}

/// `shape` is `rows` followed by any number of dimensions of size 1.
bool rows_then_ones(const std::vector<int64_t>& shape, const std::vector<int64_t>& rows) {
  if (shape.size() < rows.size() || !std::equal(rows.begin(), rows.end(), shape.begin())) return false;
  return std::all_of(shape.begin() + static_cast<std::ptrdiff_t>(rows.size()), shape.end(), [](int64_t e) { return e == 1; });
}

/// A read by a sink reducing `nr` axes from `first` on (its spatial count) that walks them as the
/// last `nr` dimensions of the tensor, whole and in order (result rank - nr + j is axis first + j,
/// coefficient 1, nothing else; no other result uses them): the merged row's read -- the tensor
/// viewed with those dimensions as one and the map's last result the column axis `first`.
/// nullopt when the read does not walk them so.
std::optional<RowRead> merged_read(const RowRead& rd, const TeNode& sink, int first, int nr) {
  const int rank = rd.map.num_results();
  if (rank < nr) return std::nullopt;
  for (int q = 0; q < rank; ++q) {
    const AffineExpr& row = rd.map.result(q);
    const int j = q - (rank - nr);
    for (int a = first; a < first + nr; ++a)
      if (row.coeffs[a] != (j >= 0 && a == first + j ? 1 : 0)) return std::nullopt;
    if (j < 0) continue;
    if (row.offset != 0 || rd.type.shape[q] != sink.axes()[first + j].extent) return std::nullopt;
    for (int a = 0; a < first; ++a)
      if (row.coeffs[a] != 0) return std::nullopt;
  }
  RowRead out = rd;
  std::vector<AffineExpr> results(rd.map.results().begin(), rd.map.results().end() - nr);
  AffineExpr column{std::vector<int64_t>(rd.map.num_axes(), 0), 0};
  column.coeffs[first] = 1;
  results.push_back(column);
  out.map = AffineMap(rd.map.num_axes(), std::move(results));
  out.type.shape.resize(rank - nr);
  int64_t n = 1;
  for (int a = first; a < first + nr; ++a) n *= sink.axes()[a].extent;
  out.type.shape.push_back(n);
  return out;
}

/// The map reads its source at the reader's own point (result r is axis r).
bool is_identity_read(const AffineMap& map) {
  for (int r = 0; r < map.num_results(); ++r)
    if (!row_is(map.result(r), r)) return false;
  return true;
}

}  // namespace

int row_column_axis(const TeNode& node, RowKind kind) {
  if (kind == RowKind::row) return node.num_spatial() - 1;
  return node.num_reduction() >= 1 ? node.num_spatial() : -1;
}

bool reads_in_bounds(const TeNode& reader, const Access& acc) {
  const std::vector<int64_t> extents = reader.extents();
  for (int r = 0; r < acc.type.rank(); ++r)
    if (acc.map.result(r).min_over(extents) < 0 || acc.map.result(r).max_over(extents) >= acc.type.shape[r]) return false;
  return true;
}

/// The last index of a vector read: `axis` with coefficient 1, and any other terms in steps of
/// whole vectors (an axis split off by a reshape: h * d + j with d a multiple of the width), with
/// `axis`'s extent a multiple of the width, so each vector is contiguous and aligned.
static bool vector_last_index(const TeNode& reader, const AffineExpr& row, int axis, int vec) {
  if (row.coeffs[axis] != 1 || row.offset % vec != 0 || reader.axes()[axis].extent % vec != 0) return false;
  for (size_t a = 0; a < row.coeffs.size(); ++a)
    if (static_cast<int>(a) != axis && row.coeffs[a] % vec != 0) return false;
  return true;
}

bool row_vector_access(const TeNode& reader, const AffineMap& map, const TensorType& type, int axis, int vec) {
  if (axis < 0 || type.rank() == 0 || map.num_results() != type.rank()) return false;
  const int rank = type.rank();
  if (type.shape[rank - 1] % vec != 0) return false;
  const std::vector<int64_t> extents = reader.extents();
  for (int r = 0; r < rank; ++r) {
    const AffineExpr& row = map.result(r);
    if (r == rank - 1 ? !(row_is(row, axis) || vector_last_index(reader, row, axis, vec)) : row.coeffs[axis] != 0) return false;
    if (row.min_over(extents) < 0 || row.max_over(extents) >= type.shape[r]) return false;
  }
  return true;
}

bool row_shifted_access(const TeNode& reader, const AffineMap& map, const TensorType& type, int axis,
                        const std::vector<int64_t>& row_extents, int64_t n) {
  const int d = static_cast<int>(row_extents.size()) + 1;
  if (axis < 0 || type.rank() != d || map.num_results() != d || type.shape.back() != n) return false;
  for (int r = 0; r + 1 < d; ++r)
    if (type.shape[r] != row_extents[r] || !row_is(map.result(r), r)) return false;
  return row_is(map.result(d - 1), axis);
}

// Whether per-row nodes i and j of a streamed row are a maximum and its sum of exponentials that
// one online pass computes (row_plan.h): i the maximum of one read of device memory, j the sum of
// exp(the same read - i's value).
static bool online_pair(const OpGraph& graph, const RowPlan& p, int i, int j) {
  const RowNode& ri = p.nodes[i];
  const RowNode& rj = p.nodes[j];
  if (ri.kind != RowKind::per_row || rj.kind != RowKind::per_row) return false;
  const TeNode& ni = graph.node(ri.node);
  const TeNode& nj = graph.node(rj.node);
  if (ni.num_reduction() != 1 || nj.num_reduction() != 1 || ni.combiner() != Combiner::max || nj.combiner() != Combiner::sum)
    return false;
  if (ni.extents() != nj.extents() || ni.num_spatial() != nj.num_spatial()) return false;
  const Expr& bi = ni.body();
  if (bi.op() != ExprOp::input || ri.reads[bi.index()].producer >= 0) return false;
  const RowRead& x = ri.reads[bi.index()];
  // The merged pass subtracts the unrounded running maximum: the reference's, rounded to the
  // maximum's dtype, is the same value only when that is x's dtype.
  if (ni.output().dtype != x.type.dtype) return false;
  const Expr& bj = nj.body();
  if (bj.op() != ExprOp::exp || bj.operands()[0].op() != ExprOp::sub) return false;
  const Expr& a = bj.operands()[0].operands()[0];
  const Expr& m = bj.operands()[0].operands()[1];
  if (a.op() != ExprOp::input || m.op() != ExprOp::input || rj.reads.size() != 2) return false;
  const RowRead& ra = rj.reads[a.index()];
  return ra.producer < 0 && ra.tensor == x.tensor && ra.map == x.map && rj.reads[m.index()].producer == i;
}

bool row_vector_aligned(const TeNode& reader, const AffineMap& map, const std::vector<int64_t>& shape, int axis, int vec) {
  const int rank = static_cast<int>(shape.size());
  if (axis < 0 || rank == 0 || map.num_results() != rank) return false;
  if (shape[rank - 1] % vec != 0) return false;
  for (int r = 0; r < rank; ++r) {
    const AffineExpr& row = map.result(r);
    if (r == rank - 1 ? !(row_is(row, axis) || vector_last_index(reader, row, axis, vec)) : row.coeffs[axis] != 0) return false;
  }
  return true;
}

bool row_vector_access_guarded(const TeNode& reader, const AffineMap& map, const TensorType& type, int axis, int vec) {
  if (!row_vector_aligned(reader, map, type.shape, axis, vec)) return false;
  const int rank = type.rank();
  const AffineExpr& last = map.result(rank - 1);
  const std::vector<int64_t> extents = reader.extents();
  return last.min_over(extents) >= 0 && last.max_over(extents) < type.shape[rank - 1];
}

std::optional<AffineMap> split_reshape_map(const std::vector<int64_t>& domain, const std::vector<int64_t>& shape) {
  const int q = static_cast<int>(shape.size());
  std::vector<AffineExpr> rows;
  int i = 0;
  for (const int64_t need : domain) {
    if (need <= 0) return std::nullopt;
    std::vector<int> dims;
    int64_t product = 1;
    while (product < need) {
      if (i >= q) return std::nullopt;
      dims.push_back(i);
      product *= shape[i++];
    }
    if (product != need) return std::nullopt;  // a merge, or no exact split
    AffineExpr row{std::vector<int64_t>(q, 0), 0};
    int64_t stride = 1;
    for (auto it = dims.rbegin(); it != dims.rend(); ++it) {
      row.coeffs[*it] = stride;
      stride *= shape[*it];
    }
    rows.push_back(std::move(row));
  }
  for (; i < q; ++i)
    if (shape[i] != 1) return std::nullopt;
  return AffineMap(q, std::move(rows));
}

bool reads_along_reduction(const TeNode& node, const AffineMap& map) {
  for (const AffineExpr& row : map.results())
    for (int a = node.num_spatial(); a < node.num_axes(); ++a)
      if (row.coeffs[a] != 0) return true;
  return false;
}

RowMatch plan_rows(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec) {
  const NodeId sink_id = group.nodes.back();
  const TeNode& sink = graph.node(sink_id);
  // The rows: the sink's spatial axes but the last (the columns), or, when the sink reduces a row
  // (its reduction axes: the columns), all its spatial axes less keepdims axes of extent 1 (one
  // per reduction axis). A sink reducing several axes (a global average pool over H and W in
  // NCHW) is a row of their product when each of its reads walks them as its tensor's last
  // dimensions, whole and in order (merged_read); its group holds nothing else but copies.
  const int sink_ns = sink.num_spatial();
  const int sink_nr = sink.num_reduction();
  const bool sink_reduces = sink_nr >= 1;
  int kept = sink_ns;
  if (sink_reduces)
    for (int j = 0; j < sink_nr && kept > 0 && sink.axes()[kept - 1].extent == 1; ++j) --kept;
  const int d = sink_reduces ? kept + 1 : sink_ns;
  const bool merged = sink_nr > 1;
  if (d < 1) return fail(cat("the sink '", sink.name(), "' is neither elementwise over rows nor a reduction"));
  if (merged && reads_axis_index(sink.body()))
    return fail(cat("the sink '", sink.name(), "' reduces ", sink_nr, " axes and reads their indices"));
  if (sink_reduces) {
    // Integer and boolean rows (a mask's sum, a count of infinities) add in 64-bit integers
    // (exact in any order), only within one block (a cluster's parts combine floats, below).
    if (!is_float(sink.output().dtype) && sink.combiner() != Combiner::sum && sink.combiner() != Combiner::max &&
        sink.combiner() != Combiner::min)
      return fail(cat("the sink '", sink.name(), "' reduces rows of ", dtype_name(sink.output().dtype), " other than by a sum, max or min"));
    // A row's reduction reads one row along its axis; a product of two (a matmul on SIMT units)
    // is not a row.
    // is not a row, and neither is a window (a pooling: the vector kernel's, a vector of channels
    // at a time): the input is read along the axis by its last index.
    int along = 0;
    for (const Access& acc : sink.inputs()) {
      bool uses = false;
      for (int a = sink_ns; a < sink_ns + sink_nr; ++a) uses |= acc.map.uses_axis(a);
      if (!uses) continue;
      ++along;
      if (merged) {  // the rest checked through any folded copy below (merged_read)
        for (const AffineExpr& row : acc.map.results()) {
          bool position = false, tap = false;
          for (int a = 0; a < sink.num_axes(); ++a)
            if (row.coeffs[a] != 0) (a < sink_ns ? position : tap) = true;
          if (position && tap) return fail(cat("the sink '", sink.name(), "' reduces over a window (a convolution or a pooling)"));
        }
        continue;
      }
      const int rank = acc.map.num_results();
      for (int r = 0; r < rank; ++r)
        if (acc.map.result(r).coeffs[sink_ns] != (r == rank - 1 ? 1 : 0))
          return fail(cat("the sink '", sink.name(), "' does not read a row along its reduction axis (a window or a strided walk)"));
    }
    if (along > 1) return fail(cat("the sink '", sink.name(), "' reduces a product of ", along, " inputs (a contraction, not a row)"));
    // A row shorter than a warp as the sink: one thread per row, the generic kernel's way, is
    // faster (an H100, 2026-11-27f: ResNet-50's mean over a width of 7, 0.0062 ms there and
    // 0.0099 ms here with 4 lanes per row).
    const int64_t warp = spec.compute.simd_width;
    int64_t columns = 1;
    for (int a = sink_ns; a < sink_ns + sink_nr; ++a) columns *= sink.axes()[a].extent;
    if (columns < warp)
      return fail(cat("the sink '", sink.name(), "' reduces rows of ", columns, ", fewer than a warp's ", warp, " threads"));
  }
  RowPlan p;
  p.n = 1;
  if (sink_reduces)
    for (int a = sink_ns; a < sink_ns + sink_nr; ++a) p.n *= sink.axes()[a].extent;
  else
    p.n = sink.axes()[d - 1].extent;
  for (int a = 0; a + 1 < d; ++a) {
    p.row_extents.push_back(sink.axes()[a].extent);
    p.rows *= sink.axes()[a].extent;
  }
  if (p.n <= 0 || p.rows <= 0) return fail("the output is empty");
  auto same_rows = [&](const TeNode& nd) {
    for (int a = 0; a + 1 < d; ++a)
      if (nd.axes()[a].extent != p.row_extents[a]) return false;
    return true;
  };

  // 1. Kinds and reads, in group order (producers first).
  const int count = static_cast<int>(group.nodes.size());
  auto pos_of = [&](NodeId n) {
    for (int i = 0; i < static_cast<int>(p.nodes.size()); ++i)
      if (p.nodes[i].node == n) return i;
    return -1;
  };
  bool reduces = false;
  for (int i = 0; i < count; ++i) {
    const TeNode& nd = graph.node(group.nodes[i]);
    const int ns = nd.num_spatial(), nr = nd.num_reduction();
    const std::vector<TensorId>& ins = graph.node_inputs(group.nodes[i]);
    RowNode rn;
    rn.node = group.nodes[i];
    rn.writes_global = generic.nodes[i].writes_global;
    for (size_t k = 0; k < ins.size(); ++k) {
      const Access& acc = nd.inputs()[k];
      if (acc.is_gather()) return fail(cat("'", nd.name(), "' gathers"));
      RowRead rd{pos_of(graph.producer(ins[k])), ins[k], acc.map, acc.type, acc.pad_value};
      if (rd.producer >= 0 && p.nodes[rd.producer].kind == RowKind::copy) {
        // Through a folded copy: its source, at the composed map (both reads in bounds); a copy
        // that only reshapes its whole source is a view of it: the same flat offsets, so the
        // source is read at the reader's map as if it had the copy's shape.
        const TeNode& copy = graph.node(p.nodes[rd.producer].node);
        if (!reads_in_bounds(nd, acc)) return fail(cat("'", nd.name(), "' reads the copy '", copy.name(), "' out of bounds"));
        const RowRead& src = p.nodes[rd.producer].reads[0];
        if (copy.output().shape != copy.extents()) rd = RowRead{-1, src.tensor, acc.map, TensorType{src.type.dtype, copy.output().shape}, src.pad};
        else rd = RowRead{-1, src.tensor, compose(src.map, acc.map), src.type, src.pad};
      }
      rn.reads.push_back(std::move(rd));
    }
    // A copy: one read, unchanged, in bounds; either of the copy's own shape (a transpose) or of
    // the whole source in order under another shape (a reshape: a view).
    const bool view = ins.size() == 1 && nd.output().shape != nd.extents() && rn.reads[0].type.shape == nd.extents() &&
                      is_identity_read(rn.reads[0].map);
    const bool copy = i != count - 1 && !rn.writes_global && nr == 0 && ins.size() == 1 && rn.reads[0].producer < 0 &&
                      nd.body().op() == ExprOp::input && nd.body().index() == 0 &&
                      nd.output().dtype == nd.inputs()[0].type.dtype && (nd.output().shape == nd.extents() || view) &&
                      reads_in_bounds(nd, nd.inputs()[0]);
    std::vector<int64_t> spatial;
    for (int a = 0; a < ns; ++a) spatial.push_back(nd.axes()[a].extent);
    const bool row = !copy && ns == d && same_rows(nd) && nd.axes()[d - 1].extent == p.n &&
                     (i == count - 1 || nd.output().shape == spatial);
    bool per_row_domain = ns >= d - 1 && same_rows(nd);
    for (int a = d - 1; a < ns; ++a) per_row_domain &= nd.axes()[a].extent == 1;
    int64_t reduced = 1;
    for (int a = ns; a < ns + nr; ++a) reduced *= nd.axes()[a].extent;
    const bool per_row = !copy && !row && per_row_domain && (nr <= 1 || (merged && i == count - 1)) &&
                         (nr == 0 || reduced == p.n) && rows_then_ones(nd.output().shape, p.row_extents);
    if (!copy && !row && !per_row)
      return fail(cat("'", nd.name(), "' is neither elementwise over the sink's rows nor one value per row"));
    // A row node's reduction is a serial loop per element: fine for a short dot product, not for a
    // window (an index moving with a position and a tap: a convolution, a pooling), which the
    // vector kernel computes a vector of channels at a time.
    if (row && nr > 0)
      for (const Access& acc : nd.inputs())
        for (const AffineExpr& r : acc.map.results()) {
          bool tap = false, position = false;
          for (int a = 0; a < nd.num_axes(); ++a)
            if (r.coeffs[a] != 0) (a < ns ? position : tap) = true;
          if (tap && position) return fail(cat("'", nd.name(), "' reduces over a window (a convolution or a pooling)"));
        }
    rn.kind = copy ? RowKind::copy : row ? RowKind::row : RowKind::per_row;
    if (merged && i != count - 1 && !copy)
      return fail(cat("the sink '", sink.name(), "' reduces ", sink_nr, " axes; '", nd.name(), "' is not a copy"));
    if (merged && i == count - 1)
      for (RowRead& rd : rn.reads) {
        bool uses = false;
        for (int a = ns; a < ns + nr; ++a) uses |= rd.map.uses_axis(a);
        if (!uses) continue;
        std::optional<RowRead> view = rd.producer < 0 ? merged_read(rd, nd, ns, nr) : std::nullopt;
        if (!view)
          return fail(cat("the sink '", sink.name(), "' reduces ", sink_nr, " axes not read as its input's last dimensions in order"));
        rd = std::move(*view);
      }
    reduces |= per_row && nr >= 1;
    p.nodes.push_back(std::move(rn));
  }
  if (!reduces) return fail("no node reduces a row (elementwise groups take the vector kernel)");

  // 2. Reads of in-group nodes: at the reader's own row (and column).
  int min_bytes = dtype_bytes(sink.output().dtype);
  for (const RowNode& rn : p.nodes) {
    if (rn.kind == RowKind::copy) continue;
    const TeNode& nd = graph.node(rn.node);
    const int col = row_column_axis(nd, rn.kind);
    if (rn.kind == RowKind::row && rn.writes_global) min_bytes = std::min(min_bytes, dtype_bytes(nd.output().dtype));
    for (const RowRead& rd : rn.reads) {
      if (rd.producer < 0) {
        if (row_vector_access(nd, rd.map, rd.type, col, 1) && (rn.kind != RowKind::row || !reads_along_reduction(nd, rd.map)))
          min_bytes = std::min(min_bytes, dtype_bytes(rd.type.dtype));
        continue;
      }
      const RowNode& pr = p.nodes[rd.producer];
      const TeNode& pn = graph.node(pr.node);
      bool ok = true;
      if (pr.kind == RowKind::row) {
        ok = col >= 0 && rd.map.num_results() == d;
        for (int r = 0; ok && r < d; ++r) ok = row_is(rd.map.result(r), r == d - 1 ? col : r);
      } else {
        const int rank = pn.output().rank();
        ok = rd.map.num_results() == rank;
        for (int r = 0; ok && r < rank; ++r) ok = r < d - 1 ? row_is(rd.map.result(r), r) : row_is_zero(rd.map.result(r), nd);
      }
      if (!ok) return fail(cat("'", nd.name(), "' reads '", pn.name(), "' at another row or column"));
    }
  }

  // 3. Vector width, threads per row, rows per block.
  const int widest = std::max(1, kRowVectorBytes / std::max(1, min_bytes));
  p.vec = widest;
  while (p.vec > 1 && p.n % p.vec != 0) p.vec /= 2;
  const int64_t vectors = (p.n + p.vec - 1) / p.vec;
  const int64_t max_threads = floor_pow2(spec.limits.max_threads_per_block);
  const int warp = static_cast<int>(spec.compute.simd_width);
  p.lanes = static_cast<int>(
      std::min(max_threads, ceil_pow2((vectors + kRowAccessesPerThread - 1) / kRowAccessesPerThread)));
  // A short row of scalar accesses (an odd length) stays in one warp -- its reductions are
  // shuffles only, no shared-memory step and block barrier each -- at up to kRowWarpAccesses
  // accesses per thread: attention's 197-wide rows (measured 2-3.7x faster on an H100 than two
  // accesses per thread over 128 lanes). Rows of 16-byte vectors keep two accesses per thread
  // (BERT's 768-wide layer norm measured 1.3x slower in one warp; 2026-11-27f).
  if (p.vec == 1 && p.lanes > warp && vectors <= static_cast<int64_t>(kRowWarpAccesses) * warp) p.lanes = warp;
  p.chunks = static_cast<int>((vectors + p.lanes - 1) / p.lanes);
  if (p.elements_per_thread() > kMaxElementsPerThread) {
    // Too long for registers: streamed, one block of kRowStreamThreads per row, a pass per
    // per-row reduction and per stored row node (the file comment).
    const std::string too_long = cat("a row of ", p.n, " elements needs ", p.elements_per_thread(),
                                     " registers per thread and node (at most ", kMaxElementsPerThread, ")");
    for (const RowNode& rn : p.nodes)
      if (rn.kind == RowKind::row && graph.node(rn.node).num_reduction() > 0)
        return fail(cat(too_long, ", and the row node '", graph.node(rn.node).name(),
                        "' reduces serially per element (not recomputed in a streamed row)"));
    p.streamed = true;
    p.lanes = static_cast<int>(std::min<int64_t>(max_threads, kRowStreamThreads));
    // N not whole vectors of the widest access: shifted vectors (the file comment), when some
    // access is one -- a stored row node always is.
    bool shiftable = false;
    for (const RowNode& rn : p.nodes) {
      if (rn.kind == RowKind::copy) continue;
      shiftable |= rn.kind == RowKind::row && rn.writes_global;
      const TeNode& nd = graph.node(rn.node);
      for (const RowRead& rd : rn.reads)
        shiftable |= rd.producer < 0 && row_shifted_access(nd, rd.map, rd.type, row_column_axis(nd, rn.kind), p.row_extents, p.n);
    }
    if (p.vec < widest && shiftable && p.lanes >= 2 * widest && p.n >= 2 * widest) {
      p.shifted = true;
      p.vec = widest;
    }
    // Fewer rows than SMs: a cluster of blocks per row (the file comment), as many as fill the
    // SMs; each thread keeps kRowAccessesPerThread vector accesses per pass at least, with fewer
    // threads per block first (down to a warp, and the 2 vec lanes a shifted row's leftover
    // columns need), then fewer blocks.
    const int64_t vectors_now = (p.n + p.vec - 1) / p.vec;
    bool float_sums = true;  // the cluster's parts are combined as f32 / f64
    for (const RowNode& rn : p.nodes)
      if (rn.kind == RowKind::per_row && graph.node(rn.node).num_reduction() >= 1)
        float_sums &= is_float(graph.node(rn.node).output().dtype);
    if (spec.limits.max_cluster_blocks >= 2 && p.rows < spec.compute.units && float_sums) {
      int64_t splits = std::min(floor_pow2(spec.limits.max_cluster_blocks), floor_pow2(std::max<int64_t>(1, spec.compute.units / p.rows)));
      const int64_t fewest = std::max<int64_t>(warp, 2 * p.vec);
      const int64_t lanes = std::clamp<int64_t>(floor_pow2(std::max<int64_t>(1, vectors_now / (kRowAccessesPerThread * splits))), fewest, max_threads);
      while (splits > 1 && vectors_now < kRowAccessesPerThread * lanes * splits) splits /= 2;
      if (splits > 1) {
        p.splits = static_cast<int>(splits);
        p.lanes = static_cast<int>(lanes);
      }
    }
    p.chunks = static_cast<int>((vectors_now + static_cast<int64_t>(p.lanes) * p.splits - 1) / (static_cast<int64_t>(p.lanes) * p.splits));
    p.passes = 0;
    for (const RowNode& rn : p.nodes)
      p.passes += (rn.kind == RowKind::per_row && graph.node(rn.node).num_reduction() >= 1) ||
                  (rn.kind == RowKind::row && rn.writes_global);
    for (int i = 0; i < static_cast<int>(p.nodes.size()) && p.online_max < 0; ++i)
      for (int j = i + 1; j < static_cast<int>(p.nodes.size()); ++j)
        if (online_pair(graph, p, i, j)) {
          p.online_max = i, p.online_sum = j;
          --p.passes;
          break;
        }
  }
  const int64_t target = std::max<int64_t>(std::min<int64_t>(kRowBlockThreads, max_threads), warp);
  p.rows_per_block = p.splits > 1 ? 1 : static_cast<int>(std::max<int64_t>(1, target / p.lanes));  // a cluster per row
  p.threads = p.lanes * p.rows_per_block;
  if (p.threads % warp != 0) return fail(cat(p.threads, " threads per block are not whole warps"));
  p.blocks = (p.rows + p.rows_per_block - 1) / p.rows_per_block * p.splits;
  return RowMatch{p, ""};
}

GroupPlan row_group_plan(const GroupPlan& generic, const RowPlan& rp) {
  GroupPlan plan = inlined_launch_plan(generic, rp.blocks, rp.threads);
  const size_t rank = plan.sink_tile.size();
  if (!rp.per_row_sink()) {
    plan.sink_tile.back() = rp.n;
    if (rank >= 2) plan.sink_tile[rank - 2] = rp.rows_per_block;
  } else if (!rp.row_extents.empty()) {
    plan.sink_tile[rp.row_extents.size() - 1] = rp.rows_per_block;  // a per-row sink: its last row axis
  }
  plan.reduce_scratch_bytes = rp.lanes > plan.warp ? static_cast<int64_t>(rp.threads / plan.warp) * 8 : 0;
  plan.cluster_blocks = rp.splits;
  return plan;
}

std::string print_row_plan(const RowPlan& p) {
  return cat("row kernel: ", p.rows, " rows of ", p.n, " elements; ", p.lanes, " threads per row, ", p.rows_per_block,
             " rows per block of ", p.threads, " threads, ", p.blocks, " blocks; ", p.chunks, " accesses of ", p.vec,
             " elements per thread and row",
             p.streamed ? cat("; streamed: the row walked in ", p.passes, " passes, not held in registers") : std::string(),
             p.shifted ? cat(" (vectors from each row's first ", p.vec, "-element aligned column, the columns before it and after the last whole vector one at a time)")
                       : std::string(),
             p.online_max >= 0 ? "; the row's maximum and its sum of exponentials in one pass (online)" : "",
             p.splits > 1 ? cat("; each row split over a cluster of ", p.splits, " blocks") : std::string());
}

}  // namespace tessel::cuda
