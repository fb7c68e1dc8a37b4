// The vector kernel of elementwise groups (vector_plan.h; see emitter.h).
#include "kernels/cuda/emitter.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace tessel::cuda::emitter {

// ---- the vector kernel (vector_plan.h) -----------------------------------------------------------
//
// A grid-stride loop over vectors of `vec` consecutive elements of the sink: the point of the
// vector's first element, the vector loads of the reads that walk the last axis, then per element
// (unrolled) every node's value in group order (in-group reads are the producer's value at the same
// element, other reads of device memory scalar with the generic bounds and pad), and one vector
// store of the sink. A window (a node reducing a few points per output) is accumulated before the
// per-element loop, in a loop over its taps whose guarded vector loads serve every element. A
// sliced window's taps are shared by the `slices` threads of a vector, which combine their sums
// through shared memory; the first of them goes on with the rest of the group.

// Node i's spatial coordinates from the sink's `vars` (VectorPlan::axis_of; 0 along an axis of
// extent 1 the sink does not have).
static std::vector<std::string> node_vars(const VectorPlan& p, int i, const std::vector<std::string>& vars) {
  std::vector<std::string> out;
  for (const int s : p.axis_of[i]) out.push_back(s >= 0 ? vars[s] : std::string("0LL"));
  return out;
}

