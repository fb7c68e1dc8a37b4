// Scalar semantics in LLVM IR (emit_scalar.h).
#include "kernels/cpu/emit_scalar.h"

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include "tilegraph/error.h"

namespace tessel::cpu {

namespace {

using llvm::IRBuilderBase;
using llvm::Type;
using llvm::Value;

bool is_unsigned_int(DType t) { return t == DType::u8 || t == DType::boolean; }

Type* scalar_of(Value* v) { return v->getType()->getScalarType(); }

// A constant of `v`'s type (splat for vectors).
Value* fp_like(Value* v, double c) { return llvm::ConstantFP::get(v->getType(), c); }
Value* int_like(Value* v, int64_t c) { return llvm::ConstantInt::get(v->getType(), static_cast<uint64_t>(c), true); }

// Calls the C math library function `name` (float variant `namef`) on each lane; scalar values
// call it once. LLVM vectorizes scalar calls only through a vector library, so the generic loops
// stay scalar around them.
Value* libm_call(IRBuilderBase& b, const std::string& name, std::initializer_list<Value*> args) {
  Value* first = *args.begin();
  Type* scalar = scalar_of(first);
  const std::string symbol = scalar->isFloatTy() ? name + "f" : name;
  llvm::Module* m = b.GetInsertBlock()->getModule();
  std::vector<Type*> params(args.size(), scalar);
  llvm::FunctionCallee fn = m->getOrInsertFunction(symbol, llvm::FunctionType::get(scalar, params, false));
  if (auto* f = llvm::dyn_cast<llvm::Function>(fn.getCallee())) {
    f->setDoesNotThrow();
    f->setDoesNotAccessMemory();
    f->setWillReturn();
  }
  auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(first->getType());
  if (!vt) return b.CreateCall(fn, std::vector<Value*>(args));
  Value* out = llvm::PoisonValue::get(vt);
  for (unsigned l = 0; l < vt->getNumElements(); ++l) {
    std::vector<Value*> lane;
    for (Value* a : args) lane.push_back(b.CreateExtractElement(a, l));
    out = b.CreateInsertElement(out, b.CreateCall(fn, lane), l);
  }
  return out;
}

Value* unary_intrinsic(IRBuilderBase& b, llvm::Intrinsic::ID id, Value* a) { return b.CreateUnaryIntrinsic(id, a); }

// ---- f32 exp, tanh and erf as straight-line arithmetic --------------------------------------
// llvm.exp and libm calls on f32 become one scalar call per lane, and a loop with a call in it is
// not vectorized; these are plain arithmetic, so they vectorize with the loop around them (or
// work lane-wise on vectors). Accuracy against fp64, measured over dense grids: exp within 1e-7
// relative (Cephes' expf polynomial), tanh and erf within 4e-7 absolute (the rational
// approximations of Eigen's fast tanh and erf). f64 keeps the math library.

// The polynomials below may fuse each multiply with the add after it (one rounding instead of
// two: as accurate or more, and half the instructions on an FMA machine). Scoped to these
// functions; the rest of a kernel keeps the interpreter's separate roundings.
struct ContractScope {
  explicit ContractScope(IRBuilderBase& b) : guard(b) {
    llvm::FastMathFlags f = b.getFastMathFlags();
    f.setAllowContract(true);
    b.setFastMathFlags(f);
  }
  IRBuilderBase::FastMathFlagGuard guard;
};

// c[0] + x (c[1] + x (c[2] + ...)), by Horner's rule.
Value* horner(IRBuilderBase& b, Value* x, std::initializer_list<double> c) {
  const double* first = c.begin();
  Value* acc = fp_like(x, first[c.size() - 1]);
  for (size_t i = c.size() - 1; i-- > 0;) acc = b.CreateFAdd(b.CreateFMul(acc, x), fp_like(x, first[i]));
  return acc;
}

// x clamped to [lo, hi]; a NaN stays NaN (an ordered compare is false for it).
Value* clamp_keep_nan(IRBuilderBase& b, Value* x, double lo, double hi) {
  x = b.CreateSelect(b.CreateFCmpOLT(x, fp_like(x, lo)), fp_like(x, lo), x);
  return b.CreateSelect(b.CreateFCmpOGT(x, fp_like(x, hi)), fp_like(x, hi), x);
}

// 2^n for an i32 n in [-126, 127], by building the float's exponent field.
Value* exp2_int(IRBuilderBase& b, Value* n, Type* float_type) {
  Value* bits = b.CreateShl(b.CreateAdd(n, int_like(n, 127)), int_like(n, 23));
  return b.CreateBitCast(bits, float_type);
}

// exp's argument reduction and polynomial: y = e^r and t = x / ln 2 + shifter (exp_f32's comment).
struct ExpParts {
  Value* y;
  Value* t;
  Value* nf;  // n as a float
};

ExpParts exp_parts(IRBuilderBase& b, Value* x) {
  ContractScope contract(b);
  // exp(x) = 2^n e^r, n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts, so r is exact enough).
  // Clamped to [-104, 89], where the result is already 0 or infinity in f32; the clamp keeps a NaN,
  // which then runs through the arithmetic as a NaN. n comes from the 1.5 * 2^23 shifter: adding
  // it rounds x / ln 2 to an integer held in t's low mantissa bits (|n| <= 150), so n as a float is
  // t - shifter and as an integer bits(t) - bits(shifter), with no float-to-int conversion (whose
  // result is poison for a NaN) and no rounding instruction. n lies in [-150, 128], applied as
  // 2^(n/2) 2^(n - n/2) so results near the overflow and in the subnormal range scale without an
  // out-of-range exponent.
  constexpr double kShifter = 12582912.0;  // 1.5 * 2^23
  Value* xc = clamp_keep_nan(b, x, -104.0, 89.0);
  Value* t = b.CreateFAdd(b.CreateFMul(xc, fp_like(x, 1.44269504088896341)), fp_like(x, kShifter));
  Value* nf = b.CreateFSub(t, fp_like(x, kShifter));
  Value* r = b.CreateFSub(xc, b.CreateFMul(nf, fp_like(x, 0.693359375)));
  r = b.CreateFSub(r, b.CreateFMul(nf, fp_like(x, -2.12194440e-4)));
  Value* p = horner(b, r, {5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3, 1.3981999507e-3, 1.9875691500e-4});
  Value* y = b.CreateFAdd(b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, r), r), r), fp_like(x, 1.0));
  return {y, t, nf};
}

