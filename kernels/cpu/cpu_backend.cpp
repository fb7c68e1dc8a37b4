// The CPU backend (cpu_backend.h): the pipeline from a Schedule to running code, top to bottom.
//
//   1. plan buffers (kernels/buffer_plan.h): arena slots for tensors that leave their group;
//   2. plan every group (group_plan.h): task grid, per-task boxes, row reuse (row_reuse.h),
//      scratch placement -- needs the buffer plan, to know which outputs stay in scratch;
//   3. emit one LLVM function per group (emit_group.h) into its own module and verify it (a
//      rejected module is saved with a repro command);
//   4. optimize (O3 unless CompileOptions::opt_level says otherwise) for the host CPU and compile it
//      to an object file (llvm_toolchain.h) -- or take the object from the cache (kernel_cache.h)
//      -- steps 3-4 for all groups in parallel (parallel_compile.h);
//   5. link the objects with ORC LLJIT, look every kernel up and build the runtime (cpu_executable.h).
// `emit` runs steps 1-3 for the spec's own target instead and writes .ll or .o files.
#include "kernels/cpu/cpu_backend.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <llvm/Config/llvm-config.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>
#include <nlohmann/json.hpp>

#include "kernels/cpu/kernel_families.h"
#include "policy/kernel_families.h"
#include "kernels/cpu/cpu_executable.h"
#include "kernels/cpu/emit_group.h"
#include "kernels/cpu/passes_hash.h"  // generated: TESSEL_CPU_PASSES_HASH (CMakeLists.txt)
#include "kernels/kernel_cache.h"
#include "kernels/parallel_compile.h"
#include "tilegraph/error.h"
#include "tilegraph/files.h"

namespace tessel {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string describe_group(const OpGraph& graph, const CpuGroupPlan& plan) {
  std::string names;
  for (NodeId n : plan.nodes) names += (names.empty() ? "" : ", ") + graph.node(n).name();
  return cat("group ", plan.group, " (", names, ")");
}

void check_inputs(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec) {
  if (spec.kind != "cpu")
    throw UserError(spec.file, "/kind", cat("the cpu backend compiles for cpu specs; '", spec.name, "' is a ", spec.kind));
  const std::vector<int> group_of = group_of_nodes(graph, schedule);
  for (NodeId n = 0; n < graph.num_nodes(); ++n)
    if (group_of[n] < 0)
      throw UserError("", cat("node '", graph.node(n).name(), "'"), "is in no group of the schedule (was it made for this model?)");
}

// One group's module, emitted for `tm`'s target and verified.
std::unique_ptr<llvm::Module> emit_module(const OpGraph& graph, const CpuGroupPlan& plan, const cpu::CodegenParams& params,
                                          llvm::LLVMContext& ctx, llvm::TargetMachine& tm, const std::string& reject_dir) {
  auto module = std::make_unique<llvm::Module>(cpu::kernel_name(plan.group), ctx);
  cpu::set_target(*module, tm);
  cpu::emit_group_kernel(graph, plan, params, *module);
  cpu::verify_or_reject(*module, reject_dir, cpu::kernel_name(plan.group), describe_group(graph, plan));
  return module;
}

/// `schedule` with every group's kernel family recorded: those it records are kept, the others
/// the backend's choice (CpuKernelFamilies::choose), as compile() records them.
Schedule with_families(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec) {
  Schedule out = schedule;
  record_missing_kernel_families(graph, spec, cpu::CpuKernelFamilies(), out);
  return out;
}

class CpuBackend : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  std::string_view description() const override {
    return "LLVM IR per fused group, JIT-compiled with ORC at O3 for the host CPU, tasks on a thread pool";
  }
  bool supports(const HwSpec& spec) const override { return spec.kind == "cpu"; }
  std::optional<std::string> unavailable() const override { return std::nullopt; }
  std::vector<std::string> emit_formats() const override { return {"llvm", "obj"}; }
  std::unique_ptr<KernelFamilies> kernel_families() const override { return std::make_unique<cpu::CpuKernelFamilies>(); }
  // The micro-kernel and the loop nests vectorize an NHWC convolution along its output channels:
  // HWIO weights are vector loads there, OHWI ones lane by lane.
  bool conv_weights_hwio() const override { return true; }
  /// The micro-kernel vectorizes an NCHW convolution along its output rows. Where a row fills at
  /// most half an f32 vector, the convolution runs in NHWC (vectorized along its output channels):
  /// ResNet-50's conv5 3x3 over 7 x 7 pixels 2.7x faster on this project's 2-core AVX-512 VM, where
  /// rows of 14 and 16 ran 1.6x and 1.5x slower so (conv4's 3x3, SD's 640-channel ResBlock).
  /// Where a row is shorter than two vectors, a 1x1 one runs as a batched MatMul over the image's
  /// pixels: ResNet-50's conv5 and conv4 1x1 3.3x and 1.4x faster, MobileNetV2's and
  /// EfficientNet's over 7 x 7 and 28 x 28 1.14x and 1.23x (2026-11-30, interleaved,
  /// experiments/op_sweep/runs/cpu-2026-11-30-nchw/).
  std::pair<int64_t, int64_t> nchw_row_limits(const HwSpec& spec) const override {
    return {spec.compute.simd_width / 2 + 1, 2 * spec.compute.simd_width};
  }