std::string Emitter::vector_kernel(const std::string& name, const VectorPlan& p) {
  const int n = static_cast<int>(p.nodes.size());
  const int d = static_cast<int>(p.extents.size());
  const int vec = p.vec;
  const TeNode& sink = g_.node(p.nodes.back());
  const DType sdt = sink.output().dtype;
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  os_ << "//   " << print_vector_plan(p) << "\n";
  for (int i = 0; i < n; ++i) os_ << "//     " << g_.node(p.nodes[i]).name() << (i + 1 == n ? ": sink" : ": in registers") << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  emit_signature(name, 0);
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";
  const int64_t vectors = p.elements / vec;
  const bool sliced = p.slices > 1;
  if (!sliced) {
    os_ << "  for (long long tsl_v = static_cast<long long>(blockIdx.x) * " << p.threads << "LL + threadIdx.x; tsl_v < " << vectors
        << "LL; tsl_v += static_cast<long long>(gridDim.x) * " << p.threads << "LL) {\n";
  } else {
    // Blocks of `lanes` vectors, a block-uniform bound (the combines' barriers); a thread past the
    // last vector works on the block's first and stores nothing.
    // With a cluster of `parts` blocks per group of vectors: the group is the cluster's index, and
    // block `tsl_rank` sums the taps' runs tsl_rank, tsl_rank + parts, ...
    os_ << "  __shared__ __align__(8) unsigned char tsl_red[" << p.combine_bytes() << "];\n";
    os_ << "  const unsigned tsl_slice = threadIdx.x / " << p.lanes << "u;\n";
    const std::string group = p.parts > 1 ? cat("(blockIdx.x / ", p.parts, "u)") : std::string("blockIdx.x");
    const std::string groups = p.parts > 1 ? cat("(gridDim.x / ", p.parts, "u)") : std::string("gridDim.x");
    if (p.parts > 1) os_ << "  const unsigned tsl_rank = blockIdx.x % " << p.parts << "u;  // = %cluster_ctarank (a 1-D grid)\n";
    os_ << "  for (long long tsl_vb = static_cast<long long>(" << group << ") * " << p.lanes << "LL; tsl_vb < " << vectors
        << "LL; tsl_vb += static_cast<long long>(" << groups << ") * " << p.lanes << "LL) {\n";
    os_ << "    const bool tsl_active = tsl_vb + threadIdx.x % " << p.lanes << "u < " << vectors << "LL;\n";
    os_ << "    const long long tsl_v = tsl_active ? tsl_vb + threadIdx.x % " << p.lanes << "u : tsl_vb;\n";
  }
  os_ << "    const long long tsl_first = tsl_v * " << vec << "LL;\n";
  os_ << "    long long tsl_q = tsl_first;\n";
  std::vector<int> axes(d);
  std::vector<std::string> base(d);
  for (int a = 0; a < d; ++a) {
    axes[a] = a;
    base[a] = cat("tsl_x", a);
  }
  emit_unflatten("    ", "long long", "tsl_q", axes, p.extents, "tsl_x");
  // Vector loads at the vector's first element.
  std::map<std::pair<int, int>, std::string> vregs;
  for (int i = 0; i < n; ++i)
    for (size_t k = 0; k < p.reads[i].size(); ++k) {
      const VectorRead& r = p.reads[i][k];
      if (r.producer >= 0 || !r.vector) continue;
      const std::vector<int64_t> strides = row_major_strides(r.read.type.shape);
      const std::vector<std::string> at = node_vars(p, i, base);
      std::string off = "0LL";
      for (int q = 0; q < r.read.type.rank(); ++q) off += cat(" + (", affine_text(r.read.map.result(q), at), ") * ", strides[q], "LL");
      const std::string reg = fresh("tsl_g");
      const std::string st = storage_type(r.read.type.dtype);
      os_ << "    " << st << " " << reg << "[" << vec << "];  // " << g_.tensor(r.read.tensor).name << "\n";
      os_ << "    tsl::row_load<" << st << ", " << vec << ">(" << reg << ", g_in" << input_param(r.read.tensor) << " + (" << off
          << "));\n";
      vregs[{i, static_cast<int>(k)}] = reg;
    }
  // Recomputed reads a vector at a time (VectorInline::vector): at the vector's first element,
  // each recomputed node's guard (its point inside its domain, the same for every element) and
  // its reads of device memory as guarded vector loads; per element below, its value from them.
  std::map<int, std::string> rguard;                 // recomputed entry -> its guard
  std::map<std::pair<int, int>, std::string> rregs;  // (entry, read) -> the read's registers
  std::function<void(int, const TeNode&, const std::vector<std::string>&, const std::string&)> load_recomputed =
      [&](int j, const TeNode& root, const std::vector<std::string>& at0, const std::string& outer) {
        const VectorInline& in = p.inlined[j];
        const TeNode& nd = g_.node(in.node);
        const std::vector<int64_t> rext = root.extents();
        // The guard and offset of `map` (over the root's axes) into `shape` at the first element.
        auto locate = [&](const AffineMap& map, const std::vector<int64_t>& shape, std::string& inside) {
          std::string off = "0LL";
          int64_t stride = 1;
          for (int q = map.num_results() - 1; q >= 0; stride *= shape[q--]) {
            const AffineExpr& row = map.result(q);
            const std::string idx = fresh("i");
            os_ << "    const long long " << idx << " = " << affine_text(row, at0) << ";\n";
            off += cat(" + ", idx, " * ", stride, "LL");
            if (row.min_over(rext) < 0 || row.max_over(rext) >= shape[q])
              inside += cat(inside.empty() ? "" : " && ", idx, " >= 0 && ", idx, " < ", shape[q], "LL");
          }
          return off;
        };
        std::string guard = outer;
        locate(in.at, nd.extents(), guard);
        rguard[j] = fresh("tsl_rg");
        os_ << "    const bool " << rguard[j] << " = " << (guard.empty() ? std::string("true") : guard) << ";  // "
            << nd.name() << " recomputed here\n";
        for (size_t k = 0; k < in.reads.size(); ++k) {
          const VectorRead& r = in.reads[k];
          if (r.inlined >= 0) {
            load_recomputed(r.inlined, root, at0, rguard[j]);
            continue;
          }
          std::string inside = rguard[j];
          const std::string off = locate(compose(r.read.map, in.at), r.read.type.shape, inside);
          const std::string reg = fresh("tsl_rr"), st = storage_type(r.read.type.dtype);
          os_ << "    " << st << " " << reg << "[" << vec << "];  // " << g_.tensor(r.read.tensor).name << "\n";
          os_ << "    if (" << inside << ") tsl::row_load<" << st << ", " << vec << ">(" << reg << ", g_in" << input_param(r.read.tensor)
              << " + (" << off << "));\n";
          os_ << "    else for (int tsl_u = 0; tsl_u < " << vec << "; ++tsl_u) " << reg << "[tsl_u] = "
              << to_storage(r.read.type.dtype, literal(r.read.type.dtype, r.read.pad)) << ";\n";
          rregs[{j, static_cast<int>(k)}] = reg;
        }
      };
  for (int i = 0; i < n; ++i)
    for (const VectorRead& r : p.reads[i])
      if (r.inlined >= 0 && p.inlined[r.inlined].vector) load_recomputed(r.inlined, g_.node(p.nodes[i]), node_vars(p, i, base), "");
  // The value of vector-recomputed entry j at element tsl_e (the root's coordinates `xe` there),
  // `pad` where its guard fails.
  std::function<std::string(int, const std::vector<std::string>&, const Scalar&, const std::string&)> recomputed_value =
      [&](int j, const std::vector<std::string>& xe, const Scalar& pad, const std::string& ind) {
        const VectorInline& in = p.inlined[j];
        const TeNode& nd = g_.node(in.node);
        const DType dt = nd.output().dtype;
        std::vector<std::string> at;
        for (int q = 0; q < in.at.num_results(); ++q) at.push_back(cat("(", affine_text(in.at.result(q), xe), ")"));
        std::vector<std::string> inputs;
        for (size_t k = 0; k < in.reads.size(); ++k) {
          const VectorRead& r = in.reads[k];
          if (r.inlined >= 0) {
            inputs.push_back(recomputed_value(r.inlined, xe, r.read.pad, ind));
            continue;
          }
          inputs.push_back(fresh("in"));
          os_ << ind << "const " << compute_type(r.read.type.dtype) << " " << inputs.back() << " = "
              << from_storage(r.read.type.dtype, cat(rregs.at({j, static_cast<int>(k)}), "[tsl_e]")) << ";\n";
        }
        std::map<const ExprNode*, std::string> memo;
        os_ << ind << "// " << nd.name() << " recomputed here: " << print_expr(nd.body(), nd.axis_names()) << "\n";
        const std::string val = emit_expr(nd.body(), inputs, at, memo, ind);
        const std::string v = fresh("rc");
        os_ << ind << "const " << compute_type(dt) << " " << v << " = " << rguard.at(j) << " ? " << round_to_dtype(dt, val) << " : "
            << literal(dt, pad) << ";\n";
        return v;
      };
  // Windows (nodes that reduce a few points per output): accumulated for the vector's elements
  // before the per-element values, each tap's guarded vector loads shared by the elements.
  std::map<int, std::string> window_acc;
  for (int i = 0; i < n; ++i) {
    const TeNode& nd = g_.node(p.nodes[i]);
    if (nd.num_reduction() == 0) continue;
    const Wide wide(*this);
    const DType dt = nd.output().dtype;
    const std::string at = acc_type(dt), comb = combiner_fn(nd.combiner());
    const std::string acc = fresh("tsl_a");
    window_acc[i] = acc;
    os_ << "    // " << nd.name() << ": " << print_expr(nd.body(), nd.axis_names()) << " (a window)\n";
    os_ << "    " << at << " " << acc << "[" << vec << "];\n";
    os_ << "    #pragma unroll\n    for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) " << acc << "[tsl_e] = "
        << literal(dt, nd.init(), true) << ";\n";
    // 32-bit index arithmetic when every index and offset the window computes fits an int over its
    // whole domain, padded taps outside the tensor included (64-bit integer multiplies cost several
    // instructions each, and a window computes an offset per tap): the sum over a read's indices of
    // the largest magnitude each takes over the domain (the vector's elements and the channel
    // steps are points of it) times its stride stays below 2^31.
    const std::vector<int64_t> window_extents = nd.extents();
    bool narrow = true;
    for (int64_t e : window_extents) narrow &= e < (int64_t{1} << 30);
    if (sliced) {  // the flattened tap counter, past the last tap by a stride at most
      double taps = 1;
      for (int a = nd.num_spatial(); a < nd.num_axes(); ++a) taps *= static_cast<double>(window_extents[a]);
      narrow &= taps + static_cast<double>(p.slices) * p.parts < static_cast<double>(int64_t{1} << 31);
    }
    for (const VectorRead& r : p.reads[i]) {
      const std::vector<int64_t> strides = row_major_strides(r.read.type.shape);
      double reach = 0;  // doubles: the bound itself must not overflow
      for (int q = 0; q < r.read.type.rank(); ++q) {
        const AffineExpr& row = r.read.map.result(q);
        const double most = std::max(std::abs(static_cast<double>(row.min_over(window_extents))),
                                     std::abs(static_cast<double>(row.max_over(window_extents))));
        reach += most * static_cast<double>(strides[q]);
      }
      narrow &= reach < static_cast<double>(int64_t{1} << 31);
    }
    const std::string it = narrow ? "int" : "long long", lit = narrow ? "" : "LL";
    // The node's spatial coordinates at the vector's first element (a grouped window splits the
    // sink's last axis m into m / Mg, m % Mg), then its reduction axes.
    const int ns = nd.num_spatial(), last = p.vector_axis[i];
    const int64_t split = p.split[i];
    std::vector<std::string> sp = node_vars(p, i, base);
    for (int a = 0; a < ns; ++a)
      if (split != 0 && a >= d - 1) sp[a] = cat("(", base[d - 1], a == d - 1 ? " / " : " % ", split, "LL)");
    std::vector<std::string> xw(ns);
    std::string ind = "    ";
    for (int a = 0; a < ns; ++a) {
      xw[a] = narrow ? fresh("tsl_n") : sp[a];
      if (narrow) os_ << ind << "const int " << xw[a] << " = static_cast<int>(" << sp[a] << ");\n";
    }
    if (p.channel_axis[i] >= 0) {
      grouped_window(nd, p.reads[i], p.channel_axis[i], p.channel_vec[i], vec, xw, sp, acc, narrow);
      continue;
    }
    const std::vector<int64_t> extents = nd.extents();
    // Span reads (a pooling window sliding along the input's innermost dimension: an NCHW
    // pooling's `s w + d k - pad`): per step of the outer taps, the elements every inner tap of
    // the vector's elements reads -- s (vec - 1) + d (K - 1) + 1 of them from s w - pad -- are
    // loaded once, in aligned 16-byte chunks from the chunk before (each chunk wholly inside the
    // row or wholly padding: the rows are whole chunks long and s w a multiple of a chunk), and
    // each tap of each element takes its register, a constant index once the loops unroll.
    // (VectorRead::span, chosen by the plan.)
    std::vector<std::string> span_regs(p.reads[i].size());
    if (!sliced) {
      for (int a = nd.num_spatial(); a < nd.num_axes(); ++a) {
        xw.push_back(cat("tsl_k", a));
        if (a + 1 == nd.num_axes()) {
          for (size_t k = 0; k < p.reads[i].size(); ++k)
            if (p.reads[i][k].span.chunks > 0)
              span_regs[k] = emit_span_load(p.reads[i][k].read, p.reads[i][k].span, xw, extents, last, a, it, lit, ind);
          os_ << ind << "#pragma unroll\n";
        }
        os_ << ind << "for (" << it << " tsl_k" << a << " = 0; tsl_k" << a << " < " << extents[a] << lit << "; ++tsl_k" << a
            << ") {\n";
        ind += "  ";
      }
    } else {
      // This thread's taps: every slices-th of them flattened, split into the reduction axes.
      std::vector<int> raxes;
      std::vector<int64_t> rext;
      int64_t points = 1;
      for (int a = nd.num_spatial(); a < nd.num_axes(); ++a) {
        xw.push_back(cat("tsl_k", a));
        raxes.push_back(a);
        rext.push_back(extents[a]);
        points *= extents[a];
      }
      os_ << ind << "#pragma unroll " << kVectorSliceUnroll << "\n";
      os_ << ind << "for (" << it << " tsl_t = static_cast<" << it << ">(tsl_slice"
          << (p.parts > 1 ? cat(" + tsl_rank * ", p.slices, "u") : std::string()) << "); tsl_t < " << points << lit
          << "; tsl_t += " << static_cast<int64_t>(p.slices) * p.parts << lit << ") {\n";
      ind += "  ";
      os_ << ind << it << " tsl_tq = tsl_t;\n";
      emit_unflatten(ind, it, "tsl_tq", raxes, rext, "tsl_k");
      for (size_t a = 1; a < raxes.size(); ++a) ind += "  ";  // as deep as the nested loops, closed below once
    }
    // Per tap: a guarded vector load for each read along the channels; for each other read that
    // stays inside its tensor, the offset at the vector's first element and its step per element.
    std::vector<std::string> wregs(p.reads[i].size()), offsets(p.reads[i].size());
    std::vector<int64_t> steps(p.reads[i].size(), 0);
    for (size_t k = 0; k < p.reads[i].size(); ++k) {
      const VectorRead& r = p.reads[i][k];
      if (!span_regs[k].empty()) continue;
      // Else a scalar read per element, bounds checked there.
      if (!r.guarded && !reads_in_bounds(nd, Access{r.read.type, r.read.map})) continue;
      const WindowOffset w = emit_window_offset(r.read, xw, extents, {last}, it, ind);
      offsets[k] = w.offset;
      steps[k] = w.steps[0];
      const std::string& inside = w.inside;
      if (!r.guarded) continue;
      const std::string st = storage_type(r.read.type.dtype);
      wregs[k] = fresh("tsl_w");
      os_ << ind << st << " " << wregs[k] << "[" << vec << "];  // " << g_.tensor(r.read.tensor).name << "\n";
      const std::string load = cat("tsl::row_load<", st, ", ", vec, ">(", wregs[k], ", g_in", input_param(r.read.tensor), " + ", offsets[k], ");");
      if (inside.empty()) {
        os_ << ind << load << "\n";
      } else {
        os_ << ind << "if (" << inside << ") " << load << "\n";
        os_ << ind << "else for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) " << wregs[k] << "[tsl_e] = "
            << to_storage(r.read.type.dtype, literal(r.read.type.dtype, r.read.pad)) << ";\n";
      }
    }
    os_ << ind << "#pragma unroll\n" << ind << "for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
    const std::string inner = ind + "  ";
    std::vector<std::string> xe = xw;
    for (int a = 0; a < ns; ++a) {
      xe[a] = cat("tsl_y", a);
      os_ << inner << "const long long " << xe[a] << " = " << sp[a] << (a == last ? " + tsl_e" : "") << "; (void)" << xe[a]
          << ";\n";
    }
    std::vector<std::string> inputs(p.reads[i].size());
    for (size_t k = 0; k < p.reads[i].size(); ++k) {
      const VectorRead& r = p.reads[i][k];
      const DType rdt = r.read.type.dtype;
      inputs[k] = fresh("in");
      if (!span_regs[k].empty()) {
        const VectorSpan& sr = r.span;
        os_ << inner << "const " << ctype(rdt) << " " << inputs[k] << " = "
            << from_storage(rdt, cat(span_regs[k], "[", sr.lead, " + ", sr.stride, " * tsl_e + ", sr.dilation, " * static_cast<int>(tsl_k",
                                     nd.num_axes() - 1, ")]"))
            << ";\n";
      } else if (r.guarded) {
        os_ << inner << "const " << ctype(rdt) << " " << inputs[k] << " = " << from_storage(rdt, cat(wregs[k], "[tsl_e]")) << ";\n";
      } else if (!offsets[k].empty()) {
        os_ << inner << "const " << ctype(rdt) << " " << inputs[k] << " = "
            << from_storage(rdt, cat("g_in", input_param(r.read.tensor), "[", offsets[k], " + tsl_e * ", steps[k], lit, "]")) << ";\n";
      } else {
        inputs[k] = emit_row_global_read(nd, r.read, xe, inner);
      }
    }
    std::map<const ExprNode*, std::string> memo;
    const std::string val = emit_expr(nd.body(), inputs, xe, memo, inner);
    os_ << inner << acc << "[tsl_e] = " << comb << "(" << acc << "[tsl_e], static_cast<" << at << ">(" << val << "));\n";
    os_ << ind << "}\n";
    for (int a = nd.num_spatial(); a < nd.num_axes(); ++a) {
      ind.resize(ind.size() - 2);
      if (!sliced || a + 1 == nd.num_axes()) os_ << ind << "}\n";
    }
    if (sliced) {
      // The slices' sums combined into the first slice's.
      os_ << "    {\n      " << at << "* tsl_red_v = reinterpret_cast<" << at << "*>(tsl_red);\n";
      os_ << "      #pragma unroll\n      for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) tsl_red_v[tsl_e * " << p.threads
          << " + threadIdx.x] = " << acc << "[tsl_e];\n";
      os_ << "      __syncthreads();\n";
      // A tree over the slices: at half-width h, slice s < h folds in slice s + h.
      int64_t half = 1;
      while (half * 2 < p.slices) half *= 2;
      os_ << "      for (unsigned tsl_h = " << half << "u; tsl_h > 0; tsl_h /= 2) {\n";
      os_ << "        if (tsl_slice < tsl_h && tsl_slice + tsl_h < " << p.slices << "u) {\n";
      os_ << "          #pragma unroll\n          for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
      os_ << "            " << acc << "[tsl_e] = " << comb << "(" << acc << "[tsl_e], tsl_red_v[tsl_e * " << p.threads
          << " + threadIdx.x + tsl_h * " << p.lanes << "u]);\n";
      os_ << "            tsl_red_v[tsl_e * " << p.threads << " + threadIdx.x] = " << acc << "[tsl_e];\n";
      os_ << "          }\n        }\n        __syncthreads();\n      }\n";
      if (p.parts > 1) {
        // The cluster's blocks' sums, added by rank 0 in rank order from their shared memory.
        os_ << "      if (tsl_rank != 0 && tsl_slice == 0)\n";
        os_ << "        for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) tsl_red_v[tsl_e * " << p.threads << " + threadIdx.x] = "
            << acc << "[tsl_e];\n";
        os_ << "      tsl::mma::cluster_sync();\n";
        os_ << "      if (tsl_rank == 0 && tsl_slice == 0)\n";
        os_ << "        for (unsigned tsl_r = 1; tsl_r < " << p.parts << "u; ++tsl_r)\n";
        os_ << "          for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) " << acc << "[tsl_e] = " << comb << "(" << acc
            << "[tsl_e], tsl::mma::cluster_load(tsl_red_v + tsl_e * " << p.threads << " + threadIdx.x, tsl_r));\n";
        os_ << "      tsl::mma::cluster_sync();\n";
      }
      os_ << "    }\n";
    }
  }
  if (sliced) os_ << "    if (!tsl_active || tsl_slice != 0" << (p.parts > 1 ? " || tsl_rank != 0" : "") << ") continue;\n";
  const std::string sst = storage_type(sdt);
  os_ << "    " << sst << " tsl_out[" << vec << "];\n";
  os_ << "    #pragma unroll\n    for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
  std::vector<std::string> x(d);
  for (int a = 0; a < d; ++a) {
    x[a] = cat("x", a);
    os_ << "      const long long " << x[a] << " = " << base[a] << (a == d - 1 ? " + tsl_e" : "") << "; (void)" << x[a] << ";\n";
  }
  std::vector<std::string> value(n);
  const std::string ind = "      ";
  for (int i = 0; i < n; ++i) {
    const TeNode& nd = g_.node(p.nodes[i]);
    const DType dt = nd.output().dtype;
    const std::vector<std::string> xi = node_vars(p, i, x);
    os_ << ind << "// " << nd.name() << ": " << print_expr(nd.body(), nd.axis_names()) << "\n";
    std::vector<std::string> inputs(p.reads[i].size());
    for (size_t k = 0; k < p.reads[i].size() && !window_acc.count(i); ++k) {
      const VectorRead& r = p.reads[i][k];
      if (r.producer >= 0) {
        inputs[k] = value[r.producer];
      } else if (r.inlined >= 0 && p.inlined[r.inlined].vector) {
        inputs[k] = recomputed_value(r.inlined, xi, r.read.pad, ind);
      } else if (r.inlined >= 0) {
        inputs[k] = emit_recomputed(p, nd, r, xi, ind);
      } else if (r.vector) {
        inputs[k] = fresh("in");
        os_ << ind << "const " << compute_type(r.read.type.dtype) << " " << inputs[k] << " = "
            << from_storage(r.read.type.dtype, cat(vregs.at({i, static_cast<int>(k)}), "[tsl_e]")) << ";\n";
      } else {
        inputs[k] = emit_row_global_read(nd, r.read, xi, ind);
      }
    }
    if (window_acc.count(i)) {
      value[i] = fresh("v");
      os_ << ind << "const " << compute_type(dt) << " " << value[i] << " = " << round_to_dtype(dt, cat(window_acc[i], "[tsl_e]"))
          << ";\n";
      continue;
    }
    std::map<const ExprNode*, std::string> memo;
    const std::string v = emit_expr(nd.body(), inputs, xi, memo, ind);
    value[i] = fresh("v");
    os_ << ind << "const " << compute_type(dt) << " " << value[i] << " = " << round_to_dtype(dt, v) << ";\n";
  }
  os_ << ind << "tsl_out[tsl_e] = " << to_storage(sdt, value[n - 1]) << ";\n";
  os_ << "    }\n";
  os_ << "    tsl::row_store<" << sst << ", " << vec << ">(g_out0 + tsl_first, tsl_out);\n";
  os_ << "  }\n}\n";
  return os_.str();
}

