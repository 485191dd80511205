#include "convert/vq.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "convert/rng.h"
#include "format/format.h"

namespace waste::convert {

namespace {

constexpr size_t kChunk = 4096;  // fixed split: results independent of thread count

size_t Chunks(size_t n) { return (n + kChunk - 1) / kChunk; }

void ForChunks(ThreadPool* pool, size_t n, const std::function<void(size_t c, size_t b, size_t e)>& fn) {
  const size_t nc = Chunks(n);
  auto run = [&](size_t cb, size_t ce) {
    for (size_t c = cb; c < ce; ++c) fn(c, c * kChunk, std::min(n, (c + 1) * kChunk));
  };
  if (pool == nullptr || nc <= 1) {
    run(0, nc);
  } else {
    pool->ParallelForDynamic(nc, 1, run);
  }
}

// k-means++ seeding: each next centre drawn with probability proportional
// to the squared distance to the nearest centre chosen so far.
std::vector<float> SeedPlusPlus(const float* x, size_t n, int k, Rng& rng, ThreadPool* pool) {
  std::vector<float> centres(static_cast<size_t>(k) * kVecDim);
  std::vector<float> d2(n, std::numeric_limits<float>::infinity());
  std::vector<double> part(Chunks(n));
  // Coordinates transposed once ([8][n]): the update per new centre is then
  // a loop over points the compiler vectorises (ExactDist2's sum, same order).
  std::vector<float> xt(n * kVecDim);
  for (size_t i = 0; i < n; ++i) {
    for (int j = 0; j < kVecDim; ++j) xt[static_cast<size_t>(j) * n + i] = x[i * kVecDim + j];
  }
  size_t pick = rng.Below(n);
  for (int c = 0; c < k; ++c) {
    std::copy_n(x + pick * kVecDim, kVecDim, centres.data() + static_cast<size_t>(c) * kVecDim);
    const float* cc = centres.data() + static_cast<size_t>(c) * kVecDim;
    ForChunks(pool, n, [&](size_t ci, size_t b, size_t e) {
      const float c0 = cc[0], c1 = cc[1], c2 = cc[2], c3 = cc[3];
      const float c4 = cc[4], c5 = cc[5], c6 = cc[6], c7 = cc[7];
      const float* t0 = xt.data();
      for (size_t i = b; i < e; ++i) {
        const float a0 = t0[i] - c0, a1 = t0[n + i] - c1, a2 = t0[2 * n + i] - c2;
        const float a3 = t0[3 * n + i] - c3, a4 = t0[4 * n + i] - c4, a5 = t0[5 * n + i] - c5;
        const float a6 = t0[6 * n + i] - c6, a7 = t0[7 * n + i] - c7;
        const float d = a0 * a0 + a1 * a1 + a2 * a2 + a3 * a3 + a4 * a4 + a5 * a5 + a6 * a6 + a7 * a7;
        d2[i] = d < d2[i] ? d : d2[i];
      }
      // The chunk's sum in double: eight interleaved partial sums (no chain
      // of dependent adds), combined in a fixed order.
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      size_t i = b;
      for (; i + 8 <= e; i += 8) {
        for (int q = 0; q < 8; ++q) acc[q] += d2[i + q];
      }
      for (int q = 0; i < e; ++i, ++q) acc[q] += d2[i];
      part[ci] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    });
    if (c + 1 == k) break;
    double total = 0;
    for (double p : part) total += p;
    if (!(total > 0)) {
      pick = rng.Below(n);  // every point is already a centre: any will do
      continue;
    }
    double r = rng.Unit() * total;
    size_t ci = 0;
    while (ci + 1 < part.size() && r >= part[ci]) r -= part[ci++];
    size_t i = ci * kChunk;
    const size_t end = std::min(n, (ci + 1) * kChunk);
    for (; i + 1 < end; ++i) {
      if (r < d2[i]) break;
      r -= d2[i];
    }
    pick = i;
  }
  return centres;
}

// Sum of w_i * ||r_i||^2 over the chunk [b, e) (w_i = 1 without weights).
double WeightedSquares(const float* r, const float* w, size_t b, size_t e) {
  double acc = 0;
  for (size_t i = b; i < e; ++i) {
    double d = 0;
    for (int j = 0; j < kVecDim; ++j) d += static_cast<double>(r[i * kVecDim + j]) * r[i * kVecDim + j];
    acc += w != nullptr ? w[i] * d : d;
  }
  return acc;
}

// One greedy stage over vectors [b, e) of `resid` [..][8]: each takes its
// nearest entry of `search` (codes[i]) and loses it, leaving the residual
// the next stage sees. The training's final pass and GreedyEncode share it.
void AssignAndSubtract(const BookSearch& search, float* resid, size_t b, size_t e, int32_t* codes) {
  search.NearestBatch(resid + b * kVecDim, e - b, codes + b);
  for (size_t i = b; i < e; ++i) {
    const float* c = search.entry(codes[i]);
    for (int j = 0; j < kVecDim; ++j) resid[i * kVecDim + j] -= c[j];
  }
}

// Greedy residual encoding of x [n][8], as the expert encoder does it:
// stage 0 takes the nearest entry of x, stage s the nearest entry of what
// stages < s leave. Writes codes [stages][n] and the residual; returns the
// (weighted) sum of squared residuals.
double GreedyEncode(const float* x, const float* w, size_t n, const std::vector<float>& books, int stages,
                    int k, ThreadPool* pool, int32_t* codes, float* resid) {
  std::vector<BookSearch> search;
  for (int s = 0; s < stages; ++s) search.emplace_back(books.data() + static_cast<size_t>(s) * k * kVecDim, k);
  std::vector<double> err(Chunks(n));
  ForChunks(pool, n, [&](size_t ci, size_t b, size_t e) {
    std::copy(x + b * kVecDim, x + e * kVecDim, resid + b * kVecDim);
    for (int s = 0; s < stages; ++s) AssignAndSubtract(search[s], resid, b, e, codes + static_cast<size_t>(s) * n);
    err[ci] = WeightedSquares(resid, w, b, e);
  });
  double total = 0;
  for (double v : err) total += v;
  return total;
}

// Refinement of greedy residual books (`books`, f16 values, with the greedy
// codes and residual of `x` they give). One round: with every vector's codes
// fixed, stage by stage in order, each entry becomes the (weighted) mean of
// its vectors' targets x_i - sum_{t != s} book_t[a_t(i)] (what the other
// stages leave, the exact minimiser of the squared error for fixed codes),
// rounded to f16; an entry no vector uses is kept. The residuals are updated
// after each stage, so later stages see the new entries. Then every vector
// is encoded greedily again with the new books. The round is kept only when
// that greedy error is lower than before it: the encoder is greedy, so what
// counts is the greedy error, not the error at the codes the round assumed.
void RefineBooks(const float* x, const float* w, size_t n, int stages, int k, int rounds, ThreadPool* pool,
                 std::vector<float>& books, std::vector<int32_t>& codes, std::vector<float>& resid,
                 KmeansReport* report) {
  const size_t nc = Chunks(n);
  std::vector<double> err(nc);
  ForChunks(pool, n, [&](size_t ci, size_t b, size_t e) { err[ci] = WeightedSquares(resid.data(), w, b, e); });
  double current = 0;
  for (double v : err) current += v;
  if (report != nullptr) report->refine_error.push_back(n > 0 ? current / static_cast<double>(n) : 0.0);
  const size_t bk = static_cast<size_t>(k) * kVecDim;
  std::vector<double> sums(nc * bk), mass(nc * static_cast<size_t>(k));
  std::vector<float> cand, r(resid.size()), cand_resid(resid.size());
  std::vector<int32_t> cand_codes(codes.size());
  for (int round = 0; round < rounds; ++round) {
    cand = books;
    r = resid;
    for (int s = 0; s < stages; ++s) {
      float* book = cand.data() + static_cast<size_t>(s) * bk;
      const int32_t* a = codes.data() + static_cast<size_t>(s) * n;
      std::fill(sums.begin(), sums.end(), 0.0);
      std::fill(mass.begin(), mass.end(), 0.0);
      ForChunks(pool, n, [&](size_t ci, size_t b, size_t e) {
        double* cs = sums.data() + ci * bk;
        double* cm = mass.data() + ci * static_cast<size_t>(k);
        for (size_t i = b; i < e; ++i) {
          const size_t c = static_cast<size_t>(a[i]);
          const double wi = w != nullptr ? w[i] : 1.0;
          cm[c] += wi;
          for (int j = 0; j < kVecDim; ++j) {
            cs[c * kVecDim + j] += wi * (static_cast<double>(r[i * kVecDim + j]) + book[c * kVecDim + j]);
          }
        }
      });
      // Reduce in chunk order, then the new entries.
      std::vector<double> acc(bk, 0.0), m(static_cast<size_t>(k), 0.0);
      for (size_t ci = 0; ci < nc; ++ci) {
        for (size_t q = 0; q < bk; ++q) acc[q] += sums[ci * bk + q];
        for (int c = 0; c < k; ++c) m[c] += mass[ci * static_cast<size_t>(k) + c];
      }
      std::vector<float> old(book, book + bk);
      for (int c = 0; c < k; ++c) {
        if (!(m[c] > 0)) continue;
        for (int j = 0; j < kVecDim; ++j) {
          book[c * kVecDim + j] = RoundBookValue(static_cast<float>(acc[c * kVecDim + j] / m[c]));
        }
      }
      ForChunks(pool, n, [&](size_t, size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) {
          const size_t c = static_cast<size_t>(a[i]);
          for (int j = 0; j < kVecDim; ++j) r[i * kVecDim + j] += old[c * kVecDim + j] - book[c * kVecDim + j];
        }
      });
    }
    const double next = GreedyEncode(x, w, n, cand, stages, k, pool, cand_codes.data(), cand_resid.data());
    if (report != nullptr) report->refine_error.push_back(n > 0 ? next / static_cast<double>(n) : 0.0);
    if (!(next < current)) break;
    current = next;
    books.swap(cand);
    codes.swap(cand_codes);
    resid.swap(cand_resid);
    if (report != nullptr) ++report->refine_kept;
  }
}

}  // namespace