  std::vector<std::string> emit(const OpGraph& graph, const Schedule& given, const HwSpec& spec, const std::string& format,
                                const std::string& dir) const override {
    if (format != "llvm" && format != "obj")
      throw UserError("command line", "--emit", cat("the cpu backend emits llvm or obj, not '", format, "'"));
    check_inputs(graph, given, spec);
    const Schedule schedule = with_families(graph, given, spec);
    const cpu::CodegenParams params = cpu::codegen_params(spec);
    const int64_t alignment = arena_alignment(spec);
    const BufferPlan buffers = plan_buffers(graph, schedule, alignment);
    std::unique_ptr<llvm::TargetMachine> tm = cpu::spec_target_machine(spec);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw UserError(dir, "", cat("cannot create the output directory: ", ec.message()));

    std::vector<std::string> files;
    nlohmann::json manifest;
    manifest["backend"] = "cpu";
    manifest["format"] = format;
    manifest["hw_spec"] = spec.name;
    manifest["target"] = {{"triple", spec.target.triple}, {"cpu", spec.target.arch}, {"features", spec.target.cpu_features}};
    manifest["kernel_abi"] =
        "void kernel(uint8_t** tensors /* by tensor id */, int64_t task_begin, int64_t task_end, uint8_t* scratch "
        "/* per thread */, const int64_t* boxes /* <kernel>.boxes.bin */, int64_t* status /* 4 words */)";
    manifest["arena_bytes"] = buffers.arena_bytes;
    manifest["alignment"] = buffers.alignment;
    nlohmann::json tensors = nlohmann::json::array();
    for (TensorId t = 0; t < graph.num_tensors(); ++t) {
      nlohmann::json e = {{"id", t}, {"name", graph.tensor(t).name}, {"type", graph.tensor(t).type.print()}};
      if (const BufferSlot* s = buffers.find(t)) e["arena_offset"] = s->offset;
      tensors.push_back(e);
    }
    manifest["tensors"] = tensors;
    nlohmann::json kernels = nlohmann::json::array();
    for (int g = 0; g < static_cast<int>(schedule.groups.size()); ++g) {
      const CpuGroupPlan plan = plan_cpu_group(graph, schedule, buffers, g, alignment, params.reuse_bytes, params.streaming_bytes);
      auto ctx = cpu::make_context();
      std::unique_ptr<llvm::Module> module = emit_module(graph, plan, params, *ctx, *tm, dir);
      const std::string base = (std::filesystem::path(dir) / cpu::kernel_name(g)).string();
      const std::string file = base + (format == "llvm" ? ".ll" : ".o");
      int nontemporal_stores = 0;
      if (format == "llvm") {
        cpu::write_ir(*module, file);
      } else {
        nontemporal_stores = cpu::optimize_module(*module, *tm);
        cpu::write_object(*module, *tm, file);
      }
      write_file_atomically(base + ".boxes.bin",
                            std::string(reinterpret_cast<const char*>(plan.boxes.data()), plan.boxes.size() * sizeof(int64_t)));
      files.push_back(file);
      files.push_back(base + ".boxes.bin");
      std::vector<std::string> nodes;
      for (NodeId n : plan.nodes) nodes.push_back(graph.node(n).name());
      nlohmann::json reuses = nlohmann::json::array();
      for (const CpuRowReuse& r : plan.reuses) {
        std::vector<std::string> readers;
        for (const CpuRowReader& reader : r.readers) readers.push_back(graph.node(plan.nodes[reader.position]).name());
        reuses.push_back({{"source", graph.node(plan.nodes[r.source]).name()}, {"value", print_expr(r.value)},
                          {"readers", readers}, {"buffer_extents", r.extents}});
      }
      std::vector<std::string> streamed;
      for (const CpuNodeBuffer& b : plan.buffers)
        if (b.streamed) streamed.push_back(graph.tensor(b.tensor).name);
      nlohmann::json kernel = {{"name", cpu::kernel_name(g)}, {"group", g}, {"file", std::filesystem::path(file).filename().string()},
                               {"nodes", nodes}, {"tasks", plan.num_tasks}, {"sink_tile", plan.sink_tile},
                               {"scratch_bytes_per_thread", plan.scratch_bytes}, {"row_reuse", reuses},
                               {"streamed_outputs", streamed},
                               {"repro", format == "llvm" ? cat("llc-16 -O3 -mtriple=", spec.target.triple, " -mcpu=", spec.target.arch, " ", file)
                                                          : cat("objdump -d ", file)}};
      // Only the object path runs the optimizer, after which the streamed tensors' vector stores
      // are marked (streaming_stores.h); the .ll is the IR as emitted.
      if (format == "obj") kernel["nontemporal_stores"] = nontemporal_stores;
      kernels.push_back(kernel);
    }
    manifest["kernels"] = kernels;
    const std::string manifest_path = (std::filesystem::path(dir) / "manifest.json").string();
    write_file_atomically(manifest_path, manifest.dump(2) + "\n");
    files.push_back(manifest_path);
    return files;
  }

