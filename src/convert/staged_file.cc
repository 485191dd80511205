#include <zlib.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "convert/passes.h"
#include "platform/platform.h"

namespace waste::convert {

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Result<std::unique_ptr<StagedFile>> StagedFile::Create(const std::string& path) {
  std::unique_ptr<StagedFile> s(new StagedFile());
  s->path_ = path;
  s->tmp_ = path + ".partial";
  s->f_ = std::fopen(s->tmp_.c_str(), "wb");
  if (s->f_ == nullptr) return IoError(fmt::format("create {}: {}", s->tmp_, std::strerror(errno)));
  s->crc_ = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
  return s;
}

StagedFile::~StagedFile() {
  if (f_ != nullptr) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

Status StagedFile::Write(const void* data, size_t n) {
  if (n == 0) return Status::Ok();
  if (std::fwrite(data, 1, n, f_) != n) {
    return IoError(fmt::format("write {} at offset {}: {}", tmp_, size_, std::strerror(errno)));
  }
  const auto* p = static_cast<const Bytef*>(data);
  size_t left = n;
  while (left > 0) {
    const uInt step = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc_ = static_cast<uint32_t>(crc32(crc_, p, step));
    p += step;
    left -= step;
  }
  size_ += n;
  return Status::Ok();
}

Status StagedFile::Commit() {
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) {
    std::remove(tmp_.c_str());
    return IoError(fmt::format("close {}: {}", tmp_, std::strerror(errno)));
  }
  return platform::CommitFile(tmp_, path_);
}

Result<std::pair<uint64_t, uint32_t>> FileCrc(const std::string& path) {
  WASTE_ASSIGN_OR_RETURN(platform::File f, platform::File::Open(path));
  std::vector<uint8_t> buf(size_t{8} << 20);
  uint32_t crc = static_cast<uint32_t>(crc32(0L, Z_NULL, 0));
  for (uint64_t off = 0; off < f.size();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), f.size() - off));
    WASTE_TRY(f.ReadAt(off, buf.data(), n));
    crc = static_cast<uint32_t>(crc32(crc, buf.data(), static_cast<uInt>(n)));
    off += n;
  }
  return std::make_pair(f.size(), crc);
}

}  // namespace waste::convert
