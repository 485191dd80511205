// Reading published checkpoints: safetensors files (one file, or shards
// named by model.safetensors.index.json). Every header is validated before
// a byte of tensor data is trusted: header length inside the file, every
// dtype known, byte counts equal to shape x dtype size, offsets inside the
// data buffer and not overlapping, every index entry present in its shard.
// Errors name the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "platform/platform.h"
#include "waste/status.h"

namespace waste::convert {

enum class DType : uint8_t { kBool, kU8, kI8, kU16, kI16, kF16, kBF16, kU32, kI32, kF32, kU64, kI64,
                             kF64, kF8E4M3, kF8E5M2 };
const char* DTypeName(DType t);
size_t DTypeBytes(DType t);

struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;   // [] = scalar
  uint64_t begin = 0;           // absolute file offset of the first byte
  uint64_t bytes = 0;
  int shard = 0;                // index into Checkpoint::shards()
  int64_t elements() const;
};

// The header length a safetensors file starts with (8 bytes, little
// endian), checked against the file's size and safetensors' 100 MB cap.
// `head` holds the file's first `head_bytes` bytes.
Result<uint64_t> SafetensorsHeaderLength(const uint8_t* head, size_t head_bytes, uint64_t file_size,
                                         const std::string& path);
// The JSON header (the `length` bytes after the first 8) of a file of
// `file_size` bytes -> its tensors, each validated: dtype, shape, offsets
// inside the data buffer, byte count, no overlap. Errors name path and tensor.
Result<std::map<std::string, TensorEntry>> ParseSafetensorsHeader(std::string_view header,
                                                                  uint64_t file_size,
                                                                  const std::string& path);

// model.safetensors.index.json -> tensor name -> shard file name (a plain
// name inside the checkpoint directory; "a/b" or ".." are refused).
Result<std::map<std::string, std::string>> ParseSafetensorsIndex(std::string_view text,
                                                                 const std::string& path);

// One safetensors file: header parsed and validated, data read on demand.
class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  const std::string& path() const { return file_.path(); }
  const std::map<std::string, TensorEntry>& tensors() const { return tensors_; }
  Status Read(const TensorEntry& t, void* dst) const;

 private:
  platform::File file_;
  std::map<std::string, TensorEntry> tensors_;
};

// A checkpoint directory: tensor name -> entry across its shards. Shards
// are opened (and their headers validated) when the checkpoint is opened.
class Checkpoint {
 public:
  static Result<std::unique_ptr<Checkpoint>> Open(const std::string& dir);
  const std::string& dir() const { return dir_; }
  const TensorEntry* Find(const std::string& name) const;
  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  // Every tensor name, sorted.
  std::vector<std::string> Names() const;
  // Raw bytes of a tensor (little-endian, as stored).
  Status ReadRaw(const TensorEntry& t, std::vector<uint8_t>* out) const;
  const std::string& ShardPath(const TensorEntry& t) const { return shards_[t.shard]->path(); }
  uint64_t total_bytes() const { return total_bytes_; }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, TensorEntry> index_;
  uint64_t total_bytes_ = 0;
};

}  // namespace waste::convert
