// The hardware spec: every fact about a target chip that the cost model, the policies and the
// code generators may use -- its memory hierarchy, compute units, launch limits, interconnect and
// code-generation target. A spec is plain data read from a JSON file under hw_specs/ (schema:
// hw_specs/schema/hw-spec.schema.json, reference: docs/hw-specs.md); reading one never touches a
// device, so Tessel can compile for chips that are not present. `tessel hw probe` (probe.h) writes
// one for the machine it runs on.
//
// Units are part of every field name: bytes, GB/s (1e9 bytes per second), GHz, ns, us, TFLOP/s.
//
//   HwSpec spec = load_hw_spec("hw_specs/nvidia-h100-sxm.json");
//   const MemoryLevel& smem = spec.level("smem");               // 228 KB per SM, 132 SMs
//   double fp16 = spec.peak_flops(DType::f16, /*tensor_cores=*/true);  // 9.894e14 FLOP/s
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tilegraph/dtype.h"

namespace tessel {

/// What one instance of a memory level is attached to. `cluster` is a group of SMs (an H100
/// thread-block cluster) or of CPU cores sharing a cache slice (an AMD CCX).
enum class MemoryScope : uint8_t { thread, warp, block, cluster, sm, core, device, host };

std::string_view scope_name(MemoryScope scope);
/// Inverse of scope_name; nullopt for an unknown name.
std::optional<MemoryScope> parse_scope(std::string_view name);

/// A hardware-managed cache's organisation.
struct CacheSpec {
  int associativity = 0;  // ways; 0 when fully associative or not known
  bool shared = false;    // shared by every unit of the scope (an L2), not private to one
  bool operator==(const CacheSpec&) const = default;
};

/// One level of the memory hierarchy. Levels are listed from the registers outward.
struct MemoryLevel {
  std::string name;  // "registers", "smem", "l2", "dram" on GPUs; "registers", "l1d", ..., "dram"
  MemoryScope scope = MemoryScope::device;
  int64_t capacity_bytes = 0;  // per instance of the scope (per SM, per core, ...)
  int64_t instances = 1;       // how many instances of the scope the chip has (132 SMs)
  /// Aggregate over the whole chip, from this level to the level inward (for registers: operand
  /// delivery to the arithmetic units). GB/s = 1e9 bytes per second.
  double bandwidth_gbps = 0;
  int64_t transaction_bytes = 0;  // sector or cache-line size; the unit of traffic
  int banks = 0;                  // 0 when not banked
  int bank_width_bytes = 0;       // 0 when not banked
  bool software_managed = false;  // registers, shared memory: the program places data there
  std::optional<CacheSpec> cache;  // set for hardware-managed caches
  double latency_ns = 0;           // load-to-use latency; 0 when not known
  /// Latency of a read while the level streams near its bandwidth (queues included): what a
  /// kernel must cover with bytes in flight (Little's law: bandwidth <= bytes in flight /
  /// loaded latency). 0 when not known (no such limit priced).
  double loaded_latency_ns = 0;
  std::string source;              // where the numbers come from

