// Tolerances by dtype and tensor comparison.
#include "tilegraph/compare.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tilegraph/error.h"
#include "tilegraph/op_graph.h"

namespace tessel {

Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::f64: return {1e-7, 1e-9, 1e-9};
    case DType::f32: return {1e-4, 1e-5, 1e-5};
    case DType::f16: return {1e-2, 1e-3, 5e-3};
    case DType::bf16: return {2e-2, 1e-2, 2e-2};
    default: return {0, 0, 0};
  }
}

namespace {

// Integers and bools must be equal, compared as int64 (an i64 value beyond 2^53 has no exact
// double, so a comparison of doubles would pass a neighbouring value).
CompareResult compare_integers(const HostTensor& actual, const HostTensor& expected) {
  CompareResult r;
  for (int64_t i = 0; i < expected.size(); ++i) {
    const int64_t a = actual.as_int(i), e = expected.as_int(i);
    if (a == e) continue;
    const double error = std::fabs(static_cast<double>(a) - static_cast<double>(e));
    r.max_abs_error = std::max(r.max_abs_error, error);
    if (e != 0) r.max_rel_error = std::max(r.max_rel_error, error / std::fabs(static_cast<double>(e)));
    if (r.mismatches == 0) r.first_mismatch = i;
    ++r.mismatches;
  }
  if (r.mismatches > 0) {
    r.ok = false;
    r.message = cat(r.mismatches, " of ", expected.size(), " elements differ (first at flat index ", r.first_mismatch,
                    ": got ", actual.as_int(r.first_mismatch), ", expected ", expected.as_int(r.first_mismatch),
                    "; ", dtype_name(expected.dtype()), " values must be equal)");
  }
  return r;
}

}  // namespace

CompareResult compare_tensors(const HostTensor& actual, const HostTensor& expected) {
  CompareResult r;
  if (actual.type() != expected.type()) {
    r.ok = false;
    r.message = cat("type ", actual.type().print(), " differs from expected ", expected.type().print());
    return r;
  }
  if (!is_float(expected.dtype())) return compare_integers(actual, expected);
  const Tolerance tol = tolerance_for(expected.dtype());
  for (int64_t i = 0; i < expected.size(); ++i) {
    const double a = actual[i], e = expected[i];
    bool good;
    if (std::isnan(e)) good = std::isnan(a);
    else if (std::isnan(a)) good = false;
    else if (std::isinf(e) || std::isinf(a)) good = a == e;
    else {
      const double err = std::fabs(a - e);
      good = err <= tol.atol + tol.rtol * std::fabs(e);
      r.max_abs_error = std::max(r.max_abs_error, err);
      if (e != 0) r.max_rel_error = std::max(r.max_rel_error, err / std::fabs(e));
    }
    if (!good) {
      if (r.mismatches == 0) r.first_mismatch = i;
      ++r.mismatches;
    }
  }
  if (r.mismatches > 0) {
    r.ok = false;
    r.message = cat(r.mismatches, " of ", expected.size(), " elements differ (first at flat index ",
                    r.first_mismatch, ": got ", actual[r.first_mismatch], ", expected ",
                    expected[r.first_mismatch], "; max abs error ", r.max_abs_error,
                    ", tolerance rtol ", tol.rtol, " atol ", tol.atol, ")");
  }
  return r;
}

CompareResult compare_compiled(const HostTensor& actual, const HostTensor& expected, std::optional<DType> computed_in) {
  if (!is_float(expected.dtype())) return compare_tensors(actual, expected);
  CompareResult r;
  if (actual.type() != expected.type()) {
    r.ok = false;
    r.message = cat("type ", actual.type().print(), " differs from expected ", expected.type().print());
    return r;
  }
  Tolerance tol = tolerance_for(expected.dtype());
  DType bound_dtype = expected.dtype();
  if (computed_in && is_float(*computed_in) && tolerance_for(*computed_in).rel_l2 > tol.rel_l2) {
    tol = tolerance_for(*computed_in);
    bound_dtype = *computed_in;
  }
  double diff2 = 0, ref2 = 0;
  bool elementwise_ok = true;  // every element within tol.atol + tol.rtol * |expected|
  for (int64_t i = 0; i < expected.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const bool special = std::isnan(e) || std::isinf(e) || std::isnan(a) || std::isinf(a);
    bool good = true;
    if (special) {
      good = (std::isnan(e) && std::isnan(a)) || a == e;
    } else {
      const double err = std::fabs(a - e);
      diff2 += err * err;
      ref2 += e * e;
      r.max_abs_error = std::max(r.max_abs_error, err);
      if (e != 0) r.max_rel_error = std::max(r.max_rel_error, err / std::fabs(e));
      elementwise_ok = elementwise_ok && err <= tol.atol + tol.rtol * std::fabs(e);
    }
    if (!good) {
      if (r.mismatches == 0) r.first_mismatch = i;
      ++r.mismatches;
    }
  }
  r.rel_l2_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  if (r.mismatches > 0) {
    r.ok = false;
    r.message = cat(r.mismatches, " NaN or infinite elements differ (first at flat index ", r.first_mismatch, ": got ",
                    actual[r.first_mismatch], ", expected ", expected[r.first_mismatch], ")");
  } else if (r.rel_l2_error > tol.rel_l2 && !elementwise_ok) {
    r.ok = false;
    r.message = cat("relative L2 error ", r.rel_l2_error, " over the ", dtype_name(bound_dtype), " bound ", tol.rel_l2,
                    " and elements off by more than ", tol.atol, " + ", tol.rtol, " |expected| (max abs error ",
                    r.max_abs_error, ")");
  }
  return r;
}

std::optional<DType> computed_precision(const OpGraph& graph, TensorId output) {
  std::optional<DType> least;
  std::vector<bool> seen(graph.num_tensors(), false);
  std::vector<TensorId> stack = {output};
  while (!stack.empty()) {
    const TensorId t = stack.back();
    stack.pop_back();
    if (seen[t]) continue;
    seen[t] = true;
    const NodeId n = graph.producer(t);
    if (n < 0) continue;
    const DType d = graph.tensor(t).type.dtype;
    if (is_float(d) && (!least || tolerance_for(d).rel_l2 > tolerance_for(*least).rel_l2)) least = d;
    for (TensorId in : graph.node_inputs(n)) stack.push_back(in);
  }
  return least;
}

}  // namespace tessel
