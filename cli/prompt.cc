#include "prompt.h"

#include <cstdio>
#include <string>
#include <utility>

#include "waste/files.h"

#include "host.h"

namespace waste::cli {

bool ReadFileText(const std::string& path, std::string* out, std::string* error,
                  const std::string& what) {
  Result<std::string> text = ReadRegularFile(path, kMaxPromptFileBytes, what);
  if (!text) {
    *error = text.error().message();
    return false;
  }
  *out = std::move(*text);
  return true;
}

bool ReadStdinText(std::string* out, std::string* error) {
  out->clear();
  char buf[65536];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, stdin)) > 0) {
    out->append(buf, got);
    if (out->size() > kMaxPromptFileBytes) {
      *error = "stdin: more than the " + std::to_string(kMaxPromptFileBytes) +
               " bytes a prompt may hold";
      return false;
    }
  }
  if (std::ferror(stdin) != 0) {
    *error = "cannot read stdin";
    return false;
  }
  return true;
}

void StripTrailingNewlines(std::string* text) {
  while (!text->empty() && (text->back() == '\n' || text->back() == '\r')) text->pop_back();
}

PromptText ReadPrompt(const Options& options, const std::string& empty_error) {
  PromptText p;
  bool from_stream = true;  // a file or stdin (false: an argument, or nothing)
  if (options.file_given) {
    std::string why;
    bool ok = options.file == "-" ? ReadStdinText(&p.text, &why)
                                  : ReadFileText(options.file, &p.text, &why);
    if (!ok) {
      p.error = "cannot read " + why;
      return p;
    }
  } else if (options.has_argument() && options.argument() != "-") {
    p.text = options.argument();
    from_stream = false;
  } else if (options.has_argument() || !StdinIsTerminal()) {
    if (!ReadStdinText(&p.text, &p.error)) return p;
  } else {
    from_stream = false;  // no source at all
  }
  if (from_stream) StripTrailingNewlines(&p.text);
  if (p.text.empty()) {
    p.error = empty_error;
    p.read_empty = from_stream;
    return p;
  }
  p.ok = true;
  return p;
}

}  // namespace waste::cli
