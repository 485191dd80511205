// Kernel microbenchmarks, every slot that matters per ISA this machine runs,
// at Kimi-Linear shapes, reported as bytes of weights (or indices) read per
// second beside a plain streaming sum over buffers of the same sizes (what
// the memory system delivers to one core). Single-threaded: the engine
// splits rows over threads, so per-core throughput is the figure to compare.
// Results and their interpretation live in docs/KERNELS.md.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/aligned_vector.h"
#include "kernels/dispatch.h"
#include "kernels/isa_register.h"
#include "kernels/kernel_table.h"
#include "kernels/numerics.h"
#include "platform/platform.h"
#include "runtime/thread_pool.h"

namespace waste::kernels {
namespace {

std::mt19937& Rng() {
  static std::mt19937 rng(1);
  return rng;
}

std::vector<uint8_t> RandomBytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 4) {
    const uint32_t r = Rng()();
    std::memcpy(v.data() + i, &r, std::min<size_t>(4, n - i));
  }
  return v;
}

// Memory as the engine's expert cache and trunk have it (platform::LargeBuffer:
// 2 MiB aligned, huge pages advised), so a "_dram" benchmark measures the
// kernel's streaming rather than 4 KiB TLB misses.
class HugeBuffer {
 public:
  explicit HugeBuffer(size_t n) : n_(n) {
    auto r = platform::LargeBuffer::Allocate(n, true, "benchmark buffer");
    if (!r) std::abort();
    buf_ = std::move(r.value());
  }
  uint8_t* data() { return buf_.data(); }
  uint8_t& operator[](size_t i) { return buf_.data()[i]; }
  size_t size() const { return n_; }

 private:
  platform::LargeBuffer buf_;
  size_t n_;
};

// `bytes` copied into HugeBuffer memory.
HugeBuffer InHugePages(const std::vector<uint8_t>& bytes) {
  HugeBuffer b(bytes.size());
  std::memcpy(b.data(), bytes.data(), bytes.size());
  return b;
}

std::vector<float> RandomFloats(size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (auto& e : v) e = lo + (hi - lo) * static_cast<float>(Rng()() / 4294967296.0);
  return v;
}

std::vector<uint16_t> RandomScales(size_t n) {
  std::vector<uint16_t> v(n);
  for (auto& e : v) e = F32ToF16(0.001f + 0.01f * static_cast<float>(Rng()() / 4294967296.0));
  return v;
}

// ---- streaming sum: the read-bandwidth yardstick ---------------------------

void StreamSum(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)) / sizeof(float);
  std::vector<float> buf = RandomFloats(n, -1, 1);
  for (auto _ : state) {
    // Eight independent accumulators: bound by loads, not by add latency; the
    // compiler vectorises this at the baseline ISA (SSE2 on x86-64).
    float acc[8] = {0};
    for (size_t i = 0; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += buf[i + j];
    float s = 0;
    for (float a : acc) s += a;
    benchmark::DoNotOptimize(s);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(float)));
}

// The same over the engine's thread pool (rows/bytes split in 2 halves):
// what two cores pull from DRAM together, the yardstick for the
// two-thread matvec figures below.
ThreadPool& Pool2() {
  static std::unique_ptr<ThreadPool> pool = std::move(ThreadPool::Create(2).value());
  return *pool;
}

void StreamSum2T(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)) / sizeof(float);
  std::vector<float> buf = RandomFloats(n, -1, 1);
  float part[2][16];
  for (auto _ : state) {
    Pool2().ParallelFor(n / 8, 1024, [&](size_t b, size_t e) {
      float acc[8] = {0};
      for (size_t i = b * 8; i < e * 8; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += buf[i + j];
      float s = 0;
      for (float a : acc) s += a;
      part[b == 0 ? 0 : 1][0] = s;
    });
    benchmark::DoNotOptimize(part);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * sizeof(float)));
  state.SetLabel("2 threads");
}

