// The platform shim: everything that differs per OS, and nothing else.
// posix.cc / linux.cc / macos.cc / windows.cc implement it, chosen by CMake;
// no other file in the tree has a per-OS #ifdef. Offsets are 64-bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "waste/status.h"

namespace waste::platform {

// Alignment every cache-bypass read buffer, offset and length must honour.
inline constexpr size_t kBypassAlignment = 4096;

// A read-only file. ReadAt is safe for concurrent use from many threads.
class File {
 public:
  File() = default;
  ~File();
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Plain buffered open.
  static Result<File> Open(const std::string& path);
  // Open bypassing the page cache (O_DIRECT / F_NOCACHE /
  // FILE_FLAG_NO_BUFFERING). When the filesystem refuses, falls back to a
  // buffered open with random-access advice and bypass() reports false.
  // `probe_bytes` (a multiple of kBypassAlignment, 0 = none) is read at
  // offset 0 to confirm bypass really works.
  static Result<File> OpenBypass(const std::string& path, size_t probe_bytes = kBypassAlignment);

  bool is_open() const { return handle_ >= 0; }
  bool bypass() const { return bypass_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Reads exactly `n` bytes at `offset` (looping over short reads). On a
  // bypass file, dst/offset/n must be kBypassAlignment-aligned: unaligned
  // requests are refused with kArg before reaching the OS. A read past EOF
  // fails with kIo ("short read").
  Status ReadAt(uint64_t offset, void* dst, size_t n) const;
  // Like ReadAt but returns the count read (may be short at EOF).
  Result<size_t> TryReadAt(uint64_t offset, void* dst, size_t n) const;

  // Native descriptor (POSIX fd / Windows HANDLE as intptr_t) for io_uring.
  intptr_t native_handle() const { return handle_; }

 private:
  intptr_t handle_ = -1;
  bool bypass_ = false;
  uint64_t size_ = 0;
  std::string path_;
};

Result<uint64_t> FileSize(const std::string& path);
bool PathExists(const std::string& path);
// Reads to EOF with no type or size check: only for the kernel's own small
// files (/proc, /sys, cgroup), whose st_size lies. Everything a user can
// point at goes through ReadRegularFile.
Result<std::string> ReadWholeFile(const std::string& path);

// The one rule for reading a whole file a user can name (manifest,
// sidecars, tokenizer, hotlist, session state, --file): only a regular
// file is read; a directory, FIFO, device or socket is refused with a
// message naming `what` and the path. The open is non-blocking, so a FIFO
// cannot hang it. A file over `max_bytes` is refused before any read, and
// no more than max_bytes + 1 bytes are ever read (a file growing under us
// is refused too). `missing`, when given, says the path does not exist.
Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                    std::string_view what, bool* missing = nullptr);

// The one rule for replacing a file: write <path>.tmp.<pid>.<seq>
// (exclusive, 0600), fsync, rename over `path`, fsync the directory. What
// is already at `path` must be nothing or a regular file (never a
// directory, device, FIFO, socket or symbolic link) and, when
// `existing_magic` is not empty, start with those bytes: a hotlist only
// replaces a hotlist, a session only a session. Temp files of this target
// left by processes that no longer exist are removed first. `what` names
// the kind in messages ("session file", "usage.waste").
Status ReplaceFile(const std::string& path, const void* data, size_t n, std::string_view what,
                   std::string_view existing_magic);
// ReplaceFile for any regular file (the container writer's outputs).
Status WriteFileAtomic(const std::string& path, const void* data, size_t n);
// Publishes a file written elsewhere (streamed to `tmp` and closed): fsync
// it, rename it over `path`, and fsync the directory so the rename itself
// survives a crash.
Status CommitFile(const std::string& tmp, const std::string& path);

// An advisory exclusive lock on a container directory (ENGINE.md §5.9):
// flock(LOCK_EX | LOCK_NB) on the directory itself. Holders in one process
// share it by (device, inode), counted; the last one released unlocks.
// Another process holding it: kBusy. A directory that cannot be opened or
// a filesystem without locks: an unheld DirLock and OK (the open goes on,
// as the reference does). Windows: never held (the flag is ignored there).
class DirLock {
 public:
  DirLock() = default;
  ~DirLock();
  DirLock(DirLock&& other) noexcept : key_(other.key_) { other.key_ = 0; }
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  bool held() const { return key_ != 0; }

