#include "model/session_state.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "platform/platform.h"

namespace waste {
namespace {

constexpr uint32_t kStateMagic = 0x53414457;  // "WDAS"
constexpr uint32_t kStateVersion = 1;
constexpr size_t kHeaderWords = 16;

struct Header {
  uint32_t magic, version;
  int32_t n_layers, hidden, kda_heads, kda_dim, conv_k, n_heads, qk_nope, qk_rope, v_head,
      attn_res_block, pos, n_blockres;
  // The reference writes 0 and never reads them; waste writes the
  // container fingerprint here (low word first).
  uint32_t reserved[2];
};
static_assert(sizeof(Header) == kHeaderWords * 4, "state header is 64 bytes");

void FillShape(const ModelConfig& c, Header* h) {
  h->n_layers = c.n_layers;
  h->hidden = c.hidden;
  h->kda_heads = c.kda.heads;
  h->kda_dim = c.kda.head_dim;
  h->conv_k = c.kda.conv_k;
  h->n_heads = c.mla.n_heads;
  h->qk_nope = c.mla.qk_nope;
  h->qk_rope = c.mla.qk_rope;
  h->v_head = c.mla.v_head;
  h->attn_res_block = c.attn_res.block;
}

void Append(std::string* out, const void* p, size_t n) {
  out->append(static_cast<const char*>(p), n);
}

}  // namespace

SessionState::SessionState(const ModelConfig& cfg, uint32_t ctx_tokens)
    : cfg_(cfg), ctx_tokens_(ctx_tokens) {
  size_t nl = static_cast<size_t>(cfg.n_layers);
  kda_.resize(nl);
  mla_.resize(nl);
  size_t c = static_cast<size_t>(cfg.kda_channels());
  size_t d = static_cast<size_t>(cfg.kda.head_dim);
  size_t taps = cfg.kda.conv_k > 1 ? static_cast<size_t>(cfg.kda.conv_k - 1) : 0;
  for (size_t l = 0; l < nl; ++l) {
    if (cfg.attn_kind[l] == AttnKind::kKda) {
      kda_[l].s.assign(static_cast<size_t>(cfg.kda.heads) * d * d, 0.0f);
      kda_[l].rings.assign(3 * c * taps, 0.0f);
    } else {
      ++n_mla_;
      mla_[l].kv.assign(static_cast<size_t>(ctx_tokens) *
                            static_cast<size_t>(cfg.mla.kv_lora_rank + cfg.mla.qk_rope),
                        0.0f);
    }
  }
}

void SessionState::Reset() {
  for (auto& k : kda_) {
    std::fill(k.s.begin(), k.s.end(), 0.0f);
    std::fill(k.rings.begin(), k.rings.end(), 0.0f);
  }
  for (auto& m : mla_) m.n_kv = 0;
  pos_ = 0;
}

int64_t SessionState::room() const {
  if (!bounded()) return std::numeric_limits<int32_t>::max() - 1 - pos_;
  return static_cast<int64_t>(ctx_tokens_) - pos_;
}

uint64_t SessionState::bytes() const {
  uint64_t b = 0;
  for (const auto& k : kda_) b += (k.s.size() + k.rings.size()) * sizeof(float);
  for (const auto& m : mla_) b += m.kv.size() * sizeof(float);
  return b;
}

std::string SessionState::Serialize(const std::vector<float>& hidden) const {
  Header h{};
  h.magic = kStateMagic;
  h.version = kStateVersion;
  FillShape(cfg_, &h);
  h.pos = pos_;
  h.n_blockres = 0;  // AttnRes history is per-token scratch (MODEL.md §10)
  h.reserved[0] = static_cast<uint32_t>(container_id_);
  h.reserved[1] = static_cast<uint32_t>(container_id_ >> 32);
  std::string out;
  Append(&out, &h, sizeof(h));
  size_t row = static_cast<size_t>(cfg_.mla.kv_lora_rank + cfg_.mla.qk_rope);
  for (size_t l = 0; l < static_cast<size_t>(cfg_.n_layers); ++l) {
    if (cfg_.attn_kind[l] == AttnKind::kKda) {
      Append(&out, kda_[l].s.data(), kda_[l].s.size() * 4);
      Append(&out, kda_[l].rings.data(), kda_[l].rings.size() * 4);
    } else {
      int32_t n = mla_[l].n_kv;
      Append(&out, &n, 4);
      Append(&out, mla_[l].kv.data(), static_cast<size_t>(n) * row * 4);
    }
  }
  std::vector<float> x(static_cast<size_t>(cfg_.hidden), 0.0f);
  if (hidden.size() == x.size()) x = hidden;
  Append(&out, x.data(), x.size() * 4);
  return out;
}

Status SessionState::WriteFile(const std::string& path, const std::string& bytes) {
  return platform::ReplaceFile(path, bytes.data(), bytes.size(), "session file",
                               std::string_view(bytes.data(), std::min<size_t>(bytes.size(), 4)));
}

uint64_t SessionState::MaxFileBytes() const {
  // Every MLA layer full (ctx positions), the most AttnRes blocks a file
  // may carry, the residual: no valid session file for this model is larger.
  uint64_t row = static_cast<uint64_t>(cfg_.mla.kv_lora_rank + cfg_.mla.qk_rope) * 4;
  uint64_t bytes = sizeof(Header);
  for (size_t l = 0; l < kda_.size(); ++l) {
    if (cfg_.attn_kind[l] == AttnKind::kKda) {
      bytes += (kda_[l].s.size() + kda_[l].rings.size()) * 4;
    } else {
      bytes += 4 + static_cast<uint64_t>(ctx_tokens_) * row;
    }
  }
  uint64_t max_blocks =
      cfg_.attn_res.block > 0 ? static_cast<uint64_t>(cfg_.n_layers / cfg_.attn_res.block + 2) : 0;
  bytes += (max_blocks + 1) * static_cast<uint64_t>(cfg_.hidden) * 4;
  return bytes;
}

Result<std::string> SessionState::ReadFile(const std::string& path, bool any_container) const {
  // A regular file no larger than this model's largest session: a device,
  // FIFO or huge sparse file is refused before it is read.
  auto data = platform::ReadRegularFile(path, MaxFileBytes(), "session file");
  if (!data) {
    // Too large is most often another model's state or one saved with a
    // longer context: the header's own checks name which.
    std::error_code ec;
    Header h{};
    if (std::filesystem::is_regular_file(path, ec) &&
        std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(&h), sizeof(h))) {
      WASTE_TRY(CheckHeader(&h, path, any_container));
    }
    return data.error();
  }
  return std::move(*data);
}

