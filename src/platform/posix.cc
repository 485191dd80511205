// The parts of the platform shim that Linux and macOS share: descriptors,
// positional reads, whole-file reads, atomic writes, aligned memory.
// OpenBypass and the machine facts differ and live in linux.cc / macos.cc.
#include <dirent.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "platform/platform.h"

namespace waste::platform {
namespace {

// Largest single pread: Linux caps one call near 2 GiB anyway, and a
// multiple of the bypass alignment keeps every later piece aligned.
constexpr size_t kMaxReadChunk = size_t{1} << 30;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  return IoError(what + " " + path + ": " + ErrnoText(err));
}

bool Aligned(uint64_t v) { return v % kBypassAlignment == 0; }

}  // namespace

File::~File() {
  if (handle_ >= 0) ::close(static_cast<int>(handle_));
}

File::File(File&& other) noexcept
    : handle_(other.handle_),
      bypass_(other.bypass_),
      size_(other.size_),
      path_(std::move(other.path_)) {
  other.handle_ = -1;
}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (handle_ >= 0) ::close(static_cast<int>(handle_));
    handle_ = other.handle_;
    bypass_ = other.bypass_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.handle_ = -1;
  }
  return *this;
}

Result<File> File::Open(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("stat", path, err);
  }
  File f;
  f.handle_ = fd;
  f.bypass_ = false;
  f.size_ = static_cast<uint64_t>(st.st_size);
  f.path_ = path;
  return f;
}

Result<size_t> File::TryReadAt(uint64_t offset, void* dst, size_t n) const {
  if (handle_ < 0) return ArgError("read from a file that is not open");
  // Checked here, before the OS sees it: O_DIRECT answers a misaligned
  // request with EINVAL on some filesystems and silently on others.
  if (bypass_ && (!Aligned(offset) || !Aligned(n) || !Aligned(reinterpret_cast<uintptr_t>(dst)))) {
    return ArgError("unaligned read on a cache-bypass file " + path_ + ": offset " +
                    std::to_string(offset) + ", " + std::to_string(n) +
                    " bytes (buffer, offset and length must be multiples of 4096)");
  }
  auto* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    size_t want = n - done < kMaxReadChunk ? n - done : kMaxReadChunk;
    ssize_t got =
        ::pread(static_cast<int>(handle_), out + done, want, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return IoError("read " + path_ + " at offset " + std::to_string(offset + done) + ": " +
                     ErrnoText(errno));
    }
    if (got == 0) break;  // end of file
    done += static_cast<size_t>(got);
    // A bypass read that stops off a 4 KiB boundary hit the end of the
    // file; asking again from there would be refused as unaligned.
    if (bypass_ && !Aligned(static_cast<uint64_t>(got))) break;
  }
  return done;
}

Status File::ReadAt(uint64_t offset, void* dst, size_t n) const {
  Result<size_t> got = TryReadAt(offset, dst, n);
  if (!got) return got.error();
  if (*got != n) {
    return IoError("short read: " + path_ + " at offset " + std::to_string(offset) + ": got " +
                   std::to_string(*got) + " of " + std::to_string(n) + " bytes");
  }
  return Status::Ok();
}

Result<uint64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
  return static_cast<uint64_t>(st.st_size);
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

