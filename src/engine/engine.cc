// Engine: one Model plus one Session (include/waste/engine.h); every call
// forwards.
#include "waste/engine.h"

#include <new>

namespace waste {

Engine::Engine(std::unique_ptr<Model> model, std::unique_ptr<Session> session) noexcept
    : model_(std::move(model)), session_(std::move(session)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Open(const std::string& container_dir,
                                             const Config& config) noexcept {
  auto model = Model::Open(container_dir, config);
  if (!model) return model.error();
  auto session = (*model)->NewSession();
  if (!session) return session.error();
  Engine* e = new (std::nothrow) Engine(std::move(*model), std::move(*session));
  if (e == nullptr) return OomError("allocation failed while opening the model");
  return std::unique_ptr<Engine>(e);
}

Model& Engine::model() noexcept { return *model_; }
const Model& Engine::model() const noexcept { return *model_; }
Session& Engine::session() noexcept { return *session_; }

const ModelInfo& Engine::info() const noexcept { return model_->info(); }
MemoryUsage Engine::memory_used() const noexcept { return model_->memory_used(); }
Stats Engine::stats() const noexcept { return session_->stats(); }
std::string Engine::backend_name() const noexcept { return model_->backend_name(); }
int Engine::threads() const noexcept { return model_->threads(); }
int Engine::position() const noexcept { return session_->position(); }
const std::string& Engine::error_detail() const noexcept { return session_->error_detail(); }
std::optional<ExpertFailureInfo> Engine::failed_expert() const noexcept {
  return session_->failed_expert();
}

Result<std::vector<int>> Engine::Tokenize(std::string_view text, bool markup,
                                          bool add_bos) const noexcept {
  return model_->Tokenize(text, markup, add_bos);
}
Result<std::vector<int>> Engine::TokenizeSegments(std::span<const PromptSegment> segments,
                                                  bool add_bos) const noexcept {
  return model_->TokenizeSegments(segments, add_bos);
}
Result<std::optional<ChatTemplate>> Engine::FindChatTemplate() const noexcept {
  return model_->FindChatTemplate();
}
Result<std::string> Engine::Detokenize(std::span<const int> ids) const noexcept {
  return model_->Detokenize(ids);
}
std::string Engine::TokenPiece(int id) const noexcept { return model_->TokenPiece(id); }

Result<std::span<const float>> Engine::Eval(std::span<const int> ids) noexcept {
  return session_->Eval(ids);
}

Result<std::vector<double>> Engine::Score(std::span<const int> ids, int next) noexcept {
  return session_->Score(ids, next);
}

Result<std::vector<TokenScore>> Engine::ScoreTop(std::span<const int> ids, int top,
                                                 int next) noexcept {
  return session_->ScoreTop(ids, top, next);
}

Result<FinishReason> Engine::Generate(std::span<const int> prompt, const GenParams& params,
                                      const TokenCallback& on_token) noexcept {
  return session_->Generate(prompt, params, on_token);
}

Status Engine::SaveState(const std::string& path) noexcept { return session_->SaveState(path); }
Status Engine::LoadState(const std::string& path, bool any_container) noexcept {
  return session_->LoadState(path, any_container);
}
void Engine::ResetState() noexcept { session_->Reset(); }
Result<SessionSnapshot> Engine::Snapshot() noexcept { return session_->Snapshot(); }
Status Engine::Restore(const SessionSnapshot& snapshot) noexcept {
  return session_->Restore(snapshot);
}
Status Engine::SetMark() noexcept { return session_->SetMark(); }
Status Engine::RewindToMark() noexcept { return session_->RewindToMark(); }

Status Engine::SaveUsage(const std::string& path) const noexcept {
  return model_->SaveUsage(path);
}

// --- Images: the model's queue (docs/VISION.md).
bool Engine::has_vision() const noexcept { return model_->has_vision(); }
int Engine::media_pad_id() const noexcept { return model_->media_pad_id(); }
Result<int> Engine::AddImage(const std::string& path) noexcept { return model_->AddImage(path); }
Result<int> Engine::AddImageBytes(std::span<const uint8_t> bytes, std::string_view name) noexcept {
  return model_->AddImageBytes(bytes, name);
}
Result<int> Engine::ImageTokens(ImageDimensions size) const noexcept {
  return model_->ImageTokens(size);
}
Result<std::vector<int>> Engine::ExpandImagePads(std::span<const int> ids) const noexcept {
  return model_->ExpandImagePads(ids);
}
int Engine::queued_images() const noexcept { return model_->queued_images(); }
void Engine::ClearImages() noexcept { model_->ClearImages(); }

}  // namespace waste