// ---- thread pool ---------------------------------------------------------------
// Cost of one fork-join with no work (2 chunks of nothing), back to back
// (the worker is still spinning from the previous job), after a pause longer
// than the spin (the worker has parked: a futex wake-up), and a job small
// enough to stay on the caller (n <= min_chunk: no other thread involved).
void PoolDispatch(benchmark::State& state, int mode) {
  ThreadPool& pool = Pool2();
  std::atomic<size_t> sink{0};
  const auto pause = std::chrono::microseconds(4 * pool.spin_us() + 200);
  for (auto _ : state) {
    if (mode == 1) {
      state.PauseTiming();
      std::this_thread::sleep_for(pause);
      state.ResumeTiming();
    }
    const size_t n = mode == 2 ? 1 : 2;
    pool.ParallelFor(n, 1, [&](size_t b, size_t e) { sink.fetch_add(e - b, std::memory_order_relaxed); });
  }
  benchmark::DoNotOptimize(sink.load());
  state.SetLabel(mode == 0 ? "back to back" : mode == 1 ? "after the worker parked" : "serial (n <= min_chunk)");
}

// ---- trunk matvec -------------------------------------------------------------

struct TrunkShape {
  const char* name;
  size_t rows, cols;
  int bits;  // 8 = Q8G, 4 = Q4G, 3 = Q3G
};

// `copies` > 1 cycles through that many distinct matrices so the working set
// exceeds the last-level cache: the decode situation, where every trunk
// matrix of the model streams from DRAM once per token. `two_threads`
// splits the rows as Ops::MatVec does, on the engine's pool.
// `fixed_point` swaps in the VNNI fixed-point Q4G prototype (in no table)
// for the table's float kernel, to compare the two (docs/KERNELS.md).
void TrunkMatVecWith(benchmark::State& state, Isa isa, TrunkShape sh, size_t copies, bool two_threads,
                     bool fixed_point) {
  KernelTable t = BuildKernelTable(isa);
  if (fixed_point) {
#if defined(WASTE_HAVE_KERNEL_PROTOTYPES)  // built on x86-64 only, outside the library
    t.matvec_q4g = avx512_vnni::MatVecQ4GFixedPoint;
    t.name += " (VNNI fixed-point Q4G)";
#else
    state.SkipWithError("the VNNI prototype is built on x86-64 only");
    return;
#endif
  }
  const size_t group = 128, groups = (sh.cols + group - 1) / group, np = groups * group;
  const size_t row_bytes = sh.bits == 8 ? np : sh.bits == 4 ? np / 2 : np * 3 / 8 + 1;
  const size_t mat_bytes = sh.rows * row_bytes;
  std::vector<uint8_t> w = RandomBytes(mat_bytes * copies);
  std::vector<uint16_t> s = RandomScales(sh.rows * groups * copies);
  std::vector<float> x = RandomFloats(sh.cols, -1, 1), y(sh.rows);
  MatVecArgs a;
  a.row_bytes = row_bytes;
  a.groups = groups;
  a.group = group;
  a.cols = sh.cols;
  a.x = x.data();
  a.y = y.data();
  const MatVecFn fn = sh.bits == 8 ? t.matvec_q8g : sh.bits == 4 ? t.matvec_q4g : t.matvec_q3g;
  size_t c = 0;
  for (auto _ : state) {
    a.weights = w.data() + c * mat_bytes;
    a.scales = s.data() + c * sh.rows * groups;
    if (two_threads) {
      Pool2().ParallelFor(sh.rows, 8, [&](size_t b, size_t e) { fn(a, b, e); });
    } else {
      fn(a, 0, sh.rows);
    }
    benchmark::ClobberMemory();
    c = (c + 1) % copies;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * (w.size() + 2 * s.size()) / copies));
  state.SetLabel(t.name + (two_threads ? " 2 threads" : ""));
}

