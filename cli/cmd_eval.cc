// eval: the next-token distribution after the prompt, no sampling
// (ENGINE.md §1.6). Rows are the most likely ids, probabilities a softmax
// over the whole vocabulary at temperature 1. --logits-out writes every
// logit as raw little-endian f32.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "commands.h"
#include "prompt_plan.h"
#include "engine_setup.h"
#include "images.h"
#include "prompt.h"
#include "report.h"
#include "waste/chat.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

constexpr int kDefaultRows = 10;

// Rounded so the JSON shows 4 / 6 decimals (§1.7): the shortest text of
// the rounded double is the rounded decimal.
double Round(double v, double scale) { return std::round(v * scale) / scale; }

bool WriteLogits(const std::string& path, std::span<const float> logits) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  bool ok = true;
  for (float v : logits) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if constexpr (std::endian::native == std::endian::big) {
      bits = (bits >> 24) | ((bits >> 8) & 0xff00u) | ((bits << 8) & 0xff0000u) | (bits << 24);
    }
    ok = ok && std::fwrite(&bits, sizeof bits, 1, f) == 1;
  }
  return std::fclose(f) == 0 && ok;
}

}  // namespace

int EvalCommand(const Options& o) {
  // MODEL first: `waste run "some words"` names no container, and that,
  // not a missing prompt, is what to say.
  if (!CheckContainerPath(o)) return 1;
  std::string prompt;
  if (o.ids_given) {
    if (o.ids.empty()) return UsageFailure(o, "no prompt");
  } else {
    PromptText p = ReadPrompt(o, "no prompt");
    if (!p.ok) return UsageFailure(o, p.error);
    prompt = std::move(p.text);
  }

  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  std::vector<HeldImage> images;  // each --image file read once
  if (!HoldImages(*engine, o.images, &images) || !AttachHeldImages(*engine, images, !o.quiet)) {
    return 1;
  }

  // Always the untemplated markup form; --system and --stop do not apply.
  std::vector<int> ids = o.ids;
  if (!o.ids_given) {
    // Images: their media blocks (markup) before the prompt text.
    std::vector<PromptSegment> segments;
    for (std::string& b : MediaBlocksFor(images)) segments.push_back({SegmentMode::kMarkup, b});
    for (PromptSegment& s : BuildEvalPrompt(prompt)) segments.push_back(std::move(s));
    if (!TokenizeSegments(*engine, segments, o, &ids)) return 1;
  }
  if (!ExpandImagePads(*engine, &ids, "eval")) return 1;

  Result<std::span<const float>> evaluated = engine->Eval(ids);
  if (!evaluated.has_value()) {
    ReportFailure("eval", evaluated.error(), DetailOf(evaluated.error(), *engine), o);
    return 1;
  }
  std::span<const float> logits = *evaluated;
  if (!o.logits_out.empty() && !WriteLogits(o.logits_out, logits)) {
    std::fprintf(stderr, "cannot write %s\n", o.logits_out.c_str());
    return 1;
  }

  const size_t vocab = logits.size();
  double max_logit = -INFINITY;
  for (float v : logits) max_logit = std::max(max_logit, double(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - max_logit);

  size_t rows = o.top_k_given && o.top_k > 0 ? size_t(o.top_k) : size_t(kDefaultRows);
  rows = std::min(rows, vocab);
  auto logit = [&](int id) { return logits[static_cast<size_t>(id)]; };
  std::vector<int> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(rows), order.end(),
                    [&](int a, int b) {
                      // NaN sorts last, so the order stays a strict weak one.
                      float la = std::isnan(logit(a)) ? -INFINITY : logit(a);
                      float lb = std::isnan(logit(b)) ? -INFINITY : logit(b);
                      if (la != lb) return la > lb;
                      return a < b;
                    });
  auto prob = [&](int id) { return std::exp(double(logit(id)) - max_logit) / sum; };

  if (o.json) {
    Json top = Json::array();
    for (size_t i = 0; i < rows; ++i) {
      int id = order[i];
      Json row;
      row["id"] = id;
      row["logit"] = Round(logit(id), 1e4);
      row["prob"] = Round(prob(id), 1e6);
      row["piece"] = DisplayPiece(engine->TokenPiece(id));  // as the text rows show it
      top.push_back(std::move(row));
    }
    Json j;
    j["prompt_tokens"] = ids.size();
    j["vocab"] = vocab;
    j["top"] = std::move(top);
    std::printf("%s\n", DumpJson(j).c_str());
    return 0;
  }
  for (size_t i = 0; i < rows; ++i) {
    int id = order[i];
    std::printf("%s\n", EvalRow(id, logit(id), prob(id), engine->TokenPiece(id)).c_str());
  }
  return 0;
}

}  // namespace waste::cli
