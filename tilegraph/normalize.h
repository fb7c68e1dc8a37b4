// The normalize stage (DESIGN.md, "Pipeline"): rewrites an imported model into the form the
// kernel families are fast on, before it is lowered for scheduling. Every rewrite keeps what the
// model computes (up to the rounding of folded weights in their dtype); tests check each against
// the reference interpreter on the model as imported, and compile()'s check does too.
//
//   0. The data movement around attention that exporters leave (normalize_views.h): scalar
//      elementwise ops moved before a Transpose, chains of view ops (Reshape, Transpose, Squeeze,
//      Unsqueeze, Flatten, a Gather of one constant index) rewritten as one strided view in
//      canonical form, and MatMul reading a Transpose of its B directly (attribute transB).
//      0d. An erf GELU written out -- Div by sqrt(2) (or Mul by its inverse), Erf, Add 1, Mul by
//      x, Mul by 0.5 (ConvNeXt-T and ViT from torchvision) -- becomes one Gelu op, computed in f32
//      and rounded once (the ops rounded each intermediate), its intermediates read by nothing
//      else.
//   1. BatchNormalization folded into the convolution before it (inference mode, constant
//      parameters, the convolution's output read by nothing else): W' = W * s per output channel
//      and b' = (b - mean) * s + beta with s = gamma / sqrt(var + epsilon), computed once here.
//   2. Channels-last (when asked: the backend prefers it, Backend::prefers_channels_last; or for
//      the convolutions within the row limits, NormalizeOptions::channels_last_rows_below): a 1x1
//      convolution (stride 1, unpadded, ungrouped, constant weights) of an NCHW tensor that has
//      no NHWC form (a model's input, a tensor computed in NCHW) runs in NCHW as the batched
//      MatMul [M, C] x [N, C, H W] after a Reshape, with no transpose (not where its output,
//      wider than its input, feeds an op that runs in NHWC, nor where a channel's H W pixels would
//      not start at the contraction alignment of rewrite 3); the elementwise ops after it run on
//      that [N, M, H W] form too (their per-channel constants as [M, 1]), until an op needs the
//      image (a Reshape back, the same elements). A Reshape of an image held only in NHWC to
//      [N, C, H W] (a ViT's patch embedding) is the NHWC form viewed as [N, H W, C]: the model's
//      Transpose to the tokens after it reads that view (absorbed), and any other reader gets
//      the [N, C, H W] tensor transposed back from it. Every other
//      2-D NCHW convolution runs in NHWC (Tessel's Conv attribute layout "NHWC", weights re-laid
//      out once to [M, kH, kW, C/g]), and so do the ops between such convolutions that can --
//      elementwise ops (per-channel constants re-laid out), a remaining BatchNormalization (as a
//      per-channel scale and shift), MaxPool / AveragePool (layout "NHWC"), GlobalAveragePool /
//      GlobalMaxPool (a pool over the whole image), Concat along the channels, and the model's own
//      Transposes into or out of NHWC (absorbed: ConvNeXt's permutes). A Transpose is
//      inserted only where a tensor is needed in the other layout: at the model's inputs and
//      outputs and before any op that has no NHWC form, each at most once per tensor; where the
//      permutation moves only axes of extent 1 (an SE block's [N, C, 1, 1], a one-channel map) it
//      is a Reshape (the same row-major data). An elementwise op whose NHWC inputs are all such
//      views, and whose other input (computed in NCHW) would need a real transpose, stays in NCHW
//      (an SE block's excite at an NCHW model's edge multiplies its input as it is). A
//      1-D convolution (NCW) runs as a 2-D one over a height of 1 between two Reshapes. An
//      ungrouped convolution whose input channels are not a multiple of the backend's alignment
//      (3 for an RGB image) gets them zero-padded: a Pad of its NHWC input, its weights padded
//      once here (the zero channels add nothing to any sum). So do convolutions the model
//      already runs in NHWC (Tessel's layout attribute: a patch embedding over 3 RGB channels).
//   2b. Reductions to one value (when the backend asks: Backend::splits_full_reductions): a
//      ReduceSum / Max / Min / Mean of a whole tensor with several axes of extent > 1 runs as the
//      same reduction of its last axis (one value per row, keepdims) and then of the rest, so that
//      the first runs a row per warp or block instead of one block for everything -- where that
//      is exact in any order: a maximum or minimum, an integer sum, an f32 or f64 sum or mean
//      (f16 and bf16 row sums would be rounded once more, and are left whole).
//   3. Aligned contraction operands (when the backend asks: Backend::contraction_alignment_bytes):
//      a MatMul or Gemm by a constant 2-D matrix whose operand rows would not start at the
//      alignment its fast contraction family needs (a vocabulary of 50257, a hidden width of 1023)
//      gets the weight re-laid out once here -- k-contiguous, [N, K] read through transB, when its
//      N is not a multiple, and K zero-padded when K is not -- and, when K is padded, the
//      activation's K zero-padded by a Pad (a copy at run time; the zeros add nothing to any sum).
//
// Shapes come from lowering the model as imported (lower_model), which is also the reference the
// normalized model is checked against.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tilegraph/lower.h"
#include "tilegraph/model_def.h"

