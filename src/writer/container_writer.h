// Writes a container v0 directory (FORMAT.md §11 "writer checklist"):
// trunk tensors quantised as §4.5, codebooks, expert banks built with
// ExpertRecordBuilder, auxiliary files, and manifest.json last. Finish()
// re-reads what it wrote through the reader's own validation, so a
// container this writer completes passes every reader check.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "container/container.h"
#include "writer/expert_record_builder.h"
#include "format/format.h"
#include "waste/status.h"

namespace waste {

struct WriterOptions {
  std::string arch;                  // manifest "arch" (descriptive)
  std::string tensor_prefix;         // "" or "language_model."
  ExpertQuant quant;                 // stages, vec_dim, entries, index_bits
  // Lay everything out and write only manifest.json (offsets and sizes are
  // exact): for checking a huge preset's shapes and parameter counts.
  bool dry_run = false;
};

class ContainerWriter {
 public:
  // `config` is the manifest's "config" object, flattened, engine spellings,
  // in the key order it should be written. The directory is created.
  static Result<std::unique_ptr<ContainerWriter>> Create(const std::string& dir,
                                                         const nlohmann::ordered_json& config,
                                                         const WriterOptions& options);
  ~ContainerWriter();

  // The config as the reader will see it, and the expert record geometry.
  const ModelConfig& config() const { return config_; }
  const format::RecordLayout& record_layout() const { return layout_; }
  bool dry_run() const { return options_.dry_run; }

  // Trunk tensor `name` (prefix included) of `shape`; `rows(r, out)` fills
  // row r (shape.back() values). Quantised per FORMAT.md §4.5 with group
  // 128; F32 is stored as given. Not called in a dry run.
  using RowSource = std::function<void(int64_t row, float* out)>;
  Status AddTensor(const std::string& name, TensorFmt fmt, const std::vector<int64_t>& shape,
                   const RowSource& rows);
  Status AddTensor(const std::string& name, TensorFmt fmt, const std::vector<int64_t>& shape,
                   std::span<const float> values);

  // The 3*stages codebooks of MoE layer `layer`: f32
  // [kind][stage][entry][vec_dim] (gate, up, down), rounded to f16 with
  // subnormals flushed. Returns the layer's codebook base.
  Result<int> AddCodebooks(int layer, std::span<const float> books);

  // One bank: BeginBank, then per expert 0..E-1 fill record() and call
  // AddRecord(), then EndBank. Codebooks of the layer come first.
  Status BeginBank(int layer);
  ExpertRecordBuilder& record() { return builder_; }
  Status AddRecord();
  Status EndBank();

  // Any other file of the container (tokenizer.model, specials.json, ...).
  Status AddFile(const std::string& name, std::string_view bytes);

  // Closes the data files, checks the whole index with the reader's rules
  // and writes manifest.json atomically.
  Status Finish();

 private:
  ContainerWriter() = default;
  struct Output;  // one data file being appended
  Status Append(Output& out, const void* data, size_t n);
  Status WriteQuantizedTensor(TensorFmt fmt, const format::TrunkGeometry& g, int group,
                              const RowSource& rows, uint64_t* scale_off);

  std::string dir_;
  WriterOptions options_;
  nlohmann::ordered_json config_json_;
  ModelConfig config_;
  format::RecordLayout layout_;
  ExpertRecordBuilder builder_{format::RecordLayout{}};

  std::unique_ptr<Output> trunk_;
  std::unique_ptr<Output> codebooks_;
  std::unique_ptr<Output> bank_;
  int bank_layer_ = -1;
  int bank_records_ = 0;
  int n_books_ = 0;
  std::vector<int> codebook_base_;     // per layer, -1 = none yet
  nlohmann::ordered_json trunk_index_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json layers_ = nlohmann::ordered_json::object();
  bool finished_ = false;
};

}  // namespace waste