Result<std::string> ReadWholeFile(const std::string& path) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  // Read to EOF rather than trusting st_size: /proc and /sys files report 0
  // or a page size.
  std::string data;
  char buf[16384];
  for (;;) {
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return ErrnoStatus("read", path, err);
    }
    if (got == 0) break;
    data.append(buf, static_cast<size_t>(got));
  }
  ::close(fd);
  return data;
}

Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                    std::string_view what, bool* missing) {
  if (missing != nullptr) *missing = false;
  const std::string name = std::string(what) + " " + path;
  int fd;
  do {
    // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    if (missing != nullptr) *missing = (err == ENOENT || err == ENOTDIR);
    return IoError(name + ": " + ErrnoText(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return IoError(name + ": " + ErrnoText(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a special file";
    // "NAME: a directory, ...": reads on after "cannot read NAME".
    return IoError(name + ": " + kind + ", not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return IoError(name + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                   std::to_string(max_bytes) + " this kind of file may hold");
  }
  // Regular file: blocking reads from here on are fine.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::string data;
  data.reserve(static_cast<size_t>(st.st_size));
  char buf[16384];
  for (;;) {
    // Never more than max_bytes + 1: one byte past the limit proves the
    // file grew beyond it.
    uint64_t room = max_bytes + 1 - data.size();
    size_t want = room < sizeof buf ? static_cast<size_t>(room) : sizeof buf;
    ssize_t got = ::read(fd, buf, want);
    if (got < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return IoError(name + ": read: " + ErrnoText(err));
    }
    if (got == 0) break;
    data.append(buf, static_cast<size_t>(got));
    if (data.size() > max_bytes) {
      ::close(fd);
      return IoError(name + ": grew past the " + std::to_string(max_bytes) +
                     " bytes this kind of file may hold while it was read");
    }
  }
  ::close(fd);
  return data;
}

namespace {

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Removes <base>.tmp.<pid>.<seq> files in `dir` whose writer is gone (a
// killed --learn or /save). A pid that still runs, or any name that does
// not parse, is left alone.
void RemoveStaleTemps(const std::string& dir, const std::string& base) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  const std::string prefix = base + ".tmp.";
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n(e->d_name);
    if (!n.starts_with(prefix)) continue;
    std::string_view rest = n.substr(prefix.size());
    size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string_view::npos || dot > 9) continue;
    long pid = 0;
    bool digits = true;
    for (char ch : rest.substr(0, dot)) {
      if (ch < '0' || ch > '9') digits = false;
      pid = pid * 10 + (ch - '0');
    }
    for (char ch : rest.substr(dot + 1)) {
      if (ch < '0' || ch > '9') digits = false;
    }
    if (!digits || pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    ::unlink((dir + "/" + std::string(n)).c_str());
  }
  ::closedir(d);
}

// What is at `path` may be replaced: nothing, or a regular file that
// starts with `magic` (any regular file when magic is empty).
Status CheckReplaceable(const std::string& path, std::string_view what, std::string_view magic) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return IoError(std::string(what) + " " + path + ": " + ErrnoText(errno));
  }
  const std::string refuse = "not writing " + std::string(what) + " over " + path + ": it is ";
  if (S_ISLNK(st.st_mode)) return IoError(refuse + "a symbolic link");
  if (S_ISDIR(st.st_mode)) return IoError(refuse + "a directory");
  if (!S_ISREG(st.st_mode)) return IoError(refuse + "a device, FIFO or socket");
  if (magic.empty()) return Status::Ok();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) return IoError(std::string(what) + " " + path + ": " + ErrnoText(errno));
  std::string head(magic.size(), '\0');
  ssize_t got = ::pread(fd, head.data(), head.size(), 0);
  ::close(fd);
  if (got != static_cast<ssize_t>(magic.size()) || head != magic) {
    return IoError(refuse + "not a " + std::string(what) + " (its first bytes differ)");
  }
  return Status::Ok();
}

}  // namespace

Status ReplaceFile(const std::string& path, const void* data, size_t n, std::string_view what,
                   std::string_view existing_magic) {
  static std::atomic<uint64_t> seq{0};
  WASTE_TRY(CheckReplaceable(path, what, existing_magic));
  const std::string dir = DirName(path);
  RemoveStaleTemps(dir, BaseName(path));
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(seq.fetch_add(1, std::memory_order_relaxed));
  int fd;
  do {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  // Named by the file the caller asked for: the temporary name is ours.
  if (fd < 0) return ErrnoStatus("cannot create", path, errno);

  auto fail = [&](const char* op, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoStatus(op, tmp, err);
  };
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    ssize_t put = ::write(fd, p + done, n - done);
    if (put < 0) {
      if (errno == EINTR) continue;
      return fail("write", errno);
    }
    done += static_cast<size_t>(put);
  }
  if (::fsync(fd) != 0) return fail("fsync", errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus("close", tmp, err);
  }
  // Checked again just before the rename: the window is small, and the
  // rename itself never follows a symbolic link at `path`.
  Status again = CheckReplaceable(path, what, existing_magic);
  if (!again.ok()) {
    ::unlink(tmp.c_str());
    return again;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError("rename " + tmp + " to " + path + ": " + ErrnoText(err));
  }
  // The rename is durable only once the directory entry is on disk.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    int rc = ::fsync(dfd);
    int err = errno;
    ::close(dfd);
    // Some filesystems refuse fsync on a directory (EINVAL): nothing to do.
    if (rc != 0 && err != EINVAL && err != EROFS) return ErrnoStatus("fsync directory", dir, err);
  }
  return Status::Ok();
}