  static Result<DirLock> Acquire(const std::string& dir);

 private:
  void Release();
  uint64_t key_ = 0;  // registry entry id; 0 = not held
};

// Aligned allocation, released only through AlignedFree (a pair).
void* AlignedAlloc(size_t alignment, size_t bytes);
void AlignedFree(void* p);
struct AlignedDeleter {
  void operator()(void* p) const { AlignedFree(p); }
};
template <typename T>
using AlignedPtr = std::unique_ptr<T, AlignedDeleter>;

// A large, long-lived, zero-filled buffer (the expert cache arena, the
// trunk). Linux: an anonymous mapping starting on a 2 MiB boundary and, when
// `huge_pages`, advised for transparent huge pages (MADV_HUGEPAGE): the
// kernel then backs it with 2 MiB pages where it can, so first touch of a
// multi-GB cache takes 512x fewer page faults and the hot loops fewer TLB
// misses. macOS: the same mapping, no advice. Windows: VirtualAlloc.
// Memory is committed on first touch, as with malloc.
class LargeBuffer {
 public:
  LargeBuffer() = default;
  ~LargeBuffer() { Release(); }
  LargeBuffer(LargeBuffer&& other) noexcept { *this = std::move(other); }
  LargeBuffer& operator=(LargeBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      std::swap(data_, other.data_);
      std::swap(size_, other.size_);
      std::swap(huge_pages_, other.huge_pages_);
    }
    return *this;
  }
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  // kOom naming `what` when the address space cannot be had.
  static Result<LargeBuffer> Allocate(size_t bytes, bool huge_pages, const std::string& what);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // The huge-page advice was asked for and accepted (Linux with THP not
  // "never"); whether the kernel found 2 MiB pages is its business.
  bool huge_pages() const { return huge_pages_; }

 private:
  void Release();  // per OS: munmap / VirtualFree, then empty
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool huge_pages_ = false;
};

// Asks the kernel to back [p, p + bytes) with huge pages; false where the
// OS has no such advice or refuses it. Used by LargeBuffer.
bool AdviseHugePages(void* p, size_t bytes);

// Connections. The HTTP library hands a request handler no socket, so
// the server finds its own connection to notice a client that hung up
// while a blocking reply is being generated. FindTcpSocket: the descriptor
// of this process's connected TCP socket whose local port is `local_port`
// and whose peer is `peer_address`:`peer_port` (the address, numeric as
// inet_ntop writes it, only breaks a tie between equal ports), else -1
// (also where the OS cannot list descriptors). SocketPeerClosed: the peer
// has closed or reset the connection; never blocks and never consumes
// data (a peer that sent more bytes is still there).
intptr_t FindTcpSocket(int local_port, const std::string& peer_address, int peer_port);
bool SocketPeerClosed(intptr_t socket);

// Machine facts.
int CpuCount();                        // CPUs this process may run on (affinity-aware)
uint64_t PhysicalRam();                // bytes, 0 if unknown
struct UsableRam {
  uint64_t bytes = 0;                  // min(physical, cgroup limits); 0 if unknown
  std::string source;                  // "physical", "cgroup v2 memory.max", "cgroup v1", ...
};
UsableRam GetUsableRam();
uint64_t PeakRssBytes();               // getrusage / GetProcessMemoryInfo
double LoadAverage();                  // 1-minute load average (getloadavg); -1 if unknown

// Thread placement. BindCurrentThread returns kUnsupported on platforms that
// cannot bind, kArg for CPUs the process may not use.
inline constexpr bool kHaveAffinity =
#if defined(__linux__) || defined(_WIN32)
    true;
#else
    false;
#endif
Status BindCurrentThread(const std::vector<int>& cpus);
// CPUs the calling process may run on (sched_getaffinity); empty if unknown.
// A snapshot taken on first use, so threads bound later do not narrow it.
std::vector<int> AllowedCpus();
// The calling thread's current affinity, read now; empty if unknown.
std::vector<int> CurrentThreadCpus();

}  // namespace waste::platform
