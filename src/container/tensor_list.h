// The one list of language-model tensors: name, kind, canonical shape and
// the ModelWeights slot it fills, per layer kind, in model order. The
// reader validates the trunk index against it, weight resolution
// (model/layer_weights.cc) binds by walking it, the writer and generator
// emit exactly it. Adding a tensor is one line in tensor_list.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "container/container.h"
#include "container/model_weights.h"
#include "model/model_config.h"
#include "waste/status.h"

namespace waste {

enum class TensorKind : uint8_t {
  kMatrix,        // 2-D [out, in] exactly; F32, Q8G, Q4G or Q3G
  kVector,        // F32, 1-D, exactly elements() values ([128,1] is not a vector)
  kExactData,     // F32, exactly elements() values, the last dimension as given
  kData,          // F32, at least elements() values
  kOptionalData,  // like kData when present as F32; a quantized one is ignored
};

// Stores `t` in its slot of `w` (`layer` < 0: a whole-model tensor).
// Returns false, storing nothing, when the slot holds F32 values and `t` is
// quantized.
using WeightBinding = bool (*)(ModelWeights& w, int layer, const TensorView& t);

// How a tensor meets the residual stream, for a writer that stores the
// stream in another orthonormal basis (the converter's residual rotation,
// docs/CONVERT.md): a reader takes the stream through an RMSNorm gain and is
// multiplied by that gain and the basis on its input side; a writer adds to
// the stream and is rotated on its output side; the embedding's rows are
// stream vectors; a norm gain is folded into its readers and becomes ones.
// A tensor the forward pass touches the stream with must say so here: an
// unlisted use would silently be left in the old basis.
enum class ResidualUse : uint8_t {
  kNone,            // never sees the stream (or only after another projection)
  kReadsNormed,     // [out, d] (or a [d] vector) applied to RMSNorm(x; norm)
  kWritesResidual,  // [d, in]: its output is added to the stream
  kEmbedding,       // [V, d]: each row is a stream vector
  kNormGain,        // [d]: an RMSNorm gain over the stream
};

struct TensorSpec {
  std::string name;              // without the tensor prefix
  TensorKind kind = TensorKind::kMatrix;
  std::vector<int64_t> shape;    // as writers store it ([Ck, 1, Kc] for a conv)
  int layer = -1;                // model.layers.{layer}., or -1
  WeightBinding bind = nullptr;
  ResidualUse residual = ResidualUse::kNone;
  std::string norm;              // kReadsNormed: the norm gain's full name
  int64_t elements() const;
};

// Every tensor the engine reads for `cfg`, in model order: embedding, then
// per layer norms, AttnRes vectors, attention, FFN, then final norm(s) and
// lm_head.
std::vector<TensorSpec> ModelTensors(const ModelConfig& cfg);

// FORMAT.md §8.1 step 9: every entry's payload and scales lie inside
// trunk.bin (`trunk_file_size` bytes). Errors name the tensor and offsets.
Status ValidateTrunkIndex(const Manifest& m, uint64_t trunk_file_size);

// FORMAT.md §8.1 step 14 and §4.8: every required tensor present (first entry
// of a name wins) with the exact kind, format and shape; no MoE router on a
// dense layer. Message: "required tensor is missing or has the wrong shape:
// NAME (...)".
Status ValidateRequiredTensors(const Manifest& m);

// Name with the prefix applied.
inline std::string PrefixedName(const ModelConfig& cfg, const std::string& name) {
  return cfg.tensor_prefix + name;
}

}  // namespace waste
