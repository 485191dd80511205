// What carries from one token to the next (MODEL.md §10): KDA recurrent
// state and conv rings, MLA latent KV cache, the position. Its session
// files use the reference's byte layout (ENGINE.md §8), so sessions move
// between engines; LoadFromBytes validates everything in a read-only pass
// before touching the live state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/aligned_vector.h"
#include "model/model_config.h"
#include "waste/status.h"

namespace waste {

// The recurrent state and the latent cache are read by the kernels in
// 64-byte vectors: cache-line aligned storage (kda_step over one layer's
// 16-byte-aligned state took 66 us against 54 aligned, docs/PERFORMANCE.md).
struct KdaLayerState {
  AlignedVector<float> s;     // [heads][dim][dim]
  std::vector<float> rings;   // [q,k,v][C][conv_k - 1], oldest first
};

struct MlaLayerState {
  AlignedVector<float> kv;    // [ctx][kv_lora_rank + qk_rope]: [c | rotated kr]
  int n_kv = 0;
};

class SessionState {
 public:
  SessionState(const ModelConfig& cfg, uint32_t ctx_tokens);

  void Reset();
  int pos() const { return pos_; }
  void set_pos(int pos) { pos_ = pos; }
  uint32_t ctx_tokens() const { return ctx_tokens_; }
  bool bounded() const { return n_mla_ > 0; }
  // Tokens that still fit (INT32_MAX-ish when unbounded).
  int64_t room() const;
  // The largest valid session file for this model and context.
  uint64_t MaxFileBytes() const;

  KdaLayerState& kda(int layer) { return kda_[static_cast<size_t>(layer)]; }
  MlaLayerState& mla(int layer) { return mla_[static_cast<size_t>(layer)]; }

  uint64_t bytes() const;    // what this state really holds

  // Which container this state belongs to: a fingerprint of its
  // manifest.json (0 = unknown), written into the header's reserved words
  // (docs/HARDENING.md) so the reference still reads our files.
  void set_container_id(uint64_t id) { container_id_ = id; }

  // Saving is Serialize, then WriteFile, which replaces only a session file
  // or nothing; the file I/O needs no lock on the state (Session::SaveState
  // holds the model's run lock only to serialize). `hidden` is the last
  // token's residual (stored for format compatibility).
  std::string Serialize(const std::vector<float>& hidden) const;
  static Status WriteFile(const std::string& path, const std::string& bytes);
  // Loading is ReadFile (it reads only the immutable shape: no lock
  // needed), then LoadFromBytes. A file naming another container is
  // refused unless `any_container`; a file naming none (written by the
  // reference) loads.
  Result<std::string> ReadFile(const std::string& path, bool any_container) const;
  // The checks and copy on bytes already read (`path` names them in
  // errors); the fuzz target's entry point.
  Status LoadFromBytes(std::string_view bytes, std::string_view path, bool any_container);
  // The 64-byte header's checks (magic, version, model shape, container,
  // position against the context, AttnRes blocks); `header` points at one.
  Status CheckHeader(const void* header, std::string_view path, bool any_container) const;

 private:
  const ModelConfig& cfg_;
  uint32_t ctx_tokens_;
  int n_mla_ = 0;
  int pos_ = 0;
  uint64_t container_id_ = 0;
  std::vector<KdaLayerState> kda_;  // indexed by layer (empty for MLA layers)
  std::vector<MlaLayerState> mla_;  // indexed by layer (empty for KDA layers)
};

}  // namespace waste
