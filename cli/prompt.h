// Where a prompt comes from (ENGINE.md §1.4): --file F (or --file - for
// stdin) beats the second positional, which beats stdin; stdin is read when
// the positional is "-" or when none was given and stdin is not a terminal.
// Text from a file or stdin loses its trailing CR/LF; an argument is used
// verbatim. Read before the model is opened, so these errors are cheap.
#pragma once

#include <string>

#include "options.h"

namespace waste::cli {

struct PromptText {
  bool ok = false;
  std::string text;
  std::string error;  // usage error (exit 2) when !ok
  // !ok because a file or stdin was read and held nothing (as opposed to
  // no source at all: no argument, no --file, stdin a terminal).
  bool read_empty = false;
};

// `empty_error` is the command's message for "nothing there".
PromptText ReadPrompt(const Options& options, const std::string& empty_error);

// Reads a whole regular file (waste/files.h: no directory, FIFO or device,
// at most kMaxPromptFileBytes); false with `error` set when it cannot.
// `what` names the file in the message ("prompt file PATH: ...").
bool ReadFileText(const std::string& path, std::string* out, std::string* error,
                  const std::string& what = "prompt file");
// Stdin to EOF, at most kMaxPromptFileBytes; false with `error` set.
bool ReadStdinText(std::string* out, std::string* error);
void StripTrailingNewlines(std::string* text);

}  // namespace waste::cli
