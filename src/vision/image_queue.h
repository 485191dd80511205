// The queue of encoded images waiting for the prompt that shows them, and
// the splice: while a call runs, each media pad position takes the next
// unused row of the queue (rows of image 0, then image 1, ...) instead of
// the embedding table's row. Lifetime rule (the reference's, kept on
// purpose; docs/VISION.md): the queue is armed at the start of an
// Eval/Generate call with its cursor at 0, and released at the end — if
// the call used at least one row, the WHOLE queue is dropped. Only a call
// whose tokens hold a media pad arms it (engine/model_core.h, ImageCall):
// the queue is the model's, and another session's call must neither take
// its rows nor reset its cursor. Unarmed, Take keeps the table's row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/forward.h"
#include "waste/status.h"

namespace waste::vision {

inline constexpr size_t kMaxQueuedImages = 32;

class ImageQueue final : public EmbeddingOverride {
 public:
  ImageQueue(int pad_id, int hidden) : pad_id_(pad_id), hidden_(static_cast<size_t>(hidden)) {}

  // Appends one image's rows ([n][hidden]). kArg for the 33rd image.
  Status Add(std::vector<float> rows);
  void Clear();
  size_t images() const { return counts_.size(); }
  const std::vector<int>& rows_per_image() const { return counts_; }
  int pad_id() const { return pad_id_; }

  // Replaces the k-th pad of `ids` by rows_per_image()[k] pads. kArg when
  // the number of pads differs from the number of queued images.
  Result<std::vector<int>> Expand(std::span<const int> ids) const;

  // Call boundaries (see above).
  void Arm() {
    cursor_ = 0;
    armed_ = true;
  }
  void Release();

  // EmbeddingOverride: the next unused row for a pad while rows remain.
  bool Take(int token, float* row) override;

 private:
  int pad_id_;
  size_t hidden_;
  std::vector<float> rows_;    // [total rows][hidden], queue order
  std::vector<int> counts_;    // rows per image
  size_t cursor_ = 0;          // rows used in the current call
  bool armed_ = false;         // a call that feeds pads is running
};

}  // namespace waste::vision