void TrunkMatVec(benchmark::State& state, Isa isa, TrunkShape sh, size_t copies, bool two_threads) {
  TrunkMatVecWith(state, isa, sh, copies, two_threads, false);
}

void TrunkMatMul(benchmark::State& state, Isa isa, TrunkShape sh, size_t tokens) {
  const KernelTable t = BuildKernelTable(isa);
  const size_t group = 128, groups = (sh.cols + group - 1) / group, np = groups * group;
  const size_t row_bytes = sh.bits == 8 ? np : np / 2;
  std::vector<uint8_t> w = RandomBytes(sh.rows * row_bytes);
  std::vector<uint16_t> s = RandomScales(sh.rows * groups);
  std::vector<float> x = RandomFloats(sh.cols * tokens, -1, 1), y(sh.rows * tokens);
  MatMulArgs m;
  m.w.weights = w.data();
  m.w.row_bytes = row_bytes;
  m.w.scales = s.data();
  m.w.groups = groups;
  m.w.group = group;
  m.w.cols = sh.cols;
  m.tokens = tokens;
  m.x = x.data();
  m.x_stride = sh.cols;
  m.y = y.data();
  m.y_stride = sh.rows;
  const MatMulFn fn = sh.bits == 8 ? t.matmul_q8g : t.matmul_q4g;
  for (auto _ : state) {
    fn(m, 0, sh.rows);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * 2 * sh.rows * sh.cols * tokens));
  state.SetLabel(t.name + " (items = flops)");
}

// ---- VQ -----------------------------------------------------------------------

struct VqShape {
  const char* name;
  size_t rows, cols;
};

void VqApply(benchmark::State& state, Isa isa, VqShape sh, bool six_bit) {
  const KernelTable t = BuildKernelTable(isa);
  const size_t nv = sh.cols / 8, nb = (sh.rows + 63) / 64;
  std::vector<uint8_t> idx = RandomBytes(nb * nv * 64 * 3);
  std::vector<uint16_t> s = RandomScales(sh.rows);
  std::vector<float> y(sh.rows);
  std::vector<float> table = RandomFloats(nv * 768, -1, 1);
  std::vector<uint8_t> tq = RandomBytes(nv * 256);
  std::vector<float> tau = RandomFloats((nv + 31) / 32, 0.001f, 0.01f);
  for (auto _ : state) {
    if (six_bit) {
      VqApply6Args a;
      a.indices = idx.data();
      a.nv = nv;
      a.table = reinterpret_cast<const int8_t*>(tq.data());
      a.tau = tau.data();
      a.scales = s.data();
      a.y = y.data();
      t.vq_apply6(a, 0, sh.rows);
    } else {
      VqApply8Args a;
      a.indices = idx.data();
      a.nv = nv;
      a.stages = 3;
      a.entries = 256;
      a.table = table.data();
      a.scales = s.data();
      a.y = y.data();
      t.vq_apply8(a, 0, sh.rows);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * idx.size()));
  state.SetLabel(t.name + " (bytes = index bytes)");
}