Status CommitFile(const std::string& tmp, const std::string& path) {
  int fd;
  do {
    fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus("open", tmp, errno);
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus("fsync", tmp, err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return IoError("rename " + tmp + " to " + path + ": " + ErrnoText(errno));
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: some filesystems refuse fsync on directories
    ::close(dfd);
  }
  return Status::Ok();
}

Status WriteFileAtomic(const std::string& path, const void* data, size_t n) {
  return ReplaceFile(path, data, n, "file", "");
}

namespace {

struct LockEntry {
  dev_t dev;
  ino_t ino;
  int fd;
  int refs;
  pid_t owner;  // a forked child inherits the table, not the ownership
};

std::mutex& LockMutex() {
  static std::mutex m;
  return m;
}

// Registry id -> entry. Ids start at 1 (0 = not held).
std::map<uint64_t, LockEntry>& LockRegistry() {
  static std::map<uint64_t, LockEntry> r;
  return r;
}

}  // namespace

DirLock::~DirLock() { Release(); }

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    Release();
    key_ = other.key_;
    other.key_ = 0;
  }
  return *this;
}

void DirLock::Release() {
  if (key_ == 0) return;
  std::lock_guard<std::mutex> g(LockMutex());
  auto& reg = LockRegistry();
  auto it = reg.find(key_);
  if (it != reg.end() && --it->second.refs == 0) {
    // In a forked child the descriptor is shared with the parent: closing
    // it drops only the child's reference, LOCK_UN would free the parent's.
    if (it->second.owner == ::getpid()) ::flock(it->second.fd, LOCK_UN);
    ::close(it->second.fd);
    reg.erase(it);
  }
  key_ = 0;
}

Result<DirLock> DirLock::Acquire(const std::string& dir) {
  static uint64_t next_id = 1;
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return DirLock();  // cannot open: proceed without ownership (§5.9)
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return DirLock();
  }
  std::lock_guard<std::mutex> g(LockMutex());
  auto& reg = LockRegistry();
  // Entries copied into a forked child belong to the parent: forget them
  // (closing only the child's reference) so the child contends properly.
  for (auto it = reg.begin(); it != reg.end();) {
    if (it->second.owner != ::getpid()) {
      ::close(it->second.fd);
      it = reg.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [id, e] : reg) {
    if (e.dev == st.st_dev && e.ino == st.st_ino) {  // this process holds it: share
      ::close(fd);
      ++e.refs;
      DirLock l;
      l.key_ = id;
      return l;
    }
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return Status(Errc::kBusy, dir + ": the container is already open in another process "
                                       "(exclusive open)");
    }
    return DirLock();  // locks unsupported here: proceed without ownership
  }
  uint64_t id = next_id++;
  reg.emplace(id, LockEntry{st.st_dev, st.st_ino, fd, 1, ::getpid()});
  DirLock l;
  l.key_ = id;
  return l;
}

