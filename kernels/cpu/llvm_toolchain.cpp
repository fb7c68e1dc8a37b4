// LLVM as the CPU backend's toolchain (llvm_toolchain.h).
#include "kernels/cpu/llvm_toolchain.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/Transforms/IPO/AlwaysInliner.h>
#include <llvm/Transforms/IPO/GlobalDCE.h>
#include <llvm/TargetParser/Host.h>

#include "kernels/cpu/emit_scalar.h"
#include "kernels/cpu/streaming_stores.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"

namespace tessel::cpu {

namespace {

void initialize_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    llvm::InitializeAllAsmParsers();
  });
}

std::string take_error(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

// Keeps LLVM's errors (for our messages) and silences its remarks and warnings.
struct QuietDiagnostics : llvm::DiagnosticHandler {
  bool handleDiagnostics(const llvm::DiagnosticInfo& di) override {
    if (di.getSeverity() == llvm::DS_Error) {
      llvm::raw_string_ostream os(errors);
      llvm::DiagnosticPrinterRawOStream printer(os);
      di.print(printer);
      os << "\n";
    }
    return true;
  }
  std::string errors;
};

std::string save_rejected(const llvm::Module& module, const std::string& reject_dir, const std::string& name) {
  const std::filesystem::path dir = reject_dir.empty() ? std::filesystem::path("tessel-rejected") : std::filesystem::path(reject_dir);
  std::error_code fs_error;
  std::filesystem::create_directories(dir, fs_error);
  const std::string path = (dir / (name + ".ll")).string();
  write_ir(module, path);
  return path;
}

llvm::CodeGenOpt::Level codegen_level(int opt_level) {
  switch (opt_level) {
    case 0: return llvm::CodeGenOpt::None;
    case 1: return llvm::CodeGenOpt::Less;
    case 2: return llvm::CodeGenOpt::Default;
    case 3: return llvm::CodeGenOpt::Aggressive;
  }
  throw InternalError(cat("LLVM optimization level ", opt_level, " is not 0-3"));
}

}  // namespace

std::unique_ptr<llvm::LLVMContext> make_context() {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  ctx->setDiagnosticHandler(std::make_unique<QuietDiagnostics>());
  return ctx;
}

std::unique_ptr<llvm::TargetMachine> host_target_machine(int opt_level) {
  initialize_llvm();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) throw InternalError("LLVM cannot describe the host CPU: " + take_error(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(codegen_level(opt_level));
  auto tm = jtmb->createTargetMachine();
  if (!tm) throw InternalError("LLVM cannot build a target machine for the host: " + take_error(tm.takeError()));
  return std::move(*tm);
}

std::string host_cpu_description() {
  std::string out(llvm::sys::getHostCPUName());
  llvm::StringMap<bool> features;
  if (llvm::sys::getHostCPUFeatures(features)) {
    std::vector<std::string> on;
    for (const auto& f : features)
      if (f.second) on.push_back(f.first().str());
    std::sort(on.begin(), on.end());
    out += " (";
    for (size_t i = 0; i < on.size(); ++i) out += (i ? "," : "") + on[i];
    out += ")";
  }
  return out;
}

std::unique_ptr<llvm::TargetMachine> spec_target_machine(const HwSpec& spec) {
  initialize_llvm();
  std::string error;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(spec.target.triple, error);
  if (!target) throw UserError(spec.file, "/target/triple", cat("LLVM has no target for '", spec.target.triple, "': ", error));
  std::string features;
  for (const std::string& f : spec.target.cpu_features) features += (features.empty() ? "+" : ",+") + f;
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(spec.target.triple, spec.target.arch, features, options,
                                                                      llvm::Reloc::PIC_, std::nullopt,
                                                                      llvm::CodeGenOpt::Aggressive));
  if (!tm) throw UserError(spec.file, "/target/arch", cat("LLVM cannot target CPU '", spec.target.arch, "' on ", spec.target.triple));
  return tm;
}

void set_target(llvm::Module& module, llvm::TargetMachine& tm) {
  module.setTargetTriple(tm.getTargetTriple().str());
  module.setDataLayout(tm.createDataLayout());
}

void verify_or_reject(llvm::Module& module, const std::string& reject_dir, const std::string& name, const std::string& what) {
  std::string message;
  llvm::raw_string_ostream os(message);
  if (!llvm::verifyModule(module, &os)) return;
  const std::string path = save_rejected(module, reject_dir, name);
  throw InternalError(cat("LLVM's verifier rejected the IR of ", what, ": ", os.str(), "saved to ", path,
                          "; reproduce with: opt-16 -passes=verify ", path));
}

