#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace waste::test {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

bool SetNonBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

}  // namespace

std::unique_ptr<Subprocess> Subprocess::Spawn(const std::vector<std::string>& argv,
                                              const std::vector<std::string>& env) {
  // Writing to a child that has exited must fail with EPIPE, not kill us.
  ::signal(SIGPIPE, SIG_IGN);
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return nullptr;
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    return nullptr;
  }
  if (::pipe2(err, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
    return nullptr;
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, none;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  // Environment: ours, with `env` replacing or adding entries.
  std::vector<std::string> envs;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& x : env) replaced = replaced || x.substr(0, x.find('=')) == name;
    if (!replaced) envs.push_back(entry);
  }
  for (const std::string& x : env) envs.push_back(x);
  std::vector<char*> envp;
  for (std::string& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (std::string& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);

  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argp[0], &actions, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]), ::close(out[1]), ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]), ::close(out[0]), ::close(err[0]);
    return nullptr;
  }
  std::unique_ptr<Subprocess> p(new Subprocess());
  p->pid_ = pid;
  p->in_ = in[1];
  p->out_ = out[0];
  p->err_ = err[0];
  p->result_.started = true;
  SetNonBlocking(p->in_);
  SetNonBlocking(p->out_);
  SetNonBlocking(p->err_);
  return p;
}

Subprocess::~Subprocess() {
  CloseFd(&in_);
  if (!reaped_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    Reap(/*block=*/true);
  }
  CloseFd(&out_);
  CloseFd(&err_);
}

void Subprocess::Pump(int wait_ms) {
  pollfd fds[2];
  int n = 0;
  if (out_ >= 0) fds[n++] = {out_, POLLIN, 0};
  if (err_ >= 0) fds[n++] = {err_, POLLIN, 0};
  if (n == 0) {
    if (wait_ms > 0) ::usleep(static_cast<useconds_t>(wait_ms) * 1000);
    return;
  }
  if (::poll(fds, static_cast<nfds_t>(n), wait_ms) <= 0) return;
  for (int i = 0; i < n; ++i) {
    if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    int* fd = fds[i].fd == out_ ? &out_ : &err_;
    std::string* sink = fds[i].fd == out_ ? &result_.out : &result_.err;
    char buf[65536];
    for (;;) {
      const ssize_t got = ::read(*fd, buf, sizeof buf);
      if (got > 0) {
        sink->append(buf, static_cast<size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) CloseFd(fd);  // EOF or error
      break;
    }
  }
}

void Subprocess::Reap(bool block) {
  if (reaped_ || pid_ <= 0) return;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r != pid_) return;
  reaped_ = true;
  if (WIFEXITED(status)) result_.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result_.term_signal = WTERMSIG(status);
}

bool Subprocess::Write(std::string_view bytes) {
  const Clock::time_point t0 = Clock::now();
  while (!bytes.empty()) {
    if (in_ < 0) return false;
    const ssize_t put = ::write(in_, bytes.data(), bytes.size());
    if (put > 0) {
      bytes.remove_prefix(static_cast<size_t>(put));
      continue;
    }
    if (put < 0 && errno == EINTR) continue;
    if (put < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // The child is not reading yet: keep its output flowing meanwhile.
      Pump(10);
      if (SecondsSince(t0) > 120) return false;
      continue;
    }
    return false;  // EPIPE: it has gone
  }
  return true;
}

void Subprocess::CloseStdin() { CloseFd(&in_); }

void Subprocess::Signal(int sig) {
  if (!reaped_ && pid_ > 0) ::kill(pid_, sig);
}

bool Subprocess::ReadUntil(const std::function<bool(const std::string&)>& done, double timeout_s) {
  const Clock::time_point t0 = Clock::now();
  for (;;) {
    if (done(result_.out)) return true;
    if (out_ < 0 || SecondsSince(t0) > timeout_s) return false;
    Pump(20);
  }
}

bool Subprocess::Wait(double timeout_s) {
  const Clock::time_point t0 = Clock::now();
  for (;;) {
    Pump(20);
    if (out_ < 0 && err_ < 0) Reap(/*block=*/false);
    if (reaped_ && out_ < 0 && err_ < 0) return true;
    if (SecondsSince(t0) > timeout_s) {
      result_.timed_out = true;
      ::kill(pid_, SIGKILL);
      Reap(/*block=*/true);
      Pump(0);
      return false;
    }
  }
}

ProcessResult RunProcess(const std::vector<std::string>& argv, std::string_view input,
                         double timeout_s, const std::vector<std::string>& env) {
  std::unique_ptr<Subprocess> p = Subprocess::Spawn(argv, env);
  if (!p) return ProcessResult();
  p->Write(input);
  p->CloseStdin();
  p->Wait(timeout_s);
  return p->result();
}

std::string Describe(const ProcessResult& r) {
  std::string s = "exit " + std::to_string(r.exit_code) + " signal " + std::to_string(r.term_signal);
  if (r.timed_out) s += " TIMED OUT";
  return s + "\n--- stdout ---\n" + r.out + "\n--- stderr ---\n" + r.err;
}

}  // namespace waste::test