Value* exp_f32(IRBuilderBase& b, Value* x) {
  constexpr int64_t kShifterBits = 0x4B400000;
  const auto [y, t, nf] = exp_parts(b, x);
  Type* i32 = x->getType()->isVectorTy() ? static_cast<Type*>(llvm::VectorType::get(b.getInt32Ty(), llvm::cast<llvm::VectorType>(x->getType())->getElementCount()))
                                         : b.getInt32Ty();
  Value* n = b.CreateSub(b.CreateBitCast(t, i32), llvm::ConstantInt::get(i32, kShifterBits));
  Value* n1 = b.CreateAShr(n, int_like(n, 1));
  Value* n2 = b.CreateSub(n, n1);
  return b.CreateFMul(b.CreateFMul(y, exp2_int(b, n1, x->getType())), exp2_int(b, n2, x->getType()));
}

// An odd rational function x P(x^2) / Q(x^2) on x clamped to [-limit, limit].
Value* odd_rational(IRBuilderBase& b, Value* x, double limit, std::initializer_list<double> p, std::initializer_list<double> q) {
  ContractScope contract(b);
  Value* xc = clamp_keep_nan(b, x, -limit, limit);
  Value* x2 = b.CreateFMul(xc, xc);
  return b.CreateFDiv(b.CreateFMul(xc, horner(b, x2, p)), horner(b, x2, q));
}

Value* tanh_f32(IRBuilderBase& b, Value* x) {
  Value* r = odd_rational(b, x, 7.90531110763549805,
                          {4.89352455891786e-03, 6.37261928875436e-04, 1.48572235717979e-05, 5.12229709037114e-08,
                           -8.60467152213735e-11, 2.00018790482477e-13, -2.76076847742355e-16},
                          {4.89352518554385e-03, 2.26843463243900e-03, 1.18534705686654e-04, 1.19825839466702e-06});
  // tanh(x) = x to f32 precision for |x| < 4e-4 (also keeps -0).
  return b.CreateSelect(b.CreateFCmpOLT(unary_intrinsic(b, llvm::Intrinsic::fabs, x), fp_like(x, 0.0004)), x, r);
}

