// Tile boxes on the device: the per-block arithmetic of tile propagation with bounding boxes
// (kernels/cuda/group_plan.h; the host mirror in group_plan.cpp sizes the buffers with the same
// steps). A box holds inclusive bounds per axis; lo > hi is empty.
#pragma once

namespace tsl {

__device__ __forceinline__ i64 imin(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ i64 imax(i64 a, i64 b) { return a > b ? a : b; }

// Grows the needed output box [olo, ohi] (rank R) of a producer by the box [l, h] one reader
// needs; the first reader sets it.
template <int R>
__device__ __forceinline__ void unite_box(bool& need, i64* olo, i64* ohi, const i64* l, const i64* h) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    olo[r] = need ? imin(olo[r], l[r]) : l[r];
    ohi[r] = need ? imax(ohi[r], h[r]) : h[r];
  }
  need = true;
}

// The smallest box of a D-dimensional domain (extents dext) holding the elements [olo, ohi] of
// an output of rank R that reshapes the domain row-major: dimension by dimension when the shapes
// are the same but for dimensions of size 1, else the linear range between the two corners,
// enclosed.
template <int R, int D>
__device__ __forceinline__ void enclose_box(const i64* olo, const i64* ohi, const i64* oshape, const i64* dext,
                                            i64* lo, i64* hi) {
  {  // shapes the same but for dimensions of size 1: dimension by dimension (group_plan.cpp's enclose)
    i64 tlo[D > 0 ? D : 1], thi[D > 0 ? D : 1];
#pragma unroll
    for (int a = 0; a < D; ++a) tlo[a] = 0, thi[a] = 0;
    int i = 0, a = 0;
    bool same = true;
    while (true) {
      while (i < R && oshape[i] == 1) ++i;
      while (a < D && dext[a] == 1) ++a;
      if (i == R || a == D) {
        same = i == R && a == D;
        break;
      }
      if (oshape[i] != dext[a]) {
        same = false;
        break;
      }
      tlo[a] = olo[i];
      thi[a] = ohi[i];
      ++i;
      ++a;
    }
    if (same) {
#pragma unroll
      for (int k = 0; k < D; ++k) lo[k] = tlo[k], hi[k] = thi[k];
      return;
    }
  }
  i64 llo = 0, lhi = 0;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    llo = llo * oshape[r] + olo[r];
    lhi = lhi * oshape[r] + ohi[r];
  }
  i64 dlo[D > 0 ? D : 1], dhi[D > 0 ? D : 1];
#pragma unroll
  for (int a = D - 1; a >= 0; --a) {
    dlo[a] = llo % dext[a];
    llo /= dext[a];
    dhi[a] = lhi % dext[a];
    lhi /= dext[a];
  }
  bool differ = false;
#pragma unroll
  for (int a = 0; a < D; ++a) {
    lo[a] = differ ? 0 : dlo[a];
    hi[a] = differ ? dext[a] - 1 : dhi[a];
    differ = differ || dlo[a] != dhi[a];
  }
}

}  // namespace tsl
