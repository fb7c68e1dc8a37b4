// The vector kernel of elementwise groups (vector_plan.h; see emitter.h).
#include "kernels/cuda/emitter.h"

#include <algorithm>

namespace tessel::cuda::emitter {

// ---- the vector kernel (vector_plan.h) -----------------------------------------------------------
//
// A grid-stride loop over vectors of `vec` consecutive elements of the sink: the point of the
// vector's first element, the vector loads of the reads that walk the last axis, then per element
// (unrolled) every node's value in group order (in-group reads are the producer's value at the same
// element, other reads of device memory scalar with the generic bounds and pad), and one vector
// store of the sink.
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
  os_ << "  for (long long tsl_v = static_cast<long long>(blockIdx.x) * " << p.threads << "LL + threadIdx.x; tsl_v < " << vectors
      << "LL; tsl_v += static_cast<long long>(gridDim.x) * " << p.threads << "LL) {\n";
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
      std::string off = "0LL";
      for (int q = 0; q < r.read.type.rank(); ++q) off += cat(" + (", affine_text(r.read.map.result(q), base), ") * ", strides[q], "LL");
      const std::string reg = fresh("tsl_g");
      const std::string st = storage_type(r.read.type.dtype);
      os_ << "    " << st << " " << reg << "[" << vec << "];  // " << g_.tensor(r.read.tensor).name << "\n";
      os_ << "    tsl::row_load<" << st << ", " << vec << ">(" << reg << ", g_in" << input_param(r.read.tensor) << " + (" << off
          << "));\n";
      vregs[{i, static_cast<int>(k)}] = reg;
    }
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
    os_ << ind << "// " << nd.name() << ": " << print_expr(nd.body(), nd.axis_names()) << "\n";
    std::vector<std::string> inputs(p.reads[i].size());
    for (size_t k = 0; k < p.reads[i].size(); ++k) {
      const VectorRead& r = p.reads[i][k];
      if (r.producer >= 0) {
        inputs[k] = value[r.producer];
      } else if (r.vector) {
        inputs[k] = fresh("in");
        os_ << ind << "const " << compute_type(r.read.type.dtype) << " " << inputs[k] << " = "
            << from_storage(r.read.type.dtype, cat(vregs.at({i, static_cast<int>(k)}), "[tsl_e]")) << ";\n";
      } else {
        inputs[k] = emit_row_global_read(nd, r.read, x, ind);
      }
    }
    std::map<const ExprNode*, std::string> memo;
    const std::string v = emit_expr(nd.body(), inputs, x, memo, ind);
    value[i] = fresh("v");
    os_ << ind << "const " << compute_type(dt) << " " << value[i] << " = " << round_to_dtype(dt, v) << ";\n";
  }
  os_ << ind << "tsl_out[tsl_e] = " << to_storage(sdt, value[n - 1]) << ";\n";
  os_ << "    }\n";
  os_ << "    tsl::row_store<" << sst << ", " << vec << ">(g_out0 + tsl_first, tsl_out);\n";
  os_ << "  }\n}\n";
  return os_.str();
}


}  // namespace tessel::cuda::emitter