// VQ3R apply on byte-plane tables (LutBuildArgs::planes), the layout the
// engine uses when the table has vq8_planes. `copies` distinct index
// matrices (cycled) put the indices in DRAM as in the engine, where every
// expert record is read once per token; the table stays cache-resident.
void VqApplyPlanes(benchmark::State& state, Isa isa, VqShape sh, size_t copies, size_t n_tables = 1) {
  const KernelTable t = BuildKernelTable(isa);
  const size_t nv = sh.cols / 8, nb = (sh.rows + 63) / 64, idx_bytes = nb * nv * 64 * 3;
  HugeBuffer idx = InHugePages(RandomBytes(idx_bytes * copies));
  std::vector<uint16_t> s = RandomScales(sh.rows);
  std::vector<float> y(sh.rows);
  std::vector<float> table = RandomFloats(nv * 768 * n_tables, -1, 1);
  // 64-byte aligned like the engine's tables (AlignedVector): from 16-byte
  // aligned storage this apply ran 15-20 % slower (docs/PERFORMANCE.md).
  HugeBuffer planes(nv * 768 * 4 * n_tables);
  for (size_t vs = 0; vs < nv * 3 * n_tables; ++vs) {
    for (size_t c = 0; c < 256; ++c) {
      uint32_t bits;
      std::memcpy(&bits, &table[vs * 256 + c], 4);
      for (size_t b = 0; b < 4; ++b) planes[(vs * 4 + b) * 256 + c] = static_cast<uint8_t>(bits >> (8 * b));
    }
  }
  VqApply8Args a;
  a.nv = nv;
  a.stages = 3;
  a.entries = 256;
  a.planes = planes.data();
  a.scales = s.data();
  a.y = y.data();
  size_t c = 0;
  for (auto _ : state) {
    a.indices = idx.data() + c * idx_bytes;
    a.planes = planes.data() + (c % n_tables) * nv * 768 * 4;
    t.vq_apply8(a, 0, sh.rows);
    benchmark::ClobberMemory();
    c = (c + 1) % copies;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * idx_bytes));
  state.SetLabel(t.name + (t.vq8_planes ? " planes" : " (f32 from planes)") + " (bytes = index bytes)");
}

// The chunked-prefill shape of the apply: `count` tokens of one expert per
// call (batched form), each with its own plane table, tables drawn from a
// pool of 64 (a chunk's worth: 57 MB for gate, so they come from DRAM) and
// indices from 16 distinct matrices. Bytes = index bytes x count (one
// token's lookups each), comparable with vq_apply8_vq3r_planes_*.
void VqApplyPlanesChunk(benchmark::State& state, Isa isa, VqShape sh, size_t count) {
  const KernelTable t = BuildKernelTable(isa);
  constexpr size_t kPool = 64, kMats = 16;
  const size_t nv = sh.cols / 8, nb = (sh.rows + 63) / 64, idx_bytes = nb * nv * 64 * 3;
  const size_t plane_bytes = nv * 768 * 4;
  HugeBuffer idx = InHugePages(RandomBytes(idx_bytes * kMats));
  std::vector<uint16_t> s = RandomScales(sh.rows);
  HugeBuffer planes = InHugePages(RandomBytes(plane_bytes * kPool));  // aligned, as the engine's
  for (size_t i = 0; i < planes.size(); i += 4) planes[i + 3] = static_cast<uint8_t>(0x3c + (planes[i + 3] & 1));  // finite
  std::vector<std::vector<float>> y(count, std::vector<float>(sh.rows));
  std::vector<const uint8_t*> ps(count);
  std::vector<float*> ys(count);
  for (size_t i = 0; i < count; ++i) ys[i] = y[i].data();
  VqApply8Args a;
  a.nv = nv;
  a.stages = 3;
  a.entries = 256;
  a.scales = s.data();
  a.count = count;
  a.plane_sets = ps.data();
  a.ys = ys.data();
  size_t c = 0, tab = 0;
  for (auto _ : state) {
    a.indices = idx.data() + (c % kMats) * idx_bytes;
    for (size_t i = 0; i < count; ++i) ps[i] = planes.data() + ((tab++ * 7) % kPool) * plane_bytes;
    t.vq_apply8(a, 0, sh.rows);
    benchmark::ClobberMemory();
    ++c;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * idx_bytes * count));
  state.SetLabel(t.name + " (bytes = index bytes x tokens)");
}

