// tokenize: text -> ids in markup mode (specials recognised; --plain turns
// that off). detokenize: ids -> raw bytes. Both read their input by the
// prompt rules of ENGINE.md §1.4, then open the container's tokenizer only
// (waste/tokenizer.h: manifest and tokenizer files, not the weights).
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_setup.h"
#include "prompt.h"
#include "report.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

// The container's tokenizer; on failure says why (a container without one:
// "tokenize: DIR has no tokenizer (...)") and returns null.
std::unique_ptr<ContainerTokenizer> OpenTokenizer(const Options& o, const std::string& what) {
  Result<std::unique_ptr<ContainerTokenizer>> t = ContainerTokenizer::Open(o.model());
  if (!t.has_value()) {
    ReportFailure(what, t.error(), t.error().message(), o);
    return nullptr;
  }
  return std::move(t).value();
}

}  // namespace

int TokenizeCommand(const Options& o) {
  // MODEL first: `waste run "some words"` names no container, and that,
  // not a missing prompt, is what to say.
  if (!CheckContainerPath(o)) return 1;
  PromptText p;
  if (o.has_argument() && o.argument().empty()) {
    p.ok = true;  // `tokenize MODEL ""`: no text, no ids
  } else {
    p = ReadPrompt(o, "nothing to read");
    // An empty file or stdin is an empty text, as "" is: no ids. Only no
    // source at all (a terminal, no argument) is a usage error.
    if (!p.ok && p.read_empty) p.ok = true;
    if (!p.ok) return UsageFailure(o, p.error);
  }

  std::unique_ptr<ContainerTokenizer> tokenizer = OpenTokenizer(o, "tokenize");
  if (!tokenizer) return 1;
  Result<std::vector<int>> ids = tokenizer->Tokenize(p.text, /*markup=*/!o.plain, /*add_bos=*/false);
  if (!ids.has_value()) {
    ReportFailure("tokenize", ids.error(), ids.error().message(), o);
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
  if (!ids->empty()) std::printf("%s\n", line.c_str());  // no ids, no line (docs/CLI.md)
  return 0;
}

int DetokenizeCommand(const Options& o) {
  // MODEL first: `waste run "some words"` names no container, and that,
  // not a missing prompt, is what to say.
  if (!CheckContainerPath(o)) return 1;
  std::vector<int> ids = o.ids;
  bool read_empty = false;  // an empty file or stdin: no ids, an empty text (tokenize's [] back)
  if (!o.ids_given) {
    PromptText p = ReadPrompt(o, "nothing to read");
    read_empty = !p.ok && p.read_empty;
    if (!p.ok && !read_empty) return UsageFailure(o, p.error);
    std::string bad;
    std::optional<std::vector<int>> parsed = ParseIdList(p.text, &bad);
    if (!parsed) return UsageFailure(o, "invalid token id: " + bad);
    ids = std::move(*parsed);
  }
  if (ids.empty() && !read_empty) return UsageFailure(o, "nothing to read");

  std::unique_ptr<ContainerTokenizer> tokenizer = OpenTokenizer(o, "detokenize");
  if (!tokenizer) return 1;
  const int vocab = tokenizer->vocab_size();
  for (int id : ids) {
    if (id >= vocab) {
      return UsageFailure(o, "invalid token id: " + std::to_string(id) + " (this model's ids are 0.." +
                                 std::to_string(vocab - 1) + ")");
    }
  }
  Result<std::string> text = tokenizer->Detokenize(ids);
  if (!text.has_value()) {
    ReportFailure("detokenize", text.error(), text.error().message(), o);
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
