// The row kernel of groups that reduce and normalize rows (row_plan.h; see emitter.h).
#include "kernels/cuda/emitter.h"

#include <algorithm>
#include <optional>

namespace tessel::cuda::emitter {

// ---- the row kernel (row_plan.h) ------------------------------------------------------------------
//
// Per block: rows_per_block rows of `lanes` threads each, looping over the rows with a grid
// stride. Per row, in group order: a row node fills an array of its values in registers (chunk c,
// element e of thread `lane` is column (c lanes + lane) vec + e), a per-row reduction folds the
// same columns and combines over the row's lanes (shuffles, plus shared memory across warps), a
// per-row elementwise node is one value. Row nodes that leave the group are stored a vector at a
// time; per-row ones by the row's first lane. A streamed row (row_kernel_streamed) keeps no row
// node: each pass walks the row and recomputes the row nodes it reads.

// The kernel's head up to the row's coordinates: the header, the signature, the grid-stride loop
// over blocks of rows; returns the coordinates' variables b_0 .. b_{d-2}.
std::vector<std::string> Emitter::emit_row_prologue(const std::string& name, const RowPlan& r) {
  const int d = static_cast<int>(r.row_extents.size()) + 1;
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  os_ << "//   " << print_row_plan(r) << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  emit_signature(name, 0);
  if (r.lanes > plan_.warp) os_ << "  __shared__ unsigned long long tsl_red[" << r.threads / plan_.warp << "];\n";
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";
  if (r.splits > 1) {
    // A row split over a cluster (row_plan.h): the cluster's index is the row's block, the lane
    // counts over all its blocks' threads (rank = blockIdx.x % splits = %cluster_ctarank, a 1-D
    // grid); tsl_part holds this block's part of a reduction for the others to read.
    os_ << "  __shared__ unsigned long long tsl_part[1];\n";
    os_ << "  const unsigned tsl_lane = (blockIdx.x % " << r.splits << "u) * " << r.lanes << "u + threadIdx.x % " << r.lanes << "u;\n";
  } else {
    os_ << "  const unsigned tsl_lane = threadIdx.x % " << r.lanes << "u;\n";
  }
  const std::string block = r.splits > 1 ? cat("(blockIdx.x / ", r.splits, "u)") : "blockIdx.x";
  const std::string grid = r.splits > 1 ? cat("(gridDim.x / ", r.splits, "u)") : "gridDim.x";
  os_ << "  for (long long tsl_base = static_cast<long long>(" << block << ") * " << r.rows_per_block << "LL; tsl_base < " << r.rows
      << "LL; tsl_base += static_cast<long long>(" << grid << ") * " << r.rows_per_block << "LL) {\n";
  os_ << "    const long long tsl_row = tsl_base + threadIdx.x / " << r.lanes << "u;\n";
  os_ << "    const bool tsl_active = tsl_row < " << r.rows << "LL;\n";
  std::vector<std::string> rows;
  os_ << "    long long tsl_rr = tsl_row;\n";
  for (int a = d - 2; a >= 0; --a) {
    rows.insert(rows.begin(), cat("tsl_b", a));
    os_ << "    const long long tsl_b" << a << " = tsl_rr % " << r.row_extents[a] << "LL; tsl_rr /= " << r.row_extents[a] << "LL;\n";
  }
  os_ << "    (void)tsl_rr;\n";
  return rows;
}

// A node's axis variables at the current column: the row's coordinates, then its column (a row
// node's last spatial axis, a per-row node's first reduction axis -- a merged row's reads walk it
// alone, row_plan.cpp's merged_read --, "0" for keepdims axes and a merged row's other reduction
// axes), then a row node's serial reduction axes.
static std::vector<std::string> row_axis_vars(const TeNode& nd, RowKind kind, const std::vector<std::string>& rows) {
  const int d = static_cast<int>(rows.size()) + 1;
  std::vector<std::string> x = rows;
  for (int a = d - 1; a < nd.num_spatial(); ++a) x.push_back(kind == RowKind::row && a == d - 1 ? "tsl_col" : "0LL");
  if (kind == RowKind::per_row)
    for (int a = nd.num_spatial(); a < nd.num_axes(); ++a) x.push_back(a == nd.num_spatial() ? "tsl_col" : "0LL");
  if (kind == RowKind::row)
    for (int a = nd.num_spatial(); a < nd.num_axes(); ++a) x.push_back(cat("tsl_k", a));
  return x;
}

// A per-row reduction's accumulator `tsl_acc<i>` combined over the row's lanes: shuffles within a
// warp, then shared memory across the warps of a row, then (a row split over a cluster of
// `splits` blocks) the blocks' parts through distributed shared memory, in rank order in every
// block; then its value `tsl_s<i>`.
void Emitter::emit_row_combine(int i, const TeNode& nd, int lanes, int splits) {
  const DType dt = nd.output().dtype;
  const std::string at = acc_type(dt);
  const std::string comb = combiner_fn(nd.combiner());
  const std::string f = cat("[](", at, " a, ", at, " b) { return ", comb, "(a, b); }");
  os_ << "    tsl_acc" << i << " = tsl::segment_combine(tsl_acc" << i << ", " << std::min(lanes, plan_.warp)
      << "u, TSL_WARP_MASK, " << f << ");\n";
  if (lanes > plan_.warp) {
    const int warps = lanes / plan_.warp;
    os_ << "    {\n      " << at << "* tsl_red_v = reinterpret_cast<" << at << "*>(tsl_red);\n";
    os_ << "      if (threadIdx.x % " << plan_.warp << "u == 0) tsl_red_v[threadIdx.x / " << plan_.warp << "u] = tsl_acc" << i
        << ";\n      __syncthreads();\n";
    os_ << "      const unsigned first = (threadIdx.x / " << lanes << "u) * " << warps << "u;\n";
    os_ << "      tsl_acc" << i << " = tsl_red_v[first];\n";
    os_ << "      for (unsigned w = 1; w < " << warps << "u; ++w) tsl_acc" << i << " = " << comb << "(tsl_acc" << i
        << ", tsl_red_v[first + w]);\n      __syncthreads();\n    }\n";
  }
  if (splits > 1) {
    TESSEL_ASSERT(at == "float" || at == "double", "a row split over a cluster reduces floats (row_plan.cpp)");
    os_ << "    {\n      " << at << "* tsl_part_v = reinterpret_cast<" << at << "*>(tsl_part);\n";
    os_ << "      if (threadIdx.x == 0) *tsl_part_v = tsl_acc" << i << ";\n      tsl::mma::cluster_sync();\n";
    os_ << "      tsl_acc" << i << " = tsl::mma::cluster_load(tsl_part_v, 0u);\n";
    os_ << "      for (unsigned tsl_r = 1; tsl_r < " << splits << "u; ++tsl_r) tsl_acc" << i << " = " << comb << "(tsl_acc" << i
        << ", tsl::mma::cluster_load(tsl_part_v, tsl_r));\n";
    os_ << "      tsl::mma::cluster_sync();  // before tsl_part is written again\n    }\n";
  }
  os_ << "    const " << compute_type(dt) << " tsl_s" << i << " = " << round_to_dtype(dt, cat("tsl_acc", i)) << ";\n";
}

// A per-row node without a reduction: one value per row from per-row values and device memory.
void Emitter::emit_row_scalar(int i, const RowPlan& r, const std::vector<std::string>& rows) {
  const RowNode& rn = r.nodes[i];
  const TeNode& nd = g_.node(rn.node);
  const DType dt = nd.output().dtype;
  const std::vector<std::string> x = row_axis_vars(nd, rn.kind, rows);
  os_ << "    " << compute_type(dt) << " tsl_s" << i << " = " << literal(dt, 0) << ";\n    if (tsl_active) {\n";
  std::vector<std::string> values(rn.reads.size());
  for (size_t k = 0; k < rn.reads.size(); ++k)
    values[k] = rn.reads[k].producer >= 0 ? cat("tsl_s", rn.reads[k].producer) : emit_row_global_read(nd, rn.reads[k], x, "      ");
  std::map<const ExprNode*, std::string> memo;
  const std::string v = emit_expr(nd.body(), values, x, memo, "      ");
  os_ << "      tsl_s" << i << " = " << round_to_dtype(dt, v) << ";\n    }\n";
}

// A stored row node's chunk of `vec` values, `tsl_out`, written to device memory.
void Emitter::emit_row_store(const RowNode& rn, const RowPlan& r, const std::string& ind) {
  const std::string st = storage_type(g_.node(rn.node).output().dtype);
  const std::string dst = cat("g_out", output_param(g_.node_output(rn.node)), " + (tsl_row * ", r.n, "LL + tsl_col0)");
  if (r.vec > 1) os_ << ind << "tsl::row_store<" << st << ", " << r.vec << ">(" << dst << ", tsl_out);\n";
  else os_ << ind << "*(" << dst << ") = tsl_out[0];\n";
}

std::string Emitter::row_kernel(const std::string& name, const RowPlan& r) {
  if (r.streamed) return row_kernel_streamed(name, r);
  const int n = static_cast<int>(r.nodes.size());
  const int vec = r.vec, lanes = r.lanes, chunks = r.chunks, elems = r.elements_per_thread();
  const bool tail = static_cast<int64_t>(chunks) * lanes * vec != r.n;
  const std::vector<std::string> rows = emit_row_prologue(name, r);
  // Vector reads of device memory, by parameter and offset text: a row read by several nodes
  // (softmax's max, sum and output) is loaded once into registers.
  std::map<std::string, std::string> row_arrays;
  for (int i = 0; i < n; ++i) {
    const RowNode& rn = r.nodes[i];
    if (rn.kind == RowKind::copy) continue;  // folded into its readers' reads
    const TeNode& nd = g_.node(rn.node);
    const DType dt = nd.output().dtype;
    const std::string ct = compute_type(dt);
    const int col = row_column_axis(nd, rn.kind);
    const std::vector<std::string> x = row_axis_vars(nd, rn.kind, rows);
    const std::vector<RowRead>& ins = rn.reads;
    os_ << "    // " << nd.name() << " (" << (rn.kind == RowKind::row ? "row" : "per row") << "): "
        << print_expr(nd.body(), nd.axis_names()) << "\n";
    if (rn.kind == RowKind::per_row && nd.num_reduction() == 0) {
      emit_row_scalar(i, r, rows);
    } else {
      std::vector<bool> vector_read(ins.size(), false);
      std::vector<std::string> array(ins.size()), offset(ins.size());
      std::vector<bool> first_use(ins.size(), false);
      for (size_t k = 0; k < ins.size(); ++k) {
        // Loaded per chunk, before a row node's serial reduction: only reads that stay put along it.
        vector_read[k] = ins[k].producer < 0 && row_vector_access(nd, ins[k].map, ins[k].type, col, vec) &&
                         (rn.kind != RowKind::row || !reads_along_reduction(nd, ins[k].map));
        if (!vector_read[k]) continue;
        offset[k] = row_vector_offset(ins[k], x, col);
        const std::string key = cat(input_param(ins[k].tensor), "|", offset[k]);
        auto it = row_arrays.find(key);
        if (it != row_arrays.end()) {
          array[k] = it->second;
          continue;
        }
        array[k] = row_arrays[key] = cat("tsl_g", row_arrays.size());
        first_use[k] = true;
        os_ << "    " << storage_type(ins[k].type.dtype) << " " << array[k] << "[" << elems << "];  // "
            << g_.tensor(ins[k].tensor).name << "'s row\n";
      }
      // The inputs' values at the current point (inside the element loop when there is a column).
      // `inner`: vector reads along the serial reduction's last axis (row nodes with reductions),
      // by input, the array and index holding the current element.
      auto inputs = [&](const std::string& ind, const std::vector<std::string>& xs, const std::vector<std::string>& inner) {
        std::vector<std::string> values(ins.size());
        for (size_t k = 0; k < ins.size(); ++k) {
          const DType idt = ins[k].type.dtype;
          const int j = ins[k].producer;
          if (j >= 0) {
            values[k] = r.nodes[j].kind == RowKind::row ? cat("tsl_v", j, "[tsl_c * ", vec, " + tsl_e]") : cat("tsl_s", j);
            continue;
          }
          if (vector_read[k] || !inner[k].empty()) {
            values[k] = fresh("in");
            const std::string at = vector_read[k] ? cat(array[k], "[tsl_c * ", vec, " + tsl_e]") : inner[k];
            os_ << ind << "const " << compute_type(idt) << " " << values[k] << " = " << from_storage(idt, at) << ";\n";
            continue;
          }
          values[k] = emit_row_global_read(nd, ins[k], xs, ind);
        }
        return values;
      };
      const std::vector<std::string> no_inner(ins.size());
      // The chunk loop's head: the column of the chunk, its guard, and the vector reads.
      auto open_chunks = [&]() {
        os_ << "    #pragma unroll\n    for (int tsl_c = 0; tsl_c < " << chunks << "; ++tsl_c) {\n";
        os_ << "      const long long tsl_col0 = (static_cast<long long>(tsl_c) * " << lanes << "LL + tsl_lane) * " << vec
            << "LL;\n";
        os_ << "      const bool tsl_ok = tsl_active" << (tail ? cat(" && tsl_col0 < ", r.n, "LL") : "") << ";\n";
        for (size_t k = 0; k < ins.size(); ++k)
          if (first_use[k]) emit_row_vector_load(ins[k], vec, array[k], cat("tsl_c * ", vec), offset[k], "      ");
        os_ << "      #pragma unroll\n      for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
        os_ << "        const long long tsl_col = tsl_col0 + tsl_e; (void)tsl_col;\n";
      };
      if (rn.kind == RowKind::row) {
        os_ << "    " << ct << " tsl_v" << i << "[" << elems << "] = {};\n";
        open_chunks();
        os_ << "        if (tsl_ok) {\n";
        if (nd.num_reduction() == 0) {
          const std::vector<std::string> values = inputs("          ", x, no_inner);
          std::map<const ExprNode*, std::string> memo;
          const std::string v = emit_expr(nd.body(), values, x, memo, "          ");
          os_ << "          tsl_v" << i << "[tsl_c * " << vec << " + tsl_e] = " << round_to_dtype(dt, v) << ";\n";
        } else {
          emit_row_reduction(nd, ins, x, inputs);
          os_ << "          tsl_v" << i << "[tsl_c * " << vec << " + tsl_e] = " << round_to_dtype(dt, "tsl_r") << ";\n";
        }
        os_ << "        }\n      }\n";
        if (rn.writes_global) {
          os_ << "      if (tsl_ok) {\n        " << storage_type(dt) << " tsl_out[" << vec << "];\n";
          os_ << "        #pragma unroll\n        for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) tsl_out[tsl_e] = "
              << to_storage(dt, cat("tsl_v", i, "[tsl_c * ", vec, " + tsl_e]")) << ";\n";
          emit_row_store(rn, r, "        ");
          os_ << "      }\n";
        }
        os_ << "    }\n";
      } else {
        const Wide wide(*this);
        const std::string at = acc_type(dt);
        os_ << "    " << at << " tsl_acc" << i << " = " << literal(dt, nd.init(), true) << ";\n";
        open_chunks();
        os_ << "        if (tsl_ok) {\n";
        const std::vector<std::string> values = inputs("          ", x, no_inner);
        std::map<const ExprNode*, std::string> memo;
        const std::string v = emit_expr(nd.body(), values, x, memo, "          ");
        os_ << "          tsl_acc" << i << " = " << combiner_fn(nd.combiner()) << "(tsl_acc" << i << ", static_cast<" << at << ">("
            << v << "));\n";
        os_ << "        }\n      }\n    }\n";
        emit_row_combine(i, nd, lanes);
      }
    }
    if (rn.kind == RowKind::per_row && rn.writes_global)
      os_ << "    if (tsl_active && tsl_lane == 0) g_out" << output_param(g_.node_output(rn.node)) << "[tsl_row] = "
          << to_storage(dt, cat("tsl_s", i)) << ";\n";
  }
  os_ << "  }\n}\n";
  return os_.str();
}

// The offset text of a vector read of a row at the chunk's first column `tsl_col0`.
std::string Emitter::row_vector_offset(const RowRead& rd, const std::vector<std::string>& x, int col) {
  const std::vector<int64_t> strides = row_major_strides(rd.type.shape);
  std::vector<std::string> xc = x;
  xc[col] = "tsl_col0";
  std::string offset = "0LL";
  for (int q = 0; q < rd.type.rank(); ++q) offset += cat(" + (", affine_text(rd.map.result(q), xc), ") * ", strides[q], "LL");
  return offset;
}

// One vector of a row into `array` at `at` (zeros past the row's end).
void Emitter::emit_row_vector_load(const RowRead& rd, int vec, const std::string& array, const std::string& at,
                                   const std::string& offset, const std::string& ind) {
  const std::string st = storage_type(rd.type.dtype);
  os_ << ind << "if (tsl_ok) tsl::row_load<" << st << ", " << vec << ">(" << array << " + " << at << ", g_in" << input_param(rd.tensor)
      << " + (" << offset << "));\n";
  os_ << ind << "else for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) " << array << "[" << at << " + tsl_e] = 0;\n";
}

// A streamed pass's chunk loop head: the first column of this thread's vector in chunk tsl_c,
// `tsl_col0`, and whether the vector lies in the row, `tsl_ok` (whole vectors from tsl_h when the
// row is shifted).
void Emitter::emit_row_stream_chunk(const RowPlan& r) {
  const int vec = r.vec, lanes = r.lanes * r.splits;  // the row's threads (all its cluster's)
  os_ << "    #pragma unroll " << kRowStreamUnroll << "\n    for (int tsl_c = 0; tsl_c < " << r.chunks << "; ++tsl_c) {\n";
  if (r.shifted) {
    os_ << "      const long long tsl_v = static_cast<long long>(tsl_c) * " << lanes << "LL + tsl_lane;\n";
    os_ << "      const long long tsl_col0 = tsl_h + tsl_v * " << vec << "LL;\n";
    os_ << "      const bool tsl_ok = tsl_active && tsl_v < tsl_vectors;\n";
  } else {
    const bool tail = static_cast<int64_t>(r.chunks) * lanes * vec != r.n;
    os_ << "      const long long tsl_col0 = (static_cast<long long>(tsl_c) * " << lanes << "LL + tsl_lane) * " << vec << "LL;\n";
    os_ << "      const bool tsl_ok = tsl_active" << (tail ? cat(" && tsl_col0 < ", r.n, "LL") : "") << ";\n";
  }
}

// A shifted row's columns outside the whole vectors, [0, tsl_h) and the tail, one per lane: opens
// the block of the lanes that have one, with its column `tsl_col`.
void Emitter::emit_row_stream_rest(const RowPlan& r) {
  os_ << "    if (tsl_active && tsl_lane < tsl_rest) {\n";
  os_ << "      const long long tsl_col = tsl_lane < tsl_h ? static_cast<long long>(tsl_lane) : " << r.n
      << "LL - tsl_rest + tsl_lane;\n";
}

// The online pass of a streamed softmax's statistics (row_plan.h): the row maximum r.online_max
// (of one read of device memory, x) and the sum r.online_sum of exp(x - maximum) in one walk. Per
// vector, the thread's running maximum `tsl_m` takes the vector's, its sum is rescaled by
// exp(old - new) when that moves it, and the vector's terms are added with the new maximum; the
// threads' maxima are combined over the row, each thread's sum rescaled to the row's maximum, and
// the sums combined.
void Emitter::emit_row_online_pass(const RowPlan& r, const std::vector<std::string>& rows) {
  const int i = r.online_max, j = r.online_sum;
  const RowNode& ri = r.nodes[i];
  const RowNode& rj = r.nodes[j];
  const TeNode& ni = g_.node(ri.node);
  const TeNode& nj = g_.node(rj.node);
  const DType di = ni.output().dtype, dj = nj.output().dtype;
  const std::string ai = acc_type(di), aj = acc_type(dj);
  const int vec = r.vec;
  const RowRead& x = ri.reads[ni.body().index()];
  const Expr& diff = nj.body().operands()[0];
  const int x_slot = diff.operands()[0].index(), m_slot = diff.operands()[1].index();
  const int col = row_column_axis(ni, ri.kind);
  const std::vector<std::string> xi = row_axis_vars(ni, ri.kind, rows), xj = row_axis_vars(nj, rj.kind, rows);
  os_ << "    // pass: " << ni.name() << " and " << nj.name() << " (per row, online: the sum rescaled by exp(old - new) whenever the "
      << "maximum moves): " << print_expr(ni.body(), ni.axis_names()) << "; " << print_expr(nj.body(), nj.axis_names()) << "\n";
  os_ << "    " << ai << " tsl_m = " << literal(di, ni.init(), true) << ";\n";
  os_ << "    " << aj << " tsl_acc" << j << " = " << literal(dj, nj.init(), true) << ";\n";
  const bool vectored = r.shifted ? row_shifted_access(ni, x.map, x.type, col, r.row_extents, r.n)
                                  : row_vector_access(ni, x.map, x.type, col, vec);
  // x at tsl_col: element tsl_e of the chunk's vector, or one read of device memory.
  auto x_value = [&](bool from_vector, const std::string& ind) {
    if (!from_vector) return emit_row_global_read(ni, x, xi, ind);
    const std::string v = fresh("in");
    os_ << ind << "const " << compute_type(x.type.dtype) << " " << v << " = " << from_storage(x.type.dtype, "tsl_g0[tsl_e]") << ";\n";
    return v;
  };
  // The running maximum moved to `to` (a value of x, or the vector's maximum), the sum rescaled.
  // While the maximum is -inf every value seen was -inf, and its terms exp(-inf - -inf) are NaN
  // where the reference's, taken against the row's (finite) maximum, are 0: the sum restarts
  // at 0 when the maximum leaves -inf, and a thread that saw only -inf adds 0.
  const std::string lowest = literal(di, ni.init(), true);
  auto rescaled = [&](const std::string& from, const std::string& to) {
    return cat("(", from, " == ", lowest, " ? static_cast<", aj, ">(0) : tsl_acc", j, " * tsl::m_exp(static_cast<", aj, ">(", from,
               " - ", to, ")))");
  };
  auto move_max = [&](const std::string& to, const std::string& ind) {
    os_ << ind << "{\n" << ind << "  const " << ai << " tsl_mn = " << combiner_fn(Combiner::max) << "(tsl_m, static_cast<" << ai
        << ">(" << to << "));\n";
    os_ << ind << "  if (tsl_mn != tsl_m) tsl_acc" << j << " = " << rescaled("tsl_m", "tsl_mn") << ";\n";
    os_ << ind << "  tsl_m = tsl_mn;\n" << ind << "}\n";
  };
  // The sum's term at x's value `v` and the running maximum (the sum's body, in f64 for f32 as
  // every reduction's own body).
  auto add_term = [&](const std::string& v, const std::string& ind) {
    const Wide wide(*this);
    std::vector<std::string> values(rj.reads.size());
    values[x_slot] = v;
    values[m_slot] = "tsl_m";
    std::map<const ExprNode*, std::string> memo;
    const std::string t = emit_expr(nj.body(), values, xj, memo, ind);
    os_ << ind << "tsl_acc" << j << " = " << combiner_fn(nj.combiner()) << "(tsl_acc" << j << ", static_cast<" << aj << ">(" << t
        << "));\n";
  };
  emit_row_stream_chunk(r);
  if (vectored) {
    os_ << "      " << storage_type(x.type.dtype) << " tsl_g0[" << vec << "];  // " << g_.tensor(x.tensor).name << "'s vector\n";
    emit_row_vector_load(x, vec, "tsl_g0", "0", row_vector_offset(x, xi, col), "      ");
  }
  os_ << "      " << ai << " tsl_vm = " << literal(di, ni.init(), true) << ";\n";
  os_ << "      #pragma unroll\n      for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
  os_ << "        const long long tsl_col = tsl_col0 + tsl_e; (void)tsl_col;\n        if (tsl_ok) {\n";
  {
    const std::string v = x_value(vectored, "          ");
    os_ << "          tsl_vm = " << combiner_fn(Combiner::max) << "(tsl_vm, static_cast<" << ai << ">(" << v << "));\n";
  }
  os_ << "        }\n      }\n";
  move_max("tsl_vm", "      ");
  os_ << "      #pragma unroll\n      for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
  os_ << "        const long long tsl_col = tsl_col0 + tsl_e; (void)tsl_col;\n        if (tsl_ok) {\n";
  add_term(x_value(vectored, "          "), "          ");
  os_ << "        }\n      }\n    }\n";
  if (r.shifted) {
    emit_row_stream_rest(r);
    const std::string v = x_value(false, "      ");
    move_max(v, "      ");
    add_term(v, "      ");
    os_ << "    }\n";
  }
  os_ << "    " << ai << " tsl_acc" << i << " = tsl_m;\n";
  emit_row_combine(i, ni, r.lanes, r.splits);
  os_ << "    if (tsl_m != tsl_acc" << i << ") tsl_acc" << j << " = " << rescaled("tsl_m", cat("tsl_acc", i)) << ";  // to the row's maximum\n";
  emit_row_combine(j, nj, r.lanes, r.splits);
}

// The streamed row (row_plan.h's file comment): one pass over the row per per-row reduction and per
// stored row node, in group order; each pass loads, a chunk at a time, the vectors of device memory
// that it and the row nodes it reads need, and computes those row nodes per element again.
std::string Emitter::row_kernel_streamed(const std::string& name, const RowPlan& r) {
  const int n = static_cast<int>(r.nodes.size());
  const int vec = r.vec, lanes = r.lanes;
  const std::vector<std::string> rows = emit_row_prologue(name, r);
  if (r.shifted) {
    // The row starts tsl_row * N elements in: its first aligned column, its whole vectors from
    // there, and the columns left over at both ends (fewer than 2 vec, at most the lanes).
    TESSEL_ASSERT(lanes >= 2 * vec, "a shifted row's leftover columns need a lane each");
    os_ << "    const long long tsl_h = (" << vec << "LL - (tsl_row * " << r.n << "LL) % " << vec << "LL) % " << vec << "LL;\n";
    os_ << "    const long long tsl_vectors = (" << r.n << "LL - tsl_h) / " << vec << "LL;\n";
    os_ << "    const long long tsl_rest = " << r.n << "LL - tsl_vectors * " << vec << "LL;\n";
  }
  for (int i = 0; i < n; ++i) {
    const RowNode& rn = r.nodes[i];
    if (rn.kind == RowKind::copy) continue;
    const TeNode& nd = g_.node(rn.node);
    const DType dt = nd.output().dtype;
    const bool reduce = rn.kind == RowKind::per_row && nd.num_reduction() >= 1;
    const bool store = rn.kind == RowKind::row && rn.writes_global;
    if (i == r.online_sum) {
      // Computed in the online pass of r.online_max.
    } else if (i == r.online_max) {
      emit_row_online_pass(r, rows);
    } else if (rn.kind == RowKind::per_row && !reduce) {
      os_ << "    // " << nd.name() << " (per row): " << print_expr(nd.body(), nd.axis_names()) << "\n";
      emit_row_scalar(i, r, rows);
    } else if (reduce || store) {
      // The row nodes this pass recomputes: those `i` reads, and theirs, in group order.
      std::vector<bool> need(n, false);
      need[i] = true;
      for (int j = i; j >= 0; --j)
        if (need[j])
          for (const RowRead& rd : r.nodes[j].reads)
            if (rd.producer >= 0 && r.nodes[rd.producer].kind == RowKind::row) need[rd.producer] = true;
      os_ << "    // pass: " << nd.name() << " (" << (reduce ? "per row" : "row") << "): " << print_expr(nd.body(), nd.axis_names())
          << "\n";
      const std::string at = acc_type(dt);
      if (reduce) os_ << "    " << at << " tsl_acc" << i << " = " << literal(dt, nd.init(), true) << ";\n";
      // One column's values of the needed row nodes at `tsl_col`, folded into the reduction or
      // left in `tsl_u<i>`: vector reads from `array_of`'s arrays at element `tsl_e`, the others
      // read from device memory one element at a time.
      auto element = [&](const std::map<std::pair<int, size_t>, std::string>& array_of, const std::string& ind) {
        for (int j = 0; j <= i; ++j) {
          if (!need[j]) continue;
          const RowNode& rj = r.nodes[j];
          const TeNode& nj = g_.node(rj.node);
          const std::vector<std::string> xj = row_axis_vars(nj, rj.kind, rows);
          // The reduction's own body in f64 for f32, as the register kernel does (Emitter::wide_).
          std::optional<Wide> wide;
          if (j == i && reduce) wide.emplace(*this);
          std::vector<std::string> values(rj.reads.size());
          for (size_t k = 0; k < rj.reads.size(); ++k) {
            const RowRead& rd = rj.reads[k];
            if (rd.producer >= 0) {
              values[k] = r.nodes[rd.producer].kind == RowKind::row ? cat("tsl_u", rd.producer) : cat("tsl_s", rd.producer);
            } else if (auto a = array_of.find({j, k}); a != array_of.end()) {
              values[k] = fresh("in");
              os_ << ind << "const " << compute_type(rd.type.dtype) << " " << values[k] << " = "
                  << from_storage(rd.type.dtype, cat(a->second, "[tsl_e]")) << ";\n";
            } else {
              values[k] = emit_row_global_read(nj, rd, xj, ind);
            }
          }
          std::map<const ExprNode*, std::string> memo;
          const std::string v = emit_expr(nj.body(), values, xj, memo, ind);
          if (j == i && reduce)
            os_ << ind << "tsl_acc" << i << " = " << combiner_fn(nd.combiner()) << "(tsl_acc" << i << ", static_cast<" << at << ">("
                << v << "));\n";
          else
            os_ << ind << "const " << compute_type(nj.output().dtype) << " tsl_u" << j << " = " << round_to_dtype(nj.output().dtype, v)
                << ";\n";
        }
      };
      emit_row_stream_chunk(r);
      // The chunk's vectors of device memory, each loaded once for the pass.
      std::map<std::string, std::string> arrays;
      std::map<std::pair<int, size_t>, std::string> array_of;  // (node, input) -> array
      for (int j = 0; j <= i; ++j) {
        if (!need[j]) continue;
        const TeNode& nj = g_.node(r.nodes[j].node);
        const int col = row_column_axis(nj, r.nodes[j].kind);
        const std::vector<std::string> xj = row_axis_vars(nj, r.nodes[j].kind, rows);
        for (size_t k = 0; k < r.nodes[j].reads.size(); ++k) {
          const RowRead& rd = r.nodes[j].reads[k];
          if (rd.producer >= 0) continue;
          if (r.shifted ? !row_shifted_access(nj, rd.map, rd.type, col, r.row_extents, r.n)
                        : !row_vector_access(nj, rd.map, rd.type, col, vec))
            continue;
          const std::string offset = row_vector_offset(rd, xj, col);
          const std::string key = cat(input_param(rd.tensor), "|", offset);
          auto it = arrays.find(key);
          if (it == arrays.end()) {
            it = arrays.emplace(key, cat("tsl_g", arrays.size())).first;
            os_ << "      " << storage_type(rd.type.dtype) << " " << it->second << "[" << vec << "];  // " << g_.tensor(rd.tensor).name
                << "'s vector\n";
            emit_row_vector_load(rd, vec, it->second, "0", offset, "      ");
          }
          array_of[{j, k}] = it->second;
        }
      }
      if (store) os_ << "      " << storage_type(dt) << " tsl_out[" << vec << "];\n";
      os_ << "      #pragma unroll\n      for (int tsl_e = 0; tsl_e < " << vec << "; ++tsl_e) {\n";
      os_ << "        const long long tsl_col = tsl_col0 + tsl_e; (void)tsl_col;\n";
      os_ << "        if (tsl_ok) {\n";
      element(array_of, "          ");
      if (store) os_ << "          tsl_out[tsl_e] = " << to_storage(dt, cat("tsl_u", i)) << ";\n";
      os_ << "        }\n      }\n";
      if (store) {
        os_ << "      if (tsl_ok) {\n";
        emit_row_store(rn, r, "        ");
        os_ << "      }\n";
      }
      os_ << "    }\n";
      if (r.shifted) {
        emit_row_stream_rest(r);
        element({}, "      ");
        if (store)
          os_ << "      g_out" << output_param(g_.node_output(rn.node)) << "[tsl_row * " << r.n << "LL + tsl_col] = "
              << to_storage(dt, cat("tsl_u", i)) << ";\n";
        os_ << "    }\n";
      }
      if (reduce) emit_row_combine(i, nd, lanes, r.splits);
    }
    if (rn.kind == RowKind::per_row && rn.writes_global)
      os_ << "    if (tsl_active && tsl_lane == 0) g_out" << output_param(g_.node_output(rn.node)) << "[tsl_row] = "
          << to_storage(dt, cat("tsl_s", i)) << ";\n";
  }
  os_ << "  }\n}\n";
  return os_.str();
}

// The serial reduction of a row node with reduction axes (attention's scores as a row of Q K^T),
// into `tsl_r` (accumulator type): nested loops over the reduction axes; the last one steps by
// vectors when some read of device memory walks it contiguously (16 bytes of the narrowest such
// dtype, halved until it divides the extent), those reads loaded a vector at a time.
template <class Inputs>
void Emitter::emit_row_reduction(const TeNode& nd, const std::vector<RowRead>& reads, const std::vector<std::string>& x,
                                 const Inputs& inputs) {
  const Wide wide(*this);
  const DType dt = nd.output().dtype;
  const std::string at = acc_type(dt), comb = combiner_fn(nd.combiner());
  const int ns = nd.num_spatial(), na = nd.num_axes(), last = na - 1;
  const int64_t extent = nd.axes()[last].extent;
  int min_bytes = kRowVectorBytes;
  for (const RowRead& rd : reads)
    if (rd.producer < 0 && row_vector_access(nd, rd.map, rd.type, last, 1)) min_bytes = std::min(min_bytes, dtype_bytes(rd.type.dtype));
  int v = std::max(1, kRowVectorBytes / min_bytes);
  while (v > 1 && extent % v != 0) v /= 2;
  std::vector<std::string> inner(reads.size());
  std::vector<bool> vectored(reads.size(), false);
  for (size_t k = 0; k < reads.size(); ++k)
    vectored[k] = v > 1 && reads[k].producer < 0 && row_vector_access(nd, reads[k].map, reads[k].type, last, v);
  std::string ind = "          ";
  os_ << ind << at << " tsl_r = " << literal(dt, nd.init(), true) << ";\n";
  for (int a = ns; a < last; ++a) {
    os_ << ind << "for (long long tsl_k" << a << " = 0; tsl_k" << a << " < " << nd.axes()[a].extent << "LL; ++tsl_k" << a << ") {\n";
    ind += "  ";
  }
  const bool vectorize = std::find(vectored.begin(), vectored.end(), true) != vectored.end();
  std::vector<std::string> xs = x;
  if (!vectorize) {
    os_ << ind << "for (long long tsl_k" << last << " = 0; tsl_k" << last << " < " << extent << "LL; ++tsl_k" << last << ") {\n";
    ind += "  ";
  } else {
    os_ << ind << "for (long long tsl_k" << last << " = 0; tsl_k" << last << " < " << extent << "LL; tsl_k" << last << " += " << v
        << "LL) {\n";
    ind += "  ";
    for (size_t k = 0; k < reads.size(); ++k) {
      if (!vectored[k]) continue;
      const std::vector<int64_t> strides = row_major_strides(reads[k].type.shape);
      std::string off = "0LL";
      for (int q = 0; q < reads[k].type.rank(); ++q) off += cat(" + (", affine_text(reads[k].map.result(q), x), ") * ", strides[q], "LL");
      const std::string st = storage_type(reads[k].type.dtype);
      const std::string arr = fresh("tsl_w");
      os_ << ind << st << " " << arr << "[" << v << "];\n";
      os_ << ind << "tsl::row_load<" << st << ", " << v << ">(" << arr << ", g_in" << input_param(reads[k].tensor) << " + (" << off << "));\n";
      inner[k] = cat(arr, "[tsl_f]");
    }
    os_ << ind << "#pragma unroll\n" << ind << "for (int tsl_f = 0; tsl_f < " << v << "; ++tsl_f) {\n";
    ind += "  ";
    os_ << ind << "const long long tsl_kf = tsl_k" << last << " + tsl_f;\n";
    xs[last] = "tsl_kf";
  }
  const std::vector<std::string> values = inputs(ind, xs, inner);
  std::map<const ExprNode*, std::string> memo;
  const std::string val = emit_expr(nd.body(), values, xs, memo, ind);
  os_ << ind << "tsl_r = " << comb << "(tsl_r, static_cast<" << at << ">(" << val << "));\n";
  for (int a = ns; a <= last + (vectorize ? 1 : 0); ++a) {
    ind.resize(ind.size() - 2);
    os_ << ind << "}\n";
  }
}

// A read of device memory at the node's point x (any affine map, pad value out of bounds).
std::string Emitter::emit_row_global_read(const TeNode& nd, const RowRead& rd, const std::vector<std::string>& x,
                                          const std::string& ind) {
  const DType dt = rd.type.dtype;
  const TensorId t = rd.tensor;
  const int rank = rd.type.rank();
  const std::vector<int64_t> extents = nd.extents();
  const std::vector<int64_t> strides = row_major_strides(rd.type.shape);
  std::string off = "0LL", inside;
  for (int q = 0; q < rank; ++q) {
    const AffineExpr& row = rd.map.result(q);
    const std::string idx = fresh("i");
    os_ << ind << "const long long " << idx << " = " << affine_text(row, x) << ";\n";
    off += cat(" + ", idx, " * ", strides[q], "LL");
    if (row.min_over(extents) < 0 || row.max_over(extents) >= rd.type.shape[q])
      inside += cat(inside.empty() ? "" : " && ", idx, " >= 0 && ", idx, " < ", rd.type.shape[q], "LL");
  }
  if (g_.tensor(t).type.num_elements() == 0) inside = "false";
  const std::string v = fresh("in");
  if (inside.empty()) {
    os_ << ind << "const " << compute_type(dt) << " " << v << " = " << from_storage(dt, cat("g_in", input_param(t), "[", off, "]"))
        << ";\n";
  } else {
    os_ << ind << compute_type(dt) << " " << v << " = " << literal(dt, rd.pad) << ";\n";
    os_ << ind << "if (" << inside << ") " << v << " = " << from_storage(dt, cat("g_in", input_param(t), "[", off, "]")) << ";\n";
  }
  return v;
}


}  // namespace tessel::cuda::emitter