// vq_matmul8 (rows decoded once, then dotted with every token): the same
// chunk shape as VqApplyPlanesChunk, indices from 16 distinct matrices.
// Bytes = index bytes x tokens, so GB/s compares with it directly.
void VqMatMulChunk(benchmark::State& state, Isa isa, VqShape sh, size_t count) {
  const KernelTable t = BuildKernelTable(isa);
  constexpr size_t kMats = 16;
  const size_t nv = sh.cols / 8, nb = (sh.rows + 63) / 64, idx_bytes = nb * nv * 64 * 3;
  HugeBuffer idx = InHugePages(RandomBytes(idx_bytes * kMats));
  std::vector<uint16_t> s = RandomScales(sh.rows);
  std::vector<std::vector<float>> books(3, RandomFloats(256 * 8, -1, 1));
  const float* bp[3] = {books[0].data(), books[1].data(), books[2].data()};
  std::vector<std::vector<float>> x(count, RandomFloats(sh.cols, -1, 1));
  std::vector<std::vector<float>> y(count, std::vector<float>(sh.rows));
  std::vector<const float*> xs(count);
  std::vector<float*> ys(count);
  for (size_t i = 0; i < count; ++i) {
    xs[i] = x[i].data();
    ys[i] = y[i].data();
  }
  VqMatMul8Args a;
  a.nv = nv;
  a.stages = 3;
  a.entries = 256;
  a.books = bp;
  a.scales = s.data();
  a.count = count;
  a.xs = xs.data();
  a.ys = ys.data();
  size_t c = 0;
  for (auto _ : state) {
    a.indices = idx.data() + (c % kMats) * idx_bytes;
    t.vq_matmul8(a, 0, sh.rows);
    benchmark::ClobberMemory();
    ++c;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * idx_bytes * count));
  state.SetLabel(t.name + " (bytes = index bytes x tokens)");
}

void LutBuildBench(benchmark::State& state, Isa isa, size_t stages, size_t entries, size_t nv) {
  const KernelTable t = BuildKernelTable(isa);
  std::vector<std::vector<float>> books;
  std::vector<const float*> ptrs;
  for (size_t s = 0; s < stages; ++s) {
    books.push_back(RandomFloats(entries * 8, -0.3f, 0.3f));
    ptrs.push_back(books.back().data());
  }
  std::vector<float> x = RandomFloats(nv * 8, -1, 1), table(nv * stages * entries);
  LutBuildArgs a;
  a.x = x.data();
  a.books = ptrs.data();
  a.stages = stages;
  a.entries = entries;
  a.vec_dim = 8;
  a.table = table.data();
  for (auto _ : state) {
    t.lut_build(a, 0, nv);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * nv * stages * entries));
  state.SetLabel(t.name + " (items = table entries)");
}

void LutQuantizeBench(benchmark::State& state, Isa isa, size_t nv) {
  const KernelTable t = BuildKernelTable(isa);
  std::vector<float> table = RandomFloats(nv * 256, -3, 3), tau((nv + 31) / 32);
  std::vector<int8_t> out(nv * 256);
  LutQuantizeArgs a;
  a.table = table.data();
  a.nv = nv;
  a.per_v = 256;
  a.out = out.data();
  a.tau = tau.data();
  for (auto _ : state) {
    t.lut_quantize(a, 0, tau.size());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * table.size() * 4));
  state.SetLabel(t.name);
}

void KdaBench(benchmark::State& state, Isa isa, size_t heads, size_t dim) {
  const KernelTable t = BuildKernelTable(isa);
  const std::vector<float> st_values = RandomFloats(heads * dim * dim, -1, 1);
  AlignedVector<float> st(st_values.begin(), st_values.end());  // as SessionState holds it
  std::vector<float> q = RandomFloats(heads * dim, -0.1f, 0.1f), k = RandomFloats(heads * dim, -0.1f, 0.1f);
  std::vector<float> v = RandomFloats(heads * dim, -1, 1), g = RandomFloats(heads * dim, -1e-4f, 0);
  std::vector<float> beta = RandomFloats(heads, 0, 0.01f), out(heads * dim);
  KdaStepArgs a;
  a.state = st.data();
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.g = g.data();
  a.beta = beta.data();
  a.out = out.data();
  a.dim = dim;
  for (auto _ : state) {
    t.kda_step(a, 0, heads);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * st.size() * 4));
  state.SetLabel(t.name + " (bytes = state)");
}