Value* erf_f32(IRBuilderBase& b, Value* x) {
  return odd_rational(b, x, 4.0,
                      {-1.60960333262415e-02, -2.95459980854025e-03, -7.34990630326855e-04, -5.69250639462346e-05,
                       -2.10102402082508e-06, 2.77068142495902e-08, -2.72614225801306e-10},
                      {-1.42647390514189e-02, -7.37332916720468e-03, -1.68282697438203e-03, -2.13374055278905e-04,
                       -1.45660718464996e-05});
}

// f32 exp is a call of the module's `tessel_expf`, which LLVM's loop vectorizer replaces by a
// call of its vector variant of the loop's width (`vector-function-abi-variant`, VFABI names);
// optimize_module inlines both after the vectorizer (prepare_math_inlining). The variants are
// exp_f32 on vectors, except where the target can do better (specialize_math_functions). Both
// are noinline until then: inlined before the vectorizer, the scalar body is what it would widen.
constexpr const char* kExpName = "tessel_expf";
constexpr int kExpVariantLanes[] = {2, 4, 8, 16, 32};

std::string exp_variant_name(int lanes) { return cat(kExpName, "_v", lanes); }

void define_body(llvm::Function* fn, const std::function<Value*(IRBuilderBase&, Value*)>& body) {
  llvm::IRBuilder<> fb(llvm::BasicBlock::Create(fn->getContext(), "entry", fn));
  fb.CreateRet(body(fb, fn->getArg(0)));
}

llvm::Function* math_function(llvm::Module& m, const std::string& name, Type* type) {
  auto* fn = llvm::Function::Create(llvm::FunctionType::get(type, {type}, false), llvm::GlobalValue::InternalLinkage, name, m);
  fn->setDoesNotAccessMemory();
  fn->setDoesNotThrow();
  fn->setWillReturn();
  fn->addFnAttr(llvm::Attribute::NoSync);
  fn->addFnAttr(llvm::Attribute::NoInline);
  return fn;
}

llvm::Function* exp_function(llvm::Module& m) {
  if (llvm::Function* fn = m.getFunction(kExpName)) return fn;
  Type* f32 = Type::getFloatTy(m.getContext());
  std::string mappings;
  std::vector<llvm::GlobalValue*> variants;
  for (int lanes : kExpVariantLanes) {
    llvm::Function* v = math_function(m, exp_variant_name(lanes), llvm::FixedVectorType::get(f32, static_cast<unsigned>(lanes)));
    define_body(v, exp_f32);
    variants.push_back(v);
    mappings += cat(mappings.empty() ? "" : ",", "_ZGV_LLVM_N", lanes, "v_", kExpName, "(", exp_variant_name(lanes), ")");
  }
  llvm::appendToCompilerUsed(m, variants);  // kept until the vectorizer has had its say
  llvm::Function* fn = math_function(m, kExpName, f32);
  define_body(fn, exp_f32);
  fn->addFnAttr("vector-function-abi-variant", mappings);
  return fn;
}

Value* exp_of(IRBuilderBase& b, Value* a) {
  if (!scalar_of(a)->isFloatTy()) return unary_intrinsic(b, llvm::Intrinsic::exp, a);
  llvm::Module& m = *b.GetInsertBlock()->getModule();
  llvm::Function* scalar = exp_function(m);
  if (!a->getType()->isVectorTy()) return b.CreateCall(scalar, {a});
  const auto lanes = static_cast<int>(llvm::cast<llvm::FixedVectorType>(a->getType())->getNumElements());
  llvm::Function* variant = m.getFunction(exp_variant_name(lanes));
  return variant ? static_cast<Value*>(b.CreateCall(variant, {a})) : exp_f32(b, a);
}

// Float -> integer of `bits` (< 64): truncate, then wrap modulo 2^bits. Done in double, where
// t - 2^bits * floor(t / 2^bits) is exact, so no library call is needed.
Value* float_to_wrapped_int(IRBuilderBase& b, Value* v, Type* int_type, int bits) {
  Type* f64 = b.getDoubleTy();
  llvm::Type* target_f64 = v->getType()->isVectorTy()
                               ? static_cast<Type*>(llvm::VectorType::get(f64, llvm::cast<llvm::VectorType>(v->getType())->getElementCount()))
                               : f64;
  Value* d = scalar_of(v)->isDoubleTy() ? v : b.CreateFPExt(v, target_f64);
  Value* t = unary_intrinsic(b, llvm::Intrinsic::trunc, d);
  const double range = std::ldexp(1.0, bits);
  Value* q = unary_intrinsic(b, llvm::Intrinsic::floor, b.CreateFMul(t, fp_like(t, 1.0 / range)));
  Value* m = b.CreateFSub(t, b.CreateFMul(q, fp_like(t, range)));
  llvm::Type* i64 = v->getType()->isVectorTy()
                        ? static_cast<Type*>(llvm::VectorType::get(b.getInt64Ty(), llvm::cast<llvm::VectorType>(v->getType())->getElementCount()))
                        : b.getInt64Ty();
  Value* wide = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, m->getType()}, {m});
  return b.CreateTrunc(wide, int_type);
}

