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
//   2. Channels-last (when asked: the backend prefers it, Backend::prefers_channels_last): every
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
};

/// What normalize_model changed.
struct NormalizeReport {
  int scalars_moved = 0;        // elementwise ops and MatMuls moved before a Transpose
  int view_chains = 0;          // chains of view ops rewritten in canonical form
  int view_ops_removed = 0;     // view ops fewer after that
  int matmuls_trans_b = 0;      // MatMuls reading a transposed B directly
  int gelus = 0;                // erf GELUs written out as five ops, now one Gelu op
  int batch_norms_folded = 0;   // into the convolution before them
  int batch_norms_scaled = 0;   // run in NHWC as a per-channel scale and shift
  int convs_1d = 0;             // 1-D convolutions rewritten as 2-D ones over a height of 1
  int convs_channels_last = 0;  // NCHW convolutions run in NHWC
  int convs_channels_padded = 0;  // input channels zero-padded to the alignment (converted or NHWC already)
  int grouped_hwio = 0;         // NHWC grouped (depthwise too) convolutions' constant weights re-laid out as HWIO
  int ops_channels_last = 0;    // other ops run in NHWC
  int transposes = 0;           // inserted where a tensor crosses between the layouts
  int transposes_as_reshapes = 0;  // of those, Reshapes: the permutation moves only axes of extent 1
  int ops_kept_nchw = 0;        // elementwise ops left in NCHW: their NHWC inputs were views of it
  int transposes_absorbed = 0;  // the model's own Transposes to or from NHWC, made redundant
  int contractions_aligned = 0;  // MatMuls and Gemms whose weight was re-laid out for aligned rows
  int contraction_pads = 0;     // of those, activations whose K is zero-padded by a Pad
  bool changed() const {
    return scalars_moved + view_chains + matmuls_trans_b + gelus + batch_norms_folded + batch_norms_scaled + convs_channels_last + ops_channels_last + transposes +
               transposes_absorbed + convs_channels_padded + grouped_hwio + contractions_aligned + convs_1d > 0;
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
