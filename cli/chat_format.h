// MODEL/chat.json (FORMAT.md §9.3) and how a prompt becomes a list of
// segments, each tokenized on its own in its own mode (ENGINE.md §1.5):
// template structure in markup mode, user text in plain mode, never
// concatenated first (that would let user text forge control tokens).
#pragma once

#include <string>
#include <vector>

namespace waste::cli {

struct ChatFormat {
  bool present = false;  // chat.json existed and parsed
  std::string system_prefix, system_suffix;
  std::string user_prefix, user_suffix;
  std::string assistant_prefix, assistant_suffix;
  std::string open;

  // A template is in force when it can frame a user turn (R's rule).
  bool usable() const {
    return present && (!user_prefix.empty() || !assistant_prefix.empty() || !open.empty());
  }
};

struct Segment {
  std::string text;
  bool markup = false;
};

// Reads <model_dir>/chat.json. A missing file is `present = false` and no
// error; a file that is not a JSON object of strings / [prefix, suffix]
// pairs sets `error` (the caller warns and continues untemplated).
ChatFormat LoadChatFormat(const std::string& model_dir, std::string* error);
// Parses chat.json text (exposed for tests).
ChatFormat ParseChatFormat(const std::string& json_text, std::string* error);

// `run` with a template: [system turn] user turn, then the hand-over.
std::vector<Segment> TemplatedPrompt(const ChatFormat& f, const std::string& system,
                                     const std::string& prompt);
// `run --raw`, no template, `eval`, and untemplated chat lines: the user's
// own text in markup mode (it may carry control tokens on purpose).
std::vector<Segment> RawPrompt(const std::string& prompt);
// The system turn alone (chat prefills it once at start).
std::vector<Segment> SystemTurn(const ChatFormat& f, const std::string& system);
// One chat line: user turn then `open` (or the assistant prefix if empty).
std::vector<Segment> ChatTurn(const ChatFormat& f, const std::string& line);

}  // namespace waste::cli