  /// capacity_bytes * instances: the whole chip's capacity at this level.
  int64_t chip_capacity_bytes() const { return capacity_bytes * instances; }
  bool operator==(const MemoryLevel&) const = default;
};

/// A tensor-core (matrix-unit) instruction shape: D[m x n] += A[m x k] * B[k x n].
struct MmaShape {
  int m = 0, n = 0, k = 0;
  bool operator==(const MmaShape&) const = default;
};

struct ComputeSpec {
  int64_t units = 0;       // SMs or cores
  int64_t simd_width = 0;  // warp size, or fp32 SIMD lanes per instruction
  double clock_ghz = 0;    // boost clock used for the peaks
  /// Fixed cost of starting one kernel (GPU launch, or a CPU parallel region's fork/join); 0 if
  /// not known.
  double launch_overhead_us = 0;
  /// CPU: cycles a loop nest spends starting its innermost loop once more (the previous loop's
  /// exit, the next row's addresses, a new prefetch stream), which the cost model charges per row
  /// of a loop nest (docs/cost-model.md, "Row starts"); 0 if not known (then not charged).
  double row_start_cycles = 0;
  std::map<DType, double> simt_peak_tflops;    // CUDA cores / SIMD units, whole chip
  std::map<DType, double> tensor_peak_tflops;  // dense matrix units, keyed by input dtype
  std::map<DType, std::vector<MmaShape>> tensor_core_shapes;  // keyed by input dtype
  /// Per kernel family of a backend ("wgmma", "vector", ...): the fraction of the roofline its
  /// kernels reach, measured (experiments/cost_model_fidelity/); the cost model divides a family's
  /// bound time by it. A family not listed: 1 (the roofline).
  std::map<std::string, double> family_efficiency;
  std::string source;
  bool operator==(const ComputeSpec&) const = default;
};

/// Launch and occupancy limits. GPU specs set every field but hardware_threads; CPU specs set
/// hardware_threads (cores x SMT) and may leave the rest 0.
struct LimitSpec {
  int64_t max_threads_per_block = 0;
  int64_t max_threads_per_sm = 0;
  int64_t max_blocks_per_sm = 0;
  int64_t registers_per_sm = 0;  // 32-bit registers
  int64_t max_registers_per_thread = 0;
  int64_t smem_per_block_bytes = 0;  // the opt-in maximum
  int64_t smem_per_sm_bytes = 0;
  int64_t max_cluster_blocks = 0;  // blocks of a thread-block cluster (sm_90+; 0: no clusters)
  int64_t hardware_threads = 0;
  bool operator==(const LimitSpec&) const = default;
};

/// A bidirectional link between two devices of the node; bandwidth is per direction.
struct LinkSpec {
  int from = 0, to = 0;  // device indices, 0 <= from, to < devices
  double bandwidth_gbps = 0;
  double latency_us = 0;
  std::string kind;  // "nvlink4", "pcie5", ...
  bool operator==(const LinkSpec&) const = default;
};

/// One level of a multi-device system, innermost first: devices are numbered so that each run of
/// `devices` consecutive numbers shares one domain of the level (an NVSwitch box of 8 GPUs, a
/// rack, the whole cluster). A collective among devices of one domain goes at this level's
/// speed; `bandwidth_gbps` is what one device can send (and receive) at once over it, per
/// direction, as a ring collective sees it.
struct InterconnectLevel {
  std::string name;  // "nvswitch", "infiniband", "shared_memory", ...
  int64_t devices = 1;
  double bandwidth_gbps = 0;
  double latency_us = 0;
  /// Measured per collective ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"): its own
  /// bandwidth and per-step latency where a library's algorithm beats or trails the ring (NCCL's
  /// all-reduce on two GPUs); a collective not listed uses the level's.
  struct Fit {
    double bandwidth_gbps = 0;
    double latency_us = 0;
    bool operator==(const Fit&) const = default;
  };
  std::map<std::string, Fit> collectives;
  /// Compute units (SMs) a collective of this level may occupy while kernels run beside it (a ring
  /// shift overlapped with a node's pieces): the collective is limited to that many, and the kernels
  /// beside it are scheduled for the units left. 0: no overlap is reserved for.
  int64_t overlap_units = 0;
  std::string source;
  bool operator==(const InterconnectLevel&) const = default;
};

struct InterconnectSpec {
  int64_t devices = 1;  // devices of this kind in the system (a node, or a cluster of them)
  std::vector<LinkSpec> links;
  /// The levels devices communicate over, innermost first; each level's `devices` divides the
  /// next one's and the last one's is `devices` (hw_spec.cpp checks). Empty: collectives use the
  /// links (their slowest) among all `devices`, or are not priced when there are none.
  std::vector<InterconnectLevel> levels;
  std::string source;
  bool operator==(const InterconnectSpec&) const = default;
};

/// The instruction features a GPU target may list (`target.gpu_features`), which code generators
/// ask for instead of comparing architecture names:
///   "mma_sync"  warp-level m16n8k16 tensor-core products of f16 and bf16 (mma.sync; sm_80 on)
///   "mma_sparse" warp-level m16n8k32 products with a 2:4 sparse f16 or bf16 operand on the sparse
///               tensor cores (mma.sp with ordered metadata; sm_80 on)
///   "cp_async"  asynchronous global-to-shared copies (cp.async; sm_80 on)
///   "ldmatrix"  shared-to-register matrix fragment loads (ldmatrix; sm_75 on)
///   "wgmma"     warpgroup tensor-core products from shared memory (wgmma.mma_async; sm_90a)
///   "tma"       the tensor memory accelerator's bulk tensor copies (cp.async.bulk.tensor; sm_90)
const std::vector<std::string>& known_gpu_features();

struct TargetSpec {
  std::string backend;  // "cuda" | "llvm"
  std::string arch;     // "sm_90a"; an LLVM CPU name ("x86-64-v3", "sapphirerapids")
  std::string triple;   // "nvptx64-nvidia-cuda", "x86_64-unknown-linux-gnu"
  std::vector<std::string> cpu_features;  // "avx2", "fma", ... (CPUs)
  std::vector<std::string> gpu_features;  // known_gpu_features() the chip has (GPUs; required there)

  /// True if the GPU target lists `feature` (one of known_gpu_features()).
  bool has_gpu_feature(std::string_view feature) const;
  bool operator==(const TargetSpec&) const = default;
};

struct HwSpec {
  std::string name, description;
  std::string kind;  // "gpu" | "cpu"
  std::vector<MemoryLevel> memory_levels;  // registers outward
  ComputeSpec compute;
  LimitSpec limits;
  InterconnectSpec interconnect;
  TargetSpec target;
  std::string source;  // where the numbers come from
  std::string file;    // the file it was read from (not part of the written form)

  /// The level named `name`; a UserError naming the levels there are when there is none.
  const MemoryLevel& level(std::string_view name) const;
  /// Index of the level named `name` in memory_levels, or -1.
  int level_index(std::string_view name) const;
  /// Peak FLOP/s (not TFLOP/s) for `dtype` on tensor cores or on the SIMT/SIMD units; 0 if the
  /// spec gives none.
  double peak_flops(DType dtype, bool tensor_cores) const;
  /// Bytes of the outermost hardware-managed cache, over the whole chip (an H100's 50 MB L2, a
  /// CPU's L3): what a cold-cache measurement must overwrite. 0 if the spec lists no cache.
  int64_t last_level_cache_bytes() const;

  bool operator==(const HwSpec&) const = default;
};

/// Reads and validates a spec file, resolving "extends" relative to the file's directory.
HwSpec load_hw_spec(const std::string& path);
/// Parses and validates spec text; `file` names it in errors and is where "extends" paths start.
HwSpec parse_hw_spec(const std::string& text, const std::string& file);
/// The canonical JSON form (fixed key order, no "extends"): parse_hw_spec(write_hw_spec(s),
/// s.file) == s for every valid spec.
std::string write_hw_spec(const HwSpec& spec);
/// A readable multi-line table, for `tessel hw show`.
std::string format_hw_spec_table(const HwSpec& spec);
/// A stable 64-bit hash (FNV-1a) of the canonical written form; keys caches of tuning results.
uint64_t hw_spec_hash(const HwSpec& spec);

}  // namespace tessel
