// Typed argument structs shared by every ISA's kernels. A kernel receives
// one of these plus a [begin, end) range of output rows (or heads, or vector
// positions), so one indirect call covers a whole range and the thread pool
// can split work by rows: results never depend on the split.
#pragma once

#include <cstddef>
#include <cstdint>

namespace waste::kernels {

// y[r] = W[r,:] · x for rows r in the range. W is a trunk matrix in one of
// the grouped formats of FORMAT.md §4.4 (or F32). For Q8G/Q4G/Q3G:
//   y[r] = Σ_k f16(scales[r*groups + k]) · (Σ_{i in group k, i < cols} q[r,i]·x[i])
// inner sums in f32, outer sum in f32 in k order (MODEL.md §6.1).
struct MatVecArgs {
  const uint8_t* weights = nullptr;   // payload, row r at weights + r*row_bytes
  size_t row_bytes = 0;               // stride between rows (format dependent)
  const uint16_t* scales = nullptr;   // f16 [rows][groups]; unused for F32
  size_t groups = 0;                  // groups per row = ceil(cols / group)
  size_t group = 128;                 // elements per group (multiple of 8)
  size_t cols = 0;                    // logical row length N (elements >= N ignored)
  const float* x = nullptr;           // [cols]
  float* y = nullptr;                 // [rows]
};

// Batched form for prefill: Y[t][r] = W[r,:] · X[t,:] for t < tokens.
// Weights are read once per row for all tokens.
struct MatMulArgs {
  MatVecArgs w;                       // x/y unused
  size_t tokens = 0;
  const float* x = nullptr;           // [tokens][x_stride]
  size_t x_stride = 0;
  float* y = nullptr;                 // [tokens][y_stride]
  size_t y_stride = 0;
};

// Row dequantisation (the batched path's first step, MODEL.md §6.1; MLA's
// absorbed query): out[r*out_stride + i] = q[r,i] · f16(s[r, i/group]) for
// i < cols and rows r in the range, one f32 rounding per element, exactly
// as the baseline. Rows are counted from w.weights.
struct DequantArgs {
  MatVecArgs w;                       // x/y unused
  float* out = nullptr;
  size_t out_stride = 0;
};

// VQ lookup-table build (MODEL.md §6.4): for vector positions v in range,
//   table[(v*stages + s)*entries + c] = Σ_{t<vec_dim} x[v*vec_dim+t] · books[s][c*vec_dim+t]
// with t accumulated in order.
//
// With `planes` set, the same values are written in byte-plane layout
// instead (and `table` is not touched): byte b (little-endian) of entry
// T[v][s][c] goes to planes[((v*stages + s)*4 + b)*entries + c]. That is the
// layout a kernel table with `vq8_planes` applies fastest (VqApply8Args);
// every vq_apply8 accepts both.
struct LutBuildArgs {
  const float* x = nullptr;           // [nv * vec_dim]
  const float* const* books = nullptr;  // [stages] pointers to f32 [entries][vec_dim]
  size_t stages = 0;
  size_t entries = 0;
  size_t vec_dim = 8;
  float* table = nullptr;             // [nv][stages][entries]
  uint8_t* planes = nullptr;          // optional: [nv][stages][4][entries] bytes
  // Optional: the same books transposed, [stages] pointers to f32
  // [vec_dim][entries], so SIMD kernels need not transpose per call.
  const float* const* books_t = nullptr;
};

// VQ apply with one index byte per stage (VQ3R/VQ2R, and any 8-bit layout):
//   y[r] = f16(scales[r]) · Σ_v ((T[v][0][i0] + T[v][1][i1]) + T[v][2][i2] ...)
// Indices use the 64-row blocked layout of FORMAT.md §6.3.
//
// Batched form (tokens routed to the same expert): with count > 0 the same
// indices and scales are applied to `count` inputs, input i reading
// tables[i] (or plane_sets[i]) and writing ys[i]; table/planes/y are then
// unused. Each result is what the single form gives for that input.
struct VqApply8Args {
  const uint8_t* indices = nullptr;   // start of the matrix's index region
  size_t nv = 0;                      // vector positions per row (N / vec_dim)
  size_t stages = 0;
  size_t entries = 0;
  const float* table = nullptr;       // [nv][stages][entries]
  const uint8_t* planes = nullptr;    // or the same table in byte planes (LutBuildArgs)
  const uint16_t* scales = nullptr;   // f16 per output row
  float* y = nullptr;
  size_t count = 0;                   // > 0: batched form
  const float* const* tables = nullptr;
  const uint8_t* const* plane_sets = nullptr;
  float* const* ys = nullptr;
};

// The same kind of matrix applied to several inputs by decoding its rows
// instead (an expert that many tokens of a prompt chunk chose: the rows are
// decoded once for all of them, where tables cost per input):
//   w[r][8v + d] = (B_0[i_0][d] + B_1[i_1][d]) + B_2[i_2][d] ...
//   ys[t][r]     = (Σ_k w[r][k] · xs[t][k]) · f16(scales[r])
// books[s] is f32 [entries][vec_dim]. These are vq_apply8's products summed
// in another order: equal to it within float noise, not bit for bit.
struct VqMatMul8Args {
  const uint8_t* indices = nullptr;   // 64-row blocked, as VqApply8Args
  size_t nv = 0;
  size_t stages = 0;
  size_t entries = 0;
  size_t vec_dim = 8;
  const float* const* books = nullptr;  // [stages]
  const uint16_t* scales = nullptr;     // f16 per output row
  size_t count = 0;                     // inputs
  const float* const* xs = nullptr;     // [count], nv * vec_dim floats each
  float* const* ys = nullptr;           // [count], indexed by row
};

// VQ4P: 4 stages × 64 entries, 6-bit indices packed 4 per 3 bytes, tables
// quantised to int8 per block of 32 vector positions (MODEL.md §6.4):
//   acc += tau[b] · (exact integer sum over the block); y = acc · f16(scale)
struct VqApply6Args {
  const uint8_t* indices = nullptr;
  size_t nv = 0;
  const int8_t* table = nullptr;      // [nv][4][64]
  const float* tau = nullptr;         // [ceil(nv/32)] block scales
  const uint16_t* scales = nullptr;
  float* y = nullptr;
};

// Quantise a float table [nv][4][64] to int8 in blocks of 32 vector
// positions: m = max|T| over the block, tau = m/127,
// q = clamp(round_half_even(T * (127/m)), -127, 127); all zero when m == 0.
struct LutQuantizeArgs {
  const float* table = nullptr;
  size_t nv = 0;
  size_t per_v = 256;                 // stages*entries values per vector position
  int8_t* out = nullptr;
  float* tau = nullptr;
};

// One token of the KDA recurrence for heads in range (MODEL.md §3 step 4).
// q, k already L2-normalised (q also times D^-1/2); g is the log decay.
struct KdaStepArgs {
  float* state = nullptr;             // [heads][dim][dim], [h][key i][value j]
  const float* q = nullptr;           // [heads*dim]
  const float* k = nullptr;
  const float* v = nullptr;
  const float* g = nullptr;           // [heads*dim] log-space decay per key row
  const float* beta = nullptr;        // [heads]
  float* out = nullptr;               // [heads*dim]
  size_t dim = 0;
};

}  // namespace waste::kernels