namespace tessel {

struct NormalizeOptions {
  bool fold_batch_norm = true;
  bool channels_last = false;
  /// With channels_last: the input channels of an ungrouped convolution are zero-padded (its
  /// input by a Pad, its weights once here) to a multiple of this many bytes, when they are not
  /// one already (an RGB image's 3 channels). 0: never. The backend's convolution family says
  /// what it needs (Backend::conv_channel_alignment_bytes).
  int channel_alignment_bytes = 0;
  /// The clean-ups of normalize_views.h: scalar ops before transposes, view chains in canonical
  /// form, MatMul reading a transposed B directly; and an erf GELU written out as one Gelu op (0d).
  bool simplify_views = true;
  /// Per operand dtype: the multiple of bytes the rows of a MatMul's or Gemm's operands must start
  /// at for the backend's fast contraction family (rewrite 3); empty: never.
  std::map<DType, int> contraction_alignment_bytes;
  /// With channels_last (or within pointwise_rows_below): a 1x1 convolution of an NCHW tensor with
  /// no NHWC form runs in NCHW as a batched MatMul of its weights and the images' pixels (rewrite
  /// 2), when that transposes less.
  bool nchw_pointwise_matmul = true;
  /// Rewrite 2b (when the backend asks: Backend::splits_full_reductions): a reduction of a whole
  /// tensor to one value becomes one of its rows, then one of the rows' values.
  bool split_full_reductions = false;
  /// Rewrite 4 (when the backend asks: Backend::conv_weights_hwio): every NHWC convolution's
  /// constant weights without a sparsity attribute re-laid out once as HWIO [kH, kW, C/g, M],
  /// ungrouped convolutions' too.
  bool conv_weights_hwio = false;
  /// Without channels_last, for a backend whose kernels vectorize an NCHW convolution along its
  /// output rows (Backend::nchw_row_limits): the 2-D NCHW convolutions whose output rows are
  /// shorter than channels_last_rows_below elements run in NHWC as channels_last runs them all,
  /// the ops after them following as there, and so does a convolution of any width whose input is
  /// in NHWC already -- except a grouped one over an NCHW tensor (the loop nest runs it along its
  /// rows); a 1x1 one of an NCHW tensor whose rows are shorter than pointwise_rows_below runs as
  /// rewrite 2's batched MatMul. 0: none.
  int64_t channels_last_rows_below = 0;
  int64_t pointwise_rows_below = 0;
};

/// What normalize_model changed.
struct NormalizeReport {
  int splits_as_picks = 0;      // Splits into one index each (unbind), now one Gather per piece
  int scalars_moved = 0;        // elementwise ops and MatMuls moved before a Transpose
  int scales_moved = 0;         // scalar multiplications of picked views moved into their source
  int view_chains = 0;          // chains of view ops rewritten in canonical form
  int view_ops_removed = 0;     // view ops fewer after that
  int matmuls_trans_b = 0;      // MatMuls reading a transposed B directly
  int gelus = 0;                // erf GELUs written out as five ops, now one Gelu op
  int batch_norms_folded = 0;   // into the convolution before them
  int batch_norms_scaled = 0;   // run in NHWC as a per-channel scale and shift
  int convs_1d = 0;             // 1-D convolutions rewritten as 2-D ones over a height of 1
  int convs_pointwise_matmul = 0;  // NCHW 1x1 convolutions run as batched MatMuls in NCHW
  int ops_pixels = 0;           // elementwise ops after them run on their [N, C, H W] form
  int reductions_split = 0;     // reductions of a whole tensor to one value, split into rows and the rest
  int convs_channels_last = 0;  // NCHW convolutions run in NHWC
  int convs_channels_padded = 0;  // input channels zero-padded to the alignment (converted or NHWC already)
  int grouped_hwio = 0;         // NHWC grouped (depthwise too) convolutions' constant weights re-laid out as HWIO
  int dense_hwio = 0;           // NHWC ungrouped convolutions' constant weights re-laid out as HWIO (rewrite 4)
  int ops_channels_last = 0;    // other ops run in NHWC
  int transposes = 0;           // inserted where a tensor crosses between the layouts
  int transposes_as_reshapes = 0;  // of those, Reshapes: the permutation moves only axes of extent 1
  int ops_kept_nchw = 0;        // elementwise ops left in NCHW: their NHWC inputs were views of it
  int transposes_absorbed = 0;  // the model's own Transposes to or from NHWC, made redundant
  int contractions_aligned = 0;  // MatMuls and Gemms whose weight was re-laid out for aligned rows
  int contraction_pads = 0;     // of those, activations whose K is zero-padded by a Pad
  bool changed() const {
    return splits_as_picks + scalars_moved + scales_moved + view_chains + matmuls_trans_b + gelus + batch_norms_folded + batch_norms_scaled + convs_channels_last + ops_channels_last + transposes +
               transposes_absorbed + convs_channels_padded + grouped_hwio + dense_hwio + contractions_aligned + convs_1d + convs_pointwise_matmul + reductions_split > 0;
  }
  /// One line: "folded 53 BatchNormalization into convolutions; 53 convolutions and 70 other ops
  /// in NHWC, 3 transposes".
  std::string summary() const;
};

/// `model` normalized as `options` say. `lowered` is `model` lowered with the caller's options
/// (its shapes; lower_model). The result has the same inputs and outputs, in the same layouts.
ModelDef normalize_model(const ModelDef& model, const OpGraph& lowered, const NormalizeOptions& options,
                         NormalizeReport* report = nullptr);

}  // namespace tessel
