#include "prompt_plan.h"

namespace waste {
namespace {

void Add(std::vector<PromptSegment>* segments, SegmentMode mode, std::string_view text) {
  if (!text.empty()) segments->push_back({mode, std::string(text)});
}

void AddMedia(std::vector<PromptSegment>* segments, std::span<const std::string> media_blocks) {
  for (const std::string& block : media_blocks) Add(segments, SegmentMode::kMarkup, block);
}

bool Templated(const ChatTemplate* tmpl) { return tmpl != nullptr && tmpl->usable(); }

}  // namespace

PromptPlan BuildRunPrompt(const ChatTemplate* tmpl, bool raw, std::string_view system,
                          std::span<const std::string> media_blocks, std::string_view prompt) {
  PromptPlan plan;
  if (raw || !Templated(tmpl)) {
    AddMedia(&plan.segments, media_blocks);
    Add(&plan.segments, SegmentMode::kMarkup, prompt);
    plan.echo_prompt = true;
    return plan;
  }
  plan.segments = BuildChatSystemTurn(tmpl, system);
  Add(&plan.segments, SegmentMode::kMarkup, tmpl->user_prefix);
  AddMedia(&plan.segments, media_blocks);
  Add(&plan.segments, SegmentMode::kPlain, prompt);
  Add(&plan.segments, SegmentMode::kMarkup, tmpl->user_suffix);
  Add(&plan.segments, SegmentMode::kMarkup, tmpl->open);
  plan.default_stops = tmpl->ReplyStops();
  return plan;
}

std::vector<PromptSegment> BuildChatSystemTurn(const ChatTemplate* tmpl, std::string_view system) {
  std::vector<PromptSegment> segments;
  if (!Templated(tmpl)) return segments;
  Add(&segments, SegmentMode::kMarkup, tmpl->begin);
  if (system.empty()) return segments;
  Add(&segments, SegmentMode::kMarkup, tmpl->system_prefix);
  Add(&segments, SegmentMode::kPlain, system);
  Add(&segments, SegmentMode::kMarkup, tmpl->system_suffix);
  return segments;
}

PromptPlan BuildChatTurn(const ChatTemplate* tmpl, std::span<const std::string> media_blocks,
                         std::string_view line) {
  PromptPlan plan;
  if (!Templated(tmpl)) {
    AddMedia(&plan.segments, media_blocks);
    Add(&plan.segments, SegmentMode::kMarkup, line);
    plan.echo_prompt = true;
    return plan;
  }
  Add(&plan.segments, SegmentMode::kMarkup, tmpl->user_prefix);
  AddMedia(&plan.segments, media_blocks);
  Add(&plan.segments, SegmentMode::kPlain, line);
  Add(&plan.segments, SegmentMode::kMarkup, tmpl->user_suffix);
  Add(&plan.segments, SegmentMode::kMarkup,
      tmpl->open.empty() ? tmpl->assistant_prefix : tmpl->open);
  plan.default_stops = tmpl->ReplyStops();
  return plan;
}

std::vector<PromptSegment> BuildEvalPrompt(std::string_view prompt) {
  std::vector<PromptSegment> segments;
  Add(&segments, SegmentMode::kMarkup, prompt);
  return segments;
}

}  // namespace waste
