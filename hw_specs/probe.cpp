// Probing the host CPU (probe.h): what Linux reports, plus short microbenchmarks.
//
//   1. Topology: hardware threads (std::thread::hardware_concurrency), physical cores (distinct
//      package/core ids under /sys/devices/system/cpu), clock, ISA flags from /proc/cpuinfo.
//   2. Caches from /sys/devices/system/cpu/cpu0/cache/index*: data and unified caches become the
//      levels l1d, l2, l3; the scope of each follows from how many CPUs share one instance.
//   3. Measurements, every hardware thread at once, best of a few repeats:
//      - fp32 FMA throughput: independent FMA chains in registers (no memory traffic);
//      - cache bandwidth: each thread reads its own working set sized to sit in that level;
//      - DRAM bandwidth: STREAM-style copy and triad over arrays much larger than the last cache.
//   The binary must run on any x86-64, so vector kernels are compiled per ISA with GCC target
//   attributes and picked at run time with __builtin_cpu_supports; a scalar kernel is the fallback.
#include "hw_specs/probe.h"

#include <sched.h>

#include <sys/utsname.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "tilegraph/error.h"

namespace tessel {
namespace {

using Clock = std::chrono::steady_clock;

// ---- Reading /sys and /proc ---------------------------------------------------------------------

std::optional<std::string> read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

/// "32K", "1024K", "32M" -> bytes.
int64_t parse_size(const std::string& text) {
  char* end = nullptr;
  int64_t v = std::strtoll(text.c_str(), &end, 10);
  if (end && (*end == 'K' || *end == 'k')) v <<= 10;
  if (end && (*end == 'M' || *end == 'm')) v <<= 20;
  if (end && (*end == 'G' || *end == 'g')) v <<= 30;
  return v;
}

/// "0-3,8,10-11" -> {0,1,2,3,8,10,11}.
std::set<int> parse_cpu_list(const std::string& text) {
  std::set<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    const size_t dash = part.find('-');
    const int lo = std::atoi(part.substr(0, dash).c_str());
    const int hi = dash == std::string::npos ? lo : std::atoi(part.substr(dash + 1).c_str());
    for (int c = lo; c <= hi; ++c) cpus.insert(c);
  }
  return cpus;
}

std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0 && line.rfind("Features", 0) != 0) continue;
    std::stringstream ss(line.substr(line.find(':') + 1));
    std::string f;
    while (ss >> f) flags.insert(f);
    break;
  }
  return flags;
}

/// Maximum clock in GHz from cpufreq, else the current "cpu MHz" of /proc/cpuinfo; 0 if neither.
double clock_ghz() {
  if (auto khz = read_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"))
    if (double v = std::atof(khz->c_str()); v > 0) return v / 1e6;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return std::atof(line.substr(line.find(':') + 1).c_str()) / 1e3;
  return 0;
}

int64_t physical_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit)
    if (key == "MemTotal:") return kib * 1024;
  return 0;
}

struct Topology {
  int threads = 1;  // hardware threads (logical CPUs)
  int cores = 1;    // physical cores
};

Topology read_topology() {
  Topology t;
  t.threads = std::max(1u, std::thread::hardware_concurrency());
  std::set<std::pair<std::string, std::string>> cores;
  std::set<int> online = parse_cpu_list(read_line("/sys/devices/system/cpu/online").value_or(""));
  for (int cpu : online) {
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    auto core = read_line(dir + "core_id"), package = read_line(dir + "physical_package_id");
    if (core && package) cores.insert({*package, *core});
  }
  t.cores = cores.empty() ? t.threads : std::min<int>(static_cast<int>(cores.size()), t.threads);
  return t;
}

struct CacheInfo {
  int level = 0;
  int64_t size_bytes = 0;
  int64_t line_bytes = 64;
  int ways = 0;
  int sharers = 1;  // CPUs sharing one instance
};

