// One expert layer: training vectors drawn from every expert, residual
// k-means per kind, the codebook part written (parts/codebooks-L<L>.bin),
// then every expert encoded in parallel batches and appended in id order to
// experts-L<L>.bin. Memory: the training set (3 x T x 32 bytes) plus one
// batch of experts in f32 and their records.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <vector>

#include "convert/dequant.h"
#include "convert/expert_encode.h"
#include "convert/passes.h"
#include "convert/rng.h"
#include "convert/vq.h"
#include "platform/platform.h"

namespace waste::convert {
namespace {

// First error by expert id wins, so the message does not depend on timing.
struct FirstError {
  std::mutex mu;
  int expert = -1;
  Status status;
  void Set(int e, Status s) {
    std::lock_guard<std::mutex> lock(mu);
    if (expert < 0 || e < expert) {
      expert = e;
      status = std::move(s);
    }
  }
};

// One worker slot's matrices, kept across experts so that every expert after
// the first reuses the memory (no page faults and zero fill per tensor).
struct ExpertMatrices {
  F32Tensor m[3];
  std::vector<uint8_t> raw;
  uint64_t source_bytes = 0;
};

Status LoadExpert(const Checkpoint& ckpt, const SourceModel& model, const LayerJob& job, int e,
                  ExpertMatrices* out) {
  out->source_bytes = 0;
  for (int k = 0; k < 3; ++k) {
    const std::string name = model.ExpertTensor(job.layer, e, k);
    WASTE_TRY(LoadF32Into(ckpt, name, model.quant, &out->m[k], &out->raw));
    out->source_bytes += SourceBytes(ckpt, name);
    const format::MatrixLayout& ml = job.layout.m[k];
    if (out->m[k].shape.size() != 2 || out->m[k].shape[0] != ml.rows ||
        out->m[k].shape[1] != ml.cols) {
      return FormatError(fmt::format("{}: tensor {} has shape [{}], the config needs [{}, {}]",
                                     ckpt.dir(), name, fmt::join(out->m[k].shape, ", "), ml.rows,
                                     ml.cols));
    }
    if (job.basis != nullptr) WASTE_TRY(job.basis->ApplyToExpert(job.layer, k, &out->m[k]));
    for (float v : out->m[k].values) {
      if (!std::isfinite(v)) {
        return FormatError(fmt::format("{}: tensor {} holds a value that is not finite", ckpt.dir(),
                                       name));
      }
    }
  }
  return Status::Ok();
}

// Matrices for the experts in flight, reused: at most one set per worker
// thread exists, so the memory bound stays what one expert per thread needs.
class MatrixPool {
 public:
  std::unique_ptr<ExpertMatrices> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return std::make_unique<ExpertMatrices>();
    std::unique_ptr<ExpertMatrices> m = std::move(free_.back());
    free_.pop_back();
    return m;
  }
  void Give(std::unique_ptr<ExpertMatrices> m) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(m));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<ExpertMatrices>> free_;
};

// One set taken from the pool for a task's lifetime, given back on every exit.
struct MatrixLease {
  explicit MatrixLease(MatrixPool& p) : pool(p), m(p.Take()) {}
  ~MatrixLease() { pool.Give(std::move(m)); }
  MatrixLease(const MatrixLease&) = delete;
  MatrixLease& operator=(const MatrixLease&) = delete;
  MatrixPool& pool;
  std::unique_ptr<ExpertMatrices> m;
};

void ForExperts(ThreadPool* pool, size_t n, const std::function<void(size_t)>& fn) {
  auto run = [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) fn(i);
  };
  if (pool == nullptr) {
    run(0, n);
  } else {
    pool->ParallelForDynamic(n, 1, run);
  }
}

}  // namespace

