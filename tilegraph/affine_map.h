// Affine maps from a node's iteration domain to the index space of a tensor it reads.
//
// Result i of the map is `sum_a coeff(i, a) * axis_a + offset(i)`. Strides and dilation are
// coefficients, padding and slicing are offsets, broadcasting is a zero row, transposition is a
// permutation of unit rows. This is the only kind of index arithmetic tile propagation has to
// understand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel {

struct AffineExpr {
  std::vector<int64_t> coeffs;  // one per domain axis
  int64_t offset = 0;

  /// Value at a point of the domain.
  int64_t apply(const int64_t* point) const;
  /// Smallest and largest value over the box [0, extents) of the domain.
  int64_t min_over(const std::vector<int64_t>& extents) const;
  int64_t max_over(const std::vector<int64_t>& extents) const;
  bool operator==(const AffineExpr&) const = default;
};

class AffineMap {
 public:
  AffineMap() = default;
  AffineMap(int num_axes, std::vector<AffineExpr> results);

  /// results[i] = axis axes[i] (use -1 for a constant-0 row, i.e. a broadcast dimension).
  static AffineMap select_axes(int num_axes, const std::vector<int>& axes);

  int num_axes() const { return num_axes_; }
  int num_results() const { return static_cast<int>(results_.size()); }
  const AffineExpr& result(int i) const { return results_[i]; }
  const std::vector<AffineExpr>& results() const { return results_; }
  /// Whether some result has a nonzero coefficient on domain axis `axis`.
  bool uses_axis(int axis) const;

  /// "[2*oh + kh - 1, c]" with the given axis names.
  std::string print(const std::vector<std::string>& axis_names) const;
  bool operator==(const AffineMap&) const = default;

 private:
  int num_axes_ = 0;
  std::vector<AffineExpr> results_;
};

/// Reading through a copy: `inner` maps the copy's axes to the tensor it reads, `outer` a reader's
/// axes to the copy's (its output coordinates are its axes); the result maps the reader's axes to
/// that tensor.
AffineMap compose(const AffineMap& inner, const AffineMap& outer);

}  // namespace tessel