// The vector or scalar type with `v`'s shape and element `elem`.
Type* like_shape(Value* v, Type* elem) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(v->getType())) return llvm::VectorType::get(elem, vt->getElementCount());
  return elem;
}

// Rounds a float value to f16 or bf16 and back (the value a store and reload would give).
Value* round_float_to(IRBuilderBase& b, DType t, Value* v) {
  return from_storage(b, t, to_storage(b, t, v));
}

}  // namespace

llvm::Type* compute_type(llvm::LLVMContext& ctx, DType dtype) {
  switch (dtype) {
    case DType::f64: return Type::getDoubleTy(ctx);
    case DType::f32: case DType::f16: case DType::bf16: return Type::getFloatTy(ctx);
    case DType::i64: return Type::getInt64Ty(ctx);
    case DType::i32: return Type::getInt32Ty(ctx);
    case DType::i8: case DType::u8: return Type::getInt8Ty(ctx);
    case DType::boolean: return Type::getInt1Ty(ctx);
  }
  TESSEL_ASSERT(false, "unknown dtype");
}

llvm::Type* compute_type(llvm::LLVMContext& ctx, DType dtype, int lanes) {
  Type* t = compute_type(ctx, dtype);
  return lanes > 1 ? static_cast<Type*>(llvm::FixedVectorType::get(t, lanes)) : t;
}

llvm::Type* storage_type(llvm::LLVMContext& ctx, DType dtype) {
  switch (dtype) {
    case DType::f16: return Type::getHalfTy(ctx);
    case DType::bf16: return Type::getInt16Ty(ctx);
    case DType::boolean: return Type::getInt8Ty(ctx);
    default: return compute_type(ctx, dtype);
  }
}

int compute_bytes(DType dtype) {
  switch (dtype) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::f16: case DType::bf16: case DType::i32: return 4;
    default: return 1;
  }
}

llvm::Value* constant_value(IRBuilderBase& b, DType dtype, const Scalar& value, int lanes) {
  Type* t = compute_type(b.getContext(), dtype, lanes);
  if (is_float(dtype)) return llvm::ConstantFP::get(t, value.as_double());
  if (dtype == DType::boolean) return llvm::ConstantInt::get(t, value != 0 ? 1 : 0);
  // Integers: exact (a node's integer constants are exact int64s, scalar.h), wrapped to the dtype;
  // u8's 0..255 zero-extends, the signed types sign-extend.
  const int64_t i = wrap_integer(dtype, value.as_int64());
  return llvm::ConstantInt::get(t, static_cast<uint64_t>(i), dtype != DType::u8);
}

llvm::Value* from_storage(IRBuilderBase& b, DType dtype, Value* stored) {
  switch (dtype) {
    case DType::f16: return b.CreateFPExt(stored, like_shape(stored, b.getFloatTy()));
    case DType::bf16: {
      Value* wide = b.CreateZExt(stored, like_shape(stored, b.getInt32Ty()));
      wide = b.CreateShl(wide, int_like(wide, 16));
      return b.CreateBitCast(wide, like_shape(stored, b.getFloatTy()));
    }
    case DType::boolean: return b.CreateICmpNE(stored, int_like(stored, 0));
    default: return stored;
  }
}

llvm::Value* to_storage(IRBuilderBase& b, DType dtype, Value* v) {
  switch (dtype) {
    case DType::f16: return b.CreateFPTrunc(v, like_shape(v, b.getHalfTy()));  // round to nearest even
    case DType::bf16: {
      // float_to_bf16_bits: NaN keeps its top bits with the quiet bit set; others round to
      // nearest even.
      Value* bits = b.CreateBitCast(v, like_shape(v, b.getInt32Ty()));
      Value* magnitude = b.CreateAnd(bits, int_like(bits, 0x7fffffff));
      Value* is_nan = b.CreateICmpUGT(magnitude, int_like(bits, 0x7f800000));
      Value* high = b.CreateLShr(bits, int_like(bits, 16));
      Value* nan_bits = b.CreateOr(high, int_like(bits, 0x40));
      Value* rounding = b.CreateAdd(int_like(bits, 0x7fff), b.CreateAnd(high, int_like(bits, 1)));
      Value* rounded = b.CreateLShr(b.CreateAdd(bits, rounding), int_like(bits, 16));
      return b.CreateTrunc(b.CreateSelect(is_nan, nan_bits, rounded), like_shape(v, b.getInt16Ty()));
    }
    case DType::boolean: return b.CreateZExt(v, like_shape(v, b.getInt8Ty()));
    default: return v;
  }
}

