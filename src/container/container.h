// Container v0 reader (FORMAT.md): manifest, resident trunk tensors, the
// on-disk embedding table, codebooks and expert banks. Open() validates
// everything FORMAT.md §8.1 lists (and more); record headers are validated
// on every read by ParseRecord(). No CLI logic, no printing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"
#include "model/model_config.h"
#include "platform/platform.h"
#include "waste/status.h"

namespace waste {

using format::TensorFmt;
const char* TensorFmtName(TensorFmt fmt);

// One manifest trunk entry, as written.
struct TensorInfo {
  std::string name;                  // full name, prefix included
  TensorFmt fmt = TensorFmt::kF32;
  uint64_t off = 0;
  uint64_t scale_off = 0;
  uint64_t bytes = 0;
  std::vector<int64_t> shape;
  int group = 128;
};

// A resident, validated tensor viewed as a matrix [rows][cols] (a vector is
// one row). For grouped formats `data` is the packed payload with `row_bytes`
// stride and `scales` the f16 [rows][groups] array.
struct TensorView {
  TensorFmt fmt = TensorFmt::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  size_t row_bytes = 0;
  int group = 128;
  size_t groups = 0;
  const uint8_t* data = nullptr;
  const uint16_t* scales = nullptr;
  const TensorInfo* info = nullptr;

  const float* f32() const { return reinterpret_cast<const float*>(data); }
  int64_t elements() const { return rows * cols; }
};

// Rows [first, first + count) of `w` as a matrix of their own (its data
// and scales offset, so every pointer stays inside the tensor's arrays).
inline TensorView RowSlice(const TensorView& w, int64_t first, int64_t count) {
  TensorView v = w;
  v.rows = count;
  v.data += static_cast<size_t>(first) * w.row_bytes;
  if (v.scales != nullptr) v.scales += static_cast<size_t>(first) * w.groups;
  return v;
}

// Reference dequantiser (tests, oracle comparisons, batched paths): row r
// as f32 [cols].
void DequantizeRow(const TensorView& t, int64_t row, float* out);

struct BankInfo {
  int layer = -1;
  std::string file;                  // name inside the container directory
  int experts = 0;
  uint64_t bytes = 0;                // whole bank, per manifest
  uint64_t record_bytes = 0;         // bytes / experts
  int codebook_base = 0;
};

// Pointers into one validated expert record (FORMAT.md §6.2–6.3).
struct ExpertRecordView {
  const uint8_t* gate = nullptr;     // index regions, 64-row blocked
  const uint8_t* up = nullptr;
  const uint8_t* down = nullptr;
  const uint16_t* scale_gate = nullptr;  // f16 [moe_inter]
  const uint16_t* scale_up = nullptr;    // f16 [moe_inter]
  const uint16_t* scale_down = nullptr;  // f16 [expert_in]
  int codebook_id = 0;
};

struct ContainerOptions {
  bool verify_crc = false;           // --verify / WASTE_VERIFY
  bool direct_io = true;             // bypass the page cache for banks
  bool huge_pages = true;            // trunk buffer advised for huge pages
};

// A record's failure as users read it: "expert E of layer L: <reason>",
// with the reason's code and (layer, expert) as Status::failed_expert()
// (the one spelling, for ParseRecord and the cache). An Ok reason is
// returned as is.
Status RecordError(int layer, int expert, const Status& reason);

class Container {
 public:
  // Opens and validates the directory `dir`. Errors name the file and the
  // field or byte offset, and what was expected.
  static Result<std::unique_ptr<Container>> Open(const std::string& dir,
                                                 const ContainerOptions& options = {});
  ~Container();

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const std::vector<TensorInfo>& trunk_index() const { return trunk_index_; }

  // Resident tensor by name WITHOUT the tensor prefix ("model.norm.weight");
  // nullptr when absent. Shapes of every required tensor were checked at open.
  // A quantized model.embed_tokens.weight stays on disk: its view has shape,
  // format and strides but data == scales == nullptr (use ReadEmbeddingRow).
  const TensorView* Find(std::string_view name) const;
  // "model.layers.{layer}.{suffix}".
  const TensorView* FindLayer(int layer, std::string_view suffix) const;

  // Embedding row of `token` as f32 [hidden]; read from disk when the table
  // is quantized (FORMAT.md §4.7). Safe for concurrent use.
  Status ReadEmbeddingRow(int token, float* out) const;

  // Codebook record `index` decoded to f32 [entries][vec_dim], f16
  // subnormals flushed to zero (FORMAT.md §5).
  const float* Codebook(int index) const;
  int codebook_count() const { return codebook_count_; }