std::string Emitter::emit_recomputed(const VectorPlan& p, const TeNode& reader, const VectorRead& r,
                                     const std::vector<std::string>& x, const std::string& ind) {
  const VectorInline& in = p.inlined[r.inlined];
  const TeNode& nd = g_.node(in.node);
  const DType dt = nd.output().dtype;
  const std::vector<int64_t> extents = reader.extents();
  // The node's coordinates at the read's point, and whether that point is inside its domain.
  std::vector<std::string> at;
  std::string inside;
  for (int q = 0; q < r.read.map.num_results(); ++q) {
    const AffineExpr& row = r.read.map.result(q);
    at.push_back(fresh("i"));
    os_ << ind << "const long long " << at.back() << " = " << affine_text(row, x) << ";\n";
    if (row.min_over(extents) < 0 || row.max_over(extents) >= r.read.type.shape[q])
      inside += cat(inside.empty() ? "" : " && ", at.back(), " >= 0 && ", at.back(), " < ", r.read.type.shape[q], "LL");
  }
  const std::string v = fresh("rc");
  os_ << ind << "// " << nd.name() << " recomputed here: " << print_expr(nd.body(), nd.axis_names()) << "\n";
  os_ << ind << compute_type(dt) << " " << v << " = " << literal(dt, r.read.pad) << ";\n";
  std::string body = ind;
  if (!inside.empty()) {
    os_ << ind << "if (" << inside << ") {\n";
    body += "  ";
  } else {
    os_ << ind << "{\n";
    body += "  ";
  }
  std::vector<std::string> inputs;
  for (const VectorRead& rr : in.reads)
    inputs.push_back(rr.inlined >= 0 ? emit_recomputed(p, nd, rr, at, body) : emit_row_global_read(nd, rr.read, at, body));
  std::map<const ExprNode*, std::string> memo;
  const std::string val = emit_expr(nd.body(), inputs, at, memo, body);
  os_ << body << v << " = " << round_to_dtype(dt, val) << ";\n" << ind << "}\n";
  return v;
}

