// A child process with pipes on stdin, stdout and stderr (posix_spawn), for
// tests that drive the built `waste` binary as a user would: write lines,
// read what it prints, send it signals, collect its exit status. Reads never
// block the test forever: every wait has a deadline, and a child still
// running when its Subprocess is destroyed is killed.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace waste::test {

struct ProcessResult {
  bool started = false;
  bool timed_out = false;
  int exit_code = -1;   // when it exited normally
  int term_signal = 0;  // when a signal ended it
  std::string out;      // stdout
  std::string err;      // stderr
};

class Subprocess {
 public:
  // argv[0] is the program path. `env` entries ("NAME=value") are added to
  // (or replace those in) the test's own environment. SIGINT and SIGPIPE
  // start at their defaults in the child. nullptr when spawning failed.
  static std::unique_ptr<Subprocess> Spawn(const std::vector<std::string>& argv,
                                           const std::vector<std::string>& env = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Writes all of `bytes` to the child's stdin (false if it went away).
  bool Write(std::string_view bytes);
  void CloseStdin();
  void Signal(int sig);

  // Collects output until `done(stdout so far)` is true (true) or the
  // deadline passes or stdout reaches EOF first (false).
  bool ReadUntil(const std::function<bool(const std::string&)>& done, double timeout_s);
  // Collects output until the child exits and both pipes are at EOF; false
  // on timeout (the child is then killed).
  bool Wait(double timeout_s);

  pid_t pid() const { return pid_; }
  bool exited() const { return reaped_; }
  const ProcessResult& result() const { return result_; }

 private:
  Subprocess() = default;
  // One round of poll + read on stdout/stderr, at most `wait_ms`.
  void Pump(int wait_ms);
  void Reap(bool block);

  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  bool reaped_ = false;
  ProcessResult result_;
};

// Spawn, write `input` to stdin, close it, wait for the exit.
ProcessResult RunProcess(const std::vector<std::string>& argv, std::string_view input = {},
                         double timeout_s = 120, const std::vector<std::string>& env = {});

// Exit status, signal and both streams, for a failed assertion's message.
std::string Describe(const ProcessResult& r);

inline bool Contains(std::string_view s, std::string_view what) {
  return s.find(what) != std::string_view::npos;
}

}  // namespace waste::test
