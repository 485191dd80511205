// The converter's passes (internal to waste_convert): the trunk, one expert
// layer, the small files. converter.cc sequences them and keeps the resume
// state; each pass publishes its files atomically and reports checksums.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/hf_tokenizer.h"
#include "convert/residual_basis.h"
#include "convert/safetensors.h"
#include "convert/source_model.h"
#include "format/format.h"
#include "runtime/thread_pool.h"
#include "waste/convert.h"
#include "waste/status.h"

namespace waste::convert {

// Streams bytes to `<path>.partial`, keeping a crc32; Commit() fsyncs and
// renames it over `path`. Destroying an uncommitted writer removes the
// partial file.
class StagedFile {
 public:
  static Result<std::unique_ptr<StagedFile>> Create(const std::string& path);
  ~StagedFile();
  Status Write(const void* data, size_t n);
  Status Commit();
  uint64_t size() const { return size_; }
  uint32_t crc() const { return crc_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  uint64_t size_ = 0;
  uint32_t crc_ = 0;
};

// Writes a small file atomically (temporary, fsync, rename), readable by all
// like the data files.
Status PublishBytes(const std::string& path, const std::string& bytes);

// crc32 and size of a whole file (resume validation).
Result<std::pair<uint64_t, uint32_t>> FileCrc(const std::string& path);

struct TrunkResult {
  nlohmann::json index;          // manifest trunk entries, in order
  uint64_t bytes = 0;
  uint32_t crc = 0;
  double err = 0, norm = 0;      // over quantised tensors
  uint64_t source_bytes = 0;
};

// How the trunk's matrices are stored: the recipe's defaults (F32 when
// small or not 2-D, Q8G for the embedding, the head and the vision tower,
// Q4G otherwise), every quantised one Q8G with `trunk8`, and before both
// the user's rules (first match wins).
struct TrunkFormats {
  struct Rule {
    std::string pattern;         // a part of the container name
    format::TensorFmt fmt;
    std::string text;            // as the user wrote it, for messages
  };
  bool trunk8 = false;
  std::vector<Rule> rules;
};

// Parses "f32" / "q8g" / "q4g" rules; an error names the bad one.
Result<TrunkFormats> ParseTrunkFormats(bool trunk8, const std::vector<TensorFormatRule>& rules);

// Trunk storage of a source tensor: 0 = F32, 2 = Q8G, 3 = Q4G. `rule_used`
// (optional) is set to the index of the rule that decided, or -1.
format::TensorFmt TrunkFormatFor(const TrunkSource& t, const std::vector<int64_t>& shape,
                                 const TrunkFormats& formats, int* rule_used = nullptr);
std::vector<int64_t> TrunkShapeFor(const TrunkSource& t, const std::vector<int64_t>& shape);

// Every tensor goes through `basis` (the identity when not rotating)
// before it is stored.
Result<TrunkResult> WriteTrunk(const Checkpoint& ckpt, const SourceModel& model, const TrunkFormats& formats,
                               const ResidualBasis& basis, bool reference,
                               const std::string& out_dir, ThreadPool* pool,
                               const std::function<void(int done, int total)>& tick);

struct LayerJob {
  int layer = 0;
  int codebook_base = 0;
  ExpertQuant quant;
  format::RecordLayout layout;
  int64_t train_vectors = 0;
  int kmeans_iterations = 16;
  uint64_t seed = 0;
  bool reference = false;        // the reference converter's recipe (ConvertOptions)
  int refine_rounds = 0;         // codebook refinement rounds (KmeansOptions)
  const ResidualBasis* basis = nullptr;  // every expert matrix is rotated by it (null: identity)
};

struct LayerResult {
  uint64_t bank_bytes = 0;
  uint32_t bank_crc = 0;
  uint64_t part_bytes = 0;
  uint32_t part_crc = 0;
  double err[3] = {0, 0, 0};
  double norm[3] = {0, 0, 0};
  uint64_t source_bytes = 0;
  double train_error[3] = {0, 0, 0};   // mean squared residual of the training set, before refinement
  std::vector<double> refine_error[3]; // KmeansReport::refine_error per kind
  int refine_kept[3] = {0, 0, 0};
  double train_cpu_s = 0;              // process CPU seconds: sampling + k-means
  double encode_cpu_s = 0;             // process CPU seconds: the experts
};

// Trains the layer's codebooks (written first, as parts/codebooks-L<L>.bin)
// and encodes every expert into experts-L<L>.bin. `experts_done` is bumped
// as experts finish; `tick` runs on the calling thread between batches.
Result<LayerResult> ConvertLayer(const Checkpoint& ckpt, const SourceModel& model,
                                 const LayerJob& job, const std::string& out_dir,
                                 ThreadPool* pool, std::atomic<int>* experts_done,
                                 const std::function<void()>& tick);

// tokenizer.model, specials.json, chat_template.jinja, chat.json,
// vision.json: whatever the checkpoint provides. Returns the names written.
Result<std::vector<std::string>> WriteSidecars(const Checkpoint& ckpt, const SourceModel& model,
                                               const std::string& out_dir);

// <src>/tokenizer.json converted (tokenizer.model, specials.json,
// pretokenizer.json). Also run before the first layer, so a tokenizer that
// cannot be converted is refused before hours of work, not after.
Result<HfTokenizerFiles> LoadHfTokenizer(const std::string& src);

std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace waste::convert