  std::unique_ptr<Executable> compile(const OpGraph& graph, const Schedule& given, const HwSpec& spec,
                                      const CompileOptions& options) const override {
    check_inputs(graph, given, spec);
    const Schedule schedule = with_families(graph, given, spec);
    CompileStats stats;
    const cpu::CodegenParams params = cpu::codegen_params(spec);
    const int64_t alignment = arena_alignment(spec);
    BufferPlan buffers = plan_buffers(graph, schedule, alignment);
    if (options.opt_level < 0 || options.opt_level > 3)
      throw UserError("command line", "--opt-level", cat("LLVM's optimization level is 0-3, not ", options.opt_level));
    const int n = static_cast<int>(schedule.groups.size());
    std::vector<cpu::CompiledGroup> groups(n);
    for (int g = 0; g < n; ++g)
      groups[g].plan = plan_cpu_group(graph, schedule, buffers, g, alignment, params.reuse_bytes, params.streaming_bytes);

    // Emit, optimize and compile every group to an object file -- or find it in the cache, keyed
    // by the IR as emitted, the host CPU, the level, LLVM's version and Tessel's own passes --
    // one worker per hardware thread, each with its own target machine; then link them all.
    const auto start = Clock::now();
    const KernelCache cache(options.cache_dir, "o");
    const std::string host = cpu::host_cpu_description();
    const std::string level = std::to_string(options.opt_level);
    std::vector<std::unique_ptr<llvm::TargetMachine>> machines(compile_workers(n));
    std::vector<std::string> objects(n);
    std::vector<double> codegen_s(n, 0);
    std::vector<char> cached(n, 0);
    compile_in_parallel(n, "CPU kernels", [&](int g, int worker) {
      if (!machines[worker]) machines[worker] = cpu::host_target_machine(options.opt_level);
      llvm::TargetMachine& tm = *machines[worker];
      auto ctx = cpu::make_context();
      const auto t0 = Clock::now();
      std::unique_ptr<llvm::Module> module = emit_module(graph, groups[g].plan, params, *ctx, tm, options.reject_dir);
      codegen_s[g] = seconds_since(t0);
      std::string key;
      if (options.use_cache) {
        key = KernelCache::key({cpu::print_module(*module), host, level, LLVM_VERSION_STRING, TESSEL_CPU_PASSES_HASH});
        if (std::optional<std::string> hit = cache.load(key)) {
          objects[g] = std::move(*hit);
          cached[g] = 1;
          return;
        }
      }
      cpu::optimize_module(*module, tm, options.opt_level);
      objects[g] = cpu::compile_object(*module, tm, cpu::kernel_name(g));
      if (options.use_cache) cache.store(key, objects[g]);
    });
    auto jit = std::make_unique<cpu::HostJit>(options.opt_level);
    for (int g = 0; g < n; ++g) {
      jit->add_object(objects[g], cpu::kernel_name(g));
      stats.codegen_s += codegen_s[g];
      stats.cache_hits += cached[g];
    }
    for (cpu::CompiledGroup& cg : groups)
      cg.kernel = reinterpret_cast<cpu::KernelFn>(jit->lookup(cpu::kernel_name(cg.plan.group), options.reject_dir));
    stats.compile_s = seconds_since(start);
    stats.kernels = static_cast<int>(groups.size());
    for (const ScheduleGroup& g : schedule.groups) stats.kernel_templates.push_back(g.group.kernel.family);
    int threads = options.threads;
    if (threads <= 0) {
      const int64_t host = std::max(1u, std::thread::hardware_concurrency());
      threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(spec.compute.units, host)));
    }
    return std::make_unique<cpu::CpuExecutable>(graph, std::move(buffers), std::move(groups), std::move(jit), threads, stats,
                                                 spec.last_level_cache_bytes());
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace tessel