llvm::Value* convert_value(IRBuilderBase& b, Value* v, DType from, DType to) {
  if (from == to) return v;
  llvm::LLVMContext& ctx = b.getContext();
  Type* to_type = like_shape(v, compute_type(ctx, to));
  if (is_float(to)) {
    Value* out;
    if (is_float(from)) {
      const unsigned fb = scalar_of(v)->getPrimitiveSizeInBits(), tb = to_type->getScalarSizeInBits();
      out = fb == tb ? v : (fb < tb ? b.CreateFPExt(v, to_type) : b.CreateFPTrunc(v, to_type));
    } else {
      out = is_unsigned_int(from) ? b.CreateUIToFP(v, to_type) : b.CreateSIToFP(v, to_type);
    }
    if (to == DType::f16 || to == DType::bf16) out = round_float_to(b, to, out);
    return out;
  }
  if (to == DType::boolean) {
    if (is_float(from)) return b.CreateFCmpUNE(v, fp_like(v, 0.0));  // NaN != 0: true
    return b.CreateICmpNE(v, int_like(v, 0));
  }
  // Integer targets.
  if (is_float(from)) {
    if (to == DType::i64) return b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {to_type, v->getType()}, {v});
    return float_to_wrapped_int(b, v, to_type, static_cast<int>(to_type->getScalarSizeInBits()));
  }
  const unsigned fb = scalar_of(v)->getIntegerBitWidth(), tb = to_type->getScalarSizeInBits();
  if (fb == tb) return v;
  if (fb > tb) return b.CreateTrunc(v, to_type);
  return is_unsigned_int(from) ? b.CreateZExt(v, to_type) : b.CreateSExt(v, to_type);
}