std::string Emitter::emit_span_load(const RowRead& r, const VectorSpan& sp, std::vector<std::string> xw,
                                    const std::vector<int64_t>& extents, int last, int innermost, const std::string& it,
                                    const std::string& lit, const std::string& ind) {
  // The offset of the first element the taps read (innermost tap 0, the vector's first element),
  // and the guard of the row's other indices; the span starts `lead` elements before it.
  xw[innermost] = cat("0", lit);
  const WindowOffset w = emit_window_offset(r, xw, extents, {}, it, ind);
  const std::string start = fresh("tsl_s"), reg = fresh("tsl_span");
  const std::string st = storage_type(r.type.dtype), pad = to_storage(r.type.dtype, literal(r.type.dtype, r.pad));
  const int64_t width = r.type.shape.back();
  os_ << ind << "// " << g_.tensor(r.tensor).name << ": the span of its last dimension every inner tap reads, " << sp.chunks
      << " chunks of " << sp.chunk << " from " << sp.front << " before " << sp.stride << " x the vector's first element\n";
  os_ << ind << "const " << it << " " << start << " = " << sp.stride << lit << " * " << xw[last] << " - " << sp.front << lit << ";\n";
  os_ << ind << st << " " << reg << "[" << sp.chunks * sp.chunk << "];\n";
  os_ << ind << "#pragma unroll\n" << ind << "for (int tsl_j = 0; tsl_j < " << sp.chunks << "; ++tsl_j) {\n";
  os_ << ind << "  const " << it << " tsl_p = " << start << " + tsl_j * " << sp.chunk << ";\n";
  os_ << ind << "  if (" << (w.inside.empty() ? std::string() : w.inside + " && ") << "tsl_p >= 0 && tsl_p < " << width << lit
      << ") tsl::row_load<" << st << ", " << sp.chunk << ">(" << reg << " + tsl_j * " << sp.chunk << ", g_in" << input_param(r.tensor)
      << " + " << w.offset << " - " << sp.lead << lit << " + tsl_j * " << sp.chunk << ");\n";
  os_ << ind << "  else for (int tsl_u = 0; tsl_u < " << sp.chunk << "; ++tsl_u) " << reg << "[tsl_j * " << sp.chunk
      << " + tsl_u] = " << pad << ";\n";
  os_ << ind << "}\n";
  return reg;
}

