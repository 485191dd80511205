// Session::SetMark / RewindToMark: one cheap rewind point per session.
// A session only moves forward between calls that reset it: Feed appends
// latent rows at n_kv and up and overwrites the recurrent state in place.
// So the rows below a mark are still the mark's rows, and going back needs
// only the recurrent state (copied here into buffers kept from one mark to
// the next), the per-layer row counts, the position and the token that
// Generate emitted but had not fed. `waste chat` marks before each message
// and rewinds when the message is stopped or fails before its reply.
#include <algorithm>

#include "engine/model_core.h"
#include "waste/model.h"

namespace waste {

uint64_t RewindMark::bytes() const {
  uint64_t floats = 0;
  for (const KdaLayerState& k : kda) floats += k.s.size() + k.rings.size();
  return floats * sizeof(float);
}

Status Session::SetMark() noexcept {
  SessionCore& s = *core_;
  WASTE_TRY(s.CheckNotInCallback());
  if (!s.model->config.rewind_marks) {
    return Status(Errc::kUnsupported,
                  "rewind marks need the model opened with Config::rewind_marks");
  }
  try {
    std::lock_guard<FairMutex> run(s.model->run_mu);
    const int layers = s.model->container->config().n_layers;
    if (!s.mark) {
      s.mark = std::make_unique<RewindMark>();
      s.mark->kda.resize(static_cast<size_t>(layers));
      s.mark->mla_n_kv.assign(static_cast<size_t>(layers), 0);
    }
    RewindMark& m = *s.mark;
    for (int l = 0; l < layers; ++l) {
      const KdaLayerState& from = s.state->kda(l);
      KdaLayerState& to = m.kda[static_cast<size_t>(l)];
      // Sized once (the first mark), then copied into in place.
      if (to.s.size() != from.s.size()) to.s = from.s;
      else std::copy(from.s.begin(), from.s.end(), to.s.begin());
      to.rings.assign(from.rings.begin(), from.rings.end());
      m.mla_n_kv[static_cast<size_t>(l)] = s.state->mla(l).n_kv;
    }
    m.pos = s.state->pos();
    m.pending = s.pending;
    m.valid = true;
    s.Report();  // the first mark adds its size
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    if (s.mark) s.mark->valid = false;
    return OomError("allocation failed while setting a rewind mark");
  }
}

Status Session::RewindToMark() noexcept {
  WASTE_TRY(core_->CheckNotInCallback());
  SessionCore& s = *core_;
  std::lock_guard<FairMutex> run(s.model->run_mu);
  if (!s.mark || !s.mark->valid) {
    return ArgError(
        "no rewind mark to go back to (none was set, or the session was reset, restored or "
        "loaded since)");
  }
  const RewindMark& m = *s.mark;
  const int layers = s.model->container->config().n_layers;
  for (int l = 0; l < layers; ++l) {
    const KdaLayerState& from = m.kda[static_cast<size_t>(l)];
    KdaLayerState& to = s.state->kda(l);
    std::copy(from.s.begin(), from.s.end(), to.s.begin());
    std::copy(from.rings.begin(), from.rings.end(), to.rings.begin());
    s.state->mla(l).n_kv = m.mla_n_kv[static_cast<size_t>(l)];
  }
  s.state->set_pos(m.pos);
  s.pending = m.pending;
  s.ClearDetail();
  return Status::Ok();
}

}  // namespace waste
