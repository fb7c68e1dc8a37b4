// LLVM as the CPU backend's toolchain: target machines (the host for JIT, the spec's target for
// ahead-of-time objects), the O3 pipeline, verification with a saved repro on failure, object
// files, and the ORC LLJIT that owns the compiled kernels. Internal to kernels/cpu/; LLVM types
// appear only as forward declarations.
#pragma once

#include <memory>
#include <string>

#include "hw_specs/hw_spec.h"

namespace llvm {
class LLVMContext;
class Module;
class TargetMachine;
}  // namespace llvm

namespace tessel::cpu {

/// A fresh context whose diagnostic handler keeps errors (for the messages of InternalErrors)
/// and drops optimization remarks and warnings (the generated code is not the user's).
std::unique_ptr<llvm::LLVMContext> make_context();

/// The host CPU (llvm::sys::getHostCPUName / getHostCPUFeatures), its code generator at
/// `opt_level` (0-3): the target machine the JIT itself compiles with.
std::unique_ptr<llvm::TargetMachine> host_target_machine(int opt_level = 3);
/// The spec's target (target.triple, target.arch, target.cpu_features); UserError when LLVM does
/// not know the triple or CPU.
std::unique_ptr<llvm::TargetMachine> spec_target_machine(const HwSpec& spec);
/// "<cpu> <features>" of the host, for manifests and error messages.
std::string host_cpu_description();

/// Sets the module's triple and data layout to the target machine's.
void set_target(llvm::Module& module, llvm::TargetMachine& tm);

/// Runs LLVM's verifier; on failure saves the module as `<reject_dir>/<name>.ll` and raises an
/// InternalError naming the file, the verifier's message and a repro command (opt-16).
void verify_or_reject(llvm::Module& module, const std::string& reject_dir, const std::string& name,
                      const std::string& what);

/// LLVM's module pipeline at `opt_level` (0-3; 3 = O3) for `tm` (its TargetTransformInfo sizes the
/// vectorizer's choices), then mark_streaming_stores (streaming_stores.h); returns the number of
/// stores that made non-temporal.
int optimize_module(llvm::Module& module, llvm::TargetMachine& tm, int opt_level = 3);

/// `module` compiled to an object file for `tm` (InternalError naming `name` when LLVM fails).
std::string compile_object(llvm::Module& module, llvm::TargetMachine& tm, const std::string& name);
/// Writes `module` as an object file for `tm`.
void write_object(llvm::Module& module, llvm::TargetMachine& tm, const std::string& path);
/// `module` as textual IR.
std::string print_module(const llvm::Module& module);
/// Writes `module` as textual IR.
void write_ir(const llvm::Module& module, const std::string& path);

/// ORC LLJIT for the host: owns every module added and the code compiled from it.
class HostJit {
 public:
  /// `opt_level` 0-3 picks the code generator's level (0: fast instruction selection).
  explicit HostJit(int opt_level = 3);
  ~HostJit();
  HostJit(const HostJit&) = delete;
  HostJit& operator=(const HostJit&) = delete;

  /// Adds an optimized module (it must have the host target set) and compiles it on lookup.
  void add(std::unique_ptr<llvm::Module> module, std::unique_ptr<llvm::LLVMContext> context);
  /// Adds an object file compiled for the host by host_target_machine(opt_level) (compile_object);
  /// `name` identifies it in errors.
  void add_object(const std::string& object, const std::string& name);
  /// The address of `symbol`; InternalError (the IR saved under `reject_dir`, a repro command)
  /// when LLVM fails to compile it.
  void* lookup(const std::string& symbol, const std::string& reject_dir);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessel::cpu
