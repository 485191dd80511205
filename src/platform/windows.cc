// Windows: the whole shim on Win32 calls. FILE_FLAG_NO_BUFFERING plus a
// probe read for cache bypass, SetThreadAffinityMask within one processor
// group (a CPU >= 64 cannot be expressed, so binding to it is refused).
#ifndef NOMINMAX
#define NOMINMAX
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef PSAPI_VERSION
#define PSAPI_VERSION 2  // K32GetProcessMemoryInfo lives in kernel32
#endif
// windows.h first: psapi.h uses its types without including it.
#include <windows.h>

#include <malloc.h>
#include <psapi.h>

#include <atomic>
#include <string>
#include <string_view>
#include <system_error>

#include "platform/platform.h"

namespace waste::platform {
namespace {

constexpr DWORD kMaxReadChunk = DWORD{1} << 30;

std::string LastErrorText(DWORD err) {
  return std::error_code(static_cast<int>(err), std::system_category()).message();
}

Status Win32Status(const std::string& what, const std::string& path, DWORD err) {
  return IoError(what + " " + path + ": " + LastErrorText(err));
}

std::wstring Widen(const std::string& utf8) {
  if (utf8.empty()) return std::wstring();
  int n = ::MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), nullptr, 0);
  std::wstring out(static_cast<size_t>(n > 0 ? n : 0), L'\0');
  if (n > 0) {
    ::MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), out.data(), n);
  }
  return out;
}

HANDLE AsHandle(intptr_t h) { return reinterpret_cast<HANDLE>(h); }

bool Aligned(uint64_t v) { return v % kBypassAlignment == 0; }

HANDLE OpenForRead(const std::string& path, DWORD flags) {
  return ::CreateFileW(Widen(path).c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE,
                       nullptr, OPEN_EXISTING, flags, nullptr);
}

uint64_t MaskOf(const std::vector<int>& cpus) {
  uint64_t mask = 0;
  for (int cpu : cpus) mask |= uint64_t{1} << cpu;
  return mask;
}

std::vector<int> CpusOf(uint64_t mask) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < 64; ++cpu) {
    if (mask & (uint64_t{1} << cpu)) cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace

File::~File() {
  if (handle_ >= 0) ::CloseHandle(AsHandle(handle_));
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
    if (handle_ >= 0) ::CloseHandle(AsHandle(handle_));
    handle_ = other.handle_;
    bypass_ = other.bypass_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.handle_ = -1;
  }
  return *this;
}

Result<File> File::Open(const std::string& path) {
  HANDLE h = OpenForRead(path, FILE_ATTRIBUTE_NORMAL);
  if (h == INVALID_HANDLE_VALUE) return Win32Status("open", path, ::GetLastError());
  LARGE_INTEGER size;
  if (!::GetFileSizeEx(h, &size)) {
    DWORD err = ::GetLastError();
    ::CloseHandle(h);
    return Win32Status("size of", path, err);
  }
  File f;
  f.handle_ = reinterpret_cast<intptr_t>(h);
  f.size_ = static_cast<uint64_t>(size.QuadPart);
  f.path_ = path;
  return f;
}

Result<File> File::OpenBypass(const std::string& path, size_t probe_bytes) {
  if (probe_bytes % kBypassAlignment != 0) {
    return ArgError("bypass probe of " + std::to_string(probe_bytes) +
                    " bytes is not a multiple of 4096");
  }
  HANDLE h = OpenForRead(path, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_NO_BUFFERING);
  if (h == INVALID_HANDLE_VALUE) {
    DWORD err = ::GetLastError();
    if (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND || err == ERROR_ACCESS_DENIED) {
      return Win32Status("open", path, err);
    }
  } else {
    bool ok = true;
    if (probe_bytes > 0) {
      void* buf = AlignedAlloc(kBypassAlignment, probe_bytes);
      if (buf == nullptr) {
        ::CloseHandle(h);
        return OomError("bypass probe buffer for " + path);
      }
      OVERLAPPED ov = {};
      DWORD got = 0;
      if (!::ReadFile(h, buf, static_cast<DWORD>(probe_bytes), &got, &ov) &&
          ::GetLastError() != ERROR_HANDLE_EOF) {
        ok = false;
      }
      AlignedFree(buf);
    }
    LARGE_INTEGER size;
    if (ok && ::GetFileSizeEx(h, &size)) {
      File f;
      f.handle_ = reinterpret_cast<intptr_t>(h);
      f.bypass_ = true;
      f.size_ = static_cast<uint64_t>(size.QuadPart);
      f.path_ = path;
      return f;
    }
    ::CloseHandle(h);
  }
  // Refused: buffered with the random-access hint (no read-ahead).
  h = OpenForRead(path, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_RANDOM_ACCESS);
  if (h == INVALID_HANDLE_VALUE) return Win32Status("open", path, ::GetLastError());
  LARGE_INTEGER size;
  if (!::GetFileSizeEx(h, &size)) {
    DWORD err = ::GetLastError();
    ::CloseHandle(h);
    return Win32Status("size of", path, err);
  }
  File f;
  f.handle_ = reinterpret_cast<intptr_t>(h);
  f.size_ = static_cast<uint64_t>(size.QuadPart);
  f.path_ = path;
  return f;
}

