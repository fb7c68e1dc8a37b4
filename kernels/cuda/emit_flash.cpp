// The streamed attention kernel (attention_plan.h; see emitter.h).
#include "kernels/cuda/emitter.h"

#include <algorithm>

namespace tessel::cuda::emitter {

// ---- the streamed attention kernel (attention_plan.h) ---------------------------------------------

// Layout: the parameters; the block's batch point and query rows; the score function (S's value is
// the dot product the kernel passes, rounded to S's dtype; the score steps' value functions are
// the generic ones, reading their side inputs from device memory); device/flash.cuh's main loop;
// the store of O (divided by the row sums, rounded to O's dtype).
namespace {
// Whether the plain chunks have their own score function is known only once it is emitted, after
// the kernel's typedef: the typedef names this token, replaced at the end.
constexpr const char* kPlainToken = "TSL_PLAIN_CHUNKS";
}  // namespace

std::string Emitter::flash_kernel(const std::string& name, const AttentionPlan& a) {
  const StreamedAttention& sh = a.shape;
  const TeNode& o = g_.node(a.pattern.out);
  const int ns = o.num_spatial();
  const int spos = plan_.position(a.pattern.scores);
  const int xpos = plan_.position(a.pattern.logits());
  const DType odt = o.output().dtype;
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  std::istringstream plan_text(print_group_plan(g_, plan_));
  for (std::string line; std::getline(plan_text, line);) os_ << "//   " << line << "\n";
  os_ << "//   " << print_attention_plan(g_, a) << "\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  const char* bf16 = a.dtype == DType::bf16 ? "true" : "false";
  if (a.warpgroup)
    os_ << "typedef tsl::flash::WarpgroupAttention<" << a.d_tile << ", " << a.dv_tile << ", " << a.chunk << ", " << a.stages
        << ", " << bf16 << ", "
        << sh.queries << ", " << sh.keys << ", " << a.q_batch.size() << ", " << a.k_batch.size() << ", " << a.v_batch.size()
        << ", " << (a.exact_exponent ? "true" : "false") << ", " << kPlainToken << "> TslAttn;\n";
  else
    os_ << "typedef tsl::flash::StreamedAttention<" << a.rows << ", " << a.chunk << ", " << a.d_tile << ", " << a.dv_tile << ", "
        << a.stages << ", " << bf16 << ", " << a.queries() << ", " << sh.keys << ", " << a.q.ld << "LL, " << a.k.ld << "LL, "
        << a.v.ld << "LL, " << sh.d << ", " << sh.dv << ", " << (a.exact_exponent ? "true" : "false") << ", " << kPlainToken
        << ", " << a.key_split << "> TslAttn;\n";
  // The host planned the launch (and the tensor maps' boxes) with these (attention_plan.cpp).
  os_ << "static_assert(TslAttn::kThreads == " << plan_.threads << " && TslAttn::kSmemBytes == " << a.smem_bytes;
  if (a.warpgroup) os_ << " && TslAttn::BR == " << a.rows << " && TslAttn::BC == " << a.chunk;
  os_ << ", \"the streamed attention plan and device/flash.cuh disagree\");\n";
  os_ << "static_assert(tsl::flash::kQFragmentsMaxHead == " << kStreamedQFragmentsMaxHead
      << ", \"cost_model/group_footprint.h and device/flash.cuh disagree on the heads whose Q stays in registers\");\n";
  const int64_t chunks = (sh.keys + a.chunk - 1) / a.chunk;
  if (a.key_ranges) {
    // Per block of query rows, most chunks first: the row tile and its key chunks [first, end).
    const AttentionKeyRanges& r = *a.key_ranges;
    std::vector<int> order(r.first.size());
    for (size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return r.end[x] - r.first[x] > r.end[y] - r.first[y]; });
    os_ << "// The key chunks each block of " << a.rows << " query rows visits (the others hold only keys the mask excludes),\n"
        << "// the blocks with the most first: row tile, first and end chunk, first and end chunk where the score steps\n"
        << "// reading a side input are identities (scored without them).\n";
    os_ << "__device__ const int tsl_key_chunks[" << 5 * order.size() << "] = {";
    for (size_t j = 0; j < order.size(); ++j)
      os_ << (j ? ", " : "") << (j % 6 == 0 ? "\n    " : "") << order[j] << ", " << r.first[order[j]] << ", " << r.end[order[j]] << ", "
          << r.plain_first[order[j]] << ", " << r.plain_end[order[j]];
    os_ << "};\n";
  }
  emit_signature(name, 1);
  os_ << "  extern __shared__ __align__(16) unsigned char tsl_smem[];\n";
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";
  // The block's index among those of whole key ranges (a cluster of a split shares one).
  const std::string blk = a.splits > 1 ? cat("(blockIdx.x / ", a.splits, "LL)") : "blockIdx.x";
  if (a.key_ranges) {
    const int64_t batch = a.batch();
    os_ << "  long long tsl_batch = " << blk << " % " << batch << "LL;\n";
    os_ << "  const int* const tsl_range = tsl_key_chunks + 5 * (" << blk << " / " << batch << "LL);\n";
    os_ << "  const int tsl_m0 = tsl_range[0] * " << a.rows << ";\n";
    os_ << "  int tsl_c0 = tsl_range[1], tsl_c1 = tsl_range[2];\n";
    os_ << "  const int tsl_p0 = tsl_range[3], tsl_p1 = tsl_range[4];\n";
  } else {
    os_ << "  long long tsl_batch = " << blk << " / " << a.tiles_m << "LL;\n";
    os_ << "  const int tsl_m0 = static_cast<int>((" << blk << " % " << a.tiles_m << "LL) * " << a.rows << "LL);\n";
    os_ << "  int tsl_c0 = 0, tsl_c1 = " << chunks << ";\n";
    os_ << "  const int tsl_p0 = 0, tsl_p1 = 0;\n";
  }
  if (a.splits > 1) {
    // Rank r of the cluster takes chunks [c0 + (c1 - c0) r / S, c0 + (c1 - c0) (r + 1) / S).
    os_ << "  {  // the keys split over the cluster's " << a.splits << " blocks\n";
    os_ << "    const int tsl_part = static_cast<int>(TslAttn::cluster_rank()), tsl_n = tsl_c1 - tsl_c0;\n";
    os_ << "    tsl_c1 = tsl_c0 + tsl_n * (tsl_part + 1) / " << a.splits << ";\n";
    os_ << "    tsl_c0 = tsl_c0 + tsl_n * tsl_part / " << a.splits << ";\n";
    os_ << "  }\n";
  }
  os_ << "  const long long tsl_batch_index = tsl_batch;\n";
  emit_batch_point(a.batch_axes, a.batch_extents);
  auto batch_offset = [&](const std::vector<int64_t>& strides) { return batch_offset_expr(a.batch_axes, strides); };
  if (a.warpgroup) {
    // The block's coordinates in the tensor maps' batch dimensions.
    for (const auto& [var, dims] : {std::pair<const char*, const std::vector<int>*>{"tsl_qb", &a.q_batch}, {"tsl_kb", &a.k_batch},
                                    {"tsl_vb", &a.v_batch}}) {
      os_ << "  const int " << var << "[4] = {";
      for (int b : *dims) os_ << "static_cast<int>(tsl_x" << a.batch_axes[b] << "), ";
      os_ << "0};\n";
    }
  } else {
    for (const auto& [var, op] : {std::pair<const char*, const MmaOperand*>{"tsl_q", &a.q}, {"tsl_k", &a.k}, {"tsl_v", &a.v}})
      os_ << "  const unsigned short* const " << var << " = g_in" << input_param(op->tensor) << " + ("
          << batch_offset(op->batch_strides) << ")" << (op->offset ? cat(" + ", op->offset, "LL") : "") << ";  // "
          << g_.tensor(op->tensor).name << "\n";
  }
  // The score function: S's value function returns the dot product being scored.
  std::string params;
  for (int q = 0; q < ns; ++q) params += cat(q ? ", " : "", "long long x", q);
  const TeNode& sn = node(spos);
  os_ << "  float tsl_acc = 0.0f;  // the dot product of the score being computed\n";
  os_ << "    // " << sn.name() << ": " << print_expr(sn.body(), sn.axis_names()) << ", summed on the tensor cores\n";
  // On the Hopper kernel the dot product goes through an add before its rounding: a conversion
  // reading wgmma accumulator registers directly makes ptxas serialize the kernel's wgmmas (its
  // warning C7514). x + 0 is x, except that -0 becomes +0.
  os_ << "    auto val" << spos << " = [&](" << params << ") -> float { return "
      << round_to_dtype(sn.output().dtype, a.warpgroup ? "tsl_acc + 0.0f" : "tsl_acc") << "; };\n";
  for (NodeId n : a.pattern.score_epilogue) {
    hoist_invariant_reads(plan_.position(n));
    emit_value_function(plan_.position(n));
  }
  std::string args;
  for (int q = 0; q < ns - 2; ++q) args += cat("tsl_x", q, ", ");
  os_ << "  auto tsl_score = [&](float tsl_dot, int tsl_dm, int tsl_n) -> float {\n";
  // A row past the end (its block is the last, and not full) is scored as the last row, without a
  // branch per score; it is not stored.
  const int64_t rows_all = a.queries();
  const std::string row = a.fold > 1 ? "tsl_r" : "tsl_xm";
  if (rows_all % a.rows == 0) os_ << "    const long long " << row << " = tsl_m0 + tsl_dm;\n";
  else
    os_ << "    const long long " << row << " = tsl_m0 + tsl_dm < " << rows_all << "LL ? tsl_m0 + tsl_dm : " << rows_all - 1
        << "LL;  // a row past the end (not stored) as the last one\n";
  if (a.fold > 1)  // row r of the packed heads: head r / M of the group, query r % M
    os_ << "    const long long tsl_x" << a.fold_axis << " = tsl_r / " << sh.queries << "LL, tsl_xm = tsl_r % " << sh.queries
        << "LL;\n";
  os_ << "    tsl_acc = tsl_dot;\n";
  os_ << "    return val" << xpos << "(" << args << "tsl_xm, static_cast<long long>(tsl_n));\n  };\n";
  // The kernel scores two adjacent keys at a time (tsl_score2): packed when the score steps allow
  // it, else tsl_score twice.
  if (const std::string why = packed_score_pair(a, spos); !why.empty()) {
    os_ << "  // scores one at a time: " << why << "\n";
    os_ << "  auto tsl_score2 = [&](float tsl_d0, float tsl_d1, int tsl_dm, int tsl_n, float& tsl_s0, float& tsl_s1) {\n";
    os_ << "    tsl_s0 = tsl_score(tsl_d0, tsl_dm, tsl_n);\n";
    os_ << "    tsl_s1 = tsl_score(tsl_d1, tsl_dm, tsl_n + 1);\n  };\n";
  }
  // The plain chunks' function: the score steps that are identities there left out, when the rest
  // packs (the gain is the packed pair: no side input read per score).
  bool plain = false;
  if (a.key_ranges && !a.key_ranges->plain_steps.empty())
    for (size_t b = 0; b < a.key_ranges->plain_first.size(); ++b) plain |= a.key_ranges->plain_end[b] > a.key_ranges->plain_first[b];
  if (plain) {
    if (const std::string why = packed_score_pair(a, spos, a.key_ranges->plain_steps, "tsl_score2p"); !why.empty()) {
      os_ << "  // the plain chunks are scored like the others: " << why << "\n";
      plain = false;
    }
  }
  if (!plain) os_ << "  auto& tsl_score2p = tsl_score2;\n";
  // Where O's rows go: O's own domain is row-major (batch.., m, dv), the batch point's rows
  // contiguous; through output copies (the heads' merge) each coordinate has the stride they
  // give it, dv's still 1 (store_strides), and a row of a folded query group is (head, query).
  std::vector<int64_t> own(ns, 1);
  for (int i = ns - 2; i >= 0; --i) own[i] = own[i + 1] * o.axes()[i + 1].extent;
  TESSEL_ASSERT(static_cast<int>(a.store_strides.size()) == ns && a.store_strides[ns - 1] == 1, "O's last axis is stored innermost");
  std::string row_offset;  // of row tsl_r of the batch point
  if (a.store_strides == own) {
    os_ << "  unsigned short* const tsl_o = g_out0 + (tsl_batch_index * " << rows_all << "LL + tsl_m0) * " << sh.dv << "LL;\n";
    row_offset = cat("static_cast<long long>(tsl_dm) * ", sh.dv, "LL");
  } else {
    std::vector<int64_t> batch_strides;
    for (int b : a.batch_axes) batch_strides.push_back(a.store_strides[b]);
    std::string strides;
    for (int64_t st : a.store_strides) strides += cat(strides.empty() ? "" : ", ", st);
    os_ << "  // O stored through its output copies: its axes' strides " << strides << "\n";
    os_ << "  unsigned short* const tsl_o = g_out0 + (" << batch_offset(batch_strides) << ");\n";
    const int64_t m_stride = a.store_strides[ns - 2];
    row_offset = a.fold > 1 ? cat("(static_cast<long long>(tsl_m0 + tsl_dm) / ", sh.queries, "LL) * ", a.store_strides[a.fold_axis],
                                  "LL + (static_cast<long long>(tsl_m0 + tsl_dm) % ", sh.queries, "LL) * ", m_stride, "LL")
                            : cat("static_cast<long long>(tsl_m0 + tsl_dm) * ", m_stride, "LL");
  }
  os_ << "  auto tsl_store = [&](int tsl_dm, int tsl_dn, float tsl_v0, float tsl_v1) {\n";
  os_ << "    if (tsl_m0 + tsl_dm >= " << rows_all << ") return;\n";
  if (a.dv_tile > sh.dv) os_ << "    if (tsl_dn >= " << sh.dv << ") return;  // a column of the padded head tile\n";
  os_ << "    const unsigned tsl_s0 = " << to_storage(odt, round_to_dtype(odt, "tsl_v0")) << ";\n";
  os_ << "    const unsigned tsl_s1 = " << to_storage(odt, round_to_dtype(odt, "tsl_v1")) << ";\n";
  os_ << "    *reinterpret_cast<unsigned*>(tsl_o + " << row_offset << " + tsl_dn) = tsl_s0 | (tsl_s1 << 16);\n";
  os_ << "  };\n";
  os_ << "  TslAttn tsl_attn;\n";
  if (a.warpgroup) {
    os_ << "  tsl_attn.run(tsl_smem, &tsl_map0, &tsl_map1, &tsl_map2, tsl_m0, tsl_qb, tsl_kb, tsl_vb, tsl_c0, tsl_c1, tsl_score, "
           "tsl_score2, tsl_p0, tsl_p1, tsl_score2p, tsl_store);\n";
  } else {
    os_ << "  tsl_attn.run(tsl_smem, tsl_q, tsl_k, tsl_v, tsl_m0, tsl_c0, tsl_c1, tsl_score, tsl_score2, tsl_p0, tsl_p1, tsl_score2p);\n";
    if (a.splits > 1) os_ << "  if (!tsl_attn.combine_cluster<" << a.splits << ">(tsl_smem)) return;  // rank 0 holds the merged rows\n";
    os_ << "  tsl_attn.for_each_pair(tsl_store);\n";
  }
  os_ << "}\n";
  std::string source = os_.str();
  for (size_t at = source.find(kPlainToken); at != std::string::npos; at = source.find(kPlainToken, at))
    source.replace(at, std::string(kPlainToken).size(), plain ? "true" : "false");
  return source;
}