llvm::Value* emit_unary(IRBuilderBase& b, ExprOp op, DType operand, Value* a) {
  if (is_float(operand)) {
    switch (op) {
      case ExprOp::neg: return b.CreateFNeg(a);
      case ExprOp::abs: return unary_intrinsic(b, llvm::Intrinsic::fabs, a);
      case ExprOp::exp: return exp_of(b, a);
      case ExprOp::log: return unary_intrinsic(b, llvm::Intrinsic::log, a);
      case ExprOp::sqrt: return unary_intrinsic(b, llvm::Intrinsic::sqrt, a);
      case ExprOp::rsqrt: return b.CreateFDiv(fp_like(a, 1.0), unary_intrinsic(b, llvm::Intrinsic::sqrt, a));
      case ExprOp::reciprocal: return b.CreateFDiv(fp_like(a, 1.0), a);
      case ExprOp::sigmoid:
        return b.CreateFDiv(fp_like(a, 1.0), b.CreateFAdd(fp_like(a, 1.0), exp_of(b, b.CreateFNeg(a))));
      case ExprOp::sin: return unary_intrinsic(b, llvm::Intrinsic::sin, a);
      case ExprOp::cos: return unary_intrinsic(b, llvm::Intrinsic::cos, a);
      case ExprOp::floor: return unary_intrinsic(b, llvm::Intrinsic::floor, a);
      case ExprOp::ceil: return unary_intrinsic(b, llvm::Intrinsic::ceil, a);
      case ExprOp::round: return unary_intrinsic(b, llvm::Intrinsic::roundeven, a);  // nearbyint: half to even
      case ExprOp::tanh: return scalar_of(a)->isFloatTy() ? tanh_f32(b, a) : libm_call(b, "tanh", {a});
      case ExprOp::erf: return scalar_of(a)->isFloatTy() ? erf_f32(b, a) : libm_call(b, "erf", {a});
      case ExprOp::tan: return libm_call(b, "tan", {a});
      case ExprOp::asin: return libm_call(b, "asin", {a});
      case ExprOp::acos: return libm_call(b, "acos", {a});
      case ExprOp::atan: return libm_call(b, "atan", {a});
      case ExprOp::sinh: return libm_call(b, "sinh", {a});
      case ExprOp::cosh: return libm_call(b, "cosh", {a});
      case ExprOp::asinh: return libm_call(b, "asinh", {a});
      case ExprOp::acosh: return libm_call(b, "acosh", {a});
      case ExprOp::atanh: return libm_call(b, "atanh", {a});
      case ExprOp::sign: {
        Value* s = b.CreateSelect(b.CreateFCmpOGT(a, fp_like(a, 0)), fp_like(a, 1),
                                  b.CreateSelect(b.CreateFCmpOLT(a, fp_like(a, 0)), fp_like(a, -1), fp_like(a, 0)));
        return b.CreateSelect(b.CreateFCmpUNO(a, a), a, s);
      }
      case ExprOp::isnan: return b.CreateFCmpUNO(a, a);
      case ExprOp::isinf: return b.CreateFCmpOEQ(unary_intrinsic(b, llvm::Intrinsic::fabs, a), fp_like(a, INFINITY));
      default: break;
    }
  } else {
    const bool is_unsigned = is_unsigned_int(operand);
    switch (op) {
      case ExprOp::logical_not: return b.CreateXor(a, int_like(a, 1));
      case ExprOp::neg: return b.CreateNeg(a);
      case ExprOp::abs: return is_unsigned ? a : b.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a, b.getFalse());
      case ExprOp::sign: {
        Value* pos = b.CreateZExt(b.CreateICmp(is_unsigned ? llvm::CmpInst::ICMP_UGT : llvm::CmpInst::ICMP_SGT, a, int_like(a, 0)), a->getType());
        if (is_unsigned) return pos;
        return b.CreateSub(pos, b.CreateZExt(b.CreateICmpSLT(a, int_like(a, 0)), a->getType()));
      }
      case ExprOp::reciprocal: {  // trunc(1 / a): 1 for 1, -1 for -1, else 0 (0 for a = 0)
        Value* one = b.CreateICmpEQ(a, int_like(a, 1));
        if (is_unsigned) return b.CreateZExt(one, a->getType());
        Value* minus_one = b.CreateICmpEQ(a, int_like(a, -1));
        return b.CreateSelect(one, int_like(a, 1), b.CreateSelect(minus_one, int_like(a, -1), int_like(a, 0)));
      }
      default: break;
    }
  }
  TESSEL_ASSERT(false, "CPU codegen: unary op ", expr_op_name(op), " on ", dtype_name(operand));
}