std::vector<CacheInfo> read_caches() {
  std::vector<CacheInfo> caches;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    auto type = read_line(dir + "type");
    if (!type) break;
    if (*type == "Instruction") continue;
    CacheInfo c;
    c.level = std::atoi(read_line(dir + "level").value_or("0").c_str());
    c.size_bytes = parse_size(read_line(dir + "size").value_or("0"));
    c.line_bytes = std::atoll(read_line(dir + "coherency_line_size").value_or("64").c_str());
    c.ways = std::atoi(read_line(dir + "ways_of_associativity").value_or("0").c_str());
    c.sharers = std::max<int>(1, parse_cpu_list(read_line(dir + "shared_cpu_list").value_or("0")).size());
    if (c.level > 0 && c.size_bytes > 0) caches.push_back(c);
  }
  std::sort(caches.begin(), caches.end(), [](const CacheInfo& a, const CacheInfo& b) { return a.level < b.level; });
  return caches;
}

// ---- Kernels ---------------------------------------------------------------------------------------
// Each kernel returns a value derived from its work so the compiler cannot drop it.

enum class Isa { scalar, avx2, avx512 };

Isa best_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return Isa::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::avx2;
#endif
  return Isa::scalar;
}

int fp32_lanes(Isa isa) { return isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 1; }

constexpr int kFmaChains = 12;  // > FMA latency (4) x FMA ports (2) on current x86 cores

#define TESSEL_REPEAT12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_avx512(int64_t iters) {
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
#define DECL(i) __m512 a##i = _mm512_set1_ps(1.0f + (i));
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm512_add_ps(s, a##i);
  TESSEL_REPEAT12(DECL)
  for (int64_t it = 0; it < iters; ++it) {
    TESSEL_REPEAT12(STEP)
  }
  __m512 s = _mm512_setzero_ps();
  TESSEL_REPEAT12(SUM)
  alignas(64) float out[16];
  _mm512_store_ps(out, s);
  float sum = 0;
  for (float v : out) sum += v;
  return sum;
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx2,fma"))) float fma_avx2(int64_t iters) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
#define DECL(i) __m256 a##i = _mm256_set1_ps(1.0f + (i));
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define SUM(i) s = _mm256_add_ps(s, a##i);
  TESSEL_REPEAT12(DECL)
  for (int64_t it = 0; it < iters; ++it) {
    TESSEL_REPEAT12(STEP)
  }
  __m256 s = _mm256_setzero_ps();
  TESSEL_REPEAT12(SUM)
  alignas(32) float out[8];
  _mm256_store_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
#undef DECL
#undef STEP
#undef SUM
}

// Read kernels: `passes` reads of p[0, n), 8 independent accumulators so that the adds keep up
// with two loads per cycle. `n` is a multiple of 128 floats.
#define TESSEL_REPEAT8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
__attribute__((target("avx512f"))) float read_avx512(const float* p, size_t n, int64_t passes) {
#define DECL(k) __m512 s##k = _mm512_setzero_ps();
#define STEP(k) s##k = _mm512_add_ps(s##k, _mm512_load_ps(q + 16 * (k)));
#define SUM(k) s0 = _mm512_add_ps(s0, s##k);
  TESSEL_REPEAT8(DECL)
  for (int64_t pass = 0; pass < passes; ++pass)
    for (const float* q = p; q < p + n; q += 128) {
      TESSEL_REPEAT8(STEP)
    }
  TESSEL_REPEAT8(SUM)
  alignas(64) float out[16];
  _mm512_store_ps(out, s0);
  return out[0] + out[5] + out[15];
#undef DECL
#undef STEP
#undef SUM
}

__attribute__((target("avx2"))) float read_avx2(const float* p, size_t n, int64_t passes) {
#define DECL(k) __m256 s##k = _mm256_setzero_ps();
#define STEP(k) s##k = _mm256_add_ps(s##k, _mm256_load_ps(q + 8 * (k)));
#define SUM(k) s0 = _mm256_add_ps(s0, s##k);
  TESSEL_REPEAT8(DECL)
  for (int64_t pass = 0; pass < passes; ++pass)
    for (const float* q = p; q < p + n; q += 64) {
      TESSEL_REPEAT8(STEP)
    }
  TESSEL_REPEAT8(SUM)
  alignas(32) float out[8];
  _mm256_store_ps(out, s0);
  return out[0] + out[3] + out[7];
#undef DECL
#undef STEP
#undef SUM
}
#endif

float fma_scalar(int64_t iters) {
  const float m = 0.999999f, c = 1e-7f;
#define DECL(i) float a##i = 1.0f + (i);
#define STEP(i) a##i = std::fma(a##i, m, c);
#define SUM(i) s += a##i;
  TESSEL_REPEAT12(DECL)
  for (int64_t it = 0; it < iters; ++it) {
    TESSEL_REPEAT12(STEP)
  }
  float s = 0;
  TESSEL_REPEAT12(SUM)
  return s;
#undef DECL
#undef STEP
#undef SUM
}

float read_scalar(const float* p, size_t n, int64_t passes) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const uint64_t* q = reinterpret_cast<const uint64_t*>(p);
  for (int64_t pass = 0; pass < passes; ++pass)
    for (size_t i = 0; i < n / 2; i += 4) s0 += q[i], s1 += q[i + 1], s2 += q[i + 2], s3 += q[i + 3];
  return static_cast<float>(s0 + s1 + s2 + s3);
}

