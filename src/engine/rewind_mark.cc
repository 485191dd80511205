// Session::SetMark / RewindToMark: cheap rewind points (Config::rewind_marks
// per session). A session only moves forward between calls that reset it:
// Feed appends latent rows at n_kv and up and overwrites the recurrent
// state in place. So the rows below a mark are still the mark's rows, and
// going back needs only the recurrent state (copied here into buffers kept
// from one mark to the next), the per-layer row counts, the position and
// the token that Generate emitted but had not fed. Going back to one mark
// drops those further on: what is fed next overwrites their rows.
// `waste chat` marks before each message and rewinds when the message is
// stopped or fails before its reply; `waste serve` keeps a request's
// restore point and its follow-on prefill's (docs/SERVER.md).
#include <algorithm>

#include "engine/model_core.h"
#include "waste/model.h"

namespace waste {

uint64_t RewindMark::bytes() const {
  uint64_t floats = 0;
  for (const KdaLayerState& k : kda) floats += k.s.size() + k.rings.size();
  return floats * sizeof(float);
}

namespace {

Status CheckIndex(const SessionCore& s, int index) {
  const int count = s.model->config.rewind_marks;
  if (count <= 0) {
    return Status(Errc::kUnsupported,
                  "rewind marks need the model opened with Config::rewind_marks");
  }
  if (index < 0 || index >= count) {
    return ArgError("rewind mark " + std::to_string(index) + " does not exist (the model keeps " +
                    std::to_string(count) + " per session: Config::rewind_marks)");
  }
  return Status::Ok();
}

}  // namespace

// The copy itself (run_mu held): into the slot's buffers, sized by the first
// mark and reused after.
void SessionCore::SaveMark(size_t slot_index) {
  if (marks.size() < MarkSlots()) marks.resize(MarkSlots());
  std::unique_ptr<RewindMark>& slot = marks[slot_index];
  const int layers = model->container->config().n_layers;
  if (!slot) {
    slot = std::make_unique<RewindMark>();
    slot->kda.resize(static_cast<size_t>(layers));
    slot->mla_n_kv.assign(static_cast<size_t>(layers), 0);
  }
  RewindMark& m = *slot;
  m.valid = false;  // until the copy is whole
  for (int l = 0; l < layers; ++l) {
    const KdaLayerState& from = state->kda(l);
    KdaLayerState& to = m.kda[static_cast<size_t>(l)];
    // Sized once (the first mark), then copied into in place.
    if (to.s.size() != from.s.size())
      to.s = from.s;
    else
      std::copy(from.s.begin(), from.s.end(), to.s.begin());
    to.rings.assign(from.rings.begin(), from.rings.end());
    m.mla_n_kv[static_cast<size_t>(l)] = state->mla(l).n_kv;
  }
  m.pos = state->pos();
  m.pending = pending;
  m.valid = true;
}

bool SessionCore::LoadMark(size_t slot_index) {
  if (slot_index >= marks.size() || !marks[slot_index] || !marks[slot_index]->valid) return false;
  const RewindMark& m = *marks[slot_index];
  const int layers = model->container->config().n_layers;
  for (int l = 0; l < layers; ++l) {
    const KdaLayerState& from = m.kda[static_cast<size_t>(l)];
    KdaLayerState& to = state->kda(l);
    std::copy(from.s.begin(), from.s.end(), to.s.begin());
    std::copy(from.rings.begin(), from.rings.end(), to.rings.begin());
    state->mla(l).n_kv = m.mla_n_kv[static_cast<size_t>(l)];
  }
  state->set_pos(m.pos);
  pending = m.pending;
  // The rows past this mark will be written again: marks there are stale.
  for (std::unique_ptr<RewindMark>& other : marks) {
    if (other && other->valid && other->pos > m.pos) other->valid = false;
  }
  return true;
}

size_t SessionCore::MarkSlots() const {
  const Config& c = model->config;
  return static_cast<size_t>(std::max(0, c.rewind_marks)) + (c.draft_tokens > 0 ? 1 : 0);
}

size_t SessionCore::DraftMarkSlot() const {
  return static_cast<size_t>(std::max(0, model->config.rewind_marks));
}

Status Session::SetMark(int index) noexcept {
  SessionCore& s = *core_;
  WASTE_TRY(s.CheckNotInCallback());
  WASTE_TRY(CheckIndex(s, index));
  try {
    std::lock_guard<FairMutex> run(s.model->run_mu);
    s.SaveMark(static_cast<size_t>(index));
    s.Report();  // the first mark adds its size
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed while setting a rewind mark");
  }
}

Status Session::RewindToMark(int index) noexcept {
  WASTE_TRY(core_->CheckNotInCallback());
  SessionCore& s = *core_;
  WASTE_TRY(CheckIndex(s, index));
  std::lock_guard<FairMutex> run(s.model->run_mu);
  if (!s.LoadMark(static_cast<size_t>(index))) {
    return ArgError("no rewind mark " + std::to_string(index) +
                    " to go back to (none was set, or the session was reset, restored or "
                    "loaded, or went back to an earlier mark since)");
  }
  s.ClearDetail();
  return Status::Ok();
}

Status Session::CopyMark(int from, int to) noexcept {
  SessionCore& s = *core_;
  WASTE_TRY(s.CheckNotInCallback());
  WASTE_TRY(CheckIndex(s, from));
  WASTE_TRY(CheckIndex(s, to));
  try {
    std::lock_guard<FairMutex> run(s.model->run_mu);
    if (static_cast<size_t>(from) >= s.marks.size() || !s.marks[static_cast<size_t>(from)] ||
        !s.marks[static_cast<size_t>(from)]->valid) {
      return ArgError("no rewind mark " + std::to_string(from) + " to copy");
    }
    if (from == to) return Status::Ok();
    const RewindMark& src = *s.marks[static_cast<size_t>(from)];
    std::unique_ptr<RewindMark>& slot = s.marks[static_cast<size_t>(to)];
    if (!slot) slot = std::make_unique<RewindMark>();
    RewindMark& dst = *slot;
    dst.valid = false;  // until the copy is whole
    dst.kda.resize(src.kda.size());
    for (size_t l = 0; l < src.kda.size(); ++l) {
      // In place when sized (every mark is sized alike after the first).
      if (dst.kda[l].s.size() != src.kda[l].s.size()) dst.kda[l].s = src.kda[l].s;
      else std::copy(src.kda[l].s.begin(), src.kda[l].s.end(), dst.kda[l].s.begin());
      dst.kda[l].rings.assign(src.kda[l].rings.begin(), src.kda[l].rings.end());
    }
    dst.mla_n_kv = src.mla_n_kv;
    dst.pos = src.pos;
    dst.pending = src.pending;
    dst.valid = true;
    s.Report();
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed while copying a rewind mark");
  }
}

int Session::MarkPosition(int index) const noexcept {
  // No run lock: the marks change only in this session's own calls, and a
  // session is used by one thread at a time (its callbacks included, which
  // may hold the run lock).
  const SessionCore& s = *core_;
  if (index < 0 || static_cast<size_t>(index) >= s.marks.size()) return -1;
  const std::unique_ptr<RewindMark>& m = s.marks[static_cast<size_t>(index)];
  return m && m->valid ? m->pos : -1;
}

}  // namespace waste
