// Session snapshots in RAM: a copy of the KDA state and conv rings, the MLA
// latent rows in use (not the whole context's allocation) and the
// position; restored by copying back. The file form is SessionState's.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "engine/model_core.h"
#include "waste/model.h"

namespace waste {

int SessionSnapshot::position() const noexcept { return data_ ? data_->pos : 0; }
uint64_t SessionSnapshot::bytes() const noexcept { return data_ ? data_->bytes : 0; }

static size_t LatentRow(const ModelConfig& cfg) {
  return static_cast<size_t>(cfg.mla.kv_lora_rank + cfg.mla.qk_rope);
}

std::shared_ptr<const SnapshotData> TakeSnapshot(const ModelCore& model, SessionState& state) {
  const ModelConfig& cfg = model.container->config();
  const size_t row = LatentRow(cfg);
  auto snap = std::make_shared<SnapshotData>();
  snap->model_id = model.id;
  snap->pos = state.pos();
  const size_t layers = static_cast<size_t>(cfg.n_layers);
  snap->kda.resize(layers);
  snap->mla_rows.resize(layers);
  snap->mla_n_kv.assign(layers, 0);
  uint64_t floats = 0;
  for (size_t l = 0; l < layers; ++l) {
    const int li = static_cast<int>(l);
    snap->kda[l] = state.kda(li);
    floats += snap->kda[l].s.size() + snap->kda[l].rings.size();
    const MlaLayerState& m = state.mla(li);
    const size_t used = static_cast<size_t>(m.n_kv) * row;
    snap->mla_rows[l].assign(m.kv.begin(), m.kv.begin() + static_cast<std::ptrdiff_t>(used));
    snap->mla_n_kv[l] = m.n_kv;
    floats += used;
  }
  snap->bytes = floats * sizeof(float);
  return snap;
}

Status RestoreSnapshot(const ModelCore& model, const SnapshotData& snap, SessionState& state) {
  if (snap.model_id != model.id) {
    return ArgError("this snapshot was taken on another model; restore it into a session of the "
                    "model it came from");
  }
  const ModelConfig& cfg = model.container->config();
  const size_t layers = static_cast<size_t>(cfg.n_layers);
  // Check everything before touching the live state.
  for (size_t l = 0; l < layers; ++l) {
    const MlaLayerState& m = state.mla(static_cast<int>(l));
    if (snap.mla_rows[l].size() > m.kv.size()) {
      return ArgError(fmt::format("the snapshot holds {} positions; this session's context has "
                                  "{}", snap.mla_n_kv[l], state.ctx_tokens()));
    }
  }
  if (state.bounded() && static_cast<uint32_t>(snap.pos) > state.ctx_tokens()) {
    return ArgError(fmt::format("the snapshot is at position {}; this session's context has {}",
                                snap.pos, state.ctx_tokens()));
  }
  for (size_t l = 0; l < layers; ++l) {
    const int li = static_cast<int>(l);
    KdaLayerState& k = state.kda(li);
    std::copy(snap.kda[l].s.begin(), snap.kda[l].s.end(), k.s.begin());
    std::copy(snap.kda[l].rings.begin(), snap.kda[l].rings.end(), k.rings.begin());
    MlaLayerState& m = state.mla(li);
    std::copy(snap.mla_rows[l].begin(), snap.mla_rows[l].end(), m.kv.begin());
    m.n_kv = snap.mla_n_kv[l];
  }
  state.set_pos(snap.pos);
  return Status::Ok();
}

}  // namespace waste