Emitter::WindowOffset Emitter::emit_window_offset(const RowRead& r, const std::vector<std::string>& x,
                                                  const std::vector<int64_t>& extents, const std::vector<int>& axes,
                                                  const std::string& it, const std::string& ind) {
  const std::string lit = it == "int" ? "" : "LL";
  const std::vector<int64_t> strides = row_major_strides(r.type.shape);
  WindowOffset w;
  w.steps.assign(axes.size(), 0);
  std::string off = cat("0", lit);
  for (int q = 0; q < r.type.rank(); ++q) {
    const AffineExpr& row = r.map.result(q);
    const std::string idx = fresh("i");
    os_ << ind << "const " << it << " " << idx << " = " << affine_text(row, x, lit.c_str()) << ";\n";
    off += cat(" + ", idx, " * ", strides[q], lit);
    for (size_t a = 0; a < axes.size(); ++a) w.steps[a] += row.coeffs[axes[a]] * strides[q];
    if (q + 1 < r.type.rank() && (row.min_over(extents) < 0 || row.max_over(extents) >= r.type.shape[q]))
      w.inside += cat(w.inside.empty() ? "" : " && ", idx, " >= 0 && ", idx, " < ", r.type.shape[q], lit);
  }
  w.offset = fresh("tsl_o");
  os_ << ind << "const " << it << " " << w.offset << " = " << off << ";\n";
  return w;
}