void* AlignedAlloc(size_t alignment, size_t bytes) {
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  void* p = nullptr;
  // posix_memalign(0 bytes) may return NULL; ask for one byte so a
  // successful call always yields a pointer AlignedFree accepts.
  if (::posix_memalign(&p, alignment, bytes == 0 ? 1 : bytes) != 0) return nullptr;
  return p;
}

void AlignedFree(void* p) { std::free(p); }

namespace {
// Transparent huge pages are 2 MiB on x86-64 and on arm64 with 4 KiB base
// pages; starting the mapping on that boundary lets the kernel use them
// from the first byte.
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

void LargeBuffer::Release() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
  huge_pages_ = false;
}

Result<LargeBuffer> LargeBuffer::Allocate(size_t bytes, bool huge_pages, const std::string& what) {
  LargeBuffer b;
  if (bytes == 0) return b;
  if (bytes > SIZE_MAX - 2 * kHugePage) return OomError(what + ": " + std::to_string(bytes) + " bytes");
  // The mapping is the request rounded to base pages, not to huge pages:
  // the kernel puts huge pages only where a whole aligned 2 MiB lies inside
  // it, so the resident set never exceeds what was asked for (the memory
  // plan counts `bytes`). Over-map by one huge page, then trim to a window
  // that starts on a 2 MiB boundary.
  const size_t size = (bytes + kBypassAlignment - 1) / kBypassAlignment * kBypassAlignment;
  const size_t span = size + kHugePage;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return OomError(what + ": " + std::to_string(bytes) + " bytes: " + ErrnoText(errno));
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) ::munmap(p, aligned - start);
  const uintptr_t end = start + span, used_end = aligned + size;
  if (end > used_end) ::munmap(reinterpret_cast<void*>(used_end), end - used_end);
  b.data_ = reinterpret_cast<uint8_t*>(aligned);
  b.size_ = size;
  b.huge_pages_ = huge_pages && AdviseHugePages(b.data_, b.size_);
  return b;
}

namespace {

int PortOf(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

// The numeric address as inet_ntop writes it ("127.0.0.1", "::1",
// "::ffff:10.0.0.1"), which is also how the HTTP library names a peer.
std::string AddressOf(const sockaddr_storage& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  const void* raw = nullptr;
  if (a.ss_family == AF_INET) raw = &reinterpret_cast<const sockaddr_in&>(a).sin_addr;
  if (a.ss_family == AF_INET6) raw = &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr;
  if (!raw || !inet_ntop(a.ss_family, raw, buf, sizeof buf)) return {};
  return buf;
}

}  // namespace

intptr_t FindTcpSocket(int local_port, const std::string& peer_address, int peer_port) {
  if (local_port <= 0 || peer_port <= 0) return -1;
  // /dev/fd lists this process's descriptors on Linux and macOS alike.
  // A descriptor closed and reused while we look is harmless: whatever
  // matches both ports (and, to break a tie, the peer's address) is the
  // connection itself, which its handler keeps open while it waits.
  DIR* dir = opendir("/dev/fd");
  if (!dir) return -1;
  std::vector<std::pair<int, std::string>> found;  // descriptor, peer address
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd < 0 || fd == dirfd(dir)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ln = sizeof local, pn = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &ln) != 0) continue;
    if (PortOf(local) != local_port) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pn) != 0) continue;
    if (PortOf(peer) != peer_port) continue;
    found.emplace_back(static_cast<int>(fd), AddressOf(peer));
  }
  closedir(dir);
  if (found.size() == 1) return found[0].first;
  // Two clients on other hosts may share a port number: the address decides.
  int match = -1, matches = 0;
  for (const auto& [fd, address] : found) {
    if (!peer_address.empty() && address == peer_address) {
      match = fd;
      ++matches;
    }
  }
  return matches == 1 ? match : -1;
}

bool SocketPeerClosed(intptr_t socket) {
  if (socket < 0) return false;
  int fd = static_cast<int>(socket);
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;  // nothing pending: still there
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;  // orderly shutdown
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace waste::platform
