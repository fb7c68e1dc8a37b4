// The CUDA backend and its runtime (see cuda_backend.h).
//
// compile():
//   1. generate one kernel per group (kernel_emitter.h);
//   2. compile each with NVRTC through the cubin cache (nvrtc_compiler.h);
//   3. open the driver, load the modules, allocate the buffer plan's arena (plan_buffers), the
//      graph inputs, the weights (uploaded once, here) and the scratch of kernels whose pool does
//      not fit shared memory.
// run(): upload the inputs, poison the arena (0xFF bytes: NaN for every float dtype, -1 for
// integers), launch the kernels in group order, synchronizing and checking after each so that a
// fault names its kernel, check the status word (gather indices out of range), download outputs.
// time(): inputs resident, one run captured as a CUDA graph and each replay timed between device
// events, all replays queued behind a spin kernel so that the GPU runs them back to back
// (TimingOptions::graph = false: the launches one by one, synchronized after each, instead); with
// a cold cache a buffer of twice the L2 is overwritten before every timed run, outside the events.
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <tuple>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kernels/buffer_plan.h"
#include "kernels/cuda/cuda_driver.h"
#include "kernels/cuda/row_plan.h"
#include "kernels/cuda/kernel_emitter.h"
#include "kernels/cuda/nm_compress.h"
#include "kernels/cuda/nvrtc_compiler.h"
#include "kernels/packed_tensor.h"
#include "kernels/parallel_compile.h"
#include "tilegraph/error.h"
#include "tilegraph/graph_inputs.h"
#include "tilegraph/files.h"

