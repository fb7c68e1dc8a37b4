// The tensor-core kernel of contraction groups (contraction_plan.h; see emitter.h).
//
// Layout of the tensor-core kernel (mma_kernel):
//   1. the same parameters;
//   2. the block's tile: a batch point and a block_m x block_n tile of the contraction's (m, n),
//      in rasterized order (groups of raster_group block rows share their B panels in L2);
//   3. the main loop (device/mma.cuh's BlockGemm: cp.async pipeline, ldmatrix, mma.sync) into
//      f32 accumulator fragments; with K split over a cluster, over the block's part of K, then
//      the parts' sums meet in rank 0 (the others return);
//   4. the epilogue: the contraction's value function returns the accumulator of the point
//      being stored (rounded to its dtype), the other nodes' value functions are the generic
//      ones, and the sink's value is stored for every accumulator inside the output -- pair by
//      pair from mma.sync's fragments, or, on the wgmma kernel, for runs of a row read back from
//      each consumer's shared-memory slab (device/wgmma.cuh's store_slab), stored as wide as the
//      address allows.
#include "kernels/cuda/emitter.h"

#include <algorithm>

namespace tessel::cuda::emitter {

namespace {
// A run of the wgmma epilogue: 8 consecutive 16-bit values, 16 bytes (device/wgmma.cuh's
// kEpiChunk); a K split's pairs: 2.
constexpr int kRunElems = 8, kPairElems = 2;
// Side inputs loaded per run at most (each holds 32 registers a thread across a 128-wide slab's
// round trip; a K split's pairs two a column group of the rank's share).
constexpr int kMaxRunReads = 4;
}  // namespace

void Emitter::emit_gather_copy(const ContractionPlan& c) {
  std::vector<int> checked;
  for (int d = 0; d < static_cast<int>(c.a_gather.size()); ++d)
    if (c.a_gather[d].check) checked.push_back(d);
  auto axis = [](int a) { return cat("x", a); };
  // (f32 -- the simt kernel -- reads chunks of 4 elements into rows padded by kSimtPad floats; the
  // pointer stays 16-bit, its offsets doubled.)
  const char* chunk = c.simt ? "4" : "tsl::mma::kChunkElems";
  const char* pad = c.simt ? "tsl::mma::kSimtPad" : "tsl::mma::kPadElems";
  const int scale = dtype_bytes(c.dtype) / 2, elem_bytes = dtype_bytes(c.dtype);
  os_ << "// A of the implicit GEMM: '" << g_.tensor(c.a.tensor).name << "' gathered, 16-byte chunks of the innermost k axis.\n";
  os_ << "struct TslGatherA {\n";
  os_ << "  static constexpr int kRows = " << c.block_m << ", kCols = " << c.block_k << ", kThreads = TslGemm::kThreads;\n";
  os_ << "  static constexpr int kChunkElems = " << chunk << ", kPad = " << pad << ";\n";
  os_ << "  static constexpr int kChunksPerRow = kCols / kChunkElems, kRowStep = kThreads / kChunksPerRow;\n";
  os_ << "  static constexpr int kChunks = kRows * kChunksPerRow, kIters = (kChunks + kThreads - 1) / kThreads;\n";
  os_ << "  static_assert(kThreads % kChunksPerRow == 0, \"a thread's chunks share one column\");\n";
  os_ << "  const unsigned short* base;\n  long long off[kIters];  // the row's part of the offset\n";
  for (int d : checked) os_ << "  long long idx" << d << "[kIters];  // the row's part of index " << d << "\n";
  os_ << "  bool ok[kIters];\n  int k;  // this thread's column of the next tile\n  unsigned dst;\n";
  os_ << "  __device__ __forceinline__ TslGatherA(const unsigned short* g, int m0) : base(g) {\n";
  os_ << "    const int t = static_cast<int>(threadIdx.x);\n";
  os_ << "    k = (t % kChunksPerRow) * kChunkElems;\n";
  os_ << "    dst = static_cast<unsigned>(((t / kChunksPerRow) * (kCols + kPad) + k) * " << elem_bytes << ");\n";
  os_ << "#pragma unroll\n    for (int i = 0; i < kIters; ++i) {\n";
  os_ << "      const long long m = m0 + t / kChunksPerRow + i * kRowStep;\n";
  os_ << "      ok[i] = (kChunks % kThreads == 0 || t + i * kThreads < kChunks) && m < " << c.m << "LL;\n";
  os_ << "      long long q = m;\n";
  emit_unflatten("      ", "long long", "q", c.m_axes, c.m_extents, "x");
  auto m_part = [&](const GatherDim& g) {
    std::string e = g.m_axis >= 0 ? cat(g.m_coeff, "LL * ", axis(g.m_axis)) : std::string();
    if (g.offset != 0 || e.empty()) e += cat(e.empty() ? "" : " + ", "(", g.offset, "LL)");
    return e;
  };
  std::string off = "0LL";
  for (const GatherDim& g : c.a_gather)
    if ((g.m_axis >= 0 || g.offset != 0) && g.stride != 0) off += cat(" + (", m_part(g), ") * ", g.stride, "LL");
  os_ << "      off[i] = " << off << ";\n";
  for (int d : checked) os_ << "      idx" << d << "[i] = " << m_part(c.a_gather[d]) << ";\n";
  os_ << "    }\n  }\n";
  os_ << "  __device__ __forceinline__ void copy(unsigned stage) const {\n";
  os_ << "    int q = k;\n";
  emit_unflatten("    ", "int", "q", c.k_axes, c.k_extents, "x");
  std::string koff = "0LL";
  for (const GatherDim& g : c.a_gather)
    if (g.k_axis >= 0) koff += cat(" + ", g.k_coeff * g.stride, "LL * ", axis(g.k_axis));
  os_ << "    const long long koff = " << koff << ";\n";
  os_ << "    const bool kok = " << (c.k % c.block_k == 0 ? std::string("true") : cat("k < ", c.k)) << ";\n";
  os_ << "#pragma unroll\n    for (int i = 0; i < kIters; ++i) {\n";
  // A thread past the tile's last chunk copies nothing: a zero-fill there would land on the rows
  // after the tile (the next operand's buffer) when the tile has fewer chunks than threads.
  os_ << "      if (kChunks % kThreads != 0 && static_cast<int>(threadIdx.x) + i * kThreads >= kChunks) continue;\n";
  os_ << "      bool v = ok[i] && kok;\n";
  for (int d : checked) {
    const GatherDim& g = c.a_gather[d];
    const std::string idx = g.k_axis >= 0 ? cat("idx", d, "[i] + ", g.k_coeff, "LL * ", axis(g.k_axis)) : cat("idx", d, "[i]");
    os_ << "      v = v && static_cast<unsigned long long>(" << idx << ") < " << g.extent << "ULL;\n";
  }
  os_ << "      tsl::mma::cp_async_16(stage + dst + static_cast<unsigned>(i * kRowStep * (kCols + kPad) * " << elem_bytes << "), "
      << "v ? base + " << (scale > 1 ? cat(scale, " * (off[i] + koff)") : std::string("off[i] + koff")) << " : base, v ? 16 : 0);\n";
  os_ << "    }\n  }\n";
  os_ << "  __device__ __forceinline__ void advance() { k += kCols; }\n};\n";
}

void Emitter::emit_conv_coords(const ContractionPlan& c) {
  const int dims = static_cast<int>(c.a_gather.size());
  const int nk = static_cast<int>(c.k_axes.size());
  os_ << "// The stages of the box-tiled convolution (contraction_plan.h): K tile kt is tap kt / " << c.k_chunks
      << " and channels 64 (kt % " << c.k_chunks << ") ..; A's box starts at m_coeff * the tile's first output point + k_coeff *\n"
      << "// the tap + offset along each input dimension (outside the input: zeros); B's map is (channels, taps, n) with k\n"
      << "// contiguous, else (n, channels, taps).\n";
  os_ << "struct TslConvCoords {\n";
  os_ << "  template <bool B_K_CONTIG>\n";
  os_ << "  __device__ __forceinline__ static void place(int kt, const tsl::wg::TileAt& at, int& a0, int& a1, int (&ab)[3], int& b0, "
         "int& b1, int (&bb)[3]) {\n";
  os_ << "    int tap = kt / " << c.k_chunks << ";\n";
  os_ << "    a0 = (kt % " << c.k_chunks << ") * " << c.block_k << ";\n";
  os_ << "    b0 = B_K_CONTIG ? a0 : at.n0;\n    b1 = B_K_CONTIG ? tap : a0;\n";
  os_ << "    bb[0] = B_K_CONTIG ? at.n0 : tap; bb[1] = bb[2] = 0;\n";
  for (int i = nk - 2; i >= 0; --i) {
    os_ << "    const int x" << c.k_axes[i] << " = tap";
    if (i > 0) os_ << " % " << c.k_extents[i] << "; tap /= " << c.k_extents[i];
    os_ << ";\n";
  }
  if (nk < 2) os_ << "    (void)tap;\n";
  auto coord = [&](const GatherDim& g) {
    std::string e = cat(g.offset);
    if (g.m_axis >= 0) {
      const int i = static_cast<int>(std::find(c.m_axes.begin(), c.m_axes.end(), g.m_axis) - c.m_axes.begin());
      e += cat(" + ", g.m_coeff, " * at.mo[", i, "]");
    }
    if (g.k_axis >= 0) e += cat(" + ", g.k_coeff, " * x", g.k_axis);
    return e;
  };
  os_ << "    a1 = " << coord(c.a_gather[dims - 2]) << ";\n";
  for (int d = dims - 3, j = 0; j < 3; --d, ++j)
    os_ << "    ab[" << j << "] = " << (d >= 0 ? coord(c.a_gather[d]) : std::string("0")) << ";\n";
  os_ << "  }\n};\n";
}

// The wgmma epilogue's side inputs read along its runs: reads, by nodes evaluated at the very point
// being stored, of 16-bit tensors in device memory whose offset grows by one along n and stays
// inside the tensor over the node's domain. A node is evaluated at the stored point when it is the
// sink, or when every node of the group that reads it is, reads it element for element (the
// identity map, no reshape) and sums nothing. `point` names the stored point's coordinates; the
// runs' offsets are written at their first point (tsl_xn0).
std::vector<Emitter::RunRead> Emitter::run_reads(const ContractionPlan& c, int cpos, const std::vector<std::string>& point) const {
  const int n = static_cast<int>(plan_.nodes.size()), s = n - 1, d = ns(s);
  std::vector<RunRead> runs;
  int distinct = 0;  // loads (RunRead::slot)
  if (node(s).num_reduction() != 0) return runs;
  std::vector<std::string> first = point;
  first[c.n_axis] = "tsl_xn0";
  std::vector<char> at_point(n, 0);
  at_point[s] = 1;
  auto element_for_element = [&](const Access& a, int rank) {
    if (a.is_gather() || a.type.rank() != rank) return false;
    for (int r = 0; r < rank; ++r) {
      const AffineExpr& row = a.map.result(r);
      if (row.offset != 0) return false;
      for (size_t x = 0; x < row.coeffs.size(); ++x)
        if (row.coeffs[x] != (static_cast<int>(x) == r ? 1 : 0)) return false;
    }
    return true;
  };
  for (int i = s - 1; i >= 0; --i) {
    if (i == cpos || node(i).num_reduction() != 0 || plan_.nodes[i].reshaped || ns(i) != d) continue;
    bool read = false, ok = true;
    for (int j = i + 1; j < n; ++j)
      for (size_t k = 0; k < node(j).inputs().size(); ++k)
        if (g_.producer(g_.node_inputs(plan_.nodes[j].node)[k]) == plan_.nodes[i].node) {
          read = true;
          ok = ok && at_point[j] && node(j).num_reduction() == 0 && element_for_element(node(j).inputs()[k], d);
        }
    at_point[i] = read && ok;
  }
  for (int i = 0; i < n; ++i) {
    if (!at_point[i] || i == cpos) continue;
    const TeNode& nd = node(i);
    for (int k = 0; k < static_cast<int>(nd.inputs().size()); ++k) {
      const Access& a = nd.inputs()[k];
      const TensorId t = g_.node_inputs(plan_.nodes[i].node)[k];
      if (a.is_gather() || plan_.position(g_.producer(t)) >= 0 || hoisted_.count({i, k}) || dtype_bytes(a.type.dtype) != 2 ||
          !is_float(a.type.dtype) || a.type.num_elements() == 0)
        continue;
      const std::vector<int64_t> strides = row_major_strides(a.type.shape);
      int64_t along_n = 0;
      bool inside = true;
      std::string offset = "0LL";
      for (int r = 0; r < a.type.rank(); ++r) {
        const AffineExpr& row = a.map.result(r);
        along_n += row.coeffs[c.n_axis] * strides[r];
        inside = inside && row.min_over(nd.extents()) >= 0 && row.max_over(nd.extents()) < a.type.shape[r];
        offset += cat(" + (", affine_text(row, first), ") * ", strides[r], "LL");
      }
      if (along_n != 1 || !inside) continue;
      // (Two reads of the same elements share one load; past kMaxRunReads, the rest are read
      // where they are used.)
      const auto same = std::find_if(runs.begin(), runs.end(), [&](const RunRead& r) { return r.tensor == t && r.offset == offset; });
      if (same != runs.end()) runs.push_back({i, k, t, a.type.dtype, offset, same->slot});
      else if (distinct < kMaxRunReads) runs.push_back({i, k, t, a.type.dtype, offset, distinct++});
    }
  }
  return runs;
}

std::string Emitter::mma_kernel(const std::string& name, const ContractionPlan& c) {
  const int n = static_cast<int>(plan_.nodes.size());
  const int s = n - 1;
  const int cpos = plan_.position(c.node);
  const TeNode& sink = node(s);
  const int d = ns(s);
  const DType sdt = sink.output().dtype;
  auto is_operand = [&](int i) {
    return std::find(c.operand_nodes.begin(), c.operand_nodes.end(), plan_.nodes[i].node) != c.operand_nodes.end();
  };
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  std::istringstream plan_text(print_group_plan(g_, plan_));
  for (std::string line; std::getline(plan_text, line);) os_ << "//   " << line << "\n";
  os_ << "//   " << print_contraction_plan(g_, c) << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  const char* bf16 = c.dtype == DType::bf16 ? "true" : "false";
  // A batched wgmma product: the batch axes each operand's tensor map has as outer dimensions (those
  // it is not broadcast over; mma_group_plan's maps, in the same order).
  auto map_batch_axes = [&](const MmaOperand& o) {
    std::vector<int> axes;
    for (size_t b = 0; b < c.batch_axes.size(); ++b)
      if (o.batch_strides[b] != 0) axes.push_back(c.batch_axes[b]);
    return axes;
  };
  const std::vector<int> a_batch = map_batch_axes(c.a), b_batch = map_batch_axes(c.b);
  // A box-tiled convolution's maps: the input's dimensions but two as A's outer ones, the taps as
  // B's; its stages' coordinates come from TslConvCoords (emit_conv_coords).
  const std::string map_dims = c.conv_box ? cat(", ", c.a_gather.size() - 2, ", 1, TslConvCoords")
                               : c.batch_axes.empty() ? std::string()
                                                      : cat(", ", a_batch.size(), ", ", b_batch.size());
  const int64_t k_param = c.conv_box ? c.k_tiles() * c.block_k : c.k;  // the kernel's K: whole tiles of a convolution's taps
  const bool f32 = c.dtype == DType::f32;
  const std::string gemm_type =
      c.gemv        ? cat("tsl::gemv::Gemv<", f32 ? "float" : "unsigned short", ", ", bf16, ", ", c.warps_m, ", ", c.gemv_cols, ", ",
                          c.gemv_unroll, ", ", c.gemv_vec, ", ", std::min<int>(c.a.align, c.gemv_vec), ", ", c.a.k_contiguous ? "true" : "false",
                          ", ", c.b.k_contiguous ? "true" : "false", ", ", c.m, ", ", c.n, ", ", c.k, ", ", c.a.ld, "LL, ", c.b.ld, "LL>")
      : c.pingpong  ? cat("tsl::wg::WarpgroupPingpong<", c.stages, ", ", c.b.k_contiguous ? "true" : "false", ", ", bf16, ", ", k_param,
                          map_dims, ">")
      : c.warpgroup ? cat("tsl::wg::WarpgroupGemm<", c.block_m, ", ", c.block_n, ", ", c.stages, ", ", c.b.k_contiguous ? "true" : "false", ", ", bf16,
                          ", ", k_param, c.split_k > 1 || c.cluster_m > 1 || !map_dims.empty() ? cat(", ", c.split_k) : std::string(),
                          c.cluster_m > 1 || !map_dims.empty() ? cat(", ", c.cluster_m) : std::string(), map_dims, ">")
      : c.nm_wgmma  ? cat("tsl::wg::SparseWarpgroupGemm<", c.block_m, ", ", c.stages, ", ", bf16, ", ", c.n, ", ", c.k, ", ", c.cluster_n, ">")
      : c.simt      ? cat("tsl::mma::SimtBlockGemm<", c.block_m, ", ", c.block_n, ", ", c.block_k, ", ", c.warps_m, ", ", c.warps_n, ", ",
                          c.stages, ", ", c.a.k_contiguous ? "true" : "false", ", ", c.b.k_contiguous ? "true" : "false", ", ", c.m, ", ",
                          c.n, ", ", c.k, ", ", c.a.ld, "LL, ", c.b.ld, "LL, ", c.a.align, ", ", c.b.align, ", ", c.simt_lanes_m(), ", ", c.k_slices, ">")
      : c.nm_sparse ? cat("tsl::mma::SparseBlockGemm<", c.block_m, ", ", c.block_n, ", ", c.block_k, ", ", c.warps_m, ", ", c.warps_n, ", ",
                          c.stages, ", ", c.a.k_contiguous ? "true" : "false", ", ", bf16, ", ", c.m, ", ", c.n, ", ", c.k, ", ", c.a.ld,
                          "LL", c.a.align < kChunkElems ? cat(", ", c.a.align) : std::string(), ">")
                  : cat("tsl::mma::BlockGemm<", c.block_m, ", ", c.block_n, ", ", c.block_k, ", ", c.warps_m, ", ", c.warps_n, ", ",
                        c.stages, ", ", c.a.k_contiguous ? "true" : "false", ", ", c.b.k_contiguous ? "true" : "false", ", ", bf16,
                        ", ", c.m, ", ", c.n, ", ", c.k, ", ", c.a.ld, "LL, ", c.b.ld, "LL",
                        c.a.align < kChunkElems || c.b.align < kChunkElems ? cat(", ", c.a.align, ", ", c.b.align) : std::string(), ">");
  if (c.conv_box) emit_conv_coords(c);
  os_ << "typedef " << gemm_type << " TslGemm;\n";
  if (c.warpgroup) {
    // The host planned the launch and the tensor maps' boxes with these (contraction_plan.cpp).
    os_ << "static_assert(TslGemm::kThreads == " << plan_.threads << " && TslGemm::BM == " << c.block_m
        << " && TslGemm::BK == " << c.block_k << " && TslGemm::kSmemBytes == " << c.smem_bytes
        << ", \"the wgmma plan and device/wgmma.cuh disagree\");\n";
  }
  if (c.nm_sparse)
    os_ << "static_assert(TslGemm::kSmemBytes == " << c.smem_bytes << " && TslGemm::KC == " << c.nm_view.k_pad / 2
        << " && TslGemm::kThreads == " << plan_.threads << (c.nm_wgmma ? cat(" && TslGemm::kBlocksPerSm == ", kWgSparseBlocksPerSm) : std::string())
        << ", \"the 2:4 plan and device/mma.cuh disagree\");\n";
  if (c.gemv)
    os_ << "static_assert(TslGemm::kSmemBytes == " << c.smem_bytes << " && TslGemm::kThreads == " << plan_.threads
        << " && TslGemm::BN == " << c.block_n << " && TslGemm::BK == " << c.block_k << ", \"the gemv plan and device/gemv.cuh disagree\");\n";
  if (c.simt) {
    // (A split K's partial sums may need more shared memory than the stages: split_k.)
    const std::string smem = c.split_k > 1 ? "(TslGemm::kSmemBytes > TslGemm::kReduceBytes ? TslGemm::kSmemBytes : TslGemm::kReduceBytes)"
                                           : "TslGemm::kSmemBytes";
    os_ << "static_assert(" << smem << " == " << c.smem_bytes << " && TslGemm::kThreads == " << plan_.threads
        << " && TslGemm::TM == " << kSimtLaneTile << " && TslGemm::TN == " << kSimtLaneTile
        << ", \"the f32 plan and device/mma.cuh disagree\");\n";
  }
  if (c.split_k > 1)
    os_ << "static_assert(TslGemm::kReduceBytes <= " << c.smem_bytes
        << ", \"the partial sums of a split K must fit the kernel's shared memory\");\n";
  if (c.implicit && !c.warpgroup) emit_gather_copy(c);
  if (c.sparse_operand >= 0) {
    // The block-sparse K loop's lists (ContractionPlan::sparse_*), from the weight's values.
    constexpr size_t kPerLine = 32;  // values per line of the generated source
    auto list = [&](const char* what, const std::vector<int>& v) {
      os_ << "static __device__ const int " << name << "_" << what << "[" << std::max<size_t>(v.size(), 1) << "] = {";
      for (size_t i = 0; i < v.size(); ++i) os_ << (i ? (i % kPerLine == 0 ? ",\n  " : ",") : "") << v[i];
      os_ << (v.empty() ? "0" : "") << "};\n";
    };
    os_ << "// block-sparse " << (c.sparse_operand == 0 ? "A" : "B") << ": per " << (c.sparse_operand == 0 ? "m" : "n")
        << " panel, the K tiles holding a non-zero block (density " << c.sparse_density << ")\n";
    list("sparse_ptr", c.sparse_ptr);
    list("sparse_tiles", c.sparse_tiles);
  }
  // One block per SM is enough to hold the pipeline; the register budget is the compiler's. (A
  // wgmma block of one consumer up to kWgPairedMaxBlockN wide is launched for two per SM.)
  emit_signature(name, c.nm_wgmma ? kWgSparseBlocksPerSm : c.warpgroup && !c.pingpong && c.warpgroups == 2 && c.block_n <= kWgPairedMaxBlockN ? kWgPairedBlocks : 1);
  os_ << "  extern __shared__ __align__(16) unsigned char tsl_smem[];\n";
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";

  // 2. The block's tile.
  // A cluster sharing B walks tiles of cluster_m block rows (its blocks' m tiles consecutive).
  // (A 2:4 wgmma cluster walks tiles of cluster_n block columns, its blocks' n tiles consecutive.)
  const int64_t rows_m = (c.tiles_m + c.cluster_m - 1) / c.cluster_m, cols_n = (c.tiles_n + c.cluster_n - 1) / c.cluster_n;
  const int64_t tiles = rows_m * cols_n, width = c.raster_group * cols_n;
  os_ << "  // the block's tile: a batch point, then groups of " << c.raster_group << " block rows, column by column\n";
  if (c.split_k > 1) {
    // Split K: the cluster's blocks share the tile; rank r sums K tiles [r T / split, (r + 1) T / split).
    const int64_t ktiles = (c.k + c.block_k - 1) / c.block_k;
    os_ << "  // K split over the cluster: " << c.split_k << " blocks per tile, " << ktiles << " K tiles\n";
    os_ << "  long long tsl_t = blockIdx.x / " << c.split_k << ";\n";
    if (!c.warpgroup) {  // (the wgmma kernel takes its part of K inside its run)
      os_ << "  const int tsl_part = static_cast<int>(TslGemm::cluster_rank());\n";
      os_ << "  const int tsl_kt0 = tsl_part * " << ktiles << " / " << c.split_k << ", tsl_kt1 = (tsl_part + 1) * " << ktiles
          << " / " << c.split_k << ";\n";
    }
  } else if (!c.persistent) {
    os_ << "  long long tsl_t = blockIdx.x;\n";
  }
  // Tile tsl_t's origin; a persistent kernel computes it per tile (tsl_origin), with its batch
  // point (the epilogue's tsl_x of the batch axes, set for the tile being stored).
  const char* in = c.persistent ? "    " : "  ";
  const std::string m0 = c.persistent ? "tsl_m0 = tsl_at.m0" : "const int tsl_m0", n0 = c.persistent ? "tsl_n0 = tsl_at.n0" : "const int tsl_n0";
  if (c.persistent) {
    os_ << "  // a persistent grid: the block's tiles are blockIdx.x, blockIdx.x + gridDim.x, ... of " << c.batch * tiles
        << (c.pingpong ? " (its two consumers take turns: ping-pong)" : "") << "\n";
    os_ << "  int tsl_m0 = 0, tsl_n0 = 0;\n";
    for (size_t i = 0; c.conv_box && i < c.m_axes.size(); ++i)
      os_ << "  int tsl_o" << i << " = 0;  // the box's first point along " << c.m_axes[i] << "\n";
    for (int b : c.batch_axes) os_ << "  long long tsl_x" << b << " = 0;\n";
    os_ << "  auto tsl_origin = [&](long long tsl_t, tsl::wg::TileAt& tsl_at) {\n";
  }
  // A grouped convolution's groups are the fastest-moving index: the blocks running together hold
  // every group's tile of the same output points, which read the same input pixels (each group's
  // channels a slice of a pixel's), so each pixel leaves DRAM once.
  if (!c.batch_axes.empty() && c.implicit)
    os_ << in << "long long tsl_batch = tsl_t % " << c.batch << "LL; tsl_t /= " << c.batch << "LL;\n";
  else if (!c.batch_axes.empty())
    os_ << in << "long long tsl_batch = tsl_t / " << tiles << "LL; tsl_t %= " << tiles << "LL;\n";
  os_ << in << "const long long tsl_first = (tsl_t / " << width << "LL) * " << c.raster_group << "LL;\n";
  os_ << in << "const long long tsl_rows = tsl::imin(" << rows_m << "LL - tsl_first, " << c.raster_group << "LL);\n";
  if (c.cluster_m > 1)
    os_ << in << m0 << " = static_cast<int>(((tsl_first + (tsl_t % " << width << "LL) % tsl_rows) * " << c.cluster_m
        << "LL + tsl::mma::cluster_rank()) * " << c.block_m << "LL);  // this block's rows of the cluster's tile\n";
  else
    os_ << in << m0 << " = static_cast<int>((tsl_first + (tsl_t % " << width << "LL) % tsl_rows) * " << c.block_m << "LL);\n";
  if (c.cluster_n > 1)
    os_ << in << n0 << " = static_cast<int>((((tsl_t % " << width << "LL) / tsl_rows) * " << c.cluster_n
        << "LL + tsl::mma::cluster_rank()) * " << c.block_n << "LL);  // this block's columns of the cluster's tile\n";
  else
    os_ << in << n0 << " = static_cast<int>(((tsl_t % " << width << "LL) / tsl_rows) * " << c.block_n << "LL);\n";
  if (c.persistent) {
    for (int b = static_cast<int>(c.batch_axes.size()) - 1; b >= 0; --b)
      os_ << "    tsl_x" << c.batch_axes[b] << " = tsl_batch % " << c.batch_extents[b] << "LL; tsl_batch /= " << c.batch_extents[b]
          << "LL;\n";
  } else {
    emit_batch_point(c.batch_axes, c.batch_extents);
  }
  if (c.warpgroup) {
    // The tile for the wgmma kernel: its origin and its batch point in the operands' tensor maps.
    if (!c.persistent) os_ << "  tsl::wg::TileAt tsl_at;\n  tsl_at.m0 = tsl_m0;\n  tsl_at.n0 = tsl_n0;\n";
    for (size_t i = 0; i < a_batch.size(); ++i) os_ << in << "tsl_at.ba[" << i << "] = static_cast<int>(tsl_x" << a_batch[i] << ");\n";
    for (size_t i = 0; i < b_batch.size(); ++i) os_ << in << "tsl_at.bb[" << i << "] = static_cast<int>(tsl_x" << b_batch[i] << ");\n";
    if (c.conv_box) {
      // A box-tiled convolution's m tile is a box of output points: its first one along each output axis.
      os_ << in << "long long tsl_mq = tsl_at.m0 / " << c.block_m << "LL;\n";
      for (int i = static_cast<int>(c.m_axes.size()) - 1; i >= 0; --i) {
        const int64_t t = c.box_tiles[i], count = (c.m_extents[i] + t - 1) / t;
        os_ << in << "tsl_at.mo[" << i << "] = static_cast<int>((tsl_mq % " << count << "LL) * " << t << "LL); tsl_mq /= " << count
            << "LL;\n";
        os_ << in << (c.persistent ? "" : "const int ") << "tsl_o" << i << " = tsl_at.mo[" << i << "];\n";
      }
    }
  }
  if (c.persistent) os_ << "  };\n";
  auto batch_offset = [&](const std::vector<int64_t>& strides) { return batch_offset_expr(c.batch_axes, strides); };
  const char* elem = c.gemv && f32 ? "float" : "unsigned short";
  if (!c.warpgroup) {
    // (The f32 kernel's copies read its rows as pairs of 16-bit elements.)
    const std::string open = c.simt ? "reinterpret_cast<const unsigned short*>(" : "", close = c.simt ? ")" : "";
    os_ << "  const " << elem << "* const tsl_a = " << open << "g_in" << input_param(c.a.tensor) << " + (" << batch_offset(c.a.batch_strides)
        << ")" << (c.a.offset ? cat(" + ", c.a.offset, "LL") : "") << close << ";  // A: " << g_.tensor(c.a.tensor).name << "\n";
    os_ << "  const " << elem << "* const tsl_b = " << open << "g_in" << input_param(c.b.tensor) << " + (" << batch_offset(c.b.batch_strides)
        << ")" << (c.b.offset ? cat(" + ", c.b.offset, "LL") : "") << close << ";  // B: " << g_.tensor(c.b.tensor).name << "\n";
  }

  // 3. The main loop (the wgmma kernel runs it with the epilogue, below).
  os_ << "  TslGemm tsl_gemm;\n";
  if (c.sparse_operand >= 0 && !c.persistent) {  // (a persistent kernel finds each tile's panel in run_tiles)
    const std::string panel = c.sparse_operand == 0 ? cat("tsl_m0 / ", c.block_m) : cat("tsl_n0 / ", c.block_n);
    os_ << "  const int tsl_panel = " << panel << ";  // the block-sparse K loop walks this panel's list\n";
    os_ << "  const int tsl_first_tile = " << name << "_sparse_ptr[tsl_panel], tsl_ktiles = " << name
        << "_sparse_ptr[tsl_panel + 1] - tsl_first_tile;\n";
  }
  if (c.warpgroup) {
    // A and B come through tsl_map0 and tsl_map1.
  } else if (c.sparse_operand >= 0) {  // (the wgmma kernel walks the list inside its run, below)
    os_ << "  TslGemm::CopyA tsl_dense_a(tsl_a, " << (c.a.k_contiguous ? "tsl_m0, 0" : "0, tsl_m0") << ");\n";
    os_ << "  TslGemm::CopyB tsl_dense_b(tsl_b, " << (c.b.k_contiguous ? "tsl_n0, 0" : "0, tsl_n0") << ");\n";
    os_ << "  tsl::mma::ListCopy<TslGemm::CopyA> tsl_copy_a(tsl_dense_a, " << name << "_sparse_tiles + tsl_first_tile);\n";
    os_ << "  tsl::mma::ListCopy<TslGemm::CopyB> tsl_copy_b(tsl_dense_b, " << name << "_sparse_tiles + tsl_first_tile);\n";
    os_ << "  tsl_gemm.run_with(tsl_smem, tsl_copy_a, tsl_copy_b, tsl_ktiles);\n";
  } else if (c.nm_wgmma) {
    // (The wgmma.sp kernel reads X, W's values and its metadata through tsl_map0..2 and runs the
    // epilogue inside its run_tiles, below, as the wgmma kernel does.)
    os_ << "  (void)tsl_a; (void)tsl_b; (void)tsl_derived0; (void)tsl_derived1;\n";
  } else if (c.nm_sparse) {
    os_ << "  (void)tsl_b;  // read compressed: tsl_derived0 (values), tsl_derived1 (metadata)\n";
    os_ << "  tsl_gemm.run(tsl_smem, tsl_a, tsl_derived0, tsl_derived1, tsl_m0, tsl_n0);\n";
  } else if (c.implicit) {
    os_ << "  TslGatherA tsl_copy_a(tsl_a, tsl_m0);\n";
    // (The f32 kernel's copies count 16-bit halves along a row: B's n columns twice.)
    os_ << "  TslGemm::CopyB tsl_copy_b(tsl_b, " << (c.b.k_contiguous ? "tsl_n0, 0" : c.simt ? "0, 2 * tsl_n0" : "0, tsl_n0") << ");\n";
    os_ << "  tsl_gemm.run_with(tsl_smem, tsl_copy_a, tsl_copy_b);\n";
  } else if (c.split_k > 1) {
    os_ << "  tsl_gemm.run(tsl_smem, tsl_a, tsl_b, tsl_m0, tsl_n0, tsl_kt0, tsl_kt1 - tsl_kt0);\n";
    os_ << "  if (!tsl_gemm.reduce_cluster<" << c.split_k << ">(tsl_smem)) return;  // rank 0 holds the sums\n";
  } else {
    os_ << "  tsl_gemm.run(tsl_smem, tsl_a, tsl_b, tsl_m0, tsl_n0);\n";
  }

  // 4. The epilogue.
  std::string params;
  for (int a = 0; a < d; ++a) params += cat(a ? ", " : "", "long long x", a);
  const TeNode& cn = node(cpos);
  os_ << "  float tsl_acc = 0.0f;  // the accumulator of the point being stored\n";
  os_ << "    // " << cn.name() << ": " << print_expr(cn.body(), cn.axis_names()) << ", summed on the "
      << (c.simt || c.gemv ? "CUDA cores" : "tensor cores") << "\n";
  std::string cparams;  // (C's own domain: more axes than the sink's when merged_n)
  for (int a = 0; a < cn.num_spatial(); ++a) cparams += cat(a ? ", " : "", "long long x", a);
  // The wgmma kernel's slab rounds the accumulators to the operands' 16-bit type (store_slab; a
  // split K passes its f32 sums instead): where C has that type its value is the slab's as it is.
  // (The 2:4 wgmma kernel stores through slabs the same way: wg_epilogue.)
  const bool wg_epilogue = c.warpgroup || c.nm_wgmma;
  const bool slab_rounded = wg_epilogue && c.split_k <= 1 && cn.output().dtype == c.dtype;
  os_ << "    auto val" << cpos << " = [&](" << cparams << ") -> float { return "
      << (slab_rounded ? std::string("tsl_acc") : round_to_dtype(cn.output().dtype, "tsl_acc")) << "; };\n";
  std::vector<std::string> point(d);  // the stored point's coordinates, by the sink's axes
  for (int a = 0; a < d; ++a) point[a] = a == c.m_axis && !c.flat_m() ? "tsl_xm" : a == c.n_axis ? "tsl_xn" : cat("tsl_x", a);
  // The wgmma kernel stores runs of 8 values along n (a K split: pairs): the side inputs read along
  // them (a bias, a residual) are loaded for every run of the slab before its round trip, for
  // every pair before the split's exchange (wgmma.cuh's prefetching).
  const int chunk = c.n % kRunElems == 0 ? kRunElems : 1;
  // (A K split stores pairs: kPairElems a prefetch.)
  const bool pairs = c.split_k > 1;
  const std::vector<RunRead> runs =
      wg_epilogue && chunk == kRunElems && !c.merged_n ? run_reads(c, cpos, point) : std::vector<RunRead>();
  // Every run (pair) a prefetch loads lies inside the output: n is whole runs.
  TESSEL_ASSERT(runs.empty() || c.n % kRunElems == 0, "prefetched runs of a partial row");
  int loads = 0;
  for (const RunRead& r : runs) loads = std::max(loads, r.slot + 1);
  if (!runs.empty()) {
    os_ << "  struct TslRuns { " << (pairs ? "unsigned" : "uint4") << " r[" << loads
        << "]; };  // the side inputs' runs at the run being stored\n";
    os_ << "  TslRuns tsl_runs{};\n  int tsl_elem = 0;  // the element of the run being stored\n";
    for (const RunRead& r : runs)
      hoisted_[{r.node, r.input}] = cat("tsl::wg::", pairs ? "pair_value" : "run_value", "<", r.dtype == DType::bf16 ? "true" : "false",
                                        ">(tsl_runs.r[", r.slot, "], tsl_elem)");
  }
  // The sink's value is stored, which rounds it: its value function leaves the rounding to the store.
  for (int i = 0; i < n; ++i)
    if (i != cpos && !is_operand(i)) emit_value_function(i, i != s);
  for (const RunRead& r : runs) hoisted_.erase({r.node, r.input});
  std::vector<int64_t> ext;
  for (int a = 0; a < d; ++a) ext.push_back(sink.axes()[a].extent);
  const std::vector<int64_t> strides = row_major_strides(ext);
  std::string off = "0LL", args;
  for (int a = 0; a < d; ++a) {
    if (a != c.n_axis) off += cat(" + ", point[a], " * ", strides[a], "LL");
    args += cat(a ? ", " : "", point[a]);
  }
  // A flattened m (an implicit GEMM's, or batch axes folded into m) is its m axes row-major,
  // which is also the row-major order of the sink's domain (n last): the offset is m * n + n.
  // (With batch axes -- a grouped convolution's groups, between m's axes and n -- the sum over
  // the point's axes above stands: every m axis is unflattened into its tsl_x.)
  if (c.flat_m() && c.batch_axes.empty()) off = cat("tsl_xm * ", c.n, "LL");
  if (c.merged_n) {
    // The sink's last axis is the groups and n merged: its index is the batch point times n plus n.
    std::string group = "0LL";
    for (size_t b = 0; b < c.batch_axes.size(); ++b) group = cat("(", group, ") * ", c.batch_extents[b], "LL + tsl_x", c.batch_axes[b]);
    off = "0LL";
    args.clear();
    for (int a = 0; a + 1 < d; ++a) {
      off += cat(" + tsl_x", a, " * ", strides[a], "LL");
      args += cat("tsl_x", a, ", ");
    }
    off += cat(" + (", group, ") * ", c.n, "LL");
    args += cat("(", group, ") * ", c.n, "LL + tsl_xn");
  }
  const std::string args1 = args.substr(0, args.rfind("tsl_xn")) + "tsl_xn + 1";
  // The stored point's row (returning past M; a flattened m unflattened into its axes) and its
  // first column, named `xn`.
  auto emit_point = [&](const char* xn) {
    if (c.conv_box) {
      // Row tsl_dm of a box-tiled convolution's tile: box points row-major over the output axes.
      os_ << "    const long long " << xn << " = tsl_n0 + tsl_dn;\n";
      os_ << "    long long tsl_r = tsl_dm;\n";
      std::string outside, flat = "0LL";
      for (int i = static_cast<int>(c.m_axes.size()) - 1; i >= 0; --i) {
        const int64_t t = c.box_tiles[i];
        os_ << "    const long long tsl_x" << c.m_axes[i] << " = tsl_o" << i
            << (t > 1 ? cat(" + tsl_r % ", t, "LL; tsl_r /= ", t, "LL") : "") << ";\n";
        if (c.m_extents[i] % t != 0) outside += cat(outside.empty() ? "" : " || ", "tsl_x", c.m_axes[i], " >= ", c.m_extents[i], "LL");
      }
      for (size_t i = 0; i < c.m_axes.size(); ++i) flat = cat("(", flat, ") * ", c.m_extents[i], "LL + tsl_x", c.m_axes[i]);
      if (!outside.empty()) os_ << "    if (" << outside << ") return;  // past an edge of the output\n";
      os_ << "    const long long tsl_xm = " << flat << ";\n";
      return;
    }
    os_ << "    const long long tsl_xm = tsl_m0 + tsl_dm, " << xn << " = tsl_n0 + tsl_dn;\n";
    os_ << "    if (tsl_xm >= " << c.m << "LL) return;\n";
    if (c.flat_m()) {
      os_ << "    long long tsl_q = tsl_xm;\n";
      emit_unflatten("    ", "long long", "tsl_q", c.m_axes, c.m_extents, "tsl_x");
    }
  };
  if (wg_epilogue) {
    // The wgmma kernel passes runs of consecutive values of a row (device/wgmma.cuh's store_slab):
    // 8 at a time when every row starts 16-byte aligned, else one at a time (consecutive threads
    // on consecutive columns); a split K passes pairs. A run inside the output is stored with the
    // widest stores its address allows (tsl::wg::store_row).
    const std::string st = storage_type(sdt);
    if (!runs.empty()) {
      // A run's side inputs: 8 consecutive elements from its first point on (run_reads).
      os_ << "  auto tsl_prefetch = [&](int tsl_dm, int tsl_dn, TslRuns& tsl_p) {\n";
      emit_point("tsl_xn0");
      os_ << "    if (tsl_xn0 + " << (pairs ? kPairElems : kRunElems) << " > " << c.n << "LL) return;\n";
      std::vector<char> loaded(static_cast<size_t>(loads), 0);  // (a shared slot is loaded once)
      for (const RunRead& r : runs)
        if (!loaded[r.slot]++)
          os_ << "    tsl_p.r[" << r.slot << "] = tsl::wg::" << (pairs ? "load_pair" : "load_run") << "(g_in" << input_param(r.tensor)
              << " + (" << r.offset << "));\n";
      os_ << "  };\n";
    }
    const std::string callback = runs.empty() ? "[&](int tsl_dm, int tsl_dn, const auto& tsl_v) {\n"
                                              : "tsl::wg::prefetching<TslRuns>(tsl_prefetch, [&](int tsl_dm, int tsl_dn, const auto& tsl_v, const TslRuns& tsl_p) {\n";
    if (c.nm_wgmma)
      os_ << "  tsl_gemm.run_tiles<" << chunk << ">(tsl_smem, &tsl_map0, &tsl_map1, &tsl_map2, " << c.batch * tiles << "LL, tsl_origin, " << callback;
    else if (c.persistent)
      os_ << "  tsl_gemm.run_tiles<" << chunk << ">(tsl_smem, &tsl_map0, &tsl_map1, " << c.batch * tiles << "LL, tsl_origin, " << callback;
    else
      os_ << "  tsl_gemm.run<" << chunk << ">(tsl_smem, &tsl_map0, &tsl_map1, tsl_at, " << callback;
    if (!runs.empty()) os_ << "    tsl_runs = tsl_p;\n";
    os_ << "    constexpr int tsl_count = static_cast<int>(sizeof(tsl_v) / sizeof(float));\n";
    emit_point("tsl_xn0");
    os_ << "    const long long tsl_off0 = " << off << " + tsl_xn0;\n";
    os_ << "    if (tsl_xn0 + tsl_count <= " << c.n << "LL) {\n";
    os_ << "      " << st << " tsl_s[tsl_count];\n";
    os_ << "#pragma unroll\n      for (int tsl_e = 0; tsl_e < tsl_count; ++tsl_e) {\n";
    os_ << "        const long long tsl_xn = tsl_xn0 + tsl_e;\n";
    os_ << "        tsl_acc = tsl_v[tsl_e];\n";
    if (!runs.empty()) os_ << "        tsl_elem = tsl_e;\n";
    os_ << "        tsl_s[tsl_e] = " << to_storage(sdt, cat("val", s, "(", args, ")")) << ";\n      }\n";
    os_ << "      if (reinterpret_cast<unsigned long long>(g_out0 + tsl_off0) % tsl::wg::store_row_alignment<" << st
        << ", tsl_count>() == 0) tsl::wg::store_row(g_out0 + tsl_off0, tsl_s);\n";
    os_ << "      else {\n#pragma unroll\n        for (int tsl_e = 0; tsl_e < tsl_count; ++tsl_e) g_out0[tsl_off0 + tsl_e] = tsl_s[tsl_e];\n      }\n";
    os_ << "      return;\n    }\n";
    os_ << "#pragma unroll\n    for (int tsl_e = 0; tsl_e < tsl_count; ++tsl_e) {\n";
    os_ << "      const long long tsl_xn = tsl_xn0 + tsl_e;\n";
    os_ << "      if (tsl_xn >= " << c.n << "LL) break;\n";
    os_ << "      tsl_acc = tsl_v[tsl_e];\n";
    if (!runs.empty()) os_ << "      tsl_elem = tsl_e;\n";
    os_ << "      g_out0[tsl_off0 + tsl_e] = " << to_storage(sdt, cat("val", s, "(", args, ")")) << ";\n    }\n";
  } else {
    os_ << "  tsl_gemm.for_each_pair([&](int tsl_dm, int tsl_dn, float tsl_v0, float tsl_v1) {\n";
    emit_point("tsl_xn");
    os_ << "    const long long tsl_off = " << off << " + tsl_xn;\n";
    const bool packed = dtype_bytes(sdt) == 2 && c.n % 2 == 0;
    if (packed) {
      // n is even and so is every row's length: the pair is one aligned 32-bit store.
      os_ << "    if (tsl_xn < " << c.n << "LL) {\n";
      os_ << "      tsl_acc = tsl_v0;\n      const unsigned tsl_s0 = " << to_storage(sdt, cat("val", s, "(", args, ")")) << ";\n";
      os_ << "      tsl_acc = tsl_v1;\n      const unsigned tsl_s1 = " << to_storage(sdt, cat("val", s, "(", args1, ")")) << ";\n";
      os_ << "      *reinterpret_cast<unsigned*>(g_out0 + tsl_off) = tsl_s0 | (tsl_s1 << 16);\n    }\n";
    } else {
      if (dtype_bytes(sdt) == 2) {
        // An odd n: rows alternate between even and odd starts; a pair at an even offset is still
        // one aligned 32-bit store (the output starts at least 4-byte aligned).
        os_ << "    if (tsl_xn + 1 < " << c.n << "LL && (tsl_off & 1LL) == 0) {\n";
        os_ << "      tsl_acc = tsl_v0;\n      const unsigned tsl_s0 = " << to_storage(sdt, cat("val", s, "(", args, ")")) << ";\n";
        os_ << "      tsl_acc = tsl_v1;\n      const unsigned tsl_s1 = " << to_storage(sdt, cat("val", s, "(", args1, ")")) << ";\n";
        os_ << "      *reinterpret_cast<unsigned*>(g_out0 + tsl_off) = tsl_s0 | (tsl_s1 << 16);\n      return;\n    }\n";
      }
      os_ << "    if (tsl_xn < " << c.n << "LL) { tsl_acc = tsl_v0; g_out0[tsl_off] = " << to_storage(sdt, cat("val", s, "(", args, ")"))
          << "; }\n";
      os_ << "    if (tsl_xn + 1 < " << c.n << "LL) { tsl_acc = tsl_v1; g_out0[tsl_off + 1] = "
          << to_storage(sdt, cat("val", s, "(", args1, ")")) << "; }\n";
    }
  }
  const std::string close = runs.empty() ? "  }" : "  })";
  if (c.warpgroup && c.sparse_operand >= 0 && c.persistent)  // each tile walks its panel's list
    os_ << close << ", tsl::wg::SparseLists{" << name << "_sparse_ptr, " << name << "_sparse_tiles, " << (c.sparse_operand == 1 ? "true" : "false")
        << "});\n}\n";
  else if (c.warpgroup && c.sparse_operand >= 0) os_ << close << ", " << name << "_sparse_tiles + tsl_first_tile, tsl_ktiles);\n}\n";
  else os_ << close << ");\n}\n";
  return os_.str();
}


}  // namespace tessel::cuda::emitter
