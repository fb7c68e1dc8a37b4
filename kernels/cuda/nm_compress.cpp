// compress_2_4 and decompress_2_4 (nm_compress.h).
#include "kernels/cuda/nm_compress.h"

#include "tilegraph/error.h"

namespace tessel::cuda {
namespace {

constexpr int kGroup = 4, kKept = 2;             // 2:4
constexpr int kRows = 16, kStepK = 32;           // mma.sp.m16n8k32: rows of the sparse A, k per step
constexpr int kHalfK = kStepK / 2;               // k described by one word
constexpr int kWords = kRows;                    // words per 16 rows and step: rows g = 0..7, halves q = 0, 1
constexpr int kMetaElems = 2 * kWords;           // 16-bit elements of metadata per 16 rows and step

int64_t meta_rows(const NmView& v) { return (v.n + kRows - 1) / kRows; }
int64_t meta_cols(const NmView& v) { return v.k_pad / kStepK * kMetaElems; }

bool nonzero(uint16_t b) { return (b & 0x7fffu) != 0; }

}  // namespace

std::string compress_2_4(const uint16_t* bits, int64_t elements, const NmView& v, NmCompressed& out) {
  TESSEL_ASSERT(v.k_pad % kStepK == 0 && v.k_pad >= v.k && v.n >= 0, "2:4 view: k_pad ", v.k_pad, " for k ", v.k);
  const int64_t kc = v.k_pad / 2;
  out.values.assign(static_cast<size_t>(v.n * kc), 0);
  // Per row and group: the two kept indices (nibble); groups past k keep 0 and 1.
  const int64_t groups = v.k_pad / kGroup;
  std::vector<uint8_t> nibble(static_cast<size_t>(meta_rows(v) * kRows * groups), 0x4);  // indices 0, 1
  for (int64_t n = 0; n < v.n; ++n)
    for (int64_t g = 0; g * kGroup < v.k; ++g) {
      int kept[kKept], count = 0;
      for (int i = 0; i < kGroup && g * kGroup + i < v.k; ++i) {
        const int64_t k = g * kGroup + i;
        const int64_t at = v.offset + (v.k_contiguous ? n * v.ld + k : k * v.ld + n);
        TESSEL_ASSERT(at >= 0 && at < elements, "2:4 view reads element ", at, " of ", elements);
        if (!nonzero(bits[at])) continue;
        if (count == kKept) return cat("more than ", kKept, " non-zeros in the group of ", kGroup, " at k ", g * kGroup, ", n ", n);
        kept[count++] = i;
      }
      // Fill with the lowest free indices, then keep them in increasing order.
      for (int i = 0; count < kKept; ++i)
        if (count == 0 || kept[0] != i) kept[count++] = i;
      if (kept[0] > kept[1]) std::swap(kept[0], kept[1]);
      nibble[static_cast<size_t>(n * groups + g)] = static_cast<uint8_t>(kept[0] | (kept[1] << 2));
      for (int j = 0; j < kKept; ++j) {
        const int64_t k = g * kGroup + kept[j];
        const int64_t at = v.offset + (v.k_contiguous ? n * v.ld + k : k * v.ld + n);
        out.values[static_cast<size_t>(n * kc + g * kKept + j)] = k < v.k ? bits[at] : 0;
      }
    }
  // The metadata words: word 2 g + q for lane 4 g + q.
  out.metadata.assign(static_cast<size_t>(meta_rows(v) * meta_cols(v)), 0);
  const int64_t steps = v.k_pad / kStepK;
  for (int64_t t = 0; t < meta_rows(v); ++t)
    for (int64_t s = 0; s < steps; ++s)
      for (int word = 0; word < kWords; ++word) {
        const int g = word / 2, half = word % 2;
        for (int r = 0; r < 2; ++r) {  // low 16 bits: row g; high: row g + 8
          const int64_t row = t * kRows + g + r * 8;
          uint16_t bits = 0;
          for (int c = 0; c < kHalfK / kGroup; ++c) {
            const int64_t group = (s * kStepK + half * kHalfK) / kGroup + c;
            bits = static_cast<uint16_t>(bits | (nibble[static_cast<size_t>(row * groups + group)] << (4 * c)));
          }
          out.metadata[static_cast<size_t>(t * meta_cols(v) + s * kMetaElems + 2 * word + r)] = bits;
        }
      }
  return "";
}

std::vector<uint16_t> decompress_2_4(const NmCompressed& c, const NmView& v) {
  std::vector<uint16_t> dense(static_cast<size_t>(v.k * v.n), 0);
  const int64_t kc = v.k_pad / 2, steps = v.k_pad / kStepK;
  for (int64_t t = 0; t < meta_rows(v); ++t)
    for (int64_t s = 0; s < steps; ++s)
      for (int word = 0; word < kWords; ++word) {
        const int g = word / 2, half = word % 2;
        for (int r = 0; r < 2; ++r) {
          const int64_t row = t * kRows + g + r * 8;
          if (row >= v.n) continue;
          const uint16_t bits = c.metadata[static_cast<size_t>(t * meta_cols(v) + s * kMetaElems + 2 * word + r)];
          for (int cg = 0; cg < kHalfK / kGroup; ++cg) {
            const int64_t group = (s * kStepK + half * kHalfK) / kGroup + cg;
            for (int j = 0; j < kKept; ++j) {
              const int idx = (bits >> (4 * cg + 2 * j)) & 3;
              const int64_t k = group * kGroup + idx;
              const uint16_t val = c.values[static_cast<size_t>(row * kc + group * kKept + j)];
              if (k < v.k) dense[static_cast<size_t>(k * v.n + row)] = val;
            }
          }
        }
      }
  return dense;
}

}  // namespace tessel::cuda