Status SessionState::CheckHeader(const void* header, std::string_view path,
                                 bool any_container) const {
  auto bad = [&](const std::string& why) {
    return FormatError(fmt::format("session file {}: {}", path, why));
  };
  const Header& h = *static_cast<const Header*>(header);
  if (h.magic != kStateMagic) return bad("not a session file (magic is not WDAS)");
  if (h.version != kStateVersion) return bad(fmt::format("version {} (expected 1)", h.version));
  Header want{};
  FillShape(cfg_, &want);
  if (std::memcmp(&h.n_layers, &want.n_layers, 10 * sizeof(int32_t)) != 0) {
    return bad(fmt::format(
        "saved for another model shape (layers {} hidden {} kda {}x{} conv {} heads {} "
        "qk {}+{} v {}; this model: layers {} hidden {} kda {}x{} conv {} heads {} qk {}+{} v {})",
        h.n_layers, h.hidden, h.kda_heads, h.kda_dim, h.conv_k, h.n_heads, h.qk_nope, h.qk_rope,
        h.v_head, want.n_layers, want.hidden, want.kda_heads, want.kda_dim, want.conv_k,
        want.n_heads, want.qk_nope, want.qk_rope, want.v_head));
  }
  uint64_t saved_for = h.reserved[0] | (static_cast<uint64_t>(h.reserved[1]) << 32);
  if (saved_for != 0 && container_id_ != 0 && saved_for != container_id_ && !any_container) {
    return bad(fmt::format(
        "saved from another container (fingerprint {:016x}; this container's is {:016x}) of the "
        "same shape; load it anyway only if you know the weights match",
        saved_for, container_id_));
  }
  if (h.pos < 0 || h.pos == std::numeric_limits<int32_t>::max() ||
      (bounded() && static_cast<uint32_t>(h.pos) > ctx_tokens_)) {
    const bool longer = bounded() && h.pos > 0 && static_cast<uint32_t>(h.pos) > ctx_tokens_;
    return bad(fmt::format("position {} does not fit a context of {}{}", h.pos, ctx_tokens_,
                           longer ? fmt::format(" (it was saved with a longer context: open with a "
                                                "context of {} or more)",
                                                h.pos)
                                  : ""));
  }
  int max_blocks = cfg_.attn_res.enabled() ? cfg_.n_layers / cfg_.attn_res.block + 2 : 0;
  if (h.n_blockres < 0 || h.n_blockres > max_blocks) {
    return bad(fmt::format("{} AttnRes blocks (at most {})", h.n_blockres, max_blocks));
  }
  return Status::Ok();
}

