#include "vision/image_queue.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace waste::vision {

Status ImageQueue::Add(std::vector<float> rows) {
  if (counts_.size() >= kMaxQueuedImages) {
    return ArgError(fmt::format("at most {} images can wait for a prompt", kMaxQueuedImages));
  }
  if (hidden_ == 0 || rows.size() % hidden_ != 0) return ArgError("image rows have the wrong width");
  counts_.push_back(static_cast<int>(rows.size() / hidden_));
  rows_.insert(rows_.end(), rows.begin(), rows.end());
  return Status::Ok();
}

void ImageQueue::Clear() {
  rows_.clear();
  rows_.shrink_to_fit();
  counts_.clear();
  cursor_ = 0;
}

void ImageQueue::Release() {
  if (cursor_ > 0) Clear();
  cursor_ = 0;
  armed_ = false;
}

bool ImageQueue::Take(int token, float* row) {
  if (!armed_ || token != pad_id_ || cursor_ * hidden_ >= rows_.size()) return false;
  std::memcpy(row, rows_.data() + cursor_ * hidden_, hidden_ * sizeof(float));
  ++cursor_;
  return true;
}

Result<std::vector<int>> ImageQueue::Expand(std::span<const int> ids) const {
  size_t pads = static_cast<size_t>(std::count(ids.begin(), ids.end(), pad_id_));
  if (pads != counts_.size()) {
    return ArgError(fmt::format("the prompt has {} media pad token{} but {} image{} queued", pads,
                                pads == 1 ? "" : "s", counts_.size(),
                                counts_.size() == 1 ? " is" : "s are"));
  }
  std::vector<int> out;
  size_t total = 0;
  for (int c : counts_) total += static_cast<size_t>(c);
  out.reserve(ids.size() + total);
  size_t k = 0;
  for (int id : ids) {
    if (id == pad_id_) {
      out.insert(out.end(), static_cast<size_t>(counts_[k++]), pad_id_);
    } else {
      out.push_back(id);
    }
  }
  return out;
}

}  // namespace waste::vision
