// Routed experts stored as vector-quantised records (VQ3R and VQ2R: one
// byte per stage index; VQ4P: four 6-bit indices in three bytes), applied
// through lookup tables built from the input — the weights are never
// dequantised. This is the only code that knows how a record's matrices
// are applied: the table layouts (f32, byte planes when the kernel table
// prefers them, int8 shadows with per-block scales for VQ4P), and the
// gate/up → activation → down sequence. The record's bytes are located and
// checked by the container (format/format.h's RecordLayout); MoeLayer deals
// in (expert, tokens) items only, so a new expert format is a sibling of
// this class and touches nothing else in the MoE block.
//
// The gate and up tables depend only on the input and the layer's books,
// so they are built once per token and shared by every expert the token
// chose; the down table depends on the expert's own activation and is
// built per (expert, token) in per-thread scratch. Tables are held for at
// most kTableTokens tokens at once (about 0.9 MB a token at Kimi-Linear's
// width): a longer chunk builds them window by window (MoeLayer), so their
// memory does not grow with the chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/aligned_vector.h"
#include "container/container.h"
#include "model/model_config.h"
#include "runtime/ops.h"

namespace waste {

class VqExperts {
 public:
  // Tokens of one expert applied together (the indices are read once for them).
  static constexpr size_t kGroup = 4;

  // Tokens whose gate/up tables are held at once.
  static constexpr size_t kTableTokens = 64;

  // Chunks of up to `max_tokens` tokens; tables for min(max_tokens,
  // kTableTokens) of them (at least a table group).
  VqExperts(const Container& container, size_t max_tokens);

  // Tokens BuildInputTables can hold.
  size_t table_tokens() const { return table_tokens_; }

  // Per-thread scratch for the pool of `ops` (sized on first use) and the
  // table layout its kernels prefer. Call before BuildInputTables/Apply.
  void Prepare(const Ops& ops);

  // Gate and up tables of tokens [0, tokens) (input rows at x_stride;
  // tokens <= table_tokens()), for the bank whose codebooks start at
  // `book_base`. Parallel on `ops`.
  void BuildInputTables(const Ops& ops, const float* x, size_t x_stride, size_t tokens,
                        int book_base);

  // One expert applied to n <= kGroup tokens: tokens[i] indexes the input
  // tables (of the last BuildInputTables), outs[i] receives expert_in
  // floats. Serial: runs inside a parallel region, on the scratch of pool
  // thread `worker`.
  void Apply(const kernels::KernelTable& k, const ExpertRecordView& rec, const size_t* tokens,
             size_t n, float* const* outs, int worker);

  // An expert chosen by at least this many tokens of a chunk goes through
  // ApplyDecoded: the kernel table's vq_decoded_min_tokens (Prepare), 0 =
  // never (the format has no such path, VQ4P, or the table's vq_matmul8
  // does not pay).
  size_t decoded_min_tokens() const { return decoded_min_tokens_; }
  // The most tokens one ApplyDecoded takes (its per-thread scratch).
  size_t decoded_max_tokens() const { return ScratchTokens(); }

  // One expert applied to n <= decoded_max_tokens() tokens by decoding its rows
  // (kernels' vq_matmul8) instead of through the tables: token i's input is
  // x + tokens[i] * x_stride (expert_in floats), its output out + slots[i] *
  // out_stride (expert_in floats). Equal to Apply within float noise
  // (another summation order). Serial, as Apply.
  void ApplyDecoded(const kernels::KernelTable& k, const ExpertRecordView& rec, const float* x,
                    size_t x_stride, const uint32_t* tokens, float* out, size_t out_stride,
                    const uint32_t* slots, size_t n, int worker);

  uint64_t scratch_bytes() const;

 private:
  struct Scratch {
    // 64-byte aligned: the kernels load the tables as whole 64-byte vectors.
    AlignedVector<float> g, u, table_mid, tau_mid;  // g, u: [max_tokens][inter]
    AlignedVector<int8_t> q_mid;
    // ApplyDecoded's per-token pointers: into g and u, and to the caller's
    // inputs and outputs.
    std::vector<float*> g_rows, u_rows, out_rows;
    std::vector<const float*> x_rows;
  };

  // Tokens the per-thread g/u scratch holds: a table group, or up to a
  // table window where ApplyDecoded may run (8-bit indices). Per thread, so
  // bounded like the tables: the memory plan has no thread count.
  size_t ScratchTokens() const { return six_bit_ ? kGroup : table_tokens_; }
  // Positions [v_begin, v_end) of one table; VQ4P also quantises the tau
  // blocks inside the range (callers pass ranges aligned to a tau block).
  void BuildTable(const kernels::KernelTable& k, const float* x, size_t n, int book_base,
                  float* table, int8_t* qtable, float* tau, size_t v_begin, size_t v_end) const;
  // One 8-bit-index matrix applied to n <= kGroup inputs, each with its own
  // table (f32, or byte planes).
  void Apply8(const kernels::KernelTable& k, const uint8_t* indices, const uint16_t* scales,
              size_t nv, const float* const* tables, size_t n, float* const* ys,
              size_t rows) const;
  // One 6-bit (VQ4P) matrix applied to one input's int8 table.
  void Apply6(const kernels::KernelTable& k, const uint8_t* indices, const uint16_t* scales,
              size_t nv, const int8_t* qtable, const float* tau, float* y, size_t rows) const;

  float* TableIn(size_t token, int which) {
    return tables_.data() + (2 * token + which) * table_in_;
  }
  int8_t* QTableIn(size_t token, int which) {
    return six_bit_ ? qtables_.data() + (2 * token + which) * table_in_ : nullptr;
  }
  float* TauIn(size_t token, int which) {
    return six_bit_ ? taus_.data() + (2 * token + which) * tau_in_ : nullptr;
  }

  const Container& container_;
  const ModelConfig& cfg_;
  size_t table_tokens_;
  bool six_bit_;
  bool planes_ = false;  // VQ3R/VQ2R tables in byte planes (kernel table's vq8_planes)
  size_t decoded_min_tokens_ = 0;
  size_t nv_in_, nv_mid_, table_in_, table_mid_, tau_in_, tau_mid_;
  // 64-byte aligned (each table's size is a multiple of 64 bytes at every
  // production shape, so every token's table starts on a cache line too).
  AlignedVector<float> tables_;    // [table_tokens][gate, up] input tables (f32 or planes)
  AlignedVector<int8_t> qtables_;  // int8 shadows (VQ4P)
  std::vector<float> taus_;
  std::vector<Scratch> scratch_;  // per pool thread
  // Every codebook transposed to [vec_dim][entries] (LutBuildArgs::books_t),
  // made once at construction (a few MB at most) so table builds never
  // transpose per call.
  AlignedVector<float> books_t_;
  size_t book_floats_ = 0;
};

}  // namespace waste