float RoundBookValue(float v) {
  uint16_t h = format::F32ToF16(v);
  if (format::F16IsSubnormal(h)) h &= 0x8000;
  return format::F16ToF32(h);
}

std::vector<float> TrainResidualBooks(std::vector<float>& vectors, const KmeansOptions& o,
                                      ThreadPool* pool, KmeansReport* report, const float* weights) {
  const size_t n = vectors.size() / kVecDim;
  const int k = o.entries;
  const bool refine = !o.reference && o.refine_rounds > 0;
  std::vector<float> original;                  // the vectors before any stage (refinement)
  std::vector<int32_t> codes;                   // [stages][n]: the greedy codes (refinement)
  if (refine) {
    original = vectors;
    codes.resize(static_cast<size_t>(o.stages) * n);
  }
  std::vector<float> books;
  books.reserve(static_cast<size_t>(o.stages) * k * kVecDim);
  std::vector<int32_t> assign(n);
  std::vector<float> dist(n);
  const size_t nc = Chunks(n);
  std::vector<double> sums(nc * static_cast<size_t>(k) * kVecDim);
  std::vector<int64_t> counts(nc * static_cast<size_t>(k));
  std::vector<double> err(nc);
  for (int s = 0; s < o.stages; ++s) {
    Rng rng(o.seed, 0x6B6D65616E73ull, static_cast<uint64_t>(s));
    std::vector<float> centres;
    if (o.reference) {
      // Forgy: k distinct rows of a random permutation.
      std::vector<size_t> perm(n);
      for (size_t i = 0; i < n; ++i) perm[i] = i;
      for (size_t i = n - 1; i > 0; --i) std::swap(perm[i], perm[rng.Below(i + 1)]);
      for (int c = 0; c < k; ++c) {
        centres.insert(centres.end(), vectors.data() + perm[c] * kVecDim,
                       vectors.data() + perm[c] * kVecDim + kVecDim);
      }
    } else {
      centres = SeedPlusPlus(vectors.data(), n, k, rng, pool);
    }
    double prev = std::numeric_limits<double>::infinity();
    int iters = 0;
    for (int it = 0; it < o.max_iterations; ++it) {
      ++iters;
      BookSearch search(centres.data(), k);
      std::fill(sums.begin(), sums.end(), 0.0);
      std::fill(counts.begin(), counts.end(), 0);
      ForChunks(pool, n, [&](size_t ci, size_t b, size_t e) {
        double* cs = sums.data() + ci * static_cast<size_t>(k) * kVecDim;
        int64_t* cn = counts.data() + ci * static_cast<size_t>(k);
        double ce = 0;
        search.NearestBatch(vectors.data() + b * kVecDim, e - b, assign.data() + b, dist.data() + b);
        for (size_t i = b; i < e; ++i) {
          const float* xi = vectors.data() + i * kVecDim;
          const int c = assign[i];
          ce += dist[i];
          ++cn[c];
          for (int j = 0; j < kVecDim; ++j) cs[static_cast<size_t>(c) * kVecDim + j] += xi[j];
        }
        err[ci] = ce;
      });
      double total = 0;
      for (double e : err) total += e;
      // Reduce in chunk order, then new centres.
      std::vector<double> acc(static_cast<size_t>(k) * kVecDim, 0.0);
      std::vector<int64_t> cnt(static_cast<size_t>(k), 0);
      for (size_t ci = 0; ci < nc; ++ci) {
        for (size_t q = 0; q < acc.size(); ++q) acc[q] += sums[ci * acc.size() + q];
        for (int c = 0; c < k; ++c) cnt[c] += counts[ci * static_cast<size_t>(k) + c];
      }
      std::vector<size_t> taken;
      for (int c = 0; c < k; ++c) {
        float* cc = centres.data() + static_cast<size_t>(c) * kVecDim;
        if (cnt[c] > 0 || o.reference) {
          if (cnt[c] == 0) continue;  // the reference leaves an empty centre where it was
          for (int j = 0; j < kVecDim; ++j) {
            cc[j] = static_cast<float>(acc[static_cast<size_t>(c) * kVecDim + j] / cnt[c]);
          }
          continue;
        }
        // Empty cluster: re-seed on the worst-served point not yet used.
        size_t worst = 0;
        float wd = -1.0f;
        for (size_t i = 0; i < n; ++i) {
          if (dist[i] > wd && std::find(taken.begin(), taken.end(), i) == taken.end()) {
            wd = dist[i];
            worst = i;
          }
        }
        taken.push_back(worst);
        dist[worst] = 0.0f;
        std::copy_n(vectors.data() + worst * kVecDim, kVecDim, cc);
        if (report != nullptr) ++report->repaired;
      }
      // Converged: the error fell by less than the tolerance (never on the
      // first pass, whose predecessor is infinite).
      if (!o.reference && taken.empty() && std::isfinite(prev) && prev - total <= o.tolerance * prev) break;
      prev = total;
    }
    // What the engine decodes: f16 entries, subnormals flushed.
    if (!o.reference) {
      for (float& v : centres) v = RoundBookValue(v);
    }
    BookSearch search(centres.data(), k);
    // The final codes of this stage, kept per stage when refining.
    int32_t* stage_codes = refine ? codes.data() + static_cast<size_t>(s) * n : assign.data();
    ForChunks(pool, n, [&](size_t ci, size_t b, size_t e) {
      AssignAndSubtract(search, vectors.data(), b, e, stage_codes);
      double ce = 0;  // summed in the order the single loop used
      for (size_t q = b * kVecDim; q < e * kVecDim; ++q) ce += static_cast<double>(vectors[q]) * vectors[q];
      err[ci] = ce;
    });
    if (report != nullptr) {
      double total = 0;
      for (double e : err) total += e;
      report->stage_error.push_back(n > 0 ? total / static_cast<double>(n) : 0.0);
      report->iterations.push_back(iters);
    }
    books.insert(books.end(), centres.begin(), centres.end());
  }
  // The passes above were the greedy encoding of the training set with the
  // final books: `codes` and `vectors` (the residual) are where refinement starts.
  if (refine) RefineBooks(original.data(), weights, n, o.stages, k, o.refine_rounds, pool, books, codes, vectors, report);
  return books;
}

}  // namespace waste::convert
