#include "vision/tower.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace waste::vision {
namespace {

float GeluTanh(float t) {
  return 0.5f * t * (1.0f + std::tanh(0.7978845608028654f * (t + 0.044715f * t * t * t)));
}

float GeluErf(float u) { return 0.5f * u * (1.0f + std::erf(u / std::sqrt(2.0f))); }

void NormRows(const float* x, const float* w, float eps, size_t rows, size_t n, float* y) {
  for (size_t r = 0; r < rows; ++r) RmsNorm(x + r * n, w, eps, n, y + r * n);
}

}  // namespace

// Bilinear resize of the stored grid to gh x gw (align_corners false,
// clamped edges), added to every patch row. The coordinate is
// (y + 0.5) * Ph / gh left to right and the four weights are summed flat,
// as the reference does.
void VisionTower::AddPositions(const PatchGrid& grid, float* x) const {
  const size_t d = static_cast<size_t>(cfg_.hidden);
  const int ph = cfg_.pos_h, pw = cfg_.pos_w, gh = grid.rows, gw = grid.cols;
  const float* g = w_->pos_grid.data();
  if (gh == ph && gw == pw) {
    for (size_t i = 0; i < static_cast<size_t>(gh * gw) * d; ++i) x[i] += g[i];
    return;
  }
  for (int y = 0; y < gh; ++y) {
    float fy = ((static_cast<float>(y) + 0.5f) * static_cast<float>(ph)) / static_cast<float>(gh) - 0.5f;
    float y0f = std::floor(fy);
    float wy = fy - y0f;
    int y0 = std::clamp(static_cast<int>(y0f), 0, ph - 1);
    int y1 = std::clamp(static_cast<int>(y0f) + 1, 0, ph - 1);
    for (int xx = 0; xx < gw; ++xx) {
      float fx = ((static_cast<float>(xx) + 0.5f) * static_cast<float>(pw)) / static_cast<float>(gw) - 0.5f;
      float x0f = std::floor(fx);
      float wx = fx - x0f;
      int x0 = std::clamp(static_cast<int>(x0f), 0, pw - 1);
      int x1 = std::clamp(static_cast<int>(x0f) + 1, 0, pw - 1);
      const float w00 = (1.0f - wy) * (1.0f - wx), w01 = (1.0f - wy) * wx;
      const float w10 = wy * (1.0f - wx), w11 = wy * wx;
      const float* g00 = g + (static_cast<size_t>(y0) * pw + x0) * d;
      const float* g01 = g + (static_cast<size_t>(y0) * pw + x1) * d;
      const float* g10 = g + (static_cast<size_t>(y1) * pw + x0) * d;
      const float* g11 = g + (static_cast<size_t>(y1) * pw + x1) * d;
      float* row = x + (static_cast<size_t>(y) * gw + xx) * d;
      for (size_t i = 0; i < d; ++i) {
        row[i] += w00 * g00[i] + w01 * g01[i] + w10 * g10[i] + w11 * g11[i];
      }
    }
  }
}

// 2-D rotary on q and k of every head: pair j uses frequency
// 1/10000^(4 floor(j/2) / d); even pairs turn with the patch column, odd
// pairs with the row (what the trained weights expect).
void VisionTower::Rope2d(const Ops& ops, const PatchGrid& grid, float* qkv) const {
  const size_t q = static_cast<size_t>(cfg_.qkv), hd = static_cast<size_t>(cfg_.head_dim());
  const size_t heads = static_cast<size_t>(cfg_.heads), pairs = hd / 2;
  std::vector<float> freq(pairs);
  for (size_t j = 0; j < pairs; ++j) {
    freq[j] = 1.0f / std::pow(10000.0f, static_cast<float>(4 * (j / 2)) / static_cast<float>(hd));
  }
  const size_t n = static_cast<size_t>(grid.patches());
  ops.For(n, 16, [&](size_t b, size_t e) {
    std::vector<float> cs(pairs), sn(pairs);
    for (size_t i = b; i < e; ++i) {
      const float cx = static_cast<float>(i % static_cast<size_t>(grid.cols));
      const float cy = static_cast<float>(i / static_cast<size_t>(grid.cols));
      for (size_t j = 0; j < pairs; ++j) {
        float theta = (j % 2 == 0 ? cx : cy) * freq[j];
        cs[j] = std::cos(theta);
        sn[j] = std::sin(theta);
      }
      float* row = qkv + i * 3 * q;
      for (size_t part = 0; part < 2; ++part) {  // q, then k
        for (size_t h = 0; h < heads; ++h) {
          float* v = row + part * q + h * hd;
          for (size_t j = 0; j < pairs; ++j) {
            float a = v[2 * j], bb = v[2 * j + 1];
            v[2 * j] = a * cs[j] - bb * sn[j];
            v[2 * j + 1] = a * sn[j] + bb * cs[j];
          }
        }
      }
    }
  });
}