float run_fma(Isa isa, int64_t iters) {
#if defined(__x86_64__)
  if (isa == Isa::avx512) return fma_avx512(iters);
  if (isa == Isa::avx2) return fma_avx2(iters);
#endif
  return fma_scalar(iters);
}

float run_read(Isa isa, const float* p, size_t n, int64_t passes) {
#if defined(__x86_64__)
  if (isa == Isa::avx512) return read_avx512(p, n, passes);
  if (isa == Isa::avx2) return read_avx2(p, n, passes);
#endif
  return read_scalar(p, n, passes);
}

std::atomic<float> g_sink{0};  // results of the kernels end here

// ---- Running on every hardware thread ------------------------------------------------------------

/// Runs body(thread) on `threads` threads started together; returns the seconds from the start
/// signal until the last one finished (thread creation is not timed).
double timed_parallel(int threads, const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      body(t);
    });
  while (ready.load() < threads) std::this_thread::yield();
  const auto start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& th : pool) th.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
using Buffer = std::unique_ptr<T[], AlignedFree>;

template <class T>
Buffer<T> allocate(size_t count) {
  const size_t bytes = (count * sizeof(T) + 4095) / 4096 * 4096;
  void* p = std::aligned_alloc(4096, bytes);
  if (!p) throw UserError("hw probe", "", cat("cannot allocate ", bytes, " bytes for a benchmark buffer"));
  return Buffer<T>(static_cast<T*>(p));
}

/// Peak fp32 FLOP/s of the whole chip.
double measure_fp32_flops(Isa isa, int threads, bool quick) {
  const int64_t iters = quick ? 2'000'000 : 8'000'000;
  const int repeats = quick ? 2 : 3;
  run_fma(isa, iters / 10);  // wake the cores up
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const double s = timed_parallel(threads, [&](int) { g_sink = g_sink + run_fma(isa, iters); });
    best = std::max(best, static_cast<double>(iters) * kFmaChains * fp32_lanes(isa) * 2 * threads / s);
  }
  return best;
}

