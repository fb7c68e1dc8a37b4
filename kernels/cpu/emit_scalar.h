// Scalar semantics in LLVM IR: how the CPU emitter lowers Tessel's dtypes and ExprOps (expr.h).
// Internal to kernels/cpu/ (LLVM types appear only as forward declarations here).
//
// Every function works on scalars and on vectors of them alike, and matches the reference
// interpreter (tilegraph/interpreter.cpp, apply_unary/apply_binary, round_to):
//   - compute types: f64 -> double; f32, f16, bf16 -> float (rounded to the dtype where the
//     interpreter rounds: on store and on a cast); i64/i32/i8/u8 -> iN; bool -> i1;
//   - storage types: f16 -> half, bf16 -> i16 (round to nearest even, NaN kept), bool -> i8;
//   - integer division and modulo by zero give 0, `mod` takes the divisor's sign, float -> int
//     conversion truncates and wraps (saturates for i64), NaN -> 0;
//   - min/max propagate NaN; the max/min combiners keep the first NaN they see.
#pragma once

#include "tilegraph/expr.h"
#include "tilegraph/node.h"

namespace llvm {
class IRBuilderBase;
class LLVMContext;
class Module;
class Type;
class Value;
}  // namespace llvm

namespace tessel::cpu {

/// The type values of `dtype` are computed in (scalar).
llvm::Type* compute_type(llvm::LLVMContext& ctx, DType dtype);
/// The type of one element in memory (packed_tensor.h's layout).
llvm::Type* storage_type(llvm::LLVMContext& ctx, DType dtype);
/// Bytes of one compute value (vector widths are sized from it).
int compute_bytes(DType dtype);

/// `compute_type(dtype)`, or a vector of `lanes` of it when lanes > 1.
llvm::Type* compute_type(llvm::LLVMContext& ctx, DType dtype, int lanes);

/// A constant `value` of `dtype` in its compute type; a splat when `lanes` > 1. An integer dtype's
/// constant is the exact integer (Scalar::as_int64), wrapped to the dtype.
llvm::Value* constant_value(llvm::IRBuilderBase& b, DType dtype, const Scalar& value, int lanes = 1);

/// A stored element (or vector of elements) -> its compute value.
llvm::Value* from_storage(llvm::IRBuilderBase& b, DType dtype, llvm::Value* stored);
/// A compute value -> its storage form (rounding f16/bf16 to nearest even).
llvm::Value* to_storage(llvm::IRBuilderBase& b, DType dtype, llvm::Value* value);

/// round_to(to, value of `from`): the semantics of ExprOp::cast and of storing a node's result.
llvm::Value* convert_value(llvm::IRBuilderBase& b, llvm::Value* v, DType from, DType to);

/// A unary ExprOp on a value of dtype `operand` (apply_unary).
llvm::Value* emit_unary(llvm::IRBuilderBase& b, ExprOp op, DType operand, llvm::Value* a);
/// A binary ExprOp on values of dtype `operand` (apply_binary).
llvm::Value* emit_binary(llvm::IRBuilderBase& b, ExprOp op, DType operand, llvm::Value* a, llvm::Value* x);
/// Float a / x as a multiplication by a reciprocal, for a divisor that does not change along the
/// loop the quotient is evaluated in: (a * r) * c with c = 2^64 when |x| is below the smallest
/// normal (zero and subnormals), else 1, and r = 1 / (x * c) -- c and r depend on x only, so
/// LLVM hoists them (one division per loop instead of one per element). The scaling keeps r
/// finite for every nonzero x; zero, NaN and infinite divisors and dividends give the division's
/// results. Rounding: two roundings instead of one (within 1.5 ulps of the quotient, ~2e-7
/// relative in f32; the f32 tolerance of tilegraph/compare.h is 1e-4); with a subnormal divisor a
/// quotient below 2^64 times the smallest normal may lose bits to underflow in a * r (absolute
/// error under 1e-25 in f32).
llvm::Value* emit_div_by_invariant(llvm::IRBuilderBase& b, llvm::Value* a, llvm::Value* x);

/// The combiner step acc <- combine(acc, v) of the interpreter, on values of dtype `dtype`. Sum and
/// product of floats are marked reassociable so that reductions vectorize.
llvm::Value* emit_combine(llvm::IRBuilderBase& b, Combiner c, DType dtype, llvm::Value* acc, llvm::Value* v);

/// f32 exp (and sigmoid through it) is a call of the module's internal `tessel_expf`, with vector
/// variants the loop vectorizer calls in its place (VFABI); kept out of line until the vectorizer
/// has run. Before the optimizer: where the target has AVX-512 (and VL for 8 lanes), the 16- and
/// 8-lane variants scale by 2^n with vscalefps instead of building the exponent.
void specialize_math_functions(llvm::Module& m, bool avx512f, bool avx512vl);
/// After the vectorizer: makes those functions always-inline and lets them be removed (the caller
/// then runs the always-inliner and global DCE).
void prepare_math_inlining(llvm::Module& m);

}  // namespace tessel::cpu
