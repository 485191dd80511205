// tokenize: text -> ids in markup mode (specials recognised; --plain turns
// that off). detokenize: ids -> raw bytes. Both read their input by the
// prompt rules of ENGINE.md §1.4 before opening the model.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_setup.h"
#include "prompt.h"
#include "report.h"
#include "waste/waste.h"

namespace waste::cli {

int TokenizeCommand(const Options& o) {
  // MODEL first: `waste run "some words"` names no container, and that,
  // not a missing prompt, is what to say.
  if (!CheckContainerPath(o)) return 1;
  PromptText p;
  if (o.has_argument() && o.argument().empty()) {
    p.ok = true;  // `tokenize MODEL ""`: no text, no ids
  } else {
    p = ReadPrompt(o, "nothing to read");
    if (!p.ok) return UsageFailure(o, p.error);
  }

  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  Result<std::vector<int>> ids =
      p.text.empty() && engine->info().has_tokenizer ? Result<std::vector<int>>(std::vector<int>())
                                                     : engine->Tokenize(p.text, /*markup=*/!o.plain, /*add_bos=*/false);
  if (!ids.has_value()) {
    ReportFailure("tokenize", ids.error(), DetailOf(ids.error(), *engine), o);
    return 1;
  }
  if (o.json) {
    Json j;
    j["n"] = ids->size();
    j["ids"] = *ids;
    std::printf("%s\n", DumpJson(j).c_str());
    return 0;
  }
  std::string line;
  for (size_t i = 0; i < ids->size(); ++i) {
    if (i > 0) line += ' ';
    line += std::to_string((*ids)[i]);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

int DetokenizeCommand(const Options& o) {
  // MODEL first: `waste run "some words"` names no container, and that,
  // not a missing prompt, is what to say.
  if (!CheckContainerPath(o)) return 1;
  std::vector<int> ids = o.ids;
  if (!o.ids_given) {
    PromptText p = ReadPrompt(o, "nothing to read");
    if (!p.ok) return UsageFailure(o, p.error);
    std::string bad;
    std::optional<std::vector<int>> parsed = ParseIdList(p.text, &bad);
    if (!parsed) return UsageFailure(o, "invalid token id: " + bad);
    ids = std::move(*parsed);
  }
  if (ids.empty()) return UsageFailure(o, "nothing to read");

  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  const int vocab = engine->info().vocab;
  for (int id : ids) {
    if (vocab > 0 && id >= vocab) return UsageFailure(o, "invalid token id: " + std::to_string(id));
  }
  Result<std::string> text = engine->Detokenize(ids);
  if (!text.has_value()) {
    ReportFailure("detokenize", text.error(), DetailOf(text.error(), *engine), o);
    return 1;
  }
  if (o.json) {
    Json j;
    j["n"] = ids.size();
    j["text"] = *text;
    std::printf("%s\n", DumpJson(j).c_str());
    return 0;
  }
  WriteOut(*text);
  WriteOut("\n");
  return 0;
}

}  // namespace waste::cli