/// Seconds to hand one parallel region to `threads` threads and wait for all of them, with the
/// CPU runtime's mechanism (kernels/cpu/thread_pool.cpp: workers asleep on a condition variable
/// woken by a generation count, the caller waiting for the last one to finish; the probe cannot
/// link the runtime, which sits above it): the median over many empty regions. What every CPU
/// kernel pays before its first task runs -- the spec's launch overhead.
double measure_dispatch_seconds(int threads, bool quick) {
  if (threads <= 1) return 0;
  std::mutex mutex;
  std::condition_variable wake, done;
  uint64_t generation = 0;
  int busy = 0;
  bool stopping = false;
  std::vector<std::thread> workers;
  for (int w = 1; w < threads; ++w) {
    try {
      workers.emplace_back([&] {
        uint64_t seen = 0;
        for (;;) {
          std::unique_lock lock(mutex);
          wake.wait(lock, [&] { return stopping || generation != seen; });
          if (stopping) return;
          seen = generation;
          if (--busy == 0) done.notify_one();
        }
      });
    } catch (const std::system_error&) {
      break;  // fewer threads: measure with those
    }
  }
  const int regions = quick ? 200 : 1000;
  std::vector<double> seconds;
  for (int r = 0; r < regions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mutex);
      busy = static_cast<int>(workers.size());
      ++generation;
    }
    wake.notify_all();
    {
      std::unique_lock lock(mutex);
      done.wait(lock, [&] { return busy == 0; });
    }
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  {
    std::lock_guard lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread& t : workers) t.join();
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// The row-start benchmark: ReLU over a [kRowMapC, kRowMapH, kRowMapW] f32 map (MobileNetV2's
// 144 x 112 x 112 activation, where the cost model's row-start term was first fitted: 7 MiB, past
// the private caches) walked in two orders that touch the same elements: cubes of kRowCube^3
// (rows of kRowCube elements, C H W / kRowCube starts of the innermost loop) and whole rows (C H
// starts). The loops are the shape of the CPU backend's generic nest: one loop per axis, the
// innermost over contiguous elements one vector an iteration (intrinsics, so that the compiler's
// own vectorizer and optimization level do not decide it), the tail masked (AVX-512) or scalar.
constexpr int64_t kRowMapC = 144, kRowMapH = 112, kRowMapW = 112, kRowCube = 16;

template <class Row>
void relu_rows(const float* in, float* out, int64_t c0, int64_t c1, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
               int64_t width, Row&& row) {
  for (int64_t c = c0; c < c1; ++c)
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t at = (c * kRowMapH + h) * width;
      row(in + at + w0, out + at + w0, w1 - w0);
    }
}
__attribute__((target("avx512f"))) void relu_row_avx512(const float* in, float* out, int64_t n) {
  const __m512 zero = _mm512_setzero_ps();
  int64_t i = 0;
  const __mmask16 all = 0xFFFF;  // (the maskz form: GCC 12 warns about _mm512_max_ps's undefined source)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_maskz_max_ps(all, _mm512_loadu_ps(in + i), zero));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, _mm512_maskz_max_ps(m, _mm512_mask_loadu_ps(zero, m, in + i), zero));
  }
}
__attribute__((target("avx2"))) void relu_row_avx2(const float* in, float* out, int64_t n) {
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_max_ps(_mm256_loadu_ps(in + i), zero));
  for (; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}
void relu_row_plain(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] > 0.0f ? in[i] : 0.0f;
}

