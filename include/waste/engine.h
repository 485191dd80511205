// Engine: one Model with one Session, for hosts that hold one
// conversation (the `waste` CLI, the tests, simple embedders). Every call
// forwards to model() or session(); a host that wants several
// conversations on one model uses waste/model.h directly. Kept rather than
// replaced so one-conversation code stays one object and one Open call.
// Every function is noexcept: failures come back as Status / Result, never
// as exceptions, and the library never prints or exits.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "waste/chat.h"
#include "waste/config.h"
#include "waste/image.h"
#include "waste/memplan.h"
#include "waste/model.h"
#include "waste/status.h"
#include "waste/types.h"

namespace waste {

class WASTE_EXPORT Engine {
 public:
  static Result<std::unique_ptr<Engine>> Open(const std::string& container_dir,
                                              const Config& config) noexcept;
  ~Engine();

  Model& model() noexcept;
  const Model& model() const noexcept;
  Session& session() noexcept;

  const ModelInfo& info() const noexcept;
  MemoryUsage memory_used() const noexcept;
  Stats stats() const noexcept;
  std::string backend_name() const noexcept;
  int threads() const noexcept;
  int position() const noexcept;     // next absolute position
  // Why the last call failed or stopped early ("expert 3 of layer 1: ..."),
  // or empty.
  const std::string& error_detail() const noexcept;
  // The expert record the last call failed on, or empty
  // (Session::failed_expert()).
  std::optional<ExpertFailureInfo> failed_expert() const noexcept;

  // Tokenizer (kUnsupported when the container has none).
  Result<std::vector<int>> Tokenize(std::string_view text, bool markup, bool add_bos) const noexcept;
  // A prompt built by waste/chat.h: each segment encoded on its own in its
  // own mode (markup or plain), the ids concatenated, BOS first if asked.
  Result<std::vector<int>> TokenizeSegments(std::span<const PromptSegment> segments,
                                            bool add_bos) const noexcept;
  Result<std::string> Detokenize(std::span<const int> ids) const noexcept;
  std::string TokenPiece(int id) const noexcept;  // raw bytes, "" when unknown
  // Model::FindChatTemplate.
  Result<std::optional<ChatTemplate>> FindChatTemplate() const noexcept;

  // Feeds `ids` at the current position; returns the last position's logits
  // (valid until the next call). Prompt must fit: ctx - position >= n.
  Result<std::span<const float>> Eval(std::span<const int> ids) noexcept;
  // Eval that also scores every next token (Session::Score).
  Result<std::vector<double>> Score(std::span<const int> ids, int next = -1) noexcept;
  // Score with each position's `top` most likely tokens (Session::ScoreTop).
  Result<std::vector<TokenScore>> ScoreTop(std::span<const int> ids, int top,
                                           int next = -1) noexcept;
  // Prefill + sampling loop (ENGINE.md §7.2): why it stopped, or the
  // error (Session::Generate).
  Result<FinishReason> Generate(std::span<const int> prompt, const GenParams& params,
                                const TokenCallback& on_token) noexcept;

  // Not const: a token emitted by Generate but not yet fed is fed first.
  Status SaveState(const std::string& path) noexcept;
  // A file saved from another container (its manifest differs) is refused
  // unless `any_container`; files written by the reference name none and load.
  Status LoadState(const std::string& path, bool any_container = false) noexcept;
  void ResetState() noexcept;

  // Hotlist (usage.waste, FORMAT.md §9.5); empty path = the configured one.
  Status SaveUsage(const std::string& path = "") const noexcept;

  // The session's state at one moment, in RAM (Session::Snapshot).
  Result<SessionSnapshot> Snapshot() noexcept;
  Status Restore(const SessionSnapshot& snapshot) noexcept;
  // A cheap rewind point (Session::SetMark; needs Config::rewind_marks).
  Status SetMark() noexcept;
  Status RewindToMark() noexcept;

  // --- Images (docs/VISION.md). Need Config::vision at open and a
  // container with a vision tower; otherwise kUnsupported.
  bool has_vision() const noexcept;
  int media_pad_id() const noexcept;   // -1 without a tower
  // Decodes, encodes (the tower runs now) and queues one image; returns
  // its row count (the pad positions it will fill). kIo for a bad file,
  // kArg for the 33rd queued image.
  Result<int> AddImage(const std::string& path) noexcept;
  Result<int> AddImageBytes(std::span<const uint8_t> bytes, std::string_view name) noexcept;
  // The prompt with its k-th media pad repeated as many times as the k-th
  // queued image has rows. kArg when pads and queued images differ in number.
  Result<std::vector<int>> ExpandImagePads(std::span<const int> ids) const noexcept;
  // The rows an image of this stored size takes (no decode; Model::ImageTokens).
  Result<int> ImageTokens(ImageDimensions size) const noexcept;
  int queued_images() const noexcept;
  void ClearImages() noexcept;          // ResetState() keeps the queue


 private:
  Engine(std::unique_ptr<Model> model, std::unique_ptr<Session> session) noexcept;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Session> session_;
};

}  // namespace waste
