#include "line_reader.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "host.h"

#ifdef WASTE_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace waste::cli {
namespace {

void WritePrompt(const char* prompt) {
  std::fputs(prompt, stdout);
  std::fflush(stdout);
}

}  // namespace

bool ContinuesOnNextLine(std::string* line) {
  if (line->empty() || line->back() != '\\') return false;
  line->pop_back();
  return true;
}

LineReader::LineReader() {
#ifdef WASTE_HAVE_LIBEDIT
  editing_ = StdinIsTerminal() && StreamIsTerminal(1);
  if (editing_) {
    if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
      history_path_ = std::string(home) + "/.waste_history";
      read_history(history_path_.c_str());  // absent on first use: fine
    }
  }
#endif
}

LineReader::~LineReader() {
#ifdef WASTE_HAVE_LIBEDIT
  if (editing_ && !history_path_.empty()) history_truncate_file(history_path_.c_str(), 1000);
#endif
}

std::optional<std::string> LineReader::ReadPhysical(const char* prompt) {
#ifdef WASTE_HAVE_LIBEDIT
  if (editing_) {
    char* raw = readline(prompt);
    if (raw == nullptr) return std::nullopt;
    std::string line(raw);
    std::free(raw);
    return line;
  }
#endif
  WritePrompt(prompt);
  std::string line;
  if (!std::getline(std::cin, line)) return std::nullopt;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

std::optional<std::string> LineReader::Read() {
  std::optional<std::string> first = ReadPhysical("> ");
  if (!first) return std::nullopt;
  std::string text;
  if (*first == "\"\"\"") {
    // A block: everything up to the closing """ line.
    for (;;) {
      std::optional<std::string> more = ReadPhysical("... ");
      if (!more || *more == "\"\"\"") break;
      text += (text.empty() ? "" : "\n") + *more;
    }
  } else {
    std::string part = *first;
    bool more = ContinuesOnNextLine(&part);
    text = part;
    while (more) {
      std::optional<std::string> next = ReadPhysical("... ");
      if (!next) break;
      part = *next;
      more = ContinuesOnNextLine(&part);
      text += "\n" + part;
    }
  }
#ifdef WASTE_HAVE_LIBEDIT
  if (editing_ && !text.empty()) {
    add_history(text.c_str());
    // Saved now: Ctrl-C at the prompt leaves with _Exit (no destructors).
    if (!history_path_.empty()) write_history(history_path_.c_str());
  }
#endif
  return text;
}

}  // namespace waste::cli