  bool is_moe_layer(int layer) const;
  const BankInfo& bank(int layer) const;          // precondition: is_moe_layer
  const platform::File& bank_file(int layer) const;
  uint64_t max_record_bytes() const { return max_record_bytes_; }
  bool direct_io() const { return direct_io_; }   // every bank bypasses the cache

  // Validates a record read from disk for (layer, expert) — every check of
  // FORMAT.md §8.2 plus the offset spacing, and the crc32 when verify is on —
  // and returns views into it. Errors read "expert E of layer L: <reason>".
  Result<ExpertRecordView> ParseRecord(int layer, int expert, const uint8_t* record,
                                       bool verify_crc) const;
  // The same checks; errors carry the reason alone (the expert cache names
  // the record itself, streaming/record_source.h).
  Result<ExpertRecordView> CheckRecord(int layer, int expert, const uint8_t* record,
                                       bool verify_crc) const;
  bool verify_crc() const { return options_.verify_crc; }

  // Geometry shared by every record of every bank (offsets, blocks, sizes).
  const format::RecordLayout& record_layout() const;

  // Reference reconstruction (FORMAT.md §6.4) of row `row` of matrix `kind`
  // (format::kGate/kUp/kDown) of a parsed record: f32 [cols] where cols is
  // expert_in for gate/up and moe_inter for down. For tests and oracles;
  // the forward pass uses the LUT kernels instead.
  void DequantizeExpertRow(const ExpertRecordView& rec, int kind, int row, float* out) const;

  // Bytes of every resident trunk tensor (what plan calls trunk_bytes).
  uint64_t resident_trunk_bytes() const { return resident_trunk_bytes_; }

  // FNV-1a 64 of manifest.json's bytes, never 0: names this container in
  // session files (docs/HARDENING.md).
  uint64_t fingerprint() const { return fingerprint_; }

  // What the finite check at open covered (every F32 trunk tensor, every
  // quantized tensor's scales, every codebook entry): counts for info.
  uint64_t checked_finite_values() const { return checked_finite_values_; }

  struct Impl;

 private:
  Container() = default;
  std::string dir_;
  ContainerOptions options_;
  ModelConfig config_;
  std::vector<TensorInfo> trunk_index_;
  int codebook_count_ = 0;
  uint64_t max_record_bytes_ = 0;
  uint64_t resident_trunk_bytes_ = 0;
  bool direct_io_ = true;
  uint64_t fingerprint_ = 0;
  uint64_t checked_finite_values_ = 0;
  std::unique_ptr<Impl> impl_;
};

// Parses and validates manifest.json text into a ModelConfig and trunk index
// without touching other files (used by Open, plan and the fuzzer).
struct Manifest {
  ModelConfig config;
  std::vector<TensorInfo> trunk;
  std::vector<BankInfo> banks;       // indexed by layer; layer = -1 when not MoE
  int index_block = 64;
};
Result<Manifest> ParseManifest(std::string_view json_text, std::string_view origin = "manifest.json");
// Only format_version, tensor_prefix, expert_quant and config (banks and
// trunk left empty): for writers, which need the shapes before an index
// exists.
Result<Manifest> ParseManifestConfig(std::string_view json_text,
                                     std::string_view origin = "manifest.json");

// Parameter counts of MODEL.md §12 (what `waste info` prints).
struct ParamCounts {
  uint64_t total = 0;
  uint64_t active = 0;
};
ParamCounts CountParameters(const ModelConfig& config, const std::vector<TensorInfo>& trunk);
inline ParamCounts CountParameters(const Manifest& m) { return CountParameters(m.config, m.trunk); }

// "experts VQ3R, trunk Q4G/Q8G/F32" (ENGINE.md §1.6): trunk formats of the
// language model in the order Q3G, Q4G, Q8G, F16, F32.
std::string QuantizationSummary(const ModelConfig& config, const std::vector<TensorInfo>& trunk);
inline std::string QuantizationSummary(const Manifest& m) {
  return QuantizationSummary(m.config, m.trunk);
}

// Open keeps a tensor resident when its name carries the prefix, except a
// quantized embed_tokens, whose rows are read from disk per token.
bool IsResidentTensor(const ModelConfig& config, const TensorInfo& t);
bool IsOnDiskEmbedding(const ModelConfig& config, const TensorInfo& t);

// Every resident payload and scale array starts on this boundary.
inline constexpr size_t kTrunkAlignment = 64;
// Bytes Open allocates for resident tensors (payload and scales of each,
// each rounded up to kTrunkAlignment; the first entry of a name only).
// Equals Container::resident_trunk_bytes() and the plan's trunk_bytes.
uint64_t ResidentTrunkBytes(const Manifest& m);

}  // namespace waste