void RegisterAll() {
  benchmark::RegisterBenchmark("StreamSum/bytes", StreamSum)->Arg(int64_t{2654208})->Arg(int64_t{384} << 20);
  benchmark::RegisterBenchmark("StreamSum2T/bytes", StreamSum2T)->Arg(int64_t{384} << 20)->UseRealTime();
  benchmark::RegisterBenchmark("ThreadPool/empty_dispatch", PoolDispatch, 0)->UseRealTime();
  benchmark::RegisterBenchmark("ThreadPool/dispatch_after_park", PoolDispatch, 1)->UseRealTime();
  benchmark::RegisterBenchmark("ThreadPool/serial_small_job", PoolDispatch, 2)->UseRealTime();
  const TrunkShape trunk_q4{"q4g_2304x2304", 2304, 2304, 4};
  const TrunkShape trunk_q8{"q8g_2304x2304", 2304, 2304, 8};
  const TrunkShape trunk_q3{"q3g_2304x2304", 2304, 2304, 3};
  const TrunkShape head_q8{"q8g_lm_head_163840x2304", 163840, 2304, 8};
  const VqShape gate{"gate_1024x2304", 1024, 2304};
  const VqShape down{"down_2304x1024", 2304, 1024};
  for (Isa isa : SupportedIsas()) {
    const std::string p = std::string(IsaName(isa)) + "/";
    for (const TrunkShape& sh : {trunk_q4, trunk_q8, trunk_q3}) {
      benchmark::RegisterBenchmark((p + "matvec_" + sh.name + "_cached").c_str(), TrunkMatVec, isa, sh, 1, false);
      benchmark::RegisterBenchmark((p + "matvec_" + sh.name + "_dram").c_str(), TrunkMatVec, isa, sh, 24, false);
    }
    benchmark::RegisterBenchmark((p + "matvec_" + head_q8.name).c_str(), TrunkMatVec, isa, head_q8, 1, false);
    for (const TrunkShape& sh : {trunk_q4, trunk_q8}) {
      benchmark::RegisterBenchmark((p + "matvec2t_" + sh.name + "_dram").c_str(), TrunkMatVec, isa, sh, 24, true)->UseRealTime();
    }
    benchmark::RegisterBenchmark((p + "matvec2t_" + head_q8.name).c_str(), TrunkMatVec, isa, head_q8, 1, true)->UseRealTime();
    benchmark::RegisterBenchmark((p + "matmul_q4g_2304x2304_64tok").c_str(), TrunkMatMul, isa, trunk_q4, 64);
    // Prefill shapes of a Kimi-Linear layer (rows x cols): KDA q/k/v, o_proj,
    // the dense MLP's down; and short chunks.
    for (size_t tokens : {2, 3, 4, 8, 11, 12, 16, 256}) {
      benchmark::RegisterBenchmark((p + "matmul_q4g_2304x2304_" + std::to_string(tokens) + "tok").c_str(),
                                   TrunkMatMul, isa, trunk_q4, tokens);
    }
    benchmark::RegisterBenchmark((p + "matmul_q4g_4096x2304_64tok").c_str(), TrunkMatMul, isa,
                                 TrunkShape{"q4g_4096x2304", 4096, 2304, 4}, 64);
    benchmark::RegisterBenchmark((p + "matmul_q4g_2304x4096_64tok").c_str(), TrunkMatMul, isa,
                                 TrunkShape{"q4g_2304x4096", 2304, 4096, 4}, 64);
    benchmark::RegisterBenchmark((p + "matmul_q4g_2304x9216_64tok").c_str(), TrunkMatMul, isa,
                                 TrunkShape{"q4g_2304x9216", 2304, 9216, 4}, 64);
    benchmark::RegisterBenchmark((p + "matmul_q8g_2304x2304_64tok").c_str(), TrunkMatMul, isa, trunk_q8, 64);
    // Decode-sized Q4G trunk matrices (rows x cols), the VNNI prototype
    // against the shipped float kernel: --benchmark_filter=q4g_decode.
    if (isa == Isa::kAvx512 && CpuHasAvx512Vnni()) {
      for (const TrunkShape& sh : {TrunkShape{"q4g_decode_2304x4096", 2304, 4096, 4},
                                   TrunkShape{"q4g_decode_4096x2304", 4096, 2304, 4},
                                   TrunkShape{"q4g_decode_2304x2304", 2304, 2304, 4},
                                   TrunkShape{"q4g_decode_1024x2304", 1024, 2304, 4}}) {
        for (bool fp : {true, false}) {
          const std::string k = p + (fp ? "vnni_" : "float_") + "matvec_" + sh.name;
          benchmark::RegisterBenchmark((k + "_cached").c_str(), TrunkMatVecWith, isa, sh, 1, false, fp);
          benchmark::RegisterBenchmark((k + "_dram").c_str(), TrunkMatVecWith, isa, sh, 24, false, fp);
          benchmark::RegisterBenchmark((k + "_2t_dram").c_str(), TrunkMatVecWith, isa, sh, 24, true, fp)->UseRealTime();
        }
      }
    }
    for (const VqShape& sh : {gate, down}) {
      benchmark::RegisterBenchmark((p + "vq_apply8_vq3r_" + sh.name).c_str(), VqApply, isa, sh, false);
      benchmark::RegisterBenchmark((p + "vq_apply6_vq4p_" + sh.name).c_str(), VqApply, isa, sh, true);
      benchmark::RegisterBenchmark((p + "vq_apply8_vq3r_planes_" + sh.name).c_str(), VqApplyPlanes, isa, sh, 1, 1);
      benchmark::RegisterBenchmark((p + "vq_apply8_vq3r_planes_" + sh.name + "_dram").c_str(), VqApplyPlanes, isa, sh, 48, 1);
      // Tables alternating like gate/up of consecutive experts (neither stays in L2).
      benchmark::RegisterBenchmark((p + "vq_apply8_vq3r_planes_" + sh.name + "_dram_2tables").c_str(), VqApplyPlanes, isa, sh, 48, 2);
    }
    for (const VqShape& sh : {gate, down}) {
      benchmark::RegisterBenchmark((p + "vq_apply8_vq3r_planes_chunk4_" + sh.name).c_str(), VqApplyPlanesChunk, isa, sh, 4);
      benchmark::RegisterBenchmark((p + "vq_apply8_vq3r_planes_chunk1_" + sh.name).c_str(), VqApplyPlanesChunk, isa, sh, 1);
      // Decoded rows against the tables (GB/s of index bytes x tokens, as above).
      for (size_t n : {1, 2, 3, 4, 6, 8, 12, 16, 32}) {
        benchmark::RegisterBenchmark((p + "vq_matmul8_vq3r_" + std::to_string(n) + "tok_" + sh.name).c_str(),
                                     VqMatMulChunk, isa, sh, n);
      }
    }
    benchmark::RegisterBenchmark((p + "lut_build_vq3r_nv288").c_str(), LutBuildBench, isa, 3, 256, 288);
    benchmark::RegisterBenchmark((p + "lut_build_vq4p_nv288").c_str(), LutBuildBench, isa, 4, 64, 288);
    benchmark::RegisterBenchmark((p + "lut_quantize_nv288").c_str(), LutQuantizeBench, isa, 288);
    benchmark::RegisterBenchmark((p + "kda_step_32x128").c_str(), KdaBench, isa, 32, 128);
  }
}

}  // namespace
}  // namespace waste::kernels

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  waste::kernels::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
