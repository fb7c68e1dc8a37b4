// The tiled transpose kernel (transpose_plan.h; see emitter.h).
#include "kernels/cuda/emitter.h"

namespace tessel::cuda::emitter {

// One block per tile of tile x tile elements of (a, b) at one batch point: threads read the tile
// along b (the input's contiguous axis), `tile` consecutive elements per warp and row, into
// shared memory padded by one column (no bank conflicts when read across), then write it along a
// (the output's contiguous axis). Elements outside the extents are neither read nor written.
std::string Emitter::transpose_kernel(const std::string& name, const TransposePlan& p) {
  const TensorInfo& in = g_.tensor(p.input);
  const std::string st = storage_type(in.type.dtype);
  const int t = p.tile, rows = t / p.rows_per_thread;
  os_ << "// Tessel generated kernel for " << spec_.name << " (" << spec_.target.arch << ").\n";
  os_ << "//   " << print_transpose_plan(p) << "\n";
  os_ << "//     " << g_.node(p.node).name() << ": sink\n";
  os_ << "#define TSL_WARP_MASK 0x" << std::hex << (plan_.warp == 32 ? 0xffffffffu : ((1u << plan_.warp) - 1u)) << std::dec
      << "u\n";
  os_ << device_library_source() << "\n";
  emit_signature(name, 0);
  os_ << "  (void)tsl_scratch; (void)tsl_status;\n";
  os_ << "  __shared__ " << st << " tsl_tile[" << t << "][" << t + 1 << "];\n";
  os_ << "  long long tsl_q = blockIdx.x;\n";
  os_ << "  const long long tsl_a0 = (tsl_q % " << p.tiles_a << "LL) * " << t << "LL; tsl_q /= " << p.tiles_a << "LL;\n";
  os_ << "  const long long tsl_b0 = (tsl_q % " << p.tiles_b << "LL) * " << t << "LL; tsl_q /= " << p.tiles_b << "LL;\n";
  os_ << "  long long tsl_in = 0, tsl_out = 0;\n";
  for (auto it = p.batch.rbegin(); it != p.batch.rend(); ++it) {
    os_ << "  { const long long c = tsl_q % " << it->extent << "LL; tsl_q /= " << it->extent << "LL; tsl_in += c * " << it->in_stride
        << "LL; tsl_out += c * " << it->out_stride << "LL; }\n";
  }
  os_ << "  const int tsl_tx = threadIdx.x % " << t << ", tsl_ty = threadIdx.x / " << t << ";\n";
  os_ << "  #pragma unroll\n";
  os_ << "  for (int tsl_r = 0; tsl_r < " << t << "; tsl_r += " << rows << ") {\n";
  os_ << "    const long long a = tsl_a0 + tsl_ty + tsl_r, b = tsl_b0 + tsl_tx;\n";
  os_ << "    if (a < " << p.a.extent << "LL && b < " << p.b.extent << "LL) tsl_tile[tsl_ty + tsl_r][tsl_tx] = g_in"
      << input_param(p.input) << "[tsl_in + a * " << p.a.in_stride << "LL + b];\n";
  os_ << "  }\n";
  os_ << "  __syncthreads();\n";
  os_ << "  #pragma unroll\n";
  os_ << "  for (int tsl_r = 0; tsl_r < " << t << "; tsl_r += " << rows << ") {\n";
  os_ << "    const long long b = tsl_b0 + tsl_ty + tsl_r, a = tsl_a0 + tsl_tx;\n";
  os_ << "    if (a < " << p.a.extent << "LL && b < " << p.b.extent << "LL) g_out0[tsl_out + b * " << p.b.out_stride
      << "LL + a] = tsl_tile[tsl_tx][tsl_ty + tsl_r];\n";
  os_ << "  }\n}\n";
  return os_.str();
}

}  // namespace tessel::cuda::emitter