/// Cycles a loop nest spends per start of its innermost loop (the spec's compute.row_start_cycles;
/// docs/cost-model.md, "Row starts"): the benchmark above on `threads` threads (one per core), the
/// work split into kRowMapC / kRowCube blocks of channels; the wall time is the busiest thread's,
/// which runs ceil(blocks / threads) of them, so cycles = (best time in cubes - best time in rows)
/// x clock / (the extra starts of that many blocks). 0 when the difference is not positive (a
/// noisy machine: not measured).
double measure_row_start_cycles(Isa isa, int threads, double clock_ghz, bool quick) {
  const size_t n = static_cast<size_t>(kRowMapC * kRowMapH * kRowMapW);
  Buffer<float> in = allocate<float>(n), out = allocate<float>(n);
  for (size_t i = 0; i < n; ++i) in[i] = (i % 7) < 3 ? -1.0f : 1.0f;
  volatile int64_t width_source = kRowMapW;  // a run-time row length: the compiler cannot fuse rows
  const int64_t width = width_source;
  auto row = [&](const float* a, float* b, int64_t len) {
    if (isa == Isa::avx512) relu_row_avx512(a, b, len);
    else if (isa == Isa::avx2) relu_row_avx2(a, b, len);
    else relu_row_plain(a, b, len);
  };
  const int64_t cubes_c = kRowMapC / kRowCube;  // the work is split by channel blocks of kRowCube
  auto chunk = [&](int t, int64_t& b0, int64_t& b1) {
    b0 = cubes_c * t / threads;
    b1 = cubes_c * (t + 1) / threads;
  };
  auto in_cubes = [&](int t) {
    int64_t b0, b1;
    chunk(t, b0, b1);
    for (int64_t cb = b0; cb < b1; ++cb)
      for (int64_t h0 = 0; h0 < kRowMapH; h0 += kRowCube)
        for (int64_t w0 = 0; w0 < width; w0 += kRowCube)
          relu_rows(in.get(), out.get(), cb * kRowCube, (cb + 1) * kRowCube, h0, std::min(h0 + kRowCube, kRowMapH), w0,
                    std::min(w0 + kRowCube, width), width, row);
  };
  auto in_rows = [&](int t) {
    int64_t b0, b1;
    chunk(t, b0, b1);
    relu_rows(in.get(), out.get(), b0 * kRowCube, b1 * kRowCube, 0, kRowMapH, 0, width, width, row);
  };
  const int repeats = quick ? 5 : 15;
  double cubes = 1e30, rows = 1e30;
  for (int r = 0; r < repeats; ++r) {  // interleaved, the best of each
    cubes = std::min(cubes, timed_parallel(threads, in_cubes));
    rows = std::min(rows, timed_parallel(threads, in_rows));
  }
  g_sink = g_sink + out[n / 3];
  // Extra starts per block of channels in cubes; the busiest thread runs ceil(blocks / threads).
  const double extra_per_block = static_cast<double>(kRowCube * kRowMapH * ((width + kRowCube - 1) / kRowCube - 1));
  const double busiest = static_cast<double>((cubes_c + threads - 1) / threads);
  const double cycles = (cubes - rows) * clock_ghz * 1e9 / (busiest * extra_per_block);
  return cycles > 0 ? cycles : 0;
}

/// Aggregate read bandwidth (bytes/s) when each thread repeatedly reads its own `ws_bytes`.
double measure_read_bandwidth(Isa isa, int threads, int64_t ws_bytes, bool quick) {
  const size_t floats = std::max<size_t>(128, static_cast<size_t>(ws_bytes) / 4 / 128 * 128);
  const int64_t bytes_per_thread = quick ? (int64_t{32} << 20) : (int64_t{192} << 20);
  const int64_t passes = std::max<int64_t>(1, bytes_per_thread / static_cast<int64_t>(floats * 4));
  std::vector<Buffer<float>> buffers(threads);
  timed_parallel(threads, [&](int t) {  // first touch on the thread that reads it
    buffers[t] = allocate<float>(floats);
    for (size_t i = 0; i < floats; ++i) buffers[t][i] = 1.0f;
  });
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const double s = timed_parallel(threads, [&](int t) {
      g_sink = g_sink + run_read(isa, buffers[t].get(), floats, passes);
    });
    best = std::max(best, static_cast<double>(passes) * floats * 4 * threads / s);
  }
  return best;
}