llvm::Value* emit_binary(IRBuilderBase& b, ExprOp op, DType operand, Value* a, Value* x) {
  if (operand == DType::boolean) {
    switch (op) {
      case ExprOp::logical_and: case ExprOp::min: return b.CreateAnd(a, x);
      case ExprOp::logical_or: case ExprOp::max: return b.CreateOr(a, x);
      case ExprOp::logical_xor: case ExprOp::ne: return b.CreateXor(a, x);
      case ExprOp::eq: return b.CreateICmpEQ(a, x);
      case ExprOp::lt: return b.CreateICmpULT(a, x);
      case ExprOp::le: return b.CreateICmpULE(a, x);
      case ExprOp::gt: return b.CreateICmpUGT(a, x);
      case ExprOp::ge: return b.CreateICmpUGE(a, x);
      default: break;
    }
    TESSEL_ASSERT(false, "CPU codegen: binary op ", expr_op_name(op), " on bool");
  }
  if (is_float(operand)) {
    switch (op) {
      case ExprOp::add: return b.CreateFAdd(a, x);
      case ExprOp::sub: return b.CreateFSub(a, x);
      case ExprOp::mul: return b.CreateFMul(a, x);
      case ExprOp::div: return b.CreateFDiv(a, x);
      case ExprOp::fmod: return b.CreateFRem(a, x);  // C fmod: the dividend's sign
      case ExprOp::mod: {  // the divisor's sign
        Value* r = b.CreateFRem(a, x);
        Value* fix = b.CreateAnd(b.CreateFCmpONE(r, fp_like(r, 0)),
                                 b.CreateICmpNE(b.CreateFCmpOLT(r, fp_like(r, 0)), b.CreateFCmpOLT(x, fp_like(x, 0))));
        return b.CreateSelect(fix, b.CreateFAdd(r, x), r);
      }
      case ExprOp::pow: return b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, x);
      case ExprOp::min: case ExprOp::max: {
        // NaN if either is NaN, else std::min / std::max (x86 cannot select llvm.minimum in LLVM 16).
        Value* pick_x = op == ExprOp::min ? b.CreateFCmpOLT(x, a) : b.CreateFCmpOLT(a, x);
        return b.CreateSelect(b.CreateFCmpUNO(a, x), fp_like(a, NAN), b.CreateSelect(pick_x, x, a));
      }
      case ExprOp::eq: return b.CreateFCmpOEQ(a, x);
      case ExprOp::ne: return b.CreateFCmpUNE(a, x);
      case ExprOp::lt: return b.CreateFCmpOLT(a, x);
      case ExprOp::le: return b.CreateFCmpOLE(a, x);
      case ExprOp::gt: return b.CreateFCmpOGT(a, x);
      case ExprOp::ge: return b.CreateFCmpOGE(a, x);
      default: break;
    }
    TESSEL_ASSERT(false, "CPU codegen: binary op ", expr_op_name(op), " on ", dtype_name(operand));
  }
  // Integers: wrap at the dtype's width, like the interpreter's round_to after every op.
  const bool u = is_unsigned_int(operand);
  Value* zero = int_like(a, 0);
  auto safe_divisor = [&] {  // 0 -> 1 and -1 -> 1 (both handled apart): no trap, no overflow
    Value* bad = b.CreateICmpEQ(x, zero);
    if (!u) bad = b.CreateOr(bad, b.CreateICmpEQ(x, int_like(x, -1)));
    return b.CreateSelect(bad, int_like(x, 1), x);
  };
  switch (op) {
    case ExprOp::add: return b.CreateAdd(a, x);
    case ExprOp::sub: return b.CreateSub(a, x);
    case ExprOp::mul: return b.CreateMul(a, x);
    case ExprOp::div: {
      Value* q = u ? b.CreateUDiv(a, safe_divisor()) : b.CreateSDiv(a, safe_divisor());
      if (!u) q = b.CreateSelect(b.CreateICmpEQ(x, int_like(x, -1)), b.CreateNeg(a), q);
      return b.CreateSelect(b.CreateICmpEQ(x, zero), zero, q);
    }
    case ExprOp::fmod: case ExprOp::mod: {
      Value* r = u ? b.CreateURem(a, safe_divisor()) : b.CreateSRem(a, safe_divisor());
      if (!u) r = b.CreateSelect(b.CreateICmpEQ(x, int_like(x, -1)), zero, r);
      if (op == ExprOp::mod && !u) {
        Value* fix = b.CreateAnd(b.CreateICmpNE(r, zero), b.CreateICmpNE(b.CreateICmpSLT(r, zero), b.CreateICmpSLT(x, zero)));
        r = b.CreateSelect(fix, b.CreateAdd(r, x), r);
      }
      return b.CreateSelect(b.CreateICmpEQ(x, zero), zero, r);
    }
    case ExprOp::pow: {  // in double, then wrapped like a cast
      Type* f64 = like_shape(a, b.getDoubleTy());
      Value* fa = u ? b.CreateUIToFP(a, f64) : b.CreateSIToFP(a, f64);
      Value* fx = u ? b.CreateUIToFP(x, f64) : b.CreateSIToFP(x, f64);
      return convert_value(b, b.CreateBinaryIntrinsic(llvm::Intrinsic::pow, fa, fx), DType::f64, operand);
    }
    case ExprOp::min: return b.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umin : llvm::Intrinsic::smin, a, x);
    case ExprOp::max: return b.CreateBinaryIntrinsic(u ? llvm::Intrinsic::umax : llvm::Intrinsic::smax, a, x);
    case ExprOp::eq: return b.CreateICmpEQ(a, x);
    case ExprOp::ne: return b.CreateICmpNE(a, x);
    case ExprOp::lt: return u ? b.CreateICmpULT(a, x) : b.CreateICmpSLT(a, x);
    case ExprOp::le: return u ? b.CreateICmpULE(a, x) : b.CreateICmpSLE(a, x);
    case ExprOp::gt: return u ? b.CreateICmpUGT(a, x) : b.CreateICmpSGT(a, x);
    case ExprOp::ge: return u ? b.CreateICmpUGE(a, x) : b.CreateICmpSGE(a, x);
    default: break;
  }
  TESSEL_ASSERT(false, "CPU codegen: binary op ", expr_op_name(op), " on ", dtype_name(operand));
}