namespace tessel {

namespace cuda {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The widest access generated code issues (16-byte cp.async and the row kernel's vector loads,
// row_plan.h): arena slots are at least this aligned.
constexpr int64_t kVectorAccessBytes = kRowVectorBytes;

struct Launch {
  std::string name;
  int group = 0;  // the schedule's group it runs
  CUfunction function = nullptr;
  int64_t blocks = 0;
  int threads = 0;
  int64_t smem_bytes = 0;
  std::vector<CUdeviceptr> args;   // kernel parameters, in order
  std::vector<TensorId> arg_tensors;  // per arg: the tensor it addresses, or -1 (scratch, status)
  std::vector<CUtensorMap> maps;   // then these (GroupPlan::tensor_maps), passed by value
  std::vector<TensorMapParam> map_params;  // what each map describes
  std::vector<void*> arg_ptrs;     // pointers to args and maps (cuLaunchKernel's kernelParams)
};

class CudaExecutable : public Executable {
 public:
  CudaExecutable(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec, const CompileOptions& options)
      : graph_(graph), d_(CudaDriver::get()) {
    try {
      init(schedule, spec, options);
    } catch (...) {
      release();
      throw;
    }
  }

  ~CudaExecutable() override { release(); }

 private:
  void init(const Schedule& schedule, const HwSpec& spec, const CompileOptions& options) {
    const OpGraph& graph = graph_;
    cold_cache_bytes_ = spec.last_level_cache_bytes();
    options_ = options;
    // 1-2. Generate and compile.
    auto start = Clock::now();
    std::vector<GeneratedKernel> kernels;
    for (int i = 0; i < static_cast<int>(schedule.groups.size()); ++i)
      kernels.push_back(emit_group_kernel(graph, schedule, i, spec));
    stats_.codegen_s = seconds_since(start);
    stats_.kernels = static_cast<int>(kernels.size());
    groups_ = kernels.size();
    for (const GeneratedKernel& k : kernels) stats_.kernel_templates.push_back(k.path);
    start = Clock::now();
    const std::string arch = cuda_arch(spec);
    arch_ = arch;
    // Identical groups (a transformer's layers) have one kernel name: compile and load it once.
    // NVRTC is thread-safe: the distinct kernels compile in parallel.
    std::map<std::string, std::string> cubins;
    std::vector<const GeneratedKernel*> distinct;
    for (const GeneratedKernel& k : kernels)
      if (cubins.emplace(k.name, std::string()).second) distinct.push_back(&k);
    std::vector<CompiledKernel> compiled(distinct.size());
    compile_in_parallel(static_cast<int>(distinct.size()), "kernels", [&](int i, int) {
      compiled[i] = compile_kernel(distinct[i]->source, distinct[i]->name, arch, options);
    });
    for (size_t i = 0; i < distinct.size(); ++i) {
      stats_.cache_hits += compiled[i].cache_hit;
      cubins[distinct[i]->name] = std::move(compiled[i].cubin);
    }
    stats_.compile_s = seconds_since(start);

    // 3. Device, modules, buffers.
    d_.check(d_.cuDeviceGet(&device_, options.context ? options.context->device() : 0), "cuDeviceGet");
    d_.check(d_.cuDevicePrimaryCtxRetain(&ctx_, device_), "cuDevicePrimaryCtxRetain");
    d_.check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    if (options.context)
      stream_ = static_cast<CUstream>(options.context->stream());
    else
      d_.check(d_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    owns_stream_ = !options.context;
    std::map<std::string, CUmodule> module_of;
    for (const auto& [name, cubin] : cubins) {
      CUmodule m = nullptr;
      d_.check(d_.cuModuleLoadData(&m, cubin.data()), cat("cuModuleLoadData (", name, ", ", arch, ")").c_str());
      modules_.push_back(m);
      module_of[name] = m;
    }
    plan_ = plan_buffers(graph, schedule, arena_alignment(spec, kVectorAccessBytes));
    arena_ = alloc(plan_.arena_bytes);
    status_ = alloc(sizeof(uint32_t));
    std::vector<CUdeviceptr> where(graph.num_tensors(), 0);
    for (TensorId t : graph.inputs()) where[t] = input_buffers_.emplace_back(alloc(bytes_of(t)));
    for (TensorId t : graph.weights()) {
      where[t] = alloc(bytes_of(t));
      const std::vector<uint8_t> data = pack_tensor(graph.weight_values(t));
      upload(where[t], data);
    }
    for (const BufferSlot& s : plan_.slots) where[s.tensor] = arena_ + static_cast<CUdeviceptr>(s.offset);
    int64_t scratch_bytes = 0;
    for (const GeneratedKernel& k : kernels) scratch_bytes = std::max(scratch_bytes, k.plan.scratch_bytes());
    if (scratch_bytes > 0) scratch_ = alloc(scratch_bytes);
    for (size_t i = 0; i < kernels.size(); ++i) {
      const GeneratedKernel& k = kernels[i];
      if (k.plan.blocks == 0) continue;  // an empty output
      Launch l;
      l.name = cat("group ", i, " (", k.name, ")");
      l.group = static_cast<int>(i);
      d_.check(d_.cuModuleGetFunction(&l.function, module_of.at(k.name), k.name.c_str()), "cuModuleGetFunction");
      l.blocks = k.plan.blocks;
      l.threads = k.plan.threads;
      l.smem_bytes = k.plan.dynamic_smem_bytes();
      TESSEL_ASSERT(l.blocks < (int64_t{1} << 31), "kernel ", k.name, " needs ", l.blocks, " blocks");
      if (l.smem_bytes > 0)
        d_.check(d_.cuFuncSetAttribute(l.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(l.smem_bytes)),
                 cat("cuFuncSetAttribute (", k.name, ": ", l.smem_bytes, " bytes of shared memory)").c_str());
      if (k.plan.persistent_grid && k.plan.cluster_blocks > 1) {
        // A persistent grid of clusters: only as many clusters as the device holds at once
        // (its GPCs fit fewer clusters than SMs / cluster size), so the blocks all run together
        // instead of some waiting for others to finish every tile.
        CUlaunchConfig config{};
        config.gridDimX = static_cast<unsigned>(l.blocks);
        config.gridDimY = config.gridDimZ = 1;
        config.blockDimX = static_cast<unsigned>(l.threads);
        config.blockDimY = config.blockDimZ = 1;
        config.sharedMemBytes = static_cast<unsigned>(l.smem_bytes);
        int clusters = 0;
        d_.check(d_.cuOccupancyMaxActiveClusters(&clusters, l.function, &config), cat("cuOccupancyMaxActiveClusters (", k.name, ")").c_str());
        if (clusters > 0) l.blocks = std::min<int64_t>(l.blocks, int64_t{clusters} * k.plan.cluster_blocks);
      }
      for (TensorId t : k.plan.inputs) {
        l.args.push_back(where[t]);
        l.arg_tensors.push_back(t);
      }
      for (TensorId t : k.plan.outputs) {
        TESSEL_ASSERT(where[t] != 0, "tensor '", graph.tensor(t).name, "' written by ", k.name, " has no buffer");
        l.args.push_back(where[t]);
        l.arg_tensors.push_back(t);
      }
      for (TensorId t : k.plan.inputs)
        TESSEL_ASSERT(where[t] != 0, "tensor '", graph.tensor(t).name, "' read by ", k.name, " has no buffer");
      l.args.push_back(scratch_);
      l.args.push_back(status_);
      l.arg_tensors.insert(l.arg_tensors.end(), {-1, -1});
      for (const DerivedBuffer& b : k.plan.derived) {
        l.args.push_back(derived_buffer(b, k.name));
        l.arg_tensors.push_back(-1);
      }
      for (const TensorMapParam& m : k.plan.tensor_maps) {
        const CUdeviceptr at = m.derived >= 0 ? derived_buffer(k.plan.derived.at(static_cast<size_t>(m.derived)), k.name)
                                              : where[m.tensor] + static_cast<CUdeviceptr>(m.offset * 2);
        l.maps.push_back(tensor_map(m, at, k.name, m.derived >= 0 ? k.plan.derived[static_cast<size_t>(m.derived)].kind
                                                                  : DerivedBuffer::Kind::nm_values));
        l.map_params.push_back(m);
      }
      launches_.push_back(std::move(l));
    }
    for (Launch& l : launches_) {
      for (CUdeviceptr& a : l.args) l.arg_ptrs.push_back(&a);
      for (CUtensorMap& m : l.maps) l.arg_ptrs.push_back(&m);
    }
    for (TensorId t : graph.outputs()) output_where_.push_back(where[t]);
    where_ = std::move(where);
    launch_where_ = where_;
    io_.inputs.assign(input_buffers_.begin(), input_buffers_.end());
    io_.outputs.assign(output_where_.begin(), output_where_.end());
    // (alloc() counted the arena, the scratch and every buffer in peak_bytes_.)
  }

  // The device buffer of `b`, derived from its weight's values the first time a kernel asks for
  // it (kernels sharing a weight and its view share the buffers).
  CUdeviceptr derived_buffer(const DerivedBuffer& b, const std::string& kernel) {
    const auto key = std::make_tuple(b.tensor, b.view.n, b.view.k, b.view.k_contiguous, b.view.ld, b.view.offset, b.view.k_pad);
    auto it = derived_.find(key);
    if (it == derived_.end()) {
      const TensorInfo& info = graph_.tensor(b.tensor);
      TESSEL_ASSERT(info.kind == TensorKind::weight && dtype_bytes(info.type.dtype) == 2, "derived buffer of '", info.name, "' for ",
                    kernel, ": not a 16-bit weight");
      const std::vector<uint8_t> data = pack_tensor(graph_.weight_values(b.tensor));
      std::vector<uint16_t> bits(data.size() / 2);
      std::memcpy(bits.data(), data.data(), bits.size() * 2);
      NmCompressed c;
      const std::string why = compress_2_4(bits.data(), static_cast<int64_t>(bits.size()), b.view, c);
      TESSEL_ASSERT(why.empty(), "2:4 weight '", info.name, "' for ", kernel, ": ", why);
      std::pair<CUdeviceptr, CUdeviceptr> bufs{alloc(static_cast<int64_t>(c.values.size() * 2)),
                                               alloc(static_cast<int64_t>(c.metadata.size() * 2))};
      upload(bufs.first, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(c.values.data()),
                                              reinterpret_cast<const uint8_t*>(c.values.data()) + c.values.size() * 2));
      upload(bufs.second, std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(c.metadata.data()),
                                               reinterpret_cast<const uint8_t*>(c.metadata.data()) + c.metadata.size() * 2));
      it = derived_.emplace(key, bufs).first;
    }
    return b.kind == DerivedBuffer::Kind::nm_values ? it->second.first : it->second.second;
  }

  // The TMA tensor map of `m` over the 16-bit tensor at `at` (device/wgmma.cuh): dimensions
  // innermost first, m.swizzle_bytes swizzle, out-of-range elements read as zero. A map over a
  // derived buffer of 2:4 metadata (`derived`) reads unsigned 16-bit elements.
  CUtensorMap tensor_map(const TensorMapParam& m, CUdeviceptr at, const std::string& kernel,
                         DerivedBuffer::Kind derived = DerivedBuffer::Kind::nm_values) const {
    const DType dt = graph_.tensor(m.tensor).type.dtype;
    const bool metadata = m.derived >= 0 && derived == DerivedBuffer::Kind::nm_metadata;
    TESSEL_ASSERT(m.swizzle_bytes == 128 || m.swizzle_bytes == 64 || m.swizzle_bytes == 0, "tensor map of '",
                  graph_.tensor(m.tensor).name, "' for ", kernel, ": a swizzle of ", m.swizzle_bytes, " bytes");
    const CUtensorMapSwizzle swizzle = m.swizzle_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                                       : m.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                               : CU_TENSOR_MAP_SWIZZLE_NONE;
    TESSEL_ASSERT(dtype_bytes(dt) == 2 && at % 16 == 0 && (m.ld * 2) % 16 == 0, "tensor map of '", graph_.tensor(m.tensor).name,
                  "' for ", kernel, ": not a 16-byte aligned view of 16-bit elements");
    const size_t nb = m.batch_extents.size();
    TESSEL_ASSERT(nb <= 3 && m.batch_strides.size() == nb, "tensor map of '", graph_.tensor(m.tensor).name, "' for ", kernel,
                  ": ", nb, " batch dimensions");
    CUtensorMap map;
    cuuint64_t dims[5] = {static_cast<cuuint64_t>(m.cols), static_cast<cuuint64_t>(m.rows)};
    cuuint64_t strides[4] = {static_cast<cuuint64_t>(m.ld * 2)};
    cuuint32_t box[5] = {static_cast<cuuint32_t>(m.box_cols), static_cast<cuuint32_t>(m.box_rows)};
    cuuint32_t element_strides[5] = {1, 1, 1, 1, 1};
    TESSEL_ASSERT(m.batch_box.empty() || m.batch_box.size() == nb, "tensor map of '", graph_.tensor(m.tensor).name, "': batch boxes");
    TESSEL_ASSERT(m.element_strides.size() <= 2 + nb, "tensor map of '", graph_.tensor(m.tensor).name, "': element strides");
    for (size_t d = 0; d < m.element_strides.size(); ++d) element_strides[d] = static_cast<cuuint32_t>(m.element_strides[d]);
    for (size_t b = 0; b < nb; ++b) {
      dims[2 + b] = static_cast<cuuint64_t>(m.batch_extents[b]);
      strides[1 + b] = static_cast<cuuint64_t>(m.batch_strides[b] * 2);
      box[2 + b] = m.batch_box.empty() ? 1 : static_cast<cuuint32_t>(m.batch_box[b]);
    }
    const CUtensorMapDataType type = metadata ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                     : dt == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                         : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    d_.check(d_.cuTensorMapEncodeTiled(&map, type, static_cast<cuuint32_t>(2 + nb), reinterpret_cast<void*>(at), dims, strides, box,
                                       element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                       CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
             cat("cuTensorMapEncodeTiled (", kernel, ": '", graph_.tensor(m.tensor).name, "' ", m.rows, "x", m.cols, ", ld ", m.ld,
                 ", box ", m.box_rows, "x", m.box_cols, ", ", nb, " batch dimensions)").c_str());
    return map;
  }

  // Never throws: errors while tearing down are ignored.
  void release() {
    if (queued_done_) {  // a queued run may still read the buffers about to be freed
      d_.cuEventSynchronize(queued_done_);
      d_.cuEventDestroy(queued_done_);
      queued_done_ = nullptr;
    }
    if (queued_status_) d_.cuMemFreeHost(queued_status_);
    queued_status_ = nullptr;
    if (graph_exec_) d_.cuGraphExecDestroy(graph_exec_);
    for (CUdeviceptr p : allocations_) d_.cuMemFree(p);
    for (CUmodule m : modules_) d_.cuModuleUnload(m);
    if (stream_ && owns_stream_) d_.cuStreamDestroy(stream_);
    if (ctx_) d_.cuDevicePrimaryCtxRelease(device_);
    graph_exec_ = nullptr;
    allocations_.clear();
    modules_.clear();
    stream_ = nullptr;
    ctx_ = nullptr;
  }

 public:
  std::vector<HostTensor> run(const std::vector<HostTensor>& inputs) override {
    d_.check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    settle();
    upload_inputs(inputs);
    d_.check(d_.cuMemsetD8Async(arena_, 0xFF, static_cast<size_t>(std::max<int64_t>(plan_.arena_bytes, 1)), stream_),
             "cuMemsetD8 (poison the arena)");
    d_.check(d_.cuMemsetD8Async(status_, 0, sizeof(uint32_t), stream_), "cuMemsetD8 (status)");
    for (const Launch& l : launches_) {
      launch(l, stream_);
      d_.check(d_.cuStreamSynchronize(stream_), cat("kernel ", l.name).c_str());
    }
    check_status();
    std::vector<HostTensor> outputs;
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      const TensorId t = graph_.outputs()[i];
      const TensorInfo& info = graph_.tensor(t);
      if (info.kind == TensorKind::weight) {  // an output that is a weight: no kernel writes it
        outputs.push_back(graph_.weight_values(t));
        continue;
      }
      if (info.kind == TensorKind::input) {
        const auto& ins = graph_.inputs();
        outputs.push_back(inputs[std::find(ins.begin(), ins.end(), t) - ins.begin()]);
        continue;
      }
      std::vector<uint8_t> data(static_cast<size_t>(bytes_of(t)));
      if (!data.empty())
        d_.check(d_.cuMemcpyDtoHAsync(data.data(), output_where_[i], data.size(), stream_), "cuMemcpyDtoH (output)");
      d_.check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
      outputs.push_back(unpack_tensor(info.type, data.data()));
    }
    return outputs;
  }

  std::vector<double> time(const std::vector<HostTensor>& inputs, const TimingOptions& options) override {
    d_.check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    settle();
    upload_inputs(inputs);
    for (int i = 0; i < options.warmup; ++i) launch_all();
    d_.check(d_.cuStreamSynchronize(stream_), "warm-up runs");
    if (options.graph && !graph_exec_) capture();
    // A cold L2: a buffer of twice the spec's last-level cache, overwritten before each timed run
    // (outside the events), evicts the inputs, weights and intermediates of the previous run.
    CUdeviceptr flush = 0;
    const size_t flush_bytes = static_cast<size_t>(2 * cold_cache_bytes_);
    if (options.cold_cache && flush_bytes > 0)
      d_.check(d_.cuMemAlloc(&flush, flush_bytes), cat("cuMemAlloc (", flush_bytes, " bytes to flush the L2)").c_str());
    std::vector<CUevent> events;
    const auto release_events = [&] {
      for (CUevent e : events) d_.cuEventDestroy(e);
      if (flush) d_.cuMemFree(flush);
    };
    std::vector<double> out;
    try {
      for (int i = 0; i < 2 * options.repeats; ++i)
        d_.check(d_.cuEventCreate(&events.emplace_back(), CU_EVENT_DEFAULT), "cuEventCreate");
      // Graph replays are queued behind a spin kernel, so the GPU runs them back to back and no
      // host time falls between an event and its replay (a replay of a few microseconds is
      // otherwise timed at the host's pace). Launches one by one synchronize after each run:
      // their time includes the host's launch cost, as TimingOptions::graph says.
      if (options.graph) spin(options.repeats);
      for (int i = 0; i < options.repeats; ++i) {
        if (flush) d_.check(d_.cuMemsetD8Async(flush, static_cast<unsigned char>(i), flush_bytes, stream_), "cuMemsetD8 (flush the L2)");
        d_.check(d_.cuEventRecord(events[2 * i], stream_), "cuEventRecord");
        if (options.graph) d_.check(d_.cuGraphLaunch(graph_exec_, stream_), "cuGraphLaunch");
        else launch_all();
        d_.check(d_.cuEventRecord(events[2 * i + 1], stream_), "cuEventRecord");
        if (!options.graph) d_.check(d_.cuEventSynchronize(events[2 * i + 1]), "timed run");
      }
      d_.check(d_.cuStreamSynchronize(stream_), "timed runs");
      for (int i = 0; i < options.repeats; ++i) {
        float ms = 0;
        d_.check(d_.cuEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cuEventElapsedTime");
        out.push_back(ms * 1e-3);
      }
    } catch (...) {
      release_events();
      throw;
    }
    release_events();
    check_status();
    return out;
  }

  std::vector<double> profile(const std::vector<HostTensor>& inputs, int repeats) override {
    d_.check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    settle();
    upload_inputs(inputs);
    for (int i = 0; i < 3; ++i) launch_all();
    d_.check(d_.cuStreamSynchronize(stream_), "warm-up runs");
    const size_t n = launches_.size();
    std::vector<CUevent> events;
    std::vector<std::vector<double>> seconds(groups_);
    try {
      for (size_t i = 0; i < 2 * n * static_cast<size_t>(repeats); ++i)
        d_.check(d_.cuEventCreate(&events.emplace_back(), CU_EVENT_DEFAULT), "cuEventCreate");
      // Behind a spin: the host queues every launch and event before the GPU reaches them.
      spin(static_cast<int>(n) * repeats);
      for (int r = 0; r < repeats; ++r)
        for (size_t i = 0; i < n; ++i) {
          const size_t e = 2 * (static_cast<size_t>(r) * n + i);
          d_.check(d_.cuEventRecord(events[e], stream_), "cuEventRecord");
          launch(launches_[i], stream_);
          d_.check(d_.cuEventRecord(events[e + 1], stream_), "cuEventRecord");
        }
      d_.check(d_.cuStreamSynchronize(stream_), "profiled runs");
      for (int r = 0; r < repeats; ++r) {
        std::vector<double> run(groups_, 0.0);
        for (size_t i = 0; i < n; ++i) {
          const size_t e = 2 * (static_cast<size_t>(r) * n + i);
          float ms = 0;
          d_.check(d_.cuEventElapsedTime(&ms, events[e], events[e + 1]), "cuEventElapsedTime");
          run[launches_[i].group] += ms * 1e-3;
        }
        for (size_t g = 0; g < groups_; ++g) seconds[g].push_back(run[g]);
      }
    } catch (...) {
      for (CUevent e : events) d_.cuEventDestroy(e);
      throw;
    }
    for (CUevent e : events) d_.cuEventDestroy(e);
    check_status();
    std::vector<double> out;
    for (std::vector<double>& s : seconds) {
      std::sort(s.begin(), s.end());
      out.push_back(s.empty() ? 0 : s[s.size() / 2]);
    }
    return out;
  }

  const CompileStats& compile_stats() const override { return stats_; }
  int64_t peak_memory_bytes() const override { return peak_bytes_; }
  int launches_per_run() const override { return static_cast<int>(launches_.size()); }
  const DeviceIo* device_io() const override { return &io_; }
  void enqueue() override {
    settle();
    launch_all();
  }

  void run_on_queue(const std::vector<uint64_t>& inputs, const std::vector<uint64_t>& outputs, void* queue) override {
    const std::vector<TensorId>& ins = graph_.inputs();
    const std::vector<TensorId>& outs = graph_.outputs();
    TESSEL_ASSERT(inputs.size() == ins.size() && outputs.size() == outs.size(), "run_on_queue: ", inputs.size(), " inputs and ",
                  outputs.size(), " outputs for a graph of ", ins.size(), " and ", outs.size());
    d_.check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    CUstream q = static_cast<CUstream>(queue);
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    d_.check(d_.cuStreamIsCapturing(q, &capture), "cuStreamIsCapturing (the caller's stream)");
    const bool captured = capture != CU_STREAM_CAPTURE_STATUS_NONE;  // (no event queries while capturing)
    if (!captured && queued_pending_ && d_.cuEventQuery(queued_done_) == CUDA_SUCCESS) {  // the last queued run's status is known
      queued_pending_ = false;
      raise_status(*queued_status_);
    }
    // This run's addresses: the caller's inputs, and the caller's outputs for the tensors kernels
    // write; the other outputs are copied once the kernels are done.
    std::vector<CUdeviceptr> where = where_;
    for (size_t i = 0; i < ins.size(); ++i) {
      TESSEL_ASSERT(inputs[i] % kDeviceAlignment == 0 || bytes_of(ins[i]) == 0, "run_on_queue: input '", graph_.tensor(ins[i]).name,
                    "' at an address not ", kDeviceAlignment, "-byte aligned");
      where[ins[i]] = inputs[i];
    }
    std::vector<bool> bound(where.size(), false);
    std::vector<std::pair<size_t, CUdeviceptr>> copies;  // (output, from)
    for (size_t o = 0; o < outs.size(); ++o) {
      const TensorId t = outs[o];
      TESSEL_ASSERT(outputs[o] % kDeviceAlignment == 0 || bytes_of(t) == 0, "run_on_queue: output '", graph_.tensor(t).name,
                    "' at an address not ", kDeviceAlignment, "-byte aligned");
      const TensorKind kind = graph_.tensor(t).kind;
      if (kind == TensorKind::input || kind == TensorKind::weight || bound[t]) {
        copies.emplace_back(o, where[t]);
      } else {
        where[t] = outputs[o];
        bound[t] = true;
      }
    }
    point_launches(where);
    if (!captured && queued_done_) d_.check(d_.cuStreamWaitEvent(q, queued_done_, 0), "cuStreamWaitEvent (the last queued run)");
    // The status word is cleared only once the last queued run's is read: runs queued back to back
    // collect their flags in it (kernels set them with atomicOr), so none is lost.
    if (!queued_pending_) d_.check(d_.cuMemsetD8Async(status_, 0, sizeof(uint32_t), q), "cuMemsetD8 (status)");
    for (const Launch& l : launches_) launch(l, q);
    for (const auto& [o, from] : copies)
      if (const int64_t bytes = bytes_of(outs[o]); bytes > 0)
        d_.check(d_.cuMemcpyDtoDAsync(outputs[o], from, static_cast<size_t>(bytes), q), "cuMemcpyDtoD (output)");
    if (captured) return;
    if (!queued_done_) {
      d_.check(d_.cuEventCreate(&queued_done_, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      void* host = nullptr;
      d_.check(d_.cuMemAllocHost(&host, sizeof(uint32_t)), "cuMemAllocHost (status)");
      queued_status_ = static_cast<uint32_t*>(host);
    }
    d_.check(d_.cuMemcpyDtoHAsync(queued_status_, status_, sizeof(uint32_t), q), "cuMemcpyDtoH (status)");
    d_.check(d_.cuEventRecord(queued_done_, q), "cuEventRecord");
    queued_pending_ = true;
  }

  void wait_queued() override {
    if (!queued_pending_) return;
    d_.check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    d_.check(d_.cuEventSynchronize(queued_done_), "the queued runs");
    queued_pending_ = false;
    raise_status(*queued_status_);
  }
  void bind_inputs(const std::vector<uint64_t>& addresses) override {
    const std::vector<TensorId>& ins = graph_.inputs();
    TESSEL_ASSERT(addresses.size() == ins.size(), "bind_inputs: ", addresses.size(), " addresses for ", ins.size(), " inputs");
    for (size_t i = 0; i < ins.size(); ++i) {
      TESSEL_ASSERT(addresses[i] % kDeviceAlignment == 0, "bind_inputs: input '", graph_.tensor(ins[i]).name, "' at an address not 16-byte aligned");
      where_[ins[i]] = addresses[i];
    }
    settle();
    // Its own input buffers are no longer read: freed, unless one of them is bound again (a bound
    // input is the caller's, never freed).
    for (size_t i = 0; i < ins.size(); ++i) {
      auto own = std::find(allocations_.begin(), allocations_.end(), input_buffers_[i]);
      if (own == allocations_.end() || std::find(addresses.begin(), addresses.end(), input_buffers_[i]) != addresses.end()) continue;
      d_.cuMemFree(*own);
      allocations_.erase(own);
      peak_bytes_ -= bytes_of(ins[i]);
    }
    // (run() and time() now upload host inputs to the bound addresses.) An output that is an input
    // is read where the input now is.
    input_buffers_.assign(addresses.begin(), addresses.end());
    io_.inputs = addresses;
    for (size_t o = 0; o < graph_.outputs().size(); ++o) output_where_[o] = where_[graph_.outputs()[o]];
    io_.outputs.assign(output_where_.begin(), output_where_.end());
    if (graph_exec_) {  // a captured run read the old buffers
      d_.cuGraphExecDestroy(graph_exec_);
      graph_exec_ = nullptr;
    }
  }

 private:
  const OpGraph graph_;  // a copy: the executable may outlive the caller's graph
  CudaDriver& d_;
  CompileStats stats_;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  bool owns_stream_ = true;  // false: the stream is a DeviceContext's
  DeviceIo io_;
  CUgraphExec graph_exec_ = nullptr;
  // The addresses the launches' arguments hold now: where_, or a run_on_queue's.
  std::vector<CUdeviceptr> launch_where_;
  // run_on_queue: an event recorded after the last queued run, the pinned word its status is
  // copied to, and whether that status is still unread.
  CUevent queued_done_ = nullptr;
  uint32_t* queued_status_ = nullptr;
  bool queued_pending_ = false;
  std::vector<CUmodule> modules_;
  std::vector<CUdeviceptr> allocations_;
  std::vector<CUdeviceptr> input_buffers_;  // where the inputs are read (its own, or bound ones)
  std::vector<CUdeviceptr> output_where_;
  std::vector<CUdeviceptr> where_;  // per tensor of the graph: its address
  std::vector<Launch> launches_;
  // The 2:4 weights' compressed values and metadata (GroupPlan::derived), per weight and view.
  std::map<std::tuple<TensorId, int64_t, int64_t, bool, int64_t, int64_t, int64_t>, std::pair<CUdeviceptr, CUdeviceptr>> derived_;
  size_t groups_ = 0;  // the schedule's groups (a group with an empty output has no launch)
  BufferPlan plan_;
  CUdeviceptr arena_ = 0, scratch_ = 0, status_ = 0;
  int64_t peak_bytes_ = 0;
  int64_t cold_cache_bytes_ = 0;  // the spec's last-level cache (TimingOptions::cold_cache)
  std::string arch_;               // "sm_90a": for the spin kernel, compiled when first timed
  CompileOptions options_;
  CUfunction spin_ = nullptr;

  /// Holds the stream for long enough that the host queues `replays` timed replays before the GPU
  /// reaches them: a one-thread kernel that waits on the global timer, 1 ms plus 50 us a replay
  /// (the host queues one in a few microseconds).
  void spin(int replays) {
    if (!spin_) {
      static const char* kSource =
          "extern \"C\" __global__ void tessel_spin(unsigned long long ns) {\n"
          "  unsigned long long t0, t;\n"
          "  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t0));\n"
          "  do { asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(t)); } while (t - t0 < ns);\n"
          "}\n";
      const CompiledKernel c = compile_kernel(kSource, "tessel_spin", arch_, options_);
      CUmodule m = nullptr;
      d_.check(d_.cuModuleLoadData(&m, c.cubin.data()), "cuModuleLoadData (tessel_spin)");
      modules_.push_back(m);
      d_.check(d_.cuModuleGetFunction(&spin_, m, "tessel_spin"), "cuModuleGetFunction (tessel_spin)");
    }
    unsigned long long ns = 1000000ull + 50000ull * static_cast<unsigned long long>(std::max(replays, 0));
    void* args[] = {&ns};
    d_.check(d_.cuLaunchKernel(spin_, 1, 1, 1, 1, 1, 1, 0, stream_, args, nullptr), "cuLaunchKernel (tessel_spin)");
  }

  int64_t bytes_of(TensorId t) const {
    const TensorType& type = graph_.tensor(t).type;
    return type.num_elements() * dtype_bytes(type.dtype);
  }

  CUdeviceptr alloc(int64_t bytes) {
    CUdeviceptr p = 0;
    const size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 16));
    d_.check(d_.cuMemAlloc(&p, n), cat("cuMemAlloc (", n, " bytes)").c_str());
    allocations_.push_back(p);
    peak_bytes_ += static_cast<int64_t>(bytes);
    return p;
  }

  void upload(CUdeviceptr dst, const std::vector<uint8_t>& data) {
    if (data.empty()) return;
    d_.check(d_.cuMemcpyHtoDAsync(dst, data.data(), data.size(), stream_), "cuMemcpyHtoD");
    d_.check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize (upload)");
  }

  void upload_inputs(const std::vector<HostTensor>& inputs) {
    check_graph_inputs(graph_, inputs);
    for (size_t i = 0; i < inputs.size(); ++i) upload(input_buffers_[i], pack_tensor(inputs[i]));
  }

  void launch(const Launch& l, CUstream stream) {
    d_.check(d_.cuLaunchKernel(l.function, static_cast<unsigned>(l.blocks), 1, 1, static_cast<unsigned>(l.threads), 1, 1,
                               static_cast<unsigned>(l.smem_bytes), stream, const_cast<void**>(l.arg_ptrs.data()), nullptr),
             cat("cuLaunchKernel (", l.name, ": ", l.blocks, " blocks of ", l.threads, " threads, ", l.smem_bytes,
                 " bytes of shared memory)").c_str());
  }

  void launch_all() {
    for (const Launch& l : launches_) launch(l, stream_);
  }

  void capture() {
    CUgraph graph = nullptr;
    d_.check(d_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
    try {
      launch_all();
    } catch (...) {
      d_.cuStreamEndCapture(stream_, &graph);
      if (graph) d_.cuGraphDestroy(graph);
      throw;
    }
    d_.check(d_.cuStreamEndCapture(stream_, &graph), "cuStreamEndCapture");
    const CUresult r = d_.cuGraphInstantiate(&graph_exec_, graph, 0);
    d_.cuGraphDestroy(graph);
    d_.check(r, "cuGraphInstantiate");
  }

  void check_status() {
    uint32_t status = 0;
    d_.check(d_.cuMemcpyDtoHAsync(&status, status_, sizeof status, stream_), "cuMemcpyDtoH (status)");
    d_.check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize (status)");
    raise_status(status);
  }

  static void raise_status(uint32_t status) {
    if (status & 1u) throw UserError("", "", "a gather index is out of range for the dimension it indexes");
    TESSEL_ASSERT(status == 0 || status == 1u, "unknown kernel status ", status);
  }

  /// Before a run on the executable's own stream: the queued runs are done (their status read),
  /// and the launches point at its own buffers again.
  void settle() {
    wait_queued();
    point_launches(where_);
  }

  /// Points the launches' arguments at `where` (per tensor, its address); tensor maps are encoded
  /// again only for the tensors that moved.
  void point_launches(const std::vector<CUdeviceptr>& where) {
    if (where == launch_where_) return;
    for (Launch& l : launches_) {
      for (size_t a = 0; a < l.args.size(); ++a)
        if (l.arg_tensors[a] >= 0) l.args[a] = where[l.arg_tensors[a]];
      for (size_t m = 0; m < l.maps.size(); ++m) {
        const TensorMapParam& p = l.map_params[m];
        if (p.derived < 0 && where[p.tensor] != launch_where_[p.tensor])  // (a derived buffer stays where it is)
          l.maps[m] = tensor_map(p, where[p.tensor] + static_cast<CUdeviceptr>(p.offset * 2), l.name);
      }
    }
    launch_where_ = where;
  }
};

/// `schedule` with every group's kernel family recorded (those it records are kept).
Schedule with_families(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec) {
  Schedule out = schedule;
  record_missing_kernel_families(graph, spec, CudaKernelFamilies(), out);
  return out;
}

/// A GPU of this machine as a DeviceContext: its primary context and one stream.
class CudaDeviceContext : public DeviceContext {
 public:
  explicit CudaDeviceContext(int device) : d_(CudaDriver::get()), index_(device) {
    int count = 0;
    d_.check(d_.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (device < 0 || device >= count)
      throw UserError("", "", cat("CUDA device ", device, " asked for; this machine has ", count));
    d_.check(d_.cuDeviceGet(&device_, device), "cuDeviceGet");
    d_.check(d_.cuDevicePrimaryCtxRetain(&ctx_, device_), "cuDevicePrimaryCtxRetain");
    d_.check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
    d_.check(d_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }
  ~CudaDeviceContext() override {
    d_.cuCtxSetCurrent(ctx_);
    if (graph_exec_) d_.cuGraphExecDestroy(graph_exec_);
    for (CUdeviceptr p : allocations_) d_.cuMemFree(p);
    for (CUevent e : events_) d_.cuEventDestroy(e);
    if (side_) d_.cuStreamDestroy(side_);
    d_.cuStreamDestroy(stream_);
    d_.cuDevicePrimaryCtxRelease(device_);
  }
  int device() const override { return index_; }
  void* stream() const override { return stream_; }
  void make_current() override { d_.check(d_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }
  uint64_t alloc(int64_t bytes) override {
    CUdeviceptr p = 0;
    const size_t n = static_cast<size_t>(std::max<int64_t>(bytes, 16));
    d_.check(d_.cuMemAlloc(&p, n), cat("cuMemAlloc (", n, " bytes)").c_str());
    allocations_.push_back(p);
    return p;
  }
  void upload(uint64_t dst, const HostTensor& tensor) override {
    const std::vector<uint8_t> data = pack_tensor(tensor);
    if (data.empty()) return;
    d_.check(d_.cuMemcpyHtoDAsync(dst, data.data(), data.size(), stream_), "cuMemcpyHtoD");
    synchronize();
  }
  HostTensor download(uint64_t src, const TensorType& type) override {
    std::vector<uint8_t> data(static_cast<size_t>(type.num_elements() * dtype_bytes(type.dtype)));
    if (!data.empty()) d_.check(d_.cuMemcpyDtoHAsync(data.data(), src, data.size(), stream_), "cuMemcpyDtoH");
    synchronize();
    return unpack_tensor(type, data.data());
  }
  void copy(uint64_t dst, uint64_t src, int64_t bytes) override {
    if (bytes > 0 && dst != src) d_.check(d_.cuMemcpyDtoDAsync(dst, src, static_cast<size_t>(bytes), stream_), "cuMemcpyDtoD");
  }
  void synchronize() override {
    d_.check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
    if (side_) d_.check(d_.cuStreamSynchronize(side_), "cuStreamSynchronize (side stream)");
  }
  void* side_stream() override {
    if (!side_) d_.check(d_.cuStreamCreate(&side_, CU_STREAM_NON_BLOCKING), "cuStreamCreate (side stream)");
    return side_;
  }
  int make_event() override {
    CUevent e = nullptr;
    d_.check(d_.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    events_.push_back(e);
    return static_cast<int>(events_.size()) - 1;
  }
  void record(int event, int queue) override {
    d_.check(d_.cuEventRecord(events_.at(event), queue_of(queue)), "cuEventRecord");
  }
  void wait(int event, int queue) override {
    d_.check(d_.cuStreamWaitEvent(queue_of(queue), events_.at(event), 0), "cuStreamWaitEvent");
  }

  std::vector<double> time(const std::function<void()>& step, const TimingOptions& options, bool* graph_used) override {
    make_current();
    for (int i = 0; i < options.warmup; ++i) step();
    synchronize();
    bool graph = options.graph;
    if (graph && !graph_exec_) {
      CUgraph g = nullptr;
      d_.check(d_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
      bool captured = true;
      try {
        step();
      } catch (...) {
        captured = false;
      }
      const CUresult end = d_.cuStreamEndCapture(stream_, &g);
      if (captured && end == CUDA_SUCCESS && g) captured = d_.cuGraphInstantiate(&graph_exec_, g, 0) == CUDA_SUCCESS;
      if (g) d_.cuGraphDestroy(g);
      if (!captured) {
        graph_exec_ = nullptr;
        graph = false;
      }
    }
    if (graph_used) *graph_used = graph;
    std::vector<CUevent> events(2 * static_cast<size_t>(options.repeats));
    for (CUevent& e : events) d_.check(d_.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    std::vector<double> out;
    for (int i = 0; i < options.repeats; ++i) {
      d_.check(d_.cuEventRecord(events[2 * i], stream_), "cuEventRecord");
      if (graph) d_.check(d_.cuGraphLaunch(graph_exec_, stream_), "cuGraphLaunch");
      else step();
      d_.check(d_.cuEventRecord(events[2 * i + 1], stream_), "cuEventRecord");
    }
    synchronize();
    for (int i = 0; i < options.repeats; ++i) {
      float ms = 0;
      d_.check(d_.cuEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]), "cuEventElapsedTime");
      out.push_back(ms * 1e-3);
    }
    for (CUevent e : events) d_.cuEventDestroy(e);
    return out;
  }

 private:
  CudaDriver& d_;
  int index_ = 0;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream queue_of(int queue) { return queue == 0 ? stream_ : static_cast<CUstream>(side_stream()); }

  CUstream stream_ = nullptr;
  CUstream side_ = nullptr;
  std::vector<CUevent> events_;
  CUgraphExec graph_exec_ = nullptr;
  std::vector<CUdeviceptr> allocations_;
};

class CudaBackend : public Backend {
 public:
  std::string_view name() const override { return "cuda"; }
  std::string_view description() const override {
    return "CUDA C++ per fused group, compiled with NVRTC, run through the CUDA driver";
  }
  bool supports(const HwSpec& spec) const override { return spec.kind == "gpu" && spec.target.backend == "cuda"; }
  std::optional<std::string> unavailable() const override { return CudaDriver::unavailable(); }
  std::unique_ptr<DeviceContext> device_context(int device) const override {
    if (auto why = CudaDriver::unavailable()) throw UnsupportedError("", "", *why);
    return std::make_unique<CudaDeviceContext>(device);
  }
  int device_count() const override {
    if (CudaDriver::unavailable()) return 0;
    int count = 0;
    return CudaDriver::get().cuDeviceGetCount(&count) == CUDA_SUCCESS ? count : 0;
  }
  // cuda: the generated CUDA C++; ptx: NVRTC's PTX of it for the spec's virtual architecture.
  std::vector<std::string> emit_formats() const override { return {"cuda", "ptx"}; }
  std::unique_ptr<KernelFamilies> kernel_families() const override { return std::make_unique<CudaKernelFamilies>(); }
  // The tensor-core convolutions (implicit GEMM, contraction_plan.h) read NHWC activations.
  bool prefers_channels_last() const override { return true; }
  // The implicit GEMM copies whole 16-byte chunks of one pixel's channels (contraction_plan.h).
  int conv_channel_alignment_bytes() const override { return kChunkElems * 2; }
  // The tensor-core families' operand rows: whole 16-byte chunks (cp.async, TMA boxes).
  std::map<DType, int> contraction_alignment_bytes() const override {
    return {{DType::f16, kChunkElems * dtype_bytes(DType::f16)}, {DType::bf16, kChunkElems * dtype_bytes(DType::bf16)}};
  }

  // The row kernel reduces rows in parallel; one value is one block's (rewrite 2b splits it).
  bool splits_full_reductions() const override { return true; }

  std::vector<std::string> emit(const OpGraph& graph, const Schedule& given, const HwSpec& spec,
                                const std::string& format, const std::string& dir) const override {
    const Schedule schedule = with_families(graph, given, spec);
    if (format != "cuda" && format != "ptx")
      throw UserError("command line", "--emit", cat("backend 'cuda' writes 'cuda' or 'ptx', not '", format, "'"));
    check_spec(spec);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw UserError(dir, "", cat("cannot create the directory: ", ec.message()));
    const std::string arch = cuda_arch(spec);
    std::vector<std::string> files;
    nlohmann::ordered_json manifest;
    manifest["format"] = "tessel-cuda-kernels";
    manifest["version"] = 1;
    manifest["hw_spec"] = spec.name;
    manifest["arch"] = arch;
    manifest["code"] = format == "ptx" ? cat("ptx for compute_", arch.substr(3)) : std::string("cuda c++");
    manifest["nvrtc_version"] = nvrtc_version();
    manifest["nvrtc_options"] = nvrtc_options(arch);
    manifest["kernels"] = nlohmann::ordered_json::array();
    auto names = [&](const std::vector<TensorId>& ts) {
      std::vector<std::string> out;
      for (TensorId t : ts) out.push_back(graph.tensor(t).name);
      return out;
    };
    for (int i = 0; i < static_cast<int>(schedule.groups.size()); ++i) {
      const GeneratedKernel k = emit_group_kernel(graph, schedule, i, spec);
      const std::string leaf = k.name + (format == "ptx" ? ".ptx" : ".cu");
      write_file_atomically(dir + "/" + leaf, format == "ptx" ? compile_ptx(k.source, k.name, arch) : k.source);
      files.push_back(dir + "/" + leaf);
      nlohmann::ordered_json e;
      e["name"] = k.name;
      e["file"] = leaf;
      e["group"] = i;
      std::vector<std::string> nodes;
      for (NodeId n : schedule.groups[i].group.nodes) nodes.push_back(graph.node(n).name());
      e["nodes"] = nodes;
      e["template"] = k.path;
      e["grid"] = k.plan.blocks;
      e["block"] = k.plan.threads;
      if (k.plan.cluster_blocks > 1) e["cluster"] = k.plan.cluster_blocks;
      e["tiles"] = k.plan.num_tiles;
      e["dynamic_smem_bytes"] = k.plan.dynamic_smem_bytes();
      e["scratch_bytes"] = k.plan.scratch_bytes();
      e["inputs"] = names(k.plan.inputs);
      e["outputs"] = names(k.plan.outputs);
      e["params"] = cat("inputs..., outputs..., scratch, status", k.plan.derived.empty() ? "" : ", derived...",
                        k.plan.tensor_maps.empty() ? "" : ", tensor_maps...");
      if (!k.plan.derived.empty()) {
        // A 2:4 weight's compressed values and metadata, which the runtime derives from its
        // values at load time (kernels/cuda/nm_compress.h says how).
        nlohmann::ordered_json derived = nlohmann::ordered_json::array();
        for (const DerivedBuffer& b : k.plan.derived)
          derived.push_back({{"kind", b.kind == DerivedBuffer::Kind::nm_values ? "nm_values" : "nm_metadata"},
                             {"tensor", graph.tensor(b.tensor).name}, {"n", b.view.n}, {"k", b.view.k},
                             {"k_contiguous", b.view.k_contiguous}, {"ld", b.view.ld}, {"offset", b.view.offset}, {"k_pad", b.view.k_pad}});
        e["derived"] = std::move(derived);
      }
      if (!k.plan.tensor_maps.empty()) {
        nlohmann::ordered_json maps = nlohmann::ordered_json::array();
        for (const TensorMapParam& m : k.plan.tensor_maps) {
          nlohmann::ordered_json j{{"tensor", graph.tensor(m.tensor).name}, {"rows", m.rows}, {"cols", m.cols}, {"ld", m.ld},
                                   {"box", {m.box_rows, m.box_cols}}, {"batch_extents", m.batch_extents},
                                   {"batch_strides", m.batch_strides}, {"offset", m.offset},
                                   {"swizzle", m.swizzle_bytes ? cat(m.swizzle_bytes, "B") : std::string("none")}, {"out_of_bounds", "zero"}};
          if (m.derived >= 0) j["derived"] = m.derived;  // over that derived buffer, not the tensor
          maps.push_back(std::move(j));
        }
        e["tensor_maps"] = std::move(maps);
      }
      manifest["kernels"].push_back(e);
    }
    const BufferPlan plan = plan_buffers(graph, schedule, arena_alignment(spec, kVectorAccessBytes));
    nlohmann::ordered_json bp;
    bp["arena_bytes"] = plan.arena_bytes;
    bp["unshared_bytes"] = plan.unshared_bytes;
    bp["alignment"] = plan.alignment;
    bp["slots"] = nlohmann::ordered_json::array();
    for (const BufferSlot& s : plan.slots)
      bp["slots"].push_back({{"tensor", graph.tensor(s.tensor).name}, {"offset", s.offset}, {"bytes", s.bytes},
                             {"first_group", s.first_group}, {"last_group", s.last_group}});
    manifest["buffer_plan"] = bp;
    const std::string mpath = dir + "/manifest.json";
    write_file_atomically(mpath, manifest.dump(2) + "\n");
    files.push_back(mpath);
    return files;
  }

  std::unique_ptr<Executable> compile(const OpGraph& graph, const Schedule& schedule, const HwSpec& spec,
                                      const CompileOptions& options) const override {
    check_spec(spec);
    if (auto why = unavailable()) throw UnsupportedError("cuda", "", *why);
    return std::make_unique<CudaExecutable>(graph, with_families(graph, schedule, spec), spec, options);
  }

 private:
  void check_spec(const HwSpec& spec) const {
    if (!supports(spec))
      throw UserError(spec.file, "/kind", cat("spec '", spec.name, "' is a '", spec.kind, "' spec for backend '",
                                              spec.target.backend, "'; the cuda backend needs a GPU spec with a cuda target"));
  }
};

}  // namespace
}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend() { return std::make_unique<cuda::CudaBackend>(); }

}  // namespace tessel