Result<size_t> File::TryReadAt(uint64_t offset, void* dst, size_t n) const {
  if (handle_ < 0) return ArgError("read from a file that is not open");
  if (bypass_ && (!Aligned(offset) || !Aligned(n) || !Aligned(reinterpret_cast<uintptr_t>(dst)))) {
    return ArgError("unaligned read on a cache-bypass file " + path_ + ": offset " +
                    std::to_string(offset) + ", " + std::to_string(n) +
                    " bytes (buffer, offset and length must be multiples of 4096)");
  }
  auto* out = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    DWORD want = n - done < kMaxReadChunk ? static_cast<DWORD>(n - done) : kMaxReadChunk;
    uint64_t at = offset + done;
    OVERLAPPED ov = {};
    ov.Offset = static_cast<DWORD>(at & 0xffffffffu);
    ov.OffsetHigh = static_cast<DWORD>(at >> 32);
    DWORD got = 0;
    if (!::ReadFile(AsHandle(handle_), out + done, want, &got, &ov)) {
      DWORD err = ::GetLastError();
      if (err == ERROR_HANDLE_EOF) break;
      return IoError("read " + path_ + " at offset " + std::to_string(at) + ": " +
                     LastErrorText(err));
    }
    if (got == 0) break;
    done += got;
    if (bypass_ && !Aligned(got)) break;  // end of file inside a sector
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
  WIN32_FILE_ATTRIBUTE_DATA data;
  if (!::GetFileAttributesExW(Widen(path).c_str(), GetFileExInfoStandard, &data)) {
    return Win32Status("stat", path, ::GetLastError());
  }
  return (static_cast<uint64_t>(data.nFileSizeHigh) << 32) | data.nFileSizeLow;
}

bool PathExists(const std::string& path) {
  return ::GetFileAttributesW(Widen(path).c_str()) != INVALID_FILE_ATTRIBUTES;
}

Result<std::string> ReadWholeFile(const std::string& path) {
  HANDLE h = OpenForRead(path, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_SEQUENTIAL_SCAN);
  if (h == INVALID_HANDLE_VALUE) return Win32Status("open", path, ::GetLastError());
  std::string data;
  char buf[16384];
  for (;;) {
    DWORD got = 0;
    if (!::ReadFile(h, buf, sizeof buf, &got, nullptr)) {
      DWORD err = ::GetLastError();
      if (err == ERROR_HANDLE_EOF) break;
      ::CloseHandle(h);
      return Win32Status("read", path, err);
    }
    if (got == 0) break;
    data.append(buf, got);
  }
  ::CloseHandle(h);
  return data;
}