llvm::Value* emit_div_by_invariant(IRBuilderBase& b, Value* a, Value* x) {
  const llvm::fltSemantics& sem = scalar_of(x)->getFltSemantics();
  Value* magnitude = unary_intrinsic(b, llvm::Intrinsic::fabs, x);
  Value* subnormal = b.CreateFCmpOLT(magnitude, fp_like(x, llvm::APFloat::getSmallestNormalized(sem).convertToDouble()));
  Value* scale = b.CreateSelect(subnormal, fp_like(x, 0x1p64), fp_like(x, 1.0));
  Value* r = b.CreateFDiv(fp_like(x, 1.0), b.CreateFMul(x, scale));
  return b.CreateFMul(b.CreateFMul(a, r), scale);
}

llvm::Value* emit_combine(IRBuilderBase& b, Combiner c, DType dtype, Value* acc, Value* v) {
  llvm::FastMathFlags reassoc;
  reassoc.setAllowReassoc();
  switch (c) {
    case Combiner::none: return v;
    case Combiner::sum:
      if (!is_float(dtype)) return dtype == DType::boolean ? b.CreateOr(acc, v) : b.CreateAdd(acc, v);
      break;
    case Combiner::prod:
      if (!is_float(dtype)) return dtype == DType::boolean ? b.CreateAnd(acc, v) : b.CreateMul(acc, v);
      break;
    case Combiner::max: case Combiner::min: {
      if (!is_float(dtype)) return emit_binary(b, c == Combiner::max ? ExprOp::max : ExprOp::min, dtype, acc, v);
      // (v > acc || v != v) ? v : acc -- a NaN, once accumulated, stays.
      Value* better = c == Combiner::max ? b.CreateFCmpOGT(v, acc) : b.CreateFCmpOLT(v, acc);
      return b.CreateSelect(b.CreateOr(better, b.CreateFCmpUNO(v, v)), v, acc);
    }
  }
  Value* r = c == Combiner::sum ? b.CreateFAdd(acc, v) : b.CreateFMul(acc, v);
  if (auto* inst = llvm::dyn_cast<llvm::Instruction>(r)) inst->setFastMathFlags(reassoc);
  return r;
}

bool is_math_function(const llvm::Function& fn) { return fn.getName().startswith(kExpName); }

void specialize_math_functions(llvm::Module& m, bool avx512f, bool avx512vl) {
  // AVX-512's vscalefps multiplies by 2^n in one instruction, rounding once, into the subnormals
  // and to infinity as the portable two-factor scale does (the same bits; NaN stays NaN): 1
  // instruction after the polynomial instead of 9.
  struct Scalef {
    int lanes;
    bool available;
    llvm::Intrinsic::ID id;
  };
  for (const Scalef& v : {Scalef{16, avx512f, llvm::Intrinsic::x86_avx512_mask_scalef_ps_512},
                          Scalef{8, avx512f && avx512vl, llvm::Intrinsic::x86_avx512_mask_scalef_ps_256}}) {
    llvm::Function* fn = m.getFunction(exp_variant_name(v.lanes));
    if (!fn || !v.available) continue;
    fn->deleteBody();
    fn->setLinkage(llvm::GlobalValue::InternalLinkage);
    define_body(fn, [&](IRBuilderBase& b, Value* x) -> Value* {
      const ExpParts e = exp_parts(b, x);
      llvm::Function* scalef = llvm::Intrinsic::getDeclaration(&m, v.id);
      std::vector<Value*> args{e.y, e.nf, llvm::Constant::getNullValue(x->getType()),
                               b.getIntN(static_cast<unsigned>(v.lanes), static_cast<uint64_t>(-1))};
      if (v.lanes == 16) args.push_back(b.getInt32(4));  // _MM_FROUND_CUR_DIRECTION
      return b.CreateCall(scalef, args);
    });
  }
}

void prepare_math_inlining(llvm::Module& m) {
  llvm::removeFromUsedLists(m, [](llvm::Constant* c) {
    auto* fn = llvm::dyn_cast<llvm::Function>(c);
    return fn && is_math_function(*fn);
  });
  for (llvm::Function& fn : m) {
    if (!is_math_function(fn) || fn.isDeclaration()) continue;
    fn.removeFnAttr(llvm::Attribute::NoInline);
    fn.addFnAttr(llvm::Attribute::AlwaysInline);
  }
}

}  // namespace tessel::cpu