// The score function of two horizontally adjacent scores (keys n and n + 1 of one row) in packed
// f16x2 (bf16x2) registers: S's two dot products rounded to S's dtype by one conversion, then each
// score step as one packed instruction. Exact: a step qualifies when its body is one product, sum
// or difference of the previous step's value at the same point and a scalar of the same 16-bit
// dtype (a read whose index does not depend on the point, hoisted; or a constant the dtype
// represents), so its value -- the exact f32 result of the two 16-bit operands (sums: at least as
// close), rounded once to the dtype -- is what the packed instruction rounds to nearest even.
// Per pair of scores: one conversion, one instruction per step and two widenings, where the
// scalar function rounds and widens each score once per step. Emits tsl_score2 and returns "",
// or returns why not (a mask read per point, a division, an f32 step, ...) and emits nothing.
std::string Emitter::packed_score_pair(const AttentionPlan& a, int spos, const std::vector<NodeId>& skip, const char* name) {
  const DType dt = node(spos).output().dtype;
  if (dt != DType::f16 && dt != DType::bf16) return cat("S is ", dtype_name(dt));
  const char* bf16 = dt == DType::bf16 ? "true" : "false";
  std::ostringstream decls, steps;
  int prev = spos;
  for (NodeId n : a.pattern.score_epilogue) {
    const int i = plan_.position(n);
    const TeNode& nd = node(i);
    if (std::find(skip.begin(), skip.end(), n) != skip.end()) {  // an identity where this function is used
      steps << "    // " << nd.name() << ": an identity here\n";
      prev = i;
      continue;
    }
    if (nd.output().dtype != dt) return cat("score step '", nd.name(), "' is ", dtype_name(nd.output().dtype));
    const Expr& body = nd.body();
    const ExprOp op = body.op();
    if (op != ExprOp::mul && op != ExprOp::add && op != ExprOp::sub)
      return cat("score step '", nd.name(), "' is not one product, sum or difference: ", print_expr(body, nd.axis_names()));
    std::string operands[2];
    bool chained = false;
    for (int side = 0; side < 2; ++side) {
      const Expr& e = body.operands()[side];
      if (e.dtype() != dt) return cat("an operand of score step '", nd.name(), "' is ", dtype_name(e.dtype()));
      if (e.op() == ExprOp::constant) {
        if (round_to(dt, e.value()) != e.value())
          return cat("the constant ", e.value(), " of score step '", nd.name(), "' is not a ", dtype_name(dt));
        operands[side] = fresh("tsl_pk");
        const std::string v = float_literal(e.value(), "float");
        decls << "  const unsigned " << operands[side] << " = tsl::flash::pack2<" << bf16 << ">(" << v << ", " << v << ");\n";
        continue;
      }
      if (e.op() != ExprOp::input) return cat("an operand of score step '", nd.name(), "' is not a read or a constant");
      const int k = e.index();
      const Access& acc = nd.inputs()[k];
      const NodeId producer = g_.producer(g_.node_inputs(n)[k]);
      if (producer == plan_.nodes[prev].node) {
        bool identity = !acc.is_gather() && acc.map.num_results() == nd.num_spatial() && nd.num_reduction() == 0;
        for (int r = 0; identity && r < nd.num_spatial(); ++r) {
          const AffineExpr& row = acc.map.result(r);
          identity = row.offset == 0;
          for (int x = 0; identity && x < nd.num_axes(); ++x) identity = row.coeffs[x] == (x == r ? 1 : 0);
        }
        if (!identity) return cat("score step '", nd.name(), "' reads the previous step at another point");
        if (chained) return cat("score step '", nd.name(), "' reads the previous step twice");
        operands[side] = "tsl_h";
        chained = true;
        continue;
      }
      auto h = hoisted_.find({i, k});
      if (h == hoisted_.end() || acc.type.dtype != dt)
        return cat("score step '", nd.name(), "' reads '", g_.tensor(g_.node_inputs(n)[k]).name, "' per point");
      operands[side] = fresh("tsl_pk");
      decls << "  const unsigned " << operands[side] << " = tsl::flash::pack2<" << bf16 << ">(" << h->second << ", " << h->second
            << ");\n";
    }
    if (!chained) return cat("score step '", nd.name(), "' does not read the previous step");
    const char* fn = op == ExprOp::mul ? "mul2" : op == ExprOp::add ? "add2" : "sub2";
    steps << "    tsl_h = tsl::flash::" << fn << "<" << bf16 << ">(" << operands[0] << ", " << operands[1] << ");  // " << nd.name()
          << ": " << print_expr(body, nd.axis_names()) << "\n";
    prev = i;
  }
  os_ << "  // scores two at a time, in packed " << dtype_name(dt) << "x2 registers (each step rounds once, as its node)\n";
  os_ << decls.str();
  os_ << "  auto " << name << " = [&](float tsl_d0, float tsl_d1, int tsl_dm, int tsl_n, float& tsl_s0, float& tsl_s1) {\n";
  os_ << "    (void)tsl_dm; (void)tsl_n;\n";
  // (The add keeps ptxas from serializing the wgmmas, as in val<S> above.)
  const std::string d0 = a.warpgroup ? "tsl_d0 + 0.0f" : "tsl_d0", d1 = a.warpgroup ? "tsl_d1 + 0.0f" : "tsl_d1";
  os_ << "    unsigned tsl_h = tsl::flash::pack2<" << bf16 << ">(" << d0 << ", " << d1 << ");  // " << node(spos).name() << "\n";
  os_ << steps.str();
  os_ << "    tsl::flash::unpack2<" << bf16 << ">(tsl_h, tsl_s0, tsl_s1);\n  };\n";
  return "";
}


}  // namespace tessel::cuda::emitter