/// STREAM-style DRAM bandwidth (bytes/s): the better of copy (2 x 8 B per element) and triad
/// (3 x 8 B per element), over arrays of `total_bytes` together.
double measure_dram_bandwidth(int threads, int64_t total_bytes, bool quick) {
  const size_t n = static_cast<size_t>(total_bytes / 3 / 8) / threads * threads;
  Buffer<double> a = allocate<double>(n), b = allocate<double>(n), c = allocate<double>(n);
  const size_t slice = n / threads;
  timed_parallel(threads, [&](int t) {
    for (size_t i = t * slice; i < (t + 1) * slice; ++i) a[i] = 0, b[i] = 1, c[i] = 2;
  });
  double best = 0;
  const int repeats = quick ? 3 : 5;
  for (int r = 0; r < repeats; ++r) {
    double s = timed_parallel(threads, [&](int t) {
      std::memcpy(a.get() + t * slice, b.get() + t * slice, slice * sizeof(double));
    });
    best = std::max(best, 2.0 * 8 * n / s);
    s = timed_parallel(threads, [&](int t) {
      double* __restrict pa = a.get();
      const double* __restrict pb = b.get();
      const double* __restrict pc = c.get();
      for (size_t i = t * slice; i < (t + 1) * slice; ++i) pa[i] = pb[i] + 3.0 * pc[i];
    });
    best = std::max(best, 3.0 * 8 * n / s);
  }
  g_sink = g_sink + static_cast<float>(a[n / 2]);
  return best;
}

// ---- Assembling the spec --------------------------------------------------------------------------

/// Linux flag name -> LLVM feature name, for the features code generation cares about.
const std::pair<const char*, const char*> kFeatures[] = {
    {"sse4_1", "sse4.1"},         {"sse4_2", "sse4.2"},         {"avx", "avx"},
    {"avx2", "avx2"},             {"fma", "fma"},               {"f16c", "f16c"},
    {"bmi1", "bmi"},              {"bmi2", "bmi2"},             {"avx_vnni", "avxvnni"},
    {"avx512f", "avx512f"},       {"avx512bw", "avx512bw"},     {"avx512cd", "avx512cd"},
    {"avx512dq", "avx512dq"},     {"avx512vl", "avx512vl"},     {"avx512_vnni", "avx512vnni"},
    {"avx512_bf16", "avx512bf16"}, {"avx512_fp16", "avx512fp16"}, {"avx512ifma", "avx512ifma"},
    {"avx512vbmi", "avx512vbmi"}, {"amx_tile", "amx-tile"},     {"amx_bf16", "amx-bf16"},
    {"amx_int8", "amx-int8"},     {"neon", "neon"},             {"asimd", "neon"},
    {"sve", "sve"}};

std::string level_name(int level) { return level == 1 ? "l1d" : cat("l", level); }

/// Measurements are written with 4 significant digits; more would only be noise.
double rounded(double v) {
  if (v <= 0) return v;
  const double scale = std::pow(10.0, 3 - static_cast<int>(std::floor(std::log10(v))));
  return std::round(v * scale) / scale;
}

}  // namespace

std::string cuda_identity(int device);  // probe_cuda.cpp

std::string probe_identity(const std::string& device) {
  if (device == "cuda") return cuda_identity(0);
  if (device != "cpu") return "";
  std::string model;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 1);
      break;
    }
  std::string flags;
  for (const std::string& f : cpu_flags()) flags += " " + f;
  const Topology t = read_topology();
  std::string caches;
  for (const CacheInfo& c : read_caches()) caches += cat(" L", c.level, ":", c.size_bytes, "/", c.sharers);
  // The CPUs this process may run on (a container's cpuset): two containers of one host with
  // different sets measure differently.
  cpu_set_t set;
  CPU_ZERO(&set);
  const int usable = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  return cat("cpu:", model, "; ", t.threads, " threads (", usable, " usable), ", t.cores, " cores;", caches, "; ", physical_memory_bytes(),
             " bytes;", flags);
}

std::string probe_source_note() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char date[16];
  std::strftime(date, sizeof(date), "%Y-%m-%d", &tm);
  return cat("measured by tessel hw probe on ", date);
}

