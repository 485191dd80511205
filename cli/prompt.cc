#include "prompt.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include "host.h"

namespace waste::cli {

bool ReadFileText(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

bool ReadStdinText(std::string* out) {
  out->clear();
  char buf[65536];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, stdin)) > 0) out->append(buf, got);
  return std::ferror(stdin) == 0;
}

void StripTrailingNewlines(std::string* text) {
  while (!text->empty() && (text->back() == '\n' || text->back() == '\r')) text->pop_back();
}

PromptText ReadPrompt(const Options& options, const std::string& empty_error) {
  PromptText p;
  bool from_stream = true;
  if (options.file_given) {
    bool ok = options.file == "-" ? ReadStdinText(&p.text) : ReadFileText(options.file, &p.text);
    if (!ok) {
      p.error = "cannot read " + options.file;
      return p;
    }
  } else if (options.has_argument() && options.argument() != "-") {
    p.text = options.argument();
    from_stream = false;
  } else if (options.has_argument() || !StdinIsTerminal()) {
    if (!ReadStdinText(&p.text)) {
      p.error = "cannot read stdin";
      return p;
    }
  }
  if (from_stream) StripTrailingNewlines(&p.text);
  if (p.text.empty()) {
    p.error = empty_error;
    return p;
  }
  p.ok = true;
  return p;
}

}  // namespace waste::cli
