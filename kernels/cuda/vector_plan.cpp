// Recognizing and planning vector kernels (see vector_plan.h).
#include "kernels/cuda/vector_plan.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>

#include "tilegraph/error.h"

namespace tessel::cuda {

namespace {

VectorMatch fail(std::string reason) { return VectorMatch{std::nullopt, std::move(reason)}; }

/// A window's read of device memory as a span (VectorSpan, the file comment): its last index
/// slides along the vector's axis `last` (stride s) and the innermost tap (dilation d) alone, less
/// a padding of at most a chunk, its other indices depend on neither, its rows are whole 16-byte
/// chunks and s vec is a multiple of one (so the span's chunks align); else none.
VectorSpan span_of(const TeNode& nd, const VectorRead& r, int last, int vec) {
  const int kin = nd.num_axes() - 1, rank = r.read.map.num_results();
  if (nd.num_reduction() == 0 || r.producer >= 0 || r.guarded || r.vector || rank == 0) return {};
  const AffineExpr& row = r.read.map.result(rank - 1);
  const int64_t chunk = kRowVectorBytes / dtype_bytes(r.read.type.dtype);
  const int64_t s = row.coeffs[last], dil = row.coeffs[kin], pad = -row.offset;
  bool ok = s > 0 && dil > 0 && pad >= 0 && pad <= chunk && chunk > 1 && (int64_t{vec} * s) % chunk == 0 &&
            r.read.type.shape[rank - 1] % chunk == 0;
  for (int a = 0; ok && a < nd.num_axes(); ++a) ok = a == last || a == kin || row.coeffs[a] == 0;
  for (int q = 0; ok && q + 1 < rank; ++q) ok = r.read.map.result(q).coeffs[last] == 0 && r.read.map.result(q).coeffs[kin] == 0;
  if (!ok) return {};
  VectorSpan sp;
  sp.front = pad > 0 ? chunk : 0;
  sp.lead = sp.front - pad;
  sp.stride = s;
  sp.dilation = dil;
  sp.chunk = chunk;
  const int64_t length = s * (vec - 1) + dil * (nd.axes()[kin].extent - 1) + 1;
  sp.chunks = (sp.lead + length + chunk - 1) / chunk;
  if (sp.chunks * chunk > kVectorMaxSpanElements) return {};
  return sp;
}

int64_t floor_pow2(int64_t v) {
  int64_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

// The sink's axis that each axis of `domain` walks when the two are equal up to axes of extent 1
// (vector_plan.h): the other axes in order with equal extents; -1 for an axis of extent 1.
// nullopt when they are not.
std::optional<std::vector<int>> squeezed_axes(const std::vector<int64_t>& domain, const std::vector<int64_t>& sink) {
  std::vector<int> out(domain.size(), -1);
  size_t s = 0;
  for (size_t a = 0; a < domain.size(); ++a) {
    if (domain[a] == 1) continue;
    while (s < sink.size() && sink[s] == 1) ++s;
    if (s == sink.size() || sink[s] != domain[a]) return std::nullopt;
    out[a] = static_cast<int>(s++);
  }
  while (s < sink.size() && sink[s] == 1) ++s;
  if (s != sink.size()) return std::nullopt;
  return out;
}

// Whether `map` (over the reader's axes) reads its producer at the reader's own point: the
// producer's axis q is read at the reader's axis that walks the same sink axis (coefficient 1),
// an axis of extent 1 walking none at 0; the reader's axes of extent 1 (always 0) may appear.
bool same_point(const AffineMap& map, const std::vector<int>& reader, const std::vector<int>& producer) {
  if (map.num_results() != static_cast<int>(producer.size())) return false;
  for (int q = 0; q < map.num_results(); ++q) {
    const AffineExpr& row = map.result(q);
    if (row.offset != 0) return false;
    for (size_t a = 0; a < row.coeffs.size(); ++a) {
      if (a >= reader.size()) {
        if (row.coeffs[a] != 0) return false;  // a reduction axis
        continue;
      }
      if (reader[a] < 0) continue;  // extent 1: its coordinate is 0
      if (row.coeffs[a] != (producer[q] >= 0 && reader[a] == producer[q] ? 1 : 0)) return false;
    }
    if (producer[q] >= 0 && std::find(reader.begin(), reader.end(), producer[q]) == reader.end()) return false;
  }
  return true;
}

struct GroupedWindow {
  int vec = 1;         // elements of the channel axis per vector load
  std::string reason;  // why not, else empty
};

// The conditions of a grouped window (vector_plan.h) on `node`, whose reads `reads` (over its axes,
// through any folded copy) sum the reduction axis `channel` along the last index of an input.
// Each read is a channel read (its last index walks `channel`, with coefficient 1) or an element
// read (its last index walks the node's last axis with coefficient 1, and no other index does:
// weights laid out [kh, kw, Cg, M], a vector of the elements' weights per channel; the vector
// width is checked once it is known, by element_read_fits).
GroupedWindow grouped_window(const TeNode& node, const std::vector<VectorRead>& reads, int channel) {
  // A sum over two or more inputs (a convolution's input and weights); a pooling along its
  // input's innermost dimension (NCHW) is not one.
  if (reads.size() < 2 || node.combiner() != Combiner::sum)
    return {1, "reduces along the innermost dimension of an input (a contraction, not a window)"};
  const std::vector<int64_t> extents = node.extents();
  const int last_spatial = node.num_spatial() - 1;
  bool grouped = false;
  int vec = kRowVectorBytes;
  for (const VectorRead& r : reads) {
    const AffineMap& map = r.read.map;
    const int rank = map.num_results();
    if (rank == 0) return {1, "reads a scalar in a grouped window"};
    const AffineExpr& last = map.result(rank - 1);
    const bool channel_read = last.coeffs[channel] == 1;
    if (!channel_read && (last.coeffs[channel] != 0 || last.coeffs[last_spatial] != 1))
      return {1, "reduces along the innermost dimension of an input (a contraction, not a window)"};
    for (int q = 0; q < rank; ++q) {
      const AffineExpr& row = map.result(q);
      if (q + 1 < rank && channel_read && row.coeffs[channel] != 0)
        return {1, "reduces its channels along more than the innermost dimension of an input"};
      if (q + 1 < rank && !channel_read && row.coeffs[last_spatial] != 0)
        return {1, "reads its last axis along more than the innermost dimension of an input"};
      const bool inside = row.min_over(extents) >= 0 && row.max_over(extents) < r.read.type.shape[q];
      if ((q + 1 == rank || row.coeffs[last_spatial] != 0 || row.coeffs[channel] != 0) && !inside)
        return {1, "reads its channels or its last axis outside an input"};
    }
    if (!channel_read) continue;
    // The channels in whole blocks of the group's extent (g Cg + c), not a window's w o + k.
    if (last.offset % extents[channel] != 0)
      return {1, "reduces along the innermost dimension of an input (a contraction, not a window)"};
    for (int a = 0; a < node.num_spatial(); ++a) {
      if (last.coeffs[a] % extents[channel] != 0)
        return {1, "reduces along the innermost dimension of an input (a contraction, not a window)"};
      grouped |= last.coeffs[a] != 0;
    }
    vec = std::min(vec, kRowVectorBytes / std::max(1, dtype_bytes(r.read.type.dtype)));
  }
  if (!grouped)
    return {1, "sums over channels of no group (a contraction over channels belongs to the tensor-core or generic families)"};
  // Halved until every channel read's vectors are contiguous and aligned (the row kernel's rule for
  // a guarded vector along `channel`).
  auto aligned = [&](int v) {
    if (extents[channel] % v != 0) return false;
    for (const VectorRead& r : reads)
      if (r.read.map.result(r.read.map.num_results() - 1).coeffs[channel] == 1 &&
          !row_vector_access_guarded(node, r.read.map, r.read.type, channel, v))
        return false;
    return true;
  };
  while (vec > 1 && !aligned(vec)) vec /= 2;
  return {vec, ""};
}

// Whether a grouped window's element read (grouped_window) is a vector of `vec` aligned elements.
bool element_read_fits(const TeNode& node, const VectorRead& r, int channel, int vec) {
  const AffineExpr& last = r.read.map.result(r.read.map.num_results() - 1);
  return last.coeffs[channel] != 1 && row_vector_access_guarded(node, r.read.map, r.read.type, node.num_spatial() - 1, vec);
}

}  // namespace

VectorMatch plan_vector(const OpGraph& graph, const ScheduledGroup& group, const GroupPlan& generic, const HwSpec& spec) {
  const int n = static_cast<int>(group.nodes.size());
  const TeNode& sink = graph.node(group.nodes.back());
  VectorPlan p;
  p.extents = sink.extents();
  p.extents.resize(sink.num_spatial());  // a window's reduction axes are not the sink's domain
  // A sink whose last axes have extent 1 (a flatten of [N, C, 1, 1]) stores the same row-major
  // offsets without them, and vectors run along its last other axis.
  while (p.extents.size() > 1 && p.extents.back() == 1) p.extents.pop_back();
  const int d = static_cast<int>(p.extents.size());
  if (d == 0) return fail("the sink is a scalar");
  p.elements = 1;
  for (int64_t e : p.extents) p.elements *= e;
  if (p.elements == 0) return fail("the output is empty");
  // A reshaping sink is fine: its output holds the domain's values in row-major order, where the
  // kernel stores them (a reshaped node inside the group is not, unless it is a copy that only
  // splits dimensions, folded below: it is read through its shape).
  int min_bytes = dtype_bytes(sink.output().dtype);
  int64_t most_points = 0;  // the most points a window of the group reduces per output
  bool float_windows = true;  // every window accumulates floats (a cluster combines f32 or f64)
  bool half_windows = true;   // every window accumulates in float (f16, bf16), not 8 bytes
  bool grouped = false;       // a grouped window in the group (not sliced)
  // In-group plain copies (a transpose, a fixed index, a reshape that only splits dimensions:
  // body in0 of one in-bounds input, same dtype, no write to device memory) are folded into their
  // readers' maps: their domains may differ from the sink's.
  std::vector<bool> folded(n, false);
  std::vector<int> index_of(n, -1);  // group position -> position in p.nodes
  for (int i = 0; i + 1 < n; ++i) {
    const TeNode& node = graph.node(group.nodes[i]);
    folded[i] = !generic.nodes[i].writes_global &&
                (!generic.nodes[i].reshaped || split_reshape_map(node.extents(), node.output().shape)) &&
                node.num_reduction() == 0 &&
                node.inputs().size() == 1 && !node.inputs()[0].is_gather() && node.body().op() == ExprOp::input &&
                node.body().index() == 0 && node.output().dtype == node.inputs()[0].type.dtype && reads_in_bounds(node, node.inputs()[0]);
  }
  // Nodes that may be recomputed where a read asks for them (the file comment): elementwise, not
  // writing device memory, their output their domain, no gather.
  std::vector<bool> inlinable(n, false);
  for (int i = 0; i + 1 < n; ++i) {
    const TeNode& node = graph.node(group.nodes[i]);
    inlinable[i] = !generic.nodes[i].writes_global && node.num_reduction() == 0 && node.output().shape == node.extents() &&
                   std::none_of(node.inputs().begin(), node.inputs().end(), [](const Access& a) { return a.is_gather(); });
  }
  // A read of `tensor` at `acc` by `reader` into `r`, through in-bounds folded copies (their
  // source at the composed map). Returns the group position of the node the read ends at (-1:
  // device memory); a copy read out of bounds is not folded: the read ends at it.
  auto follow = [&](const TeNode& reader, TensorId tensor, const Access& acc, VectorRead& r) {
    r.read.tensor = tensor;
    r.read.map = acc.map;
    r.read.type = acc.type;
    r.read.pad = acc.pad_value;
    int pos = generic.position(graph.producer(tensor));
    if (pos >= 0 && folded[pos] && !reads_in_bounds(reader, acc)) return pos;
    while (pos >= 0 && folded[pos]) {  // through the copy: its source at the composed map
      const NodeId c = group.nodes[pos];
      const TeNode& copy = graph.node(c);
      const Access& src = copy.inputs()[0];
      r.read.tensor = graph.node_inputs(c)[0];
      // A splitting reshape is read at the domain point of the output point: one more affine step.
      const AffineMap inner = copy.output().shape == copy.extents()
                                  ? src.map
                                  : compose(src.map, *split_reshape_map(copy.extents(), copy.output().shape));
      r.read.map = compose(inner, r.read.map);
      r.read.type = src.type;
      r.read.pad = src.pad_value;
      pos = generic.position(graph.producer(r.read.tensor));
    }
    return pos;
  };
  // The node whose read starts a recomputation (set below, per node): its axes along the sink's
  // last (a vector's elements) and second last (a warp's lanes, when a vector spans the whole
  // last axis), -1 when none.
  int root_vector_axis = -1, root_lane_axis = -1;
  // Whether a read of device memory at `map` (over the root's axes) by a recomputed node keeps a
  // warp's loads coalesced: the vector's elements walk it contiguously (an address step of 0 or 1
  // element along the vector axis), or the warp's lanes do. Else (a transpose read inside a
  // vector of the other layout) each element of each lane would be its own sector.
  auto coalesced = [&](const AffineMap& map, const TensorType& type) {
    auto step = [&](int axis) {  // the address step (elements, row-major) per unit of `axis`
      int64_t st = 0, stride = 1;
      for (int q = map.num_results() - 1; q >= 0; stride *= type.shape[q--]) st += map.result(q).coeffs[axis] * stride;
      return st;
    };
    if (root_vector_axis >= 0 && std::abs(step(root_vector_axis)) <= 1) return true;
    return root_lane_axis >= 0 && std::abs(step(root_lane_axis)) <= 1;
  };
  // Recomputes group node `pos` where `reader` reads it at `at` (over the root's axes): appends it
  // to p.inlined (its reads resolved, recomputing what they end at) and sets `index`; else says
  // why not.
  std::map<int, double> evaluations;  // per group position: points its recomputations evaluate
  std::function<std::string(const TeNode&, int, const AffineMap&, int&)> recompute =
      [&](const TeNode& reader, int pos, const AffineMap& at, int& index) -> std::string {
    const TeNode& nd = graph.node(group.nodes[pos]);
    if (!inlinable[pos])
      return cat("'", reader.name(), "' reads '", nd.name(), "' at another point, and it is not recomputed there (",
                 nd.num_reduction() != 0 ? "it reduces" : "it writes device memory, reshapes or gathers", ")");
    // A value that computes is recomputed at most kVectorMaxRecomputes points per point of its
    // domain, over all its reads (each read evaluates it at up to every point of the sink): a
    // broadcast (an SE gate's sigmoid per channel, read at every pixel) is computed once in its
    // own kernel instead. A copy only loads.
    if (nd.body().op() != ExprOp::input) {
      double node_points = 1;
      for (const auto& axis : nd.axes()) node_points *= static_cast<double>(axis.extent);
      evaluations[pos] += static_cast<double>(p.elements);  // the sink's points
      if (evaluations[pos] > kVectorMaxRecomputes * node_points)
        return cat("'", nd.name(), "' would be recomputed at ", evaluations[pos] / node_points, " points per value (at most ",
                   kVectorMaxRecomputes, ")");
    }
    if (static_cast<int>(p.inlined.size()) >= kVectorMaxInlined)
      return cat("more than ", kVectorMaxInlined, " values are recomputed where they are read");
    VectorInline in;
    in.node = group.nodes[pos];
    in.at = at;
    const std::vector<TensorId>& ins = graph.node_inputs(in.node);
    for (size_t k = 0; k < ins.size(); ++k) {
      VectorRead r;
      const int from = follow(nd, ins[k], nd.inputs()[k], r);
      const AffineMap root_map = compose(r.read.map, at);
      if (from >= 0) {
        const std::string why = recompute(nd, from, root_map, r.inlined);
        if (!why.empty()) return why;
      } else if (!coalesced(root_map, r.read.type)) {
        return cat("'", nd.name(), "' would be recomputed reading '", graph.tensor(r.read.tensor).name,
                   "' at addresses a warp's loads scatter (not along the vector or the lanes)");
      }
      in.reads.push_back(std::move(r));
    }
    // (Its reads may have recomputed nodes of their own.)
    if (static_cast<int>(p.inlined.size()) >= kVectorMaxInlined)
      return cat("more than ", kVectorMaxInlined, " values are recomputed where they are read");
    index = static_cast<int>(p.inlined.size());
    p.inlined.push_back(std::move(in));
    return "";
  };
  for (int i = 0; i < n; ++i) {
    if (folded[i]) continue;
    const TeNode& node = graph.node(group.nodes[i]);
    const std::vector<int64_t> all = node.extents();
    const int ns = node.num_spatial();
    const std::vector<int64_t> domain(all.begin(), all.begin() + ns);
    int64_t split = 0;
    std::vector<int> axis_of(ns);
    for (int a = 0; a < ns; ++a) axis_of[a] = a < d ? std::min(a, d - 1) : -1;
    if (domain != p.extents) {
      // A grouped window: (g, mg) for the sink's last axis, its output their row-major merge.
      const bool splits = node.num_reduction() != 0 && ns == d + 1 && node.output().shape == p.extents &&
                          std::equal(p.extents.begin(), p.extents.end() - 1, domain.begin()) &&
                          domain[d - 1] * domain[d] == p.extents[d - 1];
      // Or the sink's domain up to axes of extent 1.
      const std::optional<std::vector<int>> squeezed = splits ? std::nullopt : squeezed_axes(domain, p.extents);
      if (!splits && !squeezed && inlinable[i]) continue;  // recomputed where it is read
      if (!splits && !squeezed) return fail(cat("'", node.name(), "' has another domain than the sink"));
      if (splits) split = domain[d];
      else axis_of = *squeezed;
    }
    // The axis a vector's elements walk: the one along the sink's last (the axes after it have
    // extent 1); a grouped window's mg.
    const int vector_axis = split != 0 ? ns - 1
                                       : static_cast<int>(std::find(axis_of.begin(), axis_of.end(), d - 1) - axis_of.begin());
    if (vector_axis >= ns) return fail(cat("'", node.name(), "' has no axis along the sink's last"));
    int channel = -1, channel_vec = 1;
    if (node.num_reduction() != 0) {
      // A window: each output reduces a few points (a depthwise convolution, a pooling), or a
      // grouped window, which also sums a group's channels along the last index of its inputs.
      if (node.combiner() == Combiner::none) return fail(cat("'", node.name(), "' reduces without a combiner"));
      // A pooling of one input along its innermost dimension (NCHW: W at s w + k) slides a window
      // there -- a position and a tap in the last index: not a contraction. Its reads are scalar,
      // `vec` outputs at a step of the stride.
      bool innermost = false;
      if (node.inputs().size() == 1 && node.inputs()[0].map.num_results() > 0) {
        const AffineExpr& last = node.inputs()[0].map.result(node.inputs()[0].map.num_results() - 1);
        bool position = false, tap = false;
        for (int a = 0; a < node.num_axes(); ++a)
          if (last.coeffs[a] != 0) (a < ns ? position : tap) = true;
        innermost = position && tap;
      }
      for (const Access& acc : node.inputs()) {
        if (innermost || acc.map.num_results() == 0) continue;
        const AffineExpr& last = acc.map.result(acc.map.num_results() - 1);
        for (int a = ns; a < node.num_axes(); ++a)
          if (last.coeffs[a] != 0 && channel != a) {
            if (channel >= 0)
              return fail(cat("'", node.name(), "' reduces along the innermost dimension of its inputs over two axes"));
            channel = a;
          }
      }
      int64_t points = 1;
      for (int a = ns; a < node.num_axes(); ++a)
        if (a != channel) points *= all[a];
      // A longer window is sliced (the file comment) when it reduces one input (a pooling, a
      // column's mean); a product of two over that many points (a large depthwise filter, a
      // contraction whose reduction stays off the innermost dimensions) is not a window.
      if (points > kVectorMaxWindowPoints && node.inputs().size() != 1)
        return fail(cat("'", node.name(), "' reduces ", points, " points per output, more than a window (",
                        kVectorMaxWindowPoints, ")"));
      // A grouped window is never sliced (its emitter sums every tap in one thread).
      if (channel >= 0) grouped = true;
      else most_points = std::max(most_points, points);
      float_windows &= is_float(node.output().dtype);
      half_windows &= node.output().dtype == DType::f16 || node.output().dtype == DType::bf16;
    }
    if (i + 1 < n && generic.nodes[i].writes_global) return fail(cat("'", node.name(), "' also writes device memory"));
    if (i + 1 < n && generic.nodes[i].reshaped && split == 0)
      return fail(cat("'", node.name(), "' reshapes its output inside the group"));
    index_of[i] = static_cast<int>(p.nodes.size());
    p.nodes.push_back(group.nodes[i]);
    p.split.push_back(split);
    p.channel_axis.push_back(channel);
    p.axis_of.push_back(axis_of);
    p.vector_axis.push_back(vector_axis);
    std::vector<VectorRead> reads;
    const std::vector<TensorId>& ins = graph.node_inputs(group.nodes[i]);
    for (size_t k = 0; k < ins.size(); ++k) {
      const Access& acc = node.inputs()[k];
      if (acc.is_gather()) return fail(cat("'", node.name(), "' gathers"));
      VectorRead r;
      const int pos = follow(node, ins[k], acc, r);
      if (pos >= 0 && node.num_reduction() != 0)
        return fail(cat("'", node.name(), "' reduces over '", graph.tensor(r.read.tensor).name,
                        "', which the group computes (a window reads device memory only)"));
      if (pos >= 0) {
        // A grouped window's output is the sink's shape (its split axes merged).
        const int at = index_of[pos];
        bool same = at >= 0;
        if (same) {
          std::vector<int> produced = p.axis_of[at];
          if (p.split[at] != 0) {
            produced.resize(d);
            for (int a = 0; a < d; ++a) produced[a] = a;
          }
          same = same_point(r.read.map, axis_of, produced);
        }
        if (same) {
          r.producer = at;
        } else {
          root_vector_axis = vector_axis;
          root_lane_axis = -1;
          // A vector spans the sink's last axis (so a warp's lanes walk the axis before it) when
          // that axis is a power of two of at most 16 bytes of the sink's dtype: the vector width,
          // 16 bytes of the narrowest dtype (no wider than the sink's) halved until it divides
          // the axis, is then the axis itself.
          const int64_t last = p.extents.back();
          if (d >= 2 && p.extents[d - 2] > 1 && (last & (last - 1)) == 0 && last * dtype_bytes(sink.output().dtype) <= kRowVectorBytes)
            root_lane_axis = static_cast<int>(std::find(axis_of.begin(), axis_of.end(), d - 2) - axis_of.begin());
          if (root_lane_axis >= ns) root_lane_axis = -1;
          const std::string why = recompute(node, pos, r.read.map, r.inlined);
          if (!why.empty()) return fail(why);
        }
      } else {
        min_bytes = std::min(min_bytes, dtype_bytes(r.read.type.dtype));
      }
      reads.push_back(r);
    }
    if (channel >= 0) {
      const GroupedWindow gw = grouped_window(node, reads, channel);
      if (!gw.reason.empty()) return fail(cat("'", node.name(), "' ", gw.reason));
      channel_vec = gw.vec;
    }
    p.channel_vec.push_back(channel_vec);
    p.reads.push_back(std::move(reads));
  }
  // 16 bytes of the narrowest dtype read from or written to device memory, halved until it
  // divides the last axis (and a grouped window's Mg, and aligns its element reads).
  p.vec = std::max(1, kRowVectorBytes / std::max(1, min_bytes));
  auto fits = [&](int v) {
    if (p.extents.back() % v != 0) return false;
    for (size_t i = 0; i < p.nodes.size(); ++i) {
      if (p.split[i] > 0 && p.split[i] % v != 0) return false;
      if (p.channel_axis[i] < 0) continue;
      for (const VectorRead& r : p.reads[i]) {
        const AffineExpr& last = r.read.map.result(r.read.map.num_results() - 1);
        if (last.coeffs[p.channel_axis[i]] != 1 && !element_read_fits(graph.node(p.nodes[i]), r, p.channel_axis[i], v)) return false;
      }
    }
    return true;
  };
  while (p.vec > 1 && !fits(p.vec)) p.vec /= 2;
  if (p.vec < 2) {
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (p.channel_axis[i] >= 0 && p.extents.back() % 2 == 0)
        return fail(cat("'", graph.node(p.nodes[i]).name(),
                        "' has no vector of two elements (its groups' output channels, or its weights' alignment)"));
    return fail(cat("the last axis (", p.extents.back(), ") is not a multiple of two elements"));
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const TeNode& node = graph.node(p.nodes[i]);
    for (VectorRead& r : p.reads[i]) {
      if (r.producer >= 0 || r.inlined >= 0) continue;
      if (node.num_reduction() == 0) r.vector = row_vector_access(node, r.read.map, r.read.type, p.vector_axis[i], p.vec);
      else if (p.channel_axis[i] < 0) r.guarded = row_vector_access_guarded(node, r.read.map, r.read.type, p.vector_axis[i], p.vec);
      else r.guarded = element_read_fits(node, r, p.channel_axis[i], p.vec);
    }
  }
  const int warp = static_cast<int>(spec.compute.simd_width);
  p.threads = static_cast<int>(std::min<int64_t>(kVectorBlockThreads, spec.limits.max_threads_per_block));
  p.threads -= p.threads % warp;
  if (p.threads <= 0) return fail("no whole warp fits a block");
  const int64_t vectors = p.elements / p.vec;
  p.blocks = std::min<int64_t>((vectors + p.threads - 1) / p.threads, INT_MAX);
  // A sliced window (the file comment): past a window's points, or when the vectors fill less
  // than a wave of blocks and each slice would still sum a few taps. Vectors per block from the
  // least, doubled while the blocks still make kVectorSliceWaves waves; slices halved (down to
  // kVectorMinSlices) while a slice would sum fewer than two taps.
  const int64_t units = spec.compute.units;
  const int64_t acc_bytes = half_windows ? 4 : 8;
  // Slices halved while a slice would sum fewer than two taps, or the combine would pass CUDA's
  // static shared memory.
  auto fit_slices = [&]() {
    while (p.slices > kVectorMinSlices && (2 * p.slices > most_points ||
                                           static_cast<int64_t>(p.lanes) * p.slices * p.vec * acc_bytes > kStaticSmemBytes))
      p.slices /= 2;
    p.threads = p.lanes * p.slices;
  };
  if (!grouped && p.threads >= kVectorMinLanes * kVectorMinSlices &&
      (most_points > kVectorMaxWindowPoints || (most_points >= 2 * kVectorMinSlices && p.blocks < units))) {
    p.lanes = static_cast<int>(std::clamp<int64_t>(floor_pow2(std::max<int64_t>(1, vectors / (kVectorSliceWaves * units))),
                                                   kVectorMinLanes, p.threads / kVectorMinSlices));
    p.slices = p.threads / p.lanes;
    fit_slices();
    if (p.threads % warp != 0) return fail(cat(p.threads, " threads of a sliced window are not whole warps"));
    p.blocks = (vectors + p.lanes - 1) / p.lanes;
    // Fewer blocks than SMs (a batch-1 SE squeeze: 4 vectors over 12544 taps): blocks of the most
    // threads, and a thread-block cluster of `parts` blocks per group of vectors, each summing
    // every parts-th run of the taps (distributed shared memory combines them).
    if (p.blocks < units && spec.limits.max_cluster_blocks >= 2 && most_points > kVectorMaxWindowPoints && float_windows) {
      p.threads = static_cast<int>(floor_pow2(spec.limits.max_threads_per_block));
      p.slices = p.threads / p.lanes;
      fit_slices();
      p.parts = static_cast<int>(std::min<int64_t>(floor_pow2(spec.limits.max_cluster_blocks),
                                                   floor_pow2(std::max<int64_t>(1, units / p.blocks))));
      while (p.parts > 1 && 2 * static_cast<int64_t>(p.slices) * p.parts > most_points) p.parts /= 2;
      p.blocks *= p.parts;
    }
    p.blocks = std::min<int64_t>(p.blocks, INT_MAX - INT_MAX % p.parts);
    p.acc_bytes = static_cast<int>(acc_bytes);
    if (p.combine_bytes() > kStaticSmemBytes) return fail(cat("a sliced window's combine needs ", p.combine_bytes(), " bytes of shared memory"));
  }
  // What the recomputations cost: each entry's node evaluated at every point of the sink.
  for (const VectorInline& in : p.inlined) {
    const TeNode& nd = graph.node(in.node);
    double node_points = 1;
    for (const auto& axis : nd.axes()) node_points *= static_cast<double>(axis.extent);
    p.recomputed_flops += static_cast<double>(nd.flops()) / std::max(1.0, node_points) * static_cast<double>(p.elements);
  }
  // Recomputed reads a vector at a time (file comment): every index of the recomputed tree that
  // moves with the root's vector is aligned to it.
  std::function<bool(int, const TeNode&, int)> aligned = [&](int j, const TeNode& root, int axis) {
    const VectorInline& in = p.inlined[j];
    if (!row_vector_aligned(root, in.at, graph.node(in.node).extents(), axis, p.vec)) return false;
    for (const VectorRead& r : in.reads)
      if (r.inlined >= 0 ? !aligned(r.inlined, root, axis)
                         : !row_vector_aligned(root, compose(r.read.map, in.at), r.read.type.shape, axis, p.vec))
        return false;
    return true;
  };
  std::function<void(int)> by_vectors = [&](int j) {
    p.inlined[j].vector = true;
    for (const VectorRead& r : p.inlined[j].reads)
      if (r.inlined >= 0) by_vectors(r.inlined);
  };
  for (size_t i = 0; i < p.nodes.size(); ++i)
    for (const VectorRead& r : p.reads[i])
      if (r.inlined >= 0 && aligned(r.inlined, graph.node(p.nodes[i]), p.vector_axis[i])) by_vectors(r.inlined);
  if (p.slices == 1)
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (p.channel_axis[i] < 0)
        for (VectorRead& r : p.reads[i]) r.span = span_of(graph.node(p.nodes[i]), r, p.vector_axis[i], p.vec);
  return VectorMatch{p, ""};
}

GroupPlan vector_group_plan(const GroupPlan& generic, const VectorPlan& vp) {
  GroupPlan plan = inlined_launch_plan(generic, vp.blocks, vp.threads);
  const int sink_axis = vp.vector_axis.empty() ? -1 : vp.vector_axis.back();
  if (sink_axis >= 0 && sink_axis < static_cast<int>(plan.sink_tile.size())) plan.sink_tile[sink_axis] = vp.vec;
  else plan.sink_tile.back() = vp.vec;
  plan.reduce_scratch_bytes = vp.combine_bytes();
  plan.cluster_blocks = vp.parts;
  return plan;
}

std::string print_vector_plan(const VectorPlan& p) {
  int vector_reads = 0, other_reads = 0;
  for (const std::vector<VectorRead>& rs : p.reads)
    for (const VectorRead& r : rs)
      if (r.producer < 0 && r.inlined < 0) (r.vector || r.guarded ? vector_reads : other_reads) += 1;
  for (const VectorInline& in : p.inlined)
    for (const VectorRead& r : in.reads) (in.vector ? vector_reads : other_reads) += r.inlined < 0;
  return cat("vector kernel: ", p.elements, " elements, ", p.vec, " per thread and access; ", p.threads, " threads per block, ",
             p.blocks, " blocks (grid-stride); ", vector_reads, " vector reads, ", other_reads, " scalar reads of device memory",
             p.inlined.empty() ? std::string() : cat("; ", p.inlined.size(), " values recomputed where read"),
             p.slices > 1 ? cat("; windows sliced: ", p.slices, " threads share each vector's taps, ", p.lanes, " vectors per block",
                                p.parts > 1 ? cat(", clusters of ", p.parts, " blocks share them too") : std::string())
                          : std::string());
}

}  // namespace tessel::cuda