// A grouped window: the taps outermost, then the group's channels `cv` at a time. Per step, each
// read loads
//   - a channel read that does not depend on the node's last axis (the input: a group's channels
//     at one pixel): one vector of `cv` channels, shared by the elements (guarded at a padded
//     border);
//   - a channel read that does (weights [M, kh, kw, Cg]: an output channel's row): one vector of
//     `cv` channels per element, at a fixed step;
//   - an element read (weights [kh, kw, Cg, M], `VectorRead::guarded`): per channel, one vector of
//     the `vec` elements' weights;
// then every element's `cv` products. The plan guarantees that indices depending on the last axis
// or the channel axis stay inside their tensors, so the only guard is a padded border's, which
// moves with the taps alone.
void Emitter::grouped_window(const TeNode& nd, const std::vector<VectorRead>& reads, int channel, int cv, int vec,
                             std::vector<std::string> xw, const std::vector<std::string>& sp, const std::string& acc,
                             bool narrow) {
  const std::string it = narrow ? "int" : "long long", lit = narrow ? "" : "LL";
  const std::vector<int64_t> extents = nd.extents();
  const int ns = nd.num_spatial(), last = ns - 1;
  const std::string at = acc_type(nd.output().dtype), comb = combiner_fn(nd.combiner());
  std::string ind = "    ";
  xw.resize(nd.num_axes());
  int innermost = -1;
  for (int a = ns; a < nd.num_axes(); ++a)
    if (a != channel) innermost = a;
  for (int a = ns; a < nd.num_axes(); ++a) {
    if (a == channel) continue;
    xw[a] = cat("tsl_k", a);
    if (a == innermost) os_ << ind << "#pragma unroll\n";
    os_ << ind << "for (" << it << " tsl_k" << a << " = 0; tsl_k" << a << " < " << extents[a] << lit << "; ++tsl_k" << a << ") {\n";
    ind += "  ";
  }
  xw[channel] = "tsl_c";
  const int64_t steps = extents[channel] / cv;
  os_ << ind << (steps <= kVectorChannelUnroll ? "#pragma unroll\n" : cat("#pragma unroll ", kVectorChannelUnroll, "\n"));
  os_ << ind << "for (" << it << " tsl_c = 0; tsl_c < " << extents[channel] << lit << "; tsl_c += " << cv << lit << ") {\n";
  ind += "  ";
  enum class Mode { shared, per_element, elements };
  std::vector<std::string> regs(reads.size());
  std::vector<Mode> mode(reads.size());
  for (size_t k = 0; k < reads.size(); ++k) {
    const RowRead& r = reads[k].read;
    const WindowOffset w = emit_window_offset(r, xw, extents, {last, channel}, it, ind);
    const int64_t step = w.steps[0], channel_step = w.steps[1];
    const std::string& inside = w.inside;
    mode[k] = reads[k].guarded ? Mode::elements : step != 0 ? Mode::per_element : Mode::shared;
    const std::string st = storage_type(r.type.dtype), o = w.offset;
    regs[k] = fresh("tsl_w");
    const std::string pad = to_storage(r.type.dtype, literal(r.type.dtype, r.pad));
    // (outer count, width, the outer index's step): per element or per channel, or one vector.
    const int outer = mode[k] == Mode::per_element ? vec : mode[k] == Mode::elements ? cv : 1;
    const int width = mode[k] == Mode::elements ? vec : cv;
    const int64_t outer_step = mode[k] == Mode::per_element ? step : channel_step;
    os_ << ind << st << " " << regs[k] << (outer > 1 || mode[k] != Mode::shared ? cat("[", outer, "]") : "") << "[" << width
        << "];  // " << g_.tensor(r.tensor).name << "\n";
    std::string dst = regs[k], src = cat("g_in", input_param(r.tensor), " + ", o);
    if (mode[k] != Mode::shared) {
      os_ << ind << "#pragma unroll\n" << ind << "for (int tsl_u = 0; tsl_u < " << outer << "; ++tsl_u) ";
      dst += "[tsl_u]";
      src += cat(" + tsl_u * ", outer_step, lit);
    } else {
      os_ << ind;
    }
    const std::string load = cat("tsl::row_load<", st, ", ", width, ">(", dst, ", ", src, ");");
    if (inside.empty()) os_ << load << "\n";
    else os_ << "{\n" << ind << "  if (" << inside << ") " << load << "\n" << ind << "  else for (int tsl_j = 0; tsl_j < " << width
             << "; ++tsl_j) " << dst << "[tsl_j] = " << pad << ";\n" << ind << "}\n";
  }
  os_ << ind << "#pragma unroll\n" << ind << "for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
  os_ << ind << "  #pragma unroll\n" << ind << "  for (int tsl_j = 0; tsl_j < " << cv << "; ++tsl_j) {\n";
  const std::string inner = ind + "    ";
  std::vector<std::string> xe = xw;
  for (int a = 0; a < ns; ++a) {
    xe[a] = cat("tsl_y", a);
    os_ << inner << "const long long " << xe[a] << " = " << sp[a] << (a == last ? " + tsl_e" : "") << "; (void)" << xe[a] << ";\n";
  }
  xe[channel] = "(tsl_c + tsl_j)";
  std::vector<std::string> inputs(reads.size());
  for (size_t k = 0; k < reads.size(); ++k) {
    const DType rdt = reads[k].read.type.dtype;
    inputs[k] = fresh("in");
    const std::string element = mode[k] == Mode::shared ? "[tsl_j]" : mode[k] == Mode::per_element ? "[tsl_e][tsl_j]" : "[tsl_j][tsl_e]";
    os_ << inner << "const " << ctype(rdt) << " " << inputs[k] << " = " << from_storage(rdt, regs[k] + element) << ";\n";
  }
  std::map<const ExprNode*, std::string> memo;
  const std::string val = emit_expr(nd.body(), inputs, xe, memo, inner);
  os_ << inner << acc << "[tsl_e] = " << comb << "(" << acc << "[tsl_e], static_cast<" << at << ">(" << val << "));\n";
  os_ << ind << "  }\n" << ind << "}\n";
  for (int a = ns; a < nd.num_axes(); ++a) {
    ind.resize(ind.size() - 2);
    os_ << ind << "}\n";
  }
}

}  // namespace tessel::cuda::emitter
