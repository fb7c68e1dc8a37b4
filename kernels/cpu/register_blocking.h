// The contraction micro-kernel's register blocking (emit_contraction.cpp): plain data, no LLVM.
#pragma once

#include <cstdint>

namespace tessel::cpu {

/// MR rows (the m axis) x NR vectors (the n axis) of accumulators.
struct RegisterBlocking {
  int mr = 1, nr = 1;
};

/// The blocking for a task box of `m_extent` rows (1 when the contraction has no m axis,
/// `has_m` false) and `n_extent` columns, with `registers` vector registers of `lanes` lanes.
/// It maximizes the FMAs per load (a B vector or an A broadcast) over the whole box at one
/// reduction point: the box's rows in full MR blocks, then MR = 1 blocks; its columns in
/// ceil(n / lanes) vectors (the last one masked), in full NR blocks, then one block of the vectors
/// left. Under MR * NR + NR + 1 <= registers (one register holds the broadcast); NR is at most the
/// box's vectors, MR at most its rows. Ties keep the smaller NR, then the smaller MR.
RegisterBlocking choose_register_blocking(int64_t registers, int64_t lanes, int64_t m_extent, int64_t n_extent, bool has_m);

}  // namespace tessel::cpu