Status SessionState::LoadFromBytes(std::string_view buf, std::string_view path,
                                   bool any_container) {
  auto bad = [&](const std::string& why) {
    return FormatError(fmt::format("session file {}: {}", path, why));
  };
  if (buf.size() < sizeof(Header)) return bad("shorter than its 64-byte header");
  Header h;
  std::memcpy(&h, buf.data(), sizeof(h));
  WASTE_TRY(CheckHeader(&h, path, any_container));
  // Read-only pass: check every size before changing anything.
  size_t row = static_cast<size_t>(cfg_.mla.kv_lora_rank + cfg_.mla.qk_rope);
  size_t off = sizeof(Header);
  std::vector<size_t> offsets(static_cast<size_t>(cfg_.n_layers));
  for (size_t l = 0; l < offsets.size(); ++l) {
    offsets[l] = off;
    if (cfg_.attn_kind[l] == AttnKind::kKda) {
      off += (kda_[l].s.size() + kda_[l].rings.size()) * 4;
    } else {
      if (off + 4 > buf.size()) return bad("truncated");
      int32_t n;
      std::memcpy(&n, buf.data() + off, 4);
      if (n < 0 || n != h.pos || (bounded() && static_cast<uint32_t>(n) > ctx_tokens_)) {
        return bad(fmt::format("layer {} holds {} cached positions at position {}", l, n, h.pos));
      }
      off += 4 + static_cast<size_t>(n) * row * 4;
    }
    if (off > buf.size()) return bad("truncated");
  }
  off += static_cast<size_t>(h.n_blockres) * static_cast<size_t>(cfg_.hidden) * 4;
  off += static_cast<size_t>(cfg_.hidden) * 4;
  if (off != buf.size()) {
    return bad(fmt::format("{} bytes, expected exactly {}", buf.size(), off));
  }
  for (size_t l = 0; l < offsets.size(); ++l) {
    const char* p = buf.data() + offsets[l];
    if (cfg_.attn_kind[l] == AttnKind::kKda) {
      std::memcpy(kda_[l].s.data(), p, kda_[l].s.size() * 4);
      std::memcpy(kda_[l].rings.data(), p + kda_[l].s.size() * 4, kda_[l].rings.size() * 4);
    } else {
      int32_t n;
      std::memcpy(&n, p, 4);
      std::memcpy(mla_[l].kv.data(), p + 4, static_cast<size_t>(n) * row * 4);
      mla_[l].n_kv = n;
    }
  }
  pos_ = h.pos;
  return Status::Ok();
}

}  // namespace waste