Status ReplaceFile(const std::string& path, const void* data, size_t n, std::string_view what,
                   std::string_view existing_magic) {
  static std::atomic<uint64_t> seq{0};
  DWORD attrs = ::GetFileAttributesW(Widen(path).c_str());
  if (attrs != INVALID_FILE_ATTRIBUTES) {
    const std::string refuse = "not writing " + std::string(what) + " over " + path + ": it is ";
    if (attrs & FILE_ATTRIBUTE_DIRECTORY) return IoError(refuse + "a directory");
    if (attrs & (FILE_ATTRIBUTE_REPARSE_POINT | FILE_ATTRIBUTE_DEVICE)) {
      return IoError(refuse + "a link or a device");
    }
    if (!existing_magic.empty()) {
      HANDLE r = OpenForRead(path, FILE_ATTRIBUTE_NORMAL);
      std::string head(existing_magic.size(), '\0');
      DWORD got = 0;
      bool ok = r != INVALID_HANDLE_VALUE &&
                ::ReadFile(r, head.data(), static_cast<DWORD>(head.size()), &got, nullptr) &&
                got == head.size() && head == existing_magic;
      if (r != INVALID_HANDLE_VALUE) ::CloseHandle(r);
      if (!ok) return IoError(refuse + "not a " + std::string(what) + " (its first bytes differ)");
    }
  }
  std::string tmp = path + ".tmp." + std::to_string(::GetCurrentProcessId()) + "." +
                    std::to_string(seq.fetch_add(1, std::memory_order_relaxed));
  std::wstring wtmp = Widen(tmp);
  HANDLE h = ::CreateFileW(wtmp.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
  // Named by the file the caller asked for: the temporary name is ours.
  if (h == INVALID_HANDLE_VALUE) return Win32Status("cannot create", path, ::GetLastError());
  auto fail = [&](const char* step, DWORD err) {
    ::CloseHandle(h);
    ::DeleteFileW(wtmp.c_str());
    return Win32Status(step, tmp, err);
  };
  const auto* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    DWORD want = n - done < kMaxReadChunk ? static_cast<DWORD>(n - done) : kMaxReadChunk;
    DWORD put = 0;
    if (!::WriteFile(h, p + done, want, &put, nullptr)) return fail("write", ::GetLastError());
    done += put;
  }
  if (!::FlushFileBuffers(h)) return fail("flush", ::GetLastError());
  ::CloseHandle(h);
  if (!::MoveFileExW(wtmp.c_str(), Widen(path).c_str(),
                     MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
    DWORD err = ::GetLastError();
    ::DeleteFileW(wtmp.c_str());
    return IoError("rename " + tmp + " to " + path + ": " + LastErrorText(err));
  }
  return Status::Ok();
}

Status CommitFile(const std::string& tmp, const std::string& path) {
  std::wstring wtmp = Widen(tmp);
  HANDLE h = ::CreateFileW(wtmp.c_str(), GENERIC_WRITE, 0, nullptr, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) return Win32Status("open", tmp, ::GetLastError());
  if (!::FlushFileBuffers(h)) {
    DWORD err = ::GetLastError();
    ::CloseHandle(h);
    return Win32Status("flush", tmp, err);
  }
  ::CloseHandle(h);
  if (!::MoveFileExW(wtmp.c_str(), Widen(path).c_str(),
                     MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
    return IoError("rename " + tmp + " to " + path + ": " + LastErrorText(::GetLastError()));
  }
  return Status::Ok();
}


Status WriteFileAtomic(const std::string& path, const void* data, size_t n) {
  return ReplaceFile(path, data, n, "file", "");
}

Result<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes,
                                    std::string_view what, bool* missing) {
  if (missing != nullptr) *missing = false;
  const std::string name = std::string(what) + " " + path;
  HANDLE h = OpenForRead(path, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_SEQUENTIAL_SCAN);
  if (h == INVALID_HANDLE_VALUE) {
    DWORD err = ::GetLastError();
    if (missing != nullptr) {
      *missing = err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND;
    }
    return IoError(name + ": " + LastErrorText(err));
  }
  if (::GetFileType(h) != FILE_TYPE_DISK) {
    ::CloseHandle(h);
    return IoError(name + ": not a regular file");
  }
  LARGE_INTEGER size;
  if (!::GetFileSizeEx(h, &size) || static_cast<uint64_t>(size.QuadPart) > max_bytes) {
    ::CloseHandle(h);
    return IoError(name + ": more than the " + std::to_string(max_bytes) +
                   " bytes this kind of file may hold");
  }
  std::string data;
  char buf[16384];
  for (;;) {
    uint64_t room = max_bytes + 1 - data.size();
    DWORD want = room < sizeof buf ? static_cast<DWORD>(room) : DWORD{sizeof buf};
    DWORD got = 0;
    if (!::ReadFile(h, buf, want, &got, nullptr)) {
      DWORD err = ::GetLastError();
      if (err == ERROR_HANDLE_EOF) break;
      ::CloseHandle(h);
      return Win32Status("read", path, err);
    }
    if (got == 0) break;
    data.append(buf, got);
    if (data.size() > max_bytes) {
      ::CloseHandle(h);
      return IoError(name + ": grew past the " + std::to_string(max_bytes) +
                     " bytes this kind of file may hold while it was read");
    }
  }
  ::CloseHandle(h);
  return data;
}

// The reference ignores --exclusive-open on Windows (ENGINE.md §5.9).
DirLock::~DirLock() = default;
DirLock& DirLock::operator=(DirLock&& other) noexcept {
  key_ = other.key_;
  other.key_ = 0;
  return *this;
}
void DirLock::Release() { key_ = 0; }
Result<DirLock> DirLock::Acquire(const std::string&) { return DirLock(); }

void* AlignedAlloc(size_t alignment, size_t bytes) {
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if ((alignment & (alignment - 1)) != 0) return nullptr;
  return ::_aligned_malloc(bytes == 0 ? 1 : bytes, alignment);
}

void AlignedFree(void* p) { ::_aligned_free(p); }

// Large pages on Windows need SeLockMemoryPrivilege and are never paged;
// plain committed memory is what a desktop user's process can have.
bool AdviseHugePages(void*, size_t) { return false; }

void LargeBuffer::Release() {
  if (data_ != nullptr) ::VirtualFree(data_, 0, MEM_RELEASE);
  data_ = nullptr;
  size_ = 0;
  huge_pages_ = false;
}

Result<LargeBuffer> LargeBuffer::Allocate(size_t bytes, bool, const std::string& what) {
  LargeBuffer b;
  if (bytes == 0) return b;
  void* p = ::VirtualAlloc(nullptr, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
  if (p == nullptr) return OomError(what + ": " + std::to_string(bytes) + " bytes");
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = bytes;
  return b;
}

std::vector<int> AllowedCpus() {
  DWORD_PTR process_mask = 0, system_mask = 0;
  if (!::GetProcessAffinityMask(::GetCurrentProcess(), &process_mask, &system_mask)) return {};
  return CpusOf(static_cast<uint64_t>(process_mask));
}

std::vector<int> CurrentThreadCpus() {
  // There is no GetThreadAffinityMask: setting a mask returns the old one,
  // so set the process mask and put the old value straight back.
  DWORD_PTR process_mask = 0, system_mask = 0;
  if (!::GetProcessAffinityMask(::GetCurrentProcess(), &process_mask, &system_mask)) return {};
  DWORD_PTR old = ::SetThreadAffinityMask(::GetCurrentThread(), process_mask);
  if (old == 0) return {};
  ::SetThreadAffinityMask(::GetCurrentThread(), old);
  return CpusOf(static_cast<uint64_t>(old));
}

int CpuCount() {
  std::vector<int> cpus = AllowedCpus();
  if (!cpus.empty()) return static_cast<int>(cpus.size());
  SYSTEM_INFO info;
  ::GetSystemInfo(&info);
  return info.dwNumberOfProcessors > 0 ? static_cast<int>(info.dwNumberOfProcessors) : 1;
}

uint64_t PhysicalRam() {
  MEMORYSTATUSEX status;
  status.dwLength = sizeof status;
  if (!::GlobalMemoryStatusEx(&status)) return 0;
  return status.ullTotalPhys;
}

UsableRam GetUsableRam() {
  UsableRam usable;
  usable.bytes = PhysicalRam();
  usable.source = "physical";
  return usable;
}

uint64_t PeakRssBytes() {
  PROCESS_MEMORY_COUNTERS counters;
  if (!::K32GetProcessMemoryInfo(::GetCurrentProcess(), &counters, sizeof counters)) return 0;
  return counters.PeakWorkingSetSize;
}

double LoadAverage() { return -1.0; }  // Windows keeps no run-queue load average

Status BindCurrentThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return ArgError("empty cpu set");
  std::vector<int> allowed = AllowedCpus();
  uint64_t allowed_mask = MaskOf(allowed);
  for (int cpu : cpus) {
    // One processor group: a mask is 64 bits wide.
    if (cpu < 0 || cpu >= 64) {
      return ArgError("CPU " + std::to_string(cpu) + " is outside this thread's processor group");
    }
    if (!allowed.empty() && (allowed_mask & (uint64_t{1} << cpu)) == 0) {
      return ArgError("CPU " + std::to_string(cpu) + " is not available to this process");
    }
  }
  if (::SetThreadAffinityMask(::GetCurrentThread(), static_cast<DWORD_PTR>(MaskOf(cpus))) == 0) {
    return ArgError("SetThreadAffinityMask: " + LastErrorText(::GetLastError()));
  }
  return Status::Ok();
}

// The server's disconnect check for blocking replies is not available
// here: no socket is found, so such a reply runs to its end.
intptr_t FindTcpSocket(int, const std::string&, int) { return -1; }
bool SocketPeerClosed(intptr_t) { return false; }

}  // namespace waste::platform
