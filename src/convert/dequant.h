// Source number formats to f32, exactly (CONVERT notes in docs/CONVERT.md):
// bf16, f16, f32, fp8 e4m3 / e5m2 (optionally with 2-D block scales whose
// tile comes from the checkpoint's quantization_config), MXFP4 (E2M1
// codes, one E8M0 power-of-two scale per 32 elements) and compressed-tensors
// "pack-quantized" int4 (Kimi-K2-Thinking: symmetric int4 packed eight to an
// I32 word, one float scale per group of columns).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "convert/safetensors.h"
#include "waste/status.h"

namespace waste::convert {

float Bf16ToF32(uint16_t v);
float E4M3ToF32(uint8_t b);   // e4m3fn: no infinity, 0x7F/0xFF NaN, max 448
float E5M2ToF32(uint8_t b);   // the upper byte of an IEEE f16
float Mxfp4Value(uint8_t nibble);  // E2M1: sign bit 3, {0,.5,1,1.5,2,3,4,6}

// Elementwise float dtypes (F32, F16, BF16, F64, F8_E4M3, F8_E5M2) to f32.
// Any other dtype is an error naming `what`.
Status DecodeFloats(DType t, const uint8_t* src, size_t n, float* out, const std::string& what);

// w [rows, cols] *= scale[r / bm, c / bn]; scale is [ceil(rows/bm), ceil(cols/bn)].
Status ApplyBlockScales(float* w, int64_t rows, int64_t cols, const float* scale, int64_t srows,
                        int64_t scols, int bm, int bn, const std::string& what);

// MXFP4: packed [rows, cols/2] (low nibble = even element), scale
// [rows, cols/32] (s = 2^(e-127), e = 0 decodes to 0) -> out [rows, cols].
void DecodeMxfp4(const uint8_t* packed, const uint8_t* scale, int64_t rows, int64_t cols,
                 float* out);

// Pack-quantized int4 (compressed-tensors pack_to_int32, symmetric): packed
// [rows, ceil(cols/8)] little-endian 32-bit words, column c of a row in word
// c / 8 at bits 4 (c % 8) .. 4 (c % 8) + 3 holding q + 8 (q in [-8, 7]);
// nibbles past `cols` are padding and ignored. scale [rows, ceil(cols/group)]
// -> out [rows, cols] = q * scale[r][c / group] (exact for bf16/f16 scales).
void DecodeInt4(const uint8_t* packed, const float* scale, int64_t rows, int64_t cols, int group,
                float* out);

// How quantised matrices of a checkpoint are stored.
struct SourceQuant {
  int fp8_block_rows = 128;     // quantization_config.weight_block_size
  int fp8_block_cols = 128;
  bool fp8_block_known = false; // from the config (never guessed from shapes)
  // quantization_config of compressed-tensors with format "pack-quantized"
  // and a symmetric 4-bit int group scheme: NAME_packed is then I32 int4
  // (MXFP4's NAME_packed is U8). The group size is taken from the config,
  // never from the shapes (ceil(cols/g) fits several g).
  bool int4_packed = false;
  int int4_group = 0;  // config_groups.*.weights.group_size
};

// A tensor read from a checkpoint as f32, whatever its storage: a float
// dtype, fp8 with its NAME_scale_inv companion, MXFP4 as NAME_packed (U8) +
// NAME_scale, or pack-quantized int4 as NAME_packed (I32) + NAME_scale +
// NAME_shape. `shape` is the logical shape.
struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
  int64_t rows() const;         // product of all but the last dimension
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
};
bool CheckpointHasTensor(const Checkpoint& ckpt, const std::string& name);
Result<F32Tensor> LoadF32(const Checkpoint& ckpt, const std::string& name, const SourceQuant& q);
// The same into buffers the caller keeps between tensors (`raw`: the source
// bytes): no fresh allocation, page faults and zero fill per tensor.
Status LoadF32Into(const Checkpoint& ckpt, const std::string& name, const SourceQuant& q,
                   F32Tensor* out, std::vector<uint8_t>* raw);
// The shape LoadF32 gives `name`, without decoding it: a plain tensor's
// header shape, MXFP4's [rows, 2 x packed columns], int4's NAME_shape (the
// one read). An unreadable NAME_shape is an error naming it.
Result<std::vector<int64_t>> SourceShape(const Checkpoint& ckpt, const std::string& name);
// Bytes LoadF32 reads from the source for `name` (throughput accounting):
// the tensor and every companion (scales, int4's NAME_shape).
uint64_t SourceBytes(const Checkpoint& ckpt, const std::string& name);

}  // namespace waste::convert
