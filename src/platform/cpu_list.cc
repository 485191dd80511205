// cpu list grammar of ENGINE.md §6.3: "N" or "A-B" items joined by commas,
// blanks allowed around every number and separator, CPUs 0..1023.
#include "platform/cpu_list.h"

#include <algorithm>
#include <string>

namespace waste::platform {
namespace {

// One past the largest CPU id a list may name; the reference's limit, which
// also bounds the size of an affinity mask built from the list.
constexpr int kMaxCpus = 1024;

class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}

  void SkipBlanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void Advance() { ++pos_; }

  // Decimal digits into `out`; false when none, or when the value leaves
  // the 0..1023 range (checked as digits arrive, so no overflow is possible).
  enum class Num { kOk, kMissing, kTooBig };
  Num Number(int* out) {
    size_t start = pos_;
    long value = 0;
    bool too_big = false;
    while (!AtEnd() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (!too_big) {
        value = value * 10 + (text_[pos_] - '0');
        if (value >= kMaxCpus) too_big = true;
      }
      ++pos_;
    }
    if (pos_ == start) return Num::kMissing;
    if (too_big) return Num::kTooBig;
    *out = static_cast<int>(value);
    return Num::kOk;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

Status Refuse(std::string_view text, const char* why) {
  return ArgError("not a cpu list: \"" + std::string(text) + "\": " + why);
}

}  // namespace

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  Scanner s(text);
  std::vector<int> cpus;
  s.SkipBlanks();
  if (s.AtEnd()) return Refuse(text, "empty");
  for (;;) {
    s.SkipBlanks();
    int first = 0;
    switch (s.Number(&first)) {
      case Scanner::Num::kOk:
        break;
      case Scanner::Num::kTooBig:
        return Refuse(text, "CPU ids must be below 1024");
      case Scanner::Num::kMissing:
        return Refuse(text, "expected a CPU number");
    }
    int last = first;
    s.SkipBlanks();
    if (s.Peek() == '-') {
      s.Advance();
      s.SkipBlanks();
      switch (s.Number(&last)) {
        case Scanner::Num::kOk:
          break;
        case Scanner::Num::kTooBig:
          return Refuse(text, "CPU ids must be below 1024");
        case Scanner::Num::kMissing:
          return Refuse(text, "range has no end");
      }
      if (last < first) return Refuse(text, "range runs backwards");
      s.SkipBlanks();
    }
    for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    if (s.AtEnd()) break;
    if (s.Peek() != ',') return Refuse(text, "expected ',' between items");
    s.Advance();
    s.SkipBlanks();
    if (s.AtEnd()) return Refuse(text, "trailing comma");
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

}  // namespace waste::platform
