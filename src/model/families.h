// Model families: the one place that knows a family by name. Each entry
// holds the checkpoint architecture names it is recognised by, the config
// spellings it accepts besides the engine's own, its defaults, what it
// cannot run yet (refused at open with a message naming the feature), the
// waste-gen preset that builds a toy container of it, and what the
// converter writes for it. Everything else in src/model/ switches on
// ModelConfig's knobs and per-layer kinds, never on a family; the
// converter (src/convert) accepts exactly the architectures listed here.
//
// Adding a family: one entry in families.cc (and a waste-gen preset named
// by its generator_preset; the round-trip tests then cover it).
#pragma once

#include <functional>
#include <span>
#include <string_view>

#include "model/model_config.h"
#include "waste/status.h"

namespace waste {

// A config key the family may spell differently: `alias` is read when
// `key` (the engine's spelling) is absent.
struct ConfigAlias {
  std::string_view key;
  std::string_view alias;
};

// Values used when the config leaves a key out.
struct FamilyDefaults {
  double rms_norm_eps = 1e-5;
  int short_conv_kernel = 4;
};

// The stock chat.json turn markers the converter writes for a family when
// the tokenizer has them as special tokens (named by their look, not by a
// family).
enum class TurnMarkers {
  kNone,      // no chat.json: the chat template alone says how turns look
  kImTags,    // <|im_system|>system<|im_middle|> ... <|im_end|>
  kOpenTags,  // <|open|>message role="..."<|sep|> ... <|close|>message<|sep|>
};

struct Family {
  // ModelConfig::arch for this family; "" for the fallback, which keeps the
  // raw architecture name.
  std::string_view key;
  // Recognised when the checkpoint's architectures[0] contains one of these
  // (none for the fallback). The converter accepts exactly these names.
  std::span<const std::string_view> architectures;
  std::span<const ConfigAlias> aliases;
  FamilyDefaults defaults;
  // What the family's configs can ask for that the engine does not run:
  // a clear UnsupportedError at open instead of a silently different model
  // (null = nothing refused).
  Status (*check_supported)(const ModelConfig& c, std::string_view origin);
  // waste-gen preset building a toy container of this family ("" = none).
  std::string_view generator_preset;
  // The manifest "arch" the converter writes ("" = the checkpoint's own
  // architectures[0], kept when one name covers several releases).
  std::string_view converted_arch;
  TurnMarkers turn_markers = TurnMarkers::kNone;
};

// The family one of whose architectures occurs in `architecture`, else the
// fallback entry (never fails).
const Family& FamilyForArchitecture(std::string_view architecture);

// Every family, fallback last.
void ForEachFamily(const std::function<void(const Family&)>& visit);

}  // namespace waste