// Full bidirectional attention over the image's patches, per head; one
// (head, query) row per work item, scores kept one row at a time.
void VisionTower::Attention(const Ops& ops, size_t n, const float* qkv, float* out) const {
  const size_t q = static_cast<size_t>(cfg_.qkv), hd = static_cast<size_t>(cfg_.head_dim());
  const size_t heads = static_cast<size_t>(cfg_.heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  ops.For(heads * n, 4, [&](size_t b, size_t e) {
    std::vector<float> s(n);
    for (size_t item = b; item < e; ++item) {
      const size_t h = item / n, i = item % n;
      const float* qi = qkv + i * 3 * q + h * hd;
      float m = -INFINITY;
      for (size_t k = 0; k < n; ++k) {
        const float* kk = qkv + k * 3 * q + q + h * hd;
        float dot = 0.0f;
        for (size_t t = 0; t < hd; ++t) dot += qi[t] * kk[t];
        s[k] = dot * scale;
        m = std::max(m, s[k]);
      }
      float sum = 0.0f;
      for (size_t k = 0; k < n; ++k) {
        s[k] = std::exp(s[k] - m);
        sum += s[k];
      }
      float* o = out + i * q + h * hd;
      std::fill(o, o + hd, 0.0f);
      for (size_t k = 0; k < n; ++k) {
        const float p = s[k] / sum;
        const float* vv = qkv + k * 3 * q + 2 * q + h * hd;
        for (size_t t = 0; t < hd; ++t) o[t] += p * vv[t];
      }
    }
  });
}

Result<std::vector<float>> VisionTower::Encode(const Ops& ops, const std::vector<float>& x0,
                                               const PatchGrid& grid, TowerTrace* trace) const {
  if (grid.rows <= 0 || grid.cols <= 0 || grid.rows % 2 != 0 || grid.cols % 2 != 0) {
    return ArgError("vision grid must be even in both axes");
  }
  if (grid.patches() > cfg_.max_patches) {
    return ArgError(fmt::format("vision grid {}x{} exceeds max_patches {}", grid.rows, grid.cols,
                                cfg_.max_patches));
  }
  const size_t n = static_cast<size_t>(grid.patches());
  if (x0.size() != n * kPatchValues) return ArgError("patch tensor size does not match the grid");
  const size_t d = static_cast<size_t>(cfg_.hidden), q = static_cast<size_t>(cfg_.qkv);
  const size_t in = static_cast<size_t>(cfg_.inter), th = static_cast<size_t>(cfg_.text_hidden);

  std::vector<float> x(n * d), hn(n * d), qkv(n * 3 * q), o(n * q), f(n * std::max(in, d));
  ops.MatMul(w_->patch, x0.data(), kPatchValues, n, x.data(), d);
  AddPositions(grid, x.data());
  if (trace != nullptr) trace->embed = x;

  for (size_t b = 0; b < w_->blocks.size(); ++b) {
    const BlockWeights& bw = w_->blocks[b];
    NormRows(x.data(), bw.norm0, kTowerRmsEps, n, d, hn.data());
    ops.MatMul(bw.wqkv, hn.data(), d, n, qkv.data(), 3 * q);
    Rope2d(ops, grid, qkv.data());
    Attention(ops, n, qkv.data(), o.data());
    ops.MatMul(bw.wo, o.data(), q, n, f.data(), d);
    for (size_t i = 0; i < n * d; ++i) x[i] += f[i];
    NormRows(x.data(), bw.norm1, kTowerRmsEps, n, d, hn.data());
    ops.MatMul(bw.fc0, hn.data(), d, n, f.data(), in);
    for (size_t i = 0; i < n * in; ++i) f[i] = GeluTanh(f[i]);
    // fc1 reads f (the activation) and writes hn: the output must not alias.
    ops.MatMul(bw.fc1, f.data(), in, n, hn.data(), d);
    for (size_t i = 0; i < n * d; ++i) x[i] += hn[i];
    if (trace != nullptr) trace->blocks.push_back(x);
  }
  NormRows(x.data(), w_->final_norm, kTowerRmsEps, n, d, hn.data());
  if (trace != nullptr) trace->encoder = hn;

  // 2x2 merge: tile (a, b) concatenates its top-left, top-right,
  // bottom-left and bottom-right patches.
  const size_t gw = static_cast<size_t>(grid.cols);
  const size_t tiles = static_cast<size_t>(grid.tokens()), mw = gw / 2;
  std::vector<float> m(tiles * 4 * d), u(tiles * 4 * d);
  for (size_t t = 0; t < tiles; ++t) {
    const size_t a = t / mw, bcol = t % mw;
    const size_t src[4] = {(2 * a) * gw + 2 * bcol, (2 * a) * gw + 2 * bcol + 1,
                           (2 * a + 1) * gw + 2 * bcol, (2 * a + 1) * gw + 2 * bcol + 1};
    for (size_t k = 0; k < 4; ++k) {
      std::memcpy(m.data() + (t * 4 + k) * d, hn.data() + src[k] * d, d * sizeof(float));
    }
  }
  ops.MatMul(w_->proj0, m.data(), 4 * d, tiles, u.data(), 4 * d);
  for (float& v : u) v = GeluErf(v);
  std::vector<float> e(tiles * th);
  ops.MatMul(w_->proj2, u.data(), 4 * d, tiles, e.data(), th);
  NormRows(e.data(), w_->post_norm, kProjectorRmsEps, tiles, th, e.data());
  return e;
}

}  // namespace waste::vision