int optimize_module(llvm::Module& module, llvm::TargetMachine& tm, int opt_level) {
  codegen_level(opt_level);  // validates the level
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel levels[] = {llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
                                                   llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  const llvm::MCSubtargetInfo& target = *tm.getMCSubtargetInfo();
  specialize_math_functions(module, target.checkFeatures("+avx512f"), target.checkFeatures("+avx512vl"));
  llvm::ModulePassManager mpm = opt_level == 0 ? pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0)
                                               : pb.buildPerModuleDefaultPipeline(levels[opt_level]);
  mpm.run(module, mam);
  // The vectorizer has replaced the math functions' calls by their vector variants: inline them.
  prepare_math_inlining(module);
  llvm::ModulePassManager inline_math;
  inline_math.addPass(llvm::AlwaysInlinerPass());
  inline_math.addPass(llvm::GlobalDCEPass());
  inline_math.run(module, mam);
  // After the vectorizer and the alignment it inferred: only wide, provably aligned stores qualify.
  return mark_streaming_stores(module);
}

// Both write through write_file_atomically (tilegraph/files.h): the whole file or none, a failed
// write a UserError (an llvm::raw_fd_ostream that fails aborts the process when destroyed).
std::string compile_object(llvm::Module& module, llvm::TargetMachine& tm, const std::string& name) {
  llvm::SmallVector<char, 0> bytes;
  llvm::raw_svector_ostream out(bytes);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, out, nullptr, llvm::CGFT_ObjectFile))
    throw InternalError(cat("LLVM cannot emit object files for ", tm.getTargetTriple().str()));
  pm.run(module);
  const auto* diagnostics = static_cast<const QuietDiagnostics*>(module.getContext().getDiagHandlerPtr());
  if (!diagnostics->errors.empty()) throw InternalError(cat("LLVM failed to compile ", name, ": ", diagnostics->errors));
  return std::string(bytes.begin(), bytes.end());
}

void write_object(llvm::Module& module, llvm::TargetMachine& tm, const std::string& path) {
  write_file_atomically(path, compile_object(module, tm, path));
}

std::string print_module(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream out(text);
  module.print(out, nullptr);
  out.flush();
  return text;
}

void write_ir(const llvm::Module& module, const std::string& path) { write_file_atomically(path, print_module(module)); }

struct HostJit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  // Textual IR of every module added, kept only to save a repro when compilation fails.
  std::map<std::string, std::string> ir_by_symbol;
};

HostJit::HostJit(int opt_level) : impl_(std::make_unique<Impl>()) {
  initialize_llvm();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) throw InternalError("LLVM cannot describe the host CPU: " + take_error(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(codegen_level(opt_level));
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!jit) throw InternalError("cannot create the LLVM JIT: " + take_error(jit.takeError()));
  impl_->jit = std::move(*jit);
  // Kernels call the C math library (tanhf, erff, ...), which the process already has.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(impl_->jit->getDataLayout().getGlobalPrefix());
  if (!process) throw InternalError("cannot expose the process's symbols to the JIT: " + take_error(process.takeError()));
  impl_->jit->getMainJITDylib().addGenerator(std::move(*process));
}

HostJit::~HostJit() = default;

void HostJit::add(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context) {
  for (const llvm::Function& f : *module)
    if (!f.isDeclaration()) {
      std::string text;
      llvm::raw_string_ostream os(text);
      module->print(os, nullptr);
      impl_->ir_by_symbol[f.getName().str()] = os.str();
      break;
    }
  if (auto err = impl_->jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(context))))
    throw InternalError("the LLVM JIT refused a module: " + take_error(std::move(err)));
}

void HostJit::add_object(const std::string& object, const std::string& name) {
  if (auto err = impl_->jit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, name)))
    throw InternalError(cat("the LLVM JIT refused the object file of ", name, ": ", take_error(std::move(err))));
}

void* HostJit::lookup(const std::string& symbol, const std::string& reject_dir) {
  auto address = impl_->jit->lookup(symbol);
  if (address) return address->toPtr<void*>();
  const std::string error = take_error(address.takeError());
  std::string saved = "(IR not kept)";
  if (auto it = impl_->ir_by_symbol.find(symbol); it != impl_->ir_by_symbol.end()) {
    const std::filesystem::path dir = reject_dir.empty() ? std::filesystem::path("tessel-rejected") : std::filesystem::path(reject_dir);
    std::error_code fs_error;
    std::filesystem::create_directories(dir, fs_error);
    saved = (dir / (symbol + ".ll")).string();
    std::ofstream(saved) << it->second;
  }
  throw InternalError(cat("LLVM failed to compile ", symbol, ": ", error, "; IR saved to ", saved,
                          "; reproduce with: llc-16 -O3 ", saved));
}

}  // namespace tessel::cpu
