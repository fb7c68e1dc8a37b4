// AffineMap construction, evaluation and printing.
#include "tilegraph/affine_map.h"

#include "tilegraph/error.h"

namespace tessel {

int64_t AffineExpr::apply(const int64_t* point) const {
  int64_t v = offset;
  for (size_t a = 0; a < coeffs.size(); ++a) v += coeffs[a] * point[a];
  return v;
}

int64_t AffineExpr::min_over(const std::vector<int64_t>& extents) const {
  int64_t v = offset;
  for (size_t a = 0; a < coeffs.size(); ++a)
    if (coeffs[a] < 0) v += coeffs[a] * (extents[a] - 1);
  return v;
}

int64_t AffineExpr::max_over(const std::vector<int64_t>& extents) const {
  int64_t v = offset;
  for (size_t a = 0; a < coeffs.size(); ++a)
    if (coeffs[a] > 0) v += coeffs[a] * (extents[a] - 1);
  return v;
}

AffineMap::AffineMap(int num_axes, std::vector<AffineExpr> results)
    : num_axes_(num_axes), results_(std::move(results)) {
  for (const auto& r : results_)
    TESSEL_ASSERT(static_cast<int>(r.coeffs.size()) == num_axes_, "affine row has ",
                  r.coeffs.size(), " coefficients for ", num_axes_, " axes");
}

AffineMap AffineMap::select_axes(int num_axes, const std::vector<int>& axes) {
  std::vector<AffineExpr> rows;
  for (int a : axes) {
    AffineExpr row{std::vector<int64_t>(num_axes, 0), 0};
    if (a >= 0) {
      TESSEL_ASSERT(a < num_axes, "axis ", a, " out of ", num_axes);
      row.coeffs[a] = 1;
    }
    rows.push_back(std::move(row));
  }
  return AffineMap(num_axes, std::move(rows));
}

std::string AffineMap::print(const std::vector<std::string>& axis_names) const {
  std::string out = "[";
  for (size_t i = 0; i < results_.size(); ++i) {
    if (i) out += ", ";
    const AffineExpr& r = results_[i];
    std::string term;
    for (int a = 0; a < num_axes_; ++a) {
      const int64_t c = r.coeffs[a];
      if (c == 0) continue;
      const std::string name = a < static_cast<int>(axis_names.size()) ? axis_names[a] : cat("d", a);
      if (!term.empty()) term += c < 0 ? " - " : " + ";
      else if (c < 0) term += "-";
      const int64_t m = c < 0 ? -c : c;
      term += m == 1 ? name : cat(m, "*", name);
    }
    if (term.empty()) term = cat(r.offset);
    else if (r.offset > 0) term += cat(" + ", r.offset);
    else if (r.offset < 0) term += cat(" - ", -r.offset);
    out += term;
  }
  return out + "]";
}

bool AffineMap::uses_axis(int axis) const {
  for (const AffineExpr& row : results_)
    if (axis < static_cast<int>(row.coeffs.size()) && row.coeffs[axis] != 0) return true;
  return false;
}

AffineMap compose(const AffineMap& inner, const AffineMap& outer) {
  std::vector<AffineExpr> rows;
  for (const AffineExpr& in : inner.results()) {
    AffineExpr r{std::vector<int64_t>(outer.num_axes(), 0), in.offset};
    for (size_t a = 0; a < in.coeffs.size(); ++a) {
      if (in.coeffs[a] == 0) continue;
      const AffineExpr& o = outer.result(static_cast<int>(a));
      for (int x = 0; x < outer.num_axes(); ++x) r.coeffs[x] += in.coeffs[a] * o.coeffs[x];
      r.offset += in.coeffs[a] * o.offset;
    }
    rows.push_back(std::move(r));
  }
  return AffineMap(outer.num_axes(), std::move(rows));
}

}  // namespace tessel
