// The parts of the platform shim that Linux and macOS share: descriptors,
// positional reads, whole-file reads, atomic writes, aligned memory.
// OpenBypass and the machine facts differ and live in linux.cc / macos.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

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

Status WriteFileAtomic(const std::string& path, const void* data, size_t n) {
  static std::atomic<uint64_t> seq{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(seq.fetch_add(1, std::memory_order_relaxed));
  int fd;
  do {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return ErrnoStatus("create", tmp, errno);

  auto fail = [&](const char* what, int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoStatus(what, tmp, err);
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
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError("rename " + tmp + " to " + path + ": " + ErrnoText(err));
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

}  // namespace waste::platform
