// Tiny checkpoints in the published Hugging Face layout of each family, for
// the converter's tests: config.json with the release's key spellings,
// model.safetensors.index.json and several shards (a layer split across a
// shard boundary), bf16 weights with heavy tails, optionally fp8 e4m3 with
// block scales (DeepSeek/K2 style), MXFP4 routed experts (K3 style) or int4
// "pack-quantized" routed experts (Kimi-K2-Thinking style), and optionally
// tiktoken.model + tokenizer_config.json.
#pragma once

#include <cstdint>
#include <string>

#include "waste/status.h"

namespace waste::gen {

enum class CheckpointDType { kBf16, kFp8, kMxfp4, kInt4 };

struct CheckpointOptions {
  std::string out_dir;
  std::string preset = "tiny";       // a generator preset (tools/gen/presets.h)
  uint64_t seed = 0;
  CheckpointDType dtype = CheckpointDType::kBf16;
  int fp8_block = 32;                // fp8 tile (rows = cols), written to quantization_config
  int int4_group = 32;               // int4: columns per scale (group_size in quantization_config)
  bool int4_shared_experts = false;  // int4: pack the shared experts too (left out of `ignore`)
  int shards = 3;
  bool tokenizer = false;
  int vocab = 0;                     // > 0: override vocab_size (512 makes the embedding Q8G)
  std::string override_json;         // JSON merge patch applied to the preset's config
};

struct CheckpointReport {
  int tensors = 0;
  uint64_t bytes = 0;
};

Result<CheckpointReport> GenerateCheckpoint(const CheckpointOptions& options);

}  // namespace waste::gen
