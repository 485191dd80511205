// Reading chat's input: on a terminal through Debian's libedit (line
// editing, Up/Down history kept in ~/.waste_history) when the build found
// it; otherwise (a pipe, a file, or no libedit) plain line reading with the
// prompt written to stdout. Either way a line ending in '\' continues on
// the next one, and a line that is just """ opens a block that runs to the
// next """ line (pasting several lines); the parts are joined by newlines.
#pragma once

#include <optional>
#include <string>

namespace waste::cli {

class LineReader {
 public:
  LineReader();
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // One logical line without its newline; nullopt at end of input (Ctrl-D).
  std::optional<std::string> Read();
  // Whether line editing is in use.
  bool editing() const { return editing_; }

 private:
  std::optional<std::string> ReadPhysical(const char* prompt);

  bool editing_ = false;
  std::string history_path_;
};

// The parts of the multi-line grammar, for tests: true when `line` asks for
// another line ('\' at the end), and strips that backslash.
bool ContinuesOnNextLine(std::string* line);

}  // namespace waste::cli