HwSpec probe_host_cpu(const ProbeOptions& options) {
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const std::string measured = probe_source_note();

  // 1. Topology, ISA, clock.
  const Topology topo = read_topology();
  const std::set<std::string> flags = cpu_flags();
  const Isa isa = best_isa();
  const std::vector<CacheInfo> caches = read_caches();
  utsname uts{};
  uname(&uts);
  const std::string machine = uts.machine;

  HwSpec spec;
  spec.name = "host-cpu";
  spec.kind = "cpu";
  {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("model name", 0) == 0) {
        spec.description = line.substr(line.find(':') + 2);
        break;
      }
  }
  spec.description += cat(spec.description.empty() ? "" : ", ", topo.cores, " cores, ", topo.threads,
                           " hardware threads (probed)");
  spec.source = measured + "; topology and caches from /sys/devices/system/cpu, ISA from /proc/cpuinfo";
  spec.limits.hardware_threads = topo.threads;
  spec.target.backend = "llvm";
  spec.target.triple = machine + "-unknown-linux-gnu";
  for (const auto& [linux_name, llvm_name] : kFeatures)
    if (flags.count(linux_name) &&
        std::find(spec.target.cpu_features.begin(), spec.target.cpu_features.end(), llvm_name) ==
            spec.target.cpu_features.end())
      spec.target.cpu_features.push_back(llvm_name);
  if (machine == "x86_64")
    spec.target.arch = isa == Isa::avx512 ? "x86-64-v4" : isa == Isa::avx2 ? "x86-64-v3" : "x86-64";
  else
    spec.target.arch = "generic";

  // 2. Peak arithmetic (also gives the register level's operand bandwidth).
  progress("measuring fp32 FMA throughput");
  const double flops = measure_fp32_flops(isa, topo.threads, options.quick);
  const int lanes = fp32_lanes(isa);
  ComputeSpec& c = spec.compute;
  c.units = topo.cores;
  c.simd_width = lanes;
  c.clock_ghz = rounded(clock_ghz());
  if (c.clock_ghz <= 0)  // no cpufreq nor "cpu MHz": two FMA pipes per core assumed
    c.clock_ghz = rounded(flops / (topo.cores * lanes * 2.0 * 2.0) / 1e9);
  progress("measuring the cost of a parallel region");
  c.launch_overhead_us = rounded(measure_dispatch_seconds(topo.threads, options.quick) * 1e6);
  progress("measuring the cost of a loop's row start");
  c.row_start_cycles = std::round(measure_row_start_cycles(isa, static_cast<int>(topo.cores), c.clock_ghz, options.quick));
  c.simt_peak_tflops[DType::f32] = rounded(flops / 1e12);
  c.simt_peak_tflops[DType::f64] = rounded(flops / 2 / 1e12);
  c.source = cat(measured, ": f32 = ", kFmaChains, " independent ",
                 isa == Isa::avx512 ? "AVX-512" : isa == Isa::avx2 ? "AVX2" : "scalar",
                 " FMA chains on every hardware thread; f64 = half of f32 (estimate: half as many "
                 "lanes); clock from ",
                 read_line("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") ? "cpufreq max"
                                                                                    : "/proc/cpuinfo cpu MHz",
                 "; launch overhead = median time to wake every hardware thread for an empty parallel region and wait for it",
                 "; row start = (ReLU over a 144 x 112 x 112 map in 16^3 cubes - in whole rows, one thread per core, "
                 "one vector an iteration) x clock / the busiest thread's extra innermost-loop starts, best of interleaved runs",
                 c.row_start_cycles > 0 ? "" : " (not positive here: not measured, 0)");

  // 3. Levels: registers, the caches, DRAM.
  const int vector_bytes = lanes * 4;
  const int vector_registers = isa == Isa::avx512 ? 32 : 16;
  MemoryLevel regs;
  regs.name = "registers";
  regs.scope = MemoryScope::core;
  regs.capacity_bytes = int64_t{vector_registers} * std::max(vector_bytes, 16);
  regs.instances = topo.cores;
  regs.bandwidth_gbps = rounded(flops / 2 * 3 * 4 / 1e9);
  regs.transaction_bytes = std::max(vector_bytes, 4);
  regs.software_managed = true;
  regs.source = cat("ISA: ", vector_registers, " vector registers x ", std::max(vector_bytes, 16),
                    " B; bandwidth estimate: 3 operands x 4 B per measured fp32 FMA");
  spec.memory_levels.push_back(regs);

  int64_t inner_share = regs.capacity_bytes;  // bytes per thread of the level inward
  for (const CacheInfo& ci : caches) {
    MemoryLevel l;
    l.name = level_name(ci.level);
    const int sharers = std::min(ci.sharers, topo.threads);
    const int threads_per_core = std::max(1, topo.threads / topo.cores);
    if (sharers >= topo.threads) {
      l.scope = MemoryScope::device;
      l.instances = 1;
    } else if (sharers <= threads_per_core) {
      l.scope = MemoryScope::core;
      l.instances = topo.cores;
    } else {
      l.scope = MemoryScope::cluster;
      l.instances = (topo.threads + sharers - 1) / sharers;
    }
    l.capacity_bytes = ci.size_bytes;
    l.transaction_bytes = ci.line_bytes;
    l.cache = CacheSpec{ci.ways, sharers > threads_per_core};
    // Half of each thread's share of the level, but well past the level inward.
    const int64_t share = ci.size_bytes / sharers;
    const int64_t ws = std::max(share / 2, std::min(inner_share * 2, share * 9 / 10));
    progress(cat("measuring ", l.name, " read bandwidth (", ws >> 10, " KiB per thread)"));
    l.bandwidth_gbps = rounded(measure_read_bandwidth(isa, topo.threads, ws, options.quick) / 1e9);
    l.source = cat(measured, ": every thread reads its own ", ws >> 10, " KiB; size from /sys cache index");
    inner_share = share;
    spec.memory_levels.push_back(l);
  }

  int64_t llc_chip_bytes = 0;
  for (const MemoryLevel& l : spec.memory_levels) llc_chip_bytes = std::max(llc_chip_bytes, l.chip_capacity_bytes());
  const int64_t memory = physical_memory_bytes();
  int64_t dram_ws = std::max(llc_chip_bytes * (options.quick ? 4 : 8), (options.quick ? int64_t{96} : int64_t{256}) << 20);
  if (memory > 0) dram_ws = std::min(dram_ws, memory / 4);
  progress(cat("measuring DRAM bandwidth (", dram_ws >> 20, " MiB, copy and triad)"));
  MemoryLevel dram;
  dram.name = "dram";
  dram.scope = MemoryScope::host;
  dram.capacity_bytes = std::max(memory, llc_chip_bytes);
  dram.instances = 1;
  dram.bandwidth_gbps = rounded(measure_dram_bandwidth(topo.threads, dram_ws, options.quick) / 1e9);
  dram.transaction_bytes = caches.empty() ? 64 : caches.back().line_bytes;
  dram.source = cat(measured, ": best of STREAM-style copy and triad over ", dram_ws >> 20,
                    " MiB; capacity from /proc/meminfo");
  spec.memory_levels.push_back(dram);

  // Processes on one host (MPI ranks) exchange data through shared memory: each byte is copied
  // in and out of a shared buffer (read and write each), and every rank shares the memory bus.
  spec.interconnect.devices = topo.threads;
  InterconnectLevel shm;
  shm.name = "shared_memory";
  shm.devices = topo.threads;
  shm.bandwidth_gbps = rounded(dram.bandwidth_gbps / (4.0 * topo.threads));
  shm.latency_us = 2;
  shm.source = "estimate: the measured DRAM bandwidth over 4 memory passes per byte and the ranks sharing it; latency an estimate";
  spec.interconnect.levels.push_back(shm);
  spec.interconnect.source = "one host: its hardware threads as ranks over shared memory";
  return spec;
}

}  // namespace tessel