Result<LayerResult> ConvertLayer(const Checkpoint& ckpt, const SourceModel& model,
                                 const LayerJob& job, const std::string& out_dir,
                                 ThreadPool* pool, std::atomic<int>* experts_done,
                                 const std::function<void()>& tick) {
  LayerResult res;
  // std::clock is the process's CPU time (every thread) on POSIX systems.
  const std::clock_t cpu0 = std::clock();
  const int E = model.n_experts;
  const ExpertQuant& q = job.quant;
  const int threads = pool != nullptr ? pool->size() : 1;

  // 1. Training vectors from every expert: `per` of each kind per expert.
  // The reference samples 12 experts (0, step, 2 step, ...) only.
  std::vector<int> sampled;
  const int step = job.reference ? std::max(1, E / 12) : 1;
  for (int e = 0; e < E && (!job.reference || sampled.size() < 12); e += step) sampled.push_back(e);
  const int ns = static_cast<int>(sampled.size());
  size_t per[3], total[3];
  for (int k = 0; k < 3; ++k) {
    const format::MatrixLayout& ml = job.layout.m[k];
    const size_t vectors = static_cast<size_t>(ml.rows) * ml.nv;
    per[k] = std::min(vectors, static_cast<size_t>((job.train_vectors + ns - 1) / ns));
    total[k] = per[k] * static_cast<size_t>(ns);
    if (total[k] < static_cast<size_t>(q.entries)) {
      return FormatError(fmt::format(
          "layer {}: {} training vectors for a {}-entry codebook (experts too small)", job.layer,
          total[k], q.entries));
    }
  }
  std::vector<float> train[3], weight[3];
  // Refinement weighs each vector by its row scale squared (see vq.h).
  const bool weighted = !job.reference && job.refine_rounds > 0;
  for (int k = 0; k < 3; ++k) {
    train[k].resize(total[k] * kVecDim);
    if (weighted) weight[k].resize(total[k]);
  }
  FirstError first;
  std::atomic<uint64_t> source_bytes{0};
  const size_t batch = static_cast<size_t>(std::max(2, 2 * threads));
  MatrixPool mats;
  for (size_t b0 = 0; b0 < static_cast<size_t>(ns); b0 += batch) {
    const size_t n = std::min(batch, static_cast<size_t>(ns) - b0);
    ForExperts(pool, n, [&](size_t i) {
      const int slot = static_cast<int>(b0 + i);
      const int e = sampled[slot];
      MatrixLease lease(mats);
      ExpertMatrices& x = *lease.m;
      Status st = LoadExpert(ckpt, model, job, e, &x);
      if (!st.ok()) return first.Set(e, std::move(st));
      source_bytes += x.source_bytes;
      for (int k = 0; k < 3; ++k) {
        const format::MatrixLayout& ml = job.layout.m[k];
        // gate and up draw the same positions (same seed): their rows pair up.
        SampleTrainingVectors(x.m[k].values.data(), ml.rows, ml.cols, per[k],
                              Rng(job.seed, 0x73616D70ull, static_cast<uint64_t>(job.layer),
                                  static_cast<uint64_t>(k == 2 ? 1 : 0), static_cast<uint64_t>(e))
                                  .Next(),
                              train[k].data() + static_cast<size_t>(slot) * per[k] * kVecDim,
                              weighted ? weight[k].data() + static_cast<size_t>(slot) * per[k] : nullptr);
      }
    });
    if (first.expert >= 0) return first.status;
    if (tick) tick();
  }

  // 2. Codebooks per kind, then the part file (before the bank: a bank on
  // disk always has its books).
  KindBooks books[3];
  std::vector<uint8_t> part;
  const uint64_t rec_bytes = format::CodebookRecordBytes(q);
  for (int k = 0; k < 3; ++k) {
    KmeansOptions ko;
    ko.entries = q.entries;
    ko.stages = q.stages;
    ko.max_iterations = job.reference ? 10 : job.kmeans_iterations;
    ko.reference = job.reference;
    ko.refine_rounds = job.refine_rounds;
    ko.seed = Rng(job.seed, 0x626F6F6Bull, static_cast<uint64_t>(job.layer), static_cast<uint64_t>(k)).Next();
    KmeansReport kr;
    std::vector<float> b = TrainResidualBooks(train[k], ko, pool, &kr, weighted ? weight[k].data() : nullptr);
    res.train_error[k] = kr.stage_error.empty() ? 0 : kr.stage_error.back();
    res.refine_error[k] = kr.refine_error;
    res.refine_kept[k] = kr.refine_kept;
    std::vector<float>().swap(train[k]);
    std::vector<float>().swap(weight[k]);
    for (int s = 0; s < q.stages; ++s) {
      std::vector<uint8_t> rec(static_cast<size_t>(rec_bytes), 0);
      format::CodebookHeader h{};
      h.magic = format::kCodebookMagic;
      h.codebook_id = static_cast<uint16_t>(job.codebook_base + k * q.stages + s);
      h.fmt = format::FmtByte(format::TensorFmt::kVq3r);  // the engine's books always carry 4
      h.vec_dim = static_cast<uint8_t>(kVecDim);
      h.n_entries = static_cast<uint32_t>(q.entries);
      std::memcpy(rec.data(), &h, sizeof(h));
      for (size_t i = 0; i < static_cast<size_t>(q.entries) * kVecDim; ++i) {
        uint16_t v = format::F32ToF16(b[static_cast<size_t>(s) * q.entries * kVecDim + i]);
        std::memcpy(rec.data() + format::kCodebookHeaderBytes + 2 * i, &v, 2);
      }
      part.insert(part.end(), rec.begin(), rec.end());
    }
    books[k].Build(std::move(b), q.stages, q.entries);
  }
  {
    WASTE_ASSIGN_OR_RETURN(std::unique_ptr<StagedFile> pf,
                           StagedFile::Create(JoinPath(out_dir, fmt::format("parts/codebooks-L{}.bin", job.layer))));
    WASTE_TRY(pf->Write(part.data(), part.size()));
    res.part_bytes = pf->size();
    res.part_crc = pf->crc();
    WASTE_TRY(pf->Commit());
  }
  if (tick) tick();
  const std::clock_t cpu1 = std::clock();
  res.train_cpu_s = static_cast<double>(cpu1 - cpu0) / CLOCKS_PER_SEC;

  // 3. Every expert, in parallel batches, appended in id order.
  WASTE_ASSIGN_OR_RETURN(std::unique_ptr<StagedFile> bank,
                         StagedFile::Create(JoinPath(out_dir, fmt::format("experts-L{}.bin", job.layer))));
  std::vector<ExpertRecordBuilder> builders(batch, ExpertRecordBuilder(job.layout));
  std::vector<MatrixError> errs(batch * 3);
  for (size_t b0 = 0; b0 < static_cast<size_t>(E); b0 += batch) {
    const size_t n = std::min(batch, static_cast<size_t>(E) - b0);
    ForExperts(pool, n, [&](size_t i) {
      const int e = static_cast<int>(b0 + i);
      MatrixLease lease(mats);
      ExpertMatrices& x = *lease.m;
      Status st = LoadExpert(ckpt, model, job, e, &x);
      if (!st.ok()) return first.Set(e, std::move(st));
      source_bytes += x.source_bytes;
      ExpertRecordBuilder& rb = builders[i];
      rb.Clear();
      for (int k = 0; k < 3; ++k) {
        errs[i * 3 + k] = EncodeMatrix(rb, k, x.m[k].values.data(), books[k], job.reference);
      }
      rb.Finish(job.layer, e, job.codebook_base);
      if (experts_done != nullptr) ++*experts_done;
    });
    if (first.expert >= 0) return first.status;
    for (size_t i = 0; i < n; ++i) {
      WASTE_TRY(bank->Write(builders[i].data(), builders[i].size()));
      for (int k = 0; k < 3; ++k) {
        res.err[k] += errs[i * 3 + k].err;
        res.norm[k] += errs[i * 3 + k].norm;
      }
    }
    if (tick) tick();
  }
  res.bank_bytes = bank->size();
  res.bank_crc = bank->crc();
  WASTE_TRY(bank->Commit());
  res.source_bytes = source_bytes.load();
  res.encode_cpu_s = static_cast<double>(std::clock() - cpu1) / CLOCKS_PER_SEC;
  return res;
}

}  // namespace waste::convert
