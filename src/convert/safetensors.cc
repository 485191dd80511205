#include "convert/safetensors.h"
#include "base/exception_status.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace waste::convert {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // safetensors' own cap is 100 MB

struct DTypeInfo {
  const char* name;
  DType type;
  size_t bytes;
};
constexpr DTypeInfo kDTypes[] = {
    {"BOOL", DType::kBool, 1},  {"U8", DType::kU8, 1},     {"I8", DType::kI8, 1},
    {"U16", DType::kU16, 2},    {"I16", DType::kI16, 2},   {"F16", DType::kF16, 2},
    {"BF16", DType::kBF16, 2},  {"U32", DType::kU32, 4},   {"I32", DType::kI32, 4},
    {"F32", DType::kF32, 4},    {"U64", DType::kU64, 8},   {"I64", DType::kI64, 8},
    {"F64", DType::kF64, 8},    {"F8_E4M3", DType::kF8E4M3, 1}, {"F8_E5M2", DType::kF8E5M2, 1},
};

std::string Join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

Status ParseEntry(const std::string& path, const std::string& name, const Json& v,
                  uint64_t data_start, uint64_t data_bytes, TensorEntry* out) {
  auto bad = [&](const std::string& why) {
    return FormatError(fmt::format("{}: tensor {}: {}", path, name, why));
  };
  if (!v.is_object()) return bad("header entry is not an object");
  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) return bad("no dtype");
  const std::string d = dt->get<std::string>();
  const DTypeInfo* info = nullptr;
  for (const DTypeInfo& i : kDTypes) {
    if (d == i.name) info = &i;
  }
  if (info == nullptr) return bad(fmt::format("unsupported dtype {}", d));
  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) return bad("no shape");
  int64_t elements = 1;
  for (const Json& x : *sh) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > (int64_t{1} << 40)) {
      return bad("shape holds something other than a dimension in 0..2^40");
    }
    const int64_t dim = x.get<int64_t>();
    if (dim != 0 && elements > (int64_t{1} << 48) / dim) return bad("more than 2^48 elements");
    elements *= dim;
    out->shape.push_back(dim);
  }
  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    return bad("data_offsets is not [begin, end]");
  }
  const uint64_t b = (*off)[0].get<uint64_t>(), e = (*off)[1].get<uint64_t>();
  if (b > e || e > data_bytes) {
    return bad(fmt::format("data_offsets [{}, {}] outside the {} data bytes (truncated file?)", b, e,
                           data_bytes));
  }
  const uint64_t want = static_cast<uint64_t>(elements) * info->bytes;
  if (e - b != want) {
    return bad(fmt::format("{} bytes stored for {} elements of {} ({} bytes)", e - b, elements, d,
                           want));
  }
  out->name = name;
  out->dtype = info->type;
  out->begin = data_start + b;
  out->bytes = e - b;
  return Status::Ok();
}

}  // namespace

const char* DTypeName(DType t) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.type == t) return i.name;
  }
  return "?";
}
size_t DTypeBytes(DType t) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.type == t) return i.bytes;
  }
  return 0;
}

int64_t TensorEntry::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<uint64_t> SafetensorsHeaderLength(const uint8_t* head, size_t head_bytes, uint64_t file_size,
                                         const std::string& path) {
  if (file_size < 8 || head_bytes < 8) {
    return FormatError(fmt::format("{}: {} bytes, not a safetensors file", path, file_size));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];
  if (n > file_size - 8 || n > kMaxHeaderBytes || n < 2) {
    return FormatError(fmt::format("{}: header length {} does not fit the {}-byte file", path, n,
                                   file_size));
  }
  return n;
}

Result<std::map<std::string, TensorEntry>> ParseSafetensorsHeader(std::string_view text,
                                                                  uint64_t file_size,
                                                                  const std::string& path) {
  Json header;
  try {
    header = Json::parse(text);
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kFormat, fmt::format("{}: header is not JSON: {}", path, e.what()));
  }
  if (!header.is_object()) return FormatError(fmt::format("{}: header is not an object", path));
  const uint64_t data_start = 8 + text.size();
  if (data_start > file_size) {
    return FormatError(fmt::format("{}: header length {} does not fit the {}-byte file", path,
                                   text.size(), file_size));
  }
  const uint64_t data_bytes = file_size - data_start;
  std::map<std::string, TensorEntry> tensors;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    TensorEntry t;
    WASTE_TRY(ParseEntry(path, it.key(), it.value(), data_start, data_bytes, &t));
    if (t.bytes > 0) spans.emplace_back(t.begin, t.begin + t.bytes);
    tensors.emplace(it.key(), std::move(t));
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      return FormatError(fmt::format("{}: two tensors overlap at byte {}", path, spans[i].first));
    }
  }
  return tensors;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  WASTE_ASSIGN_OR_RETURN(f->file_, platform::File::Open(path));
  const uint64_t size = f->file_.size();
  uint8_t len_bytes[8] = {};
  if (size >= 8) {
    WASTE_TRY(f->file_.ReadAt(0, len_bytes, 8));
  }
  WASTE_ASSIGN_OR_RETURN(const uint64_t n, SafetensorsHeaderLength(len_bytes, 8, size, path));
  std::string text(n, '\0');
  WASTE_TRY(f->file_.ReadAt(8, text.data(), n));
  WASTE_ASSIGN_OR_RETURN(f->tensors_, ParseSafetensorsHeader(text, size, path));
  return f;
}

Status SafetensorsFile::Read(const TensorEntry& t, void* dst) const {
  Status st = file_.ReadAt(t.begin, dst, t.bytes);
  if (!st.ok()) return IoError(fmt::format("{}: tensor {}: {}", path(), t.name, st.message()));
  return Status::Ok();
}

Result<std::map<std::string, std::string>> ParseSafetensorsIndex(std::string_view text,
                                                                 const std::string& path) {
  std::map<std::string, std::string> weight_map;
  try {
    Json j = Json::parse(text);
    const Json& wm = j.at("weight_map");
    if (!wm.is_object()) throw std::runtime_error("weight_map is not an object");
    for (auto it = wm.begin(); it != wm.end(); ++it) {
      const std::string shard = it.value().get<std::string>();
      if (shard.empty() || shard.find('/') != std::string::npos || shard.find("..") != std::string::npos) {
        throw std::runtime_error(fmt::format("shard name \"{}\" leaves the directory", shard));
      }
      weight_map[it.key()] = shard;
    }
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kFormat, fmt::format("{}: {}", path, e.what()));
  }
  return weight_map;
}

namespace {

// Why `dir` holds no weights, in the words a user can act on: a mistyped
// path and a container given where its checkpoint belongs are the usual
// causes, and "neither index nor model.safetensors" names neither.
Status NotACheckpoint(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return IoError(fmt::format("no such directory: {}", dir));
  if (!std::filesystem::is_directory(dir, ec)) {
    return IoError(
        fmt::format("{} is a file; a checkpoint is a directory (config.json, safetensors)", dir));
  }
  if (std::filesystem::exists(Join(dir, "manifest.json"), ec)) {
    return ArgError(
        fmt::format("{} is a waste container already (manifest.json), not a checkpoint", dir));
  }
  return IoError(
      fmt::format("{}: neither model.safetensors.index.json nor model.safetensors", dir));
}

}  // namespace

Result<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  std::unique_ptr<Checkpoint> c(new Checkpoint());
  c->dir_ = dir;
  const std::string index_path = Join(dir, "model.safetensors.index.json");
  std::vector<std::string> shard_names;
  std::map<std::string, std::string> weight_map;
  if (platform::PathExists(index_path)) {
    WASTE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(index_path));
    WASTE_ASSIGN_OR_RETURN(weight_map, ParseSafetensorsIndex(text, index_path));
    for (const auto& [name, shard] : weight_map) {
      if (std::find(shard_names.begin(), shard_names.end(), shard) == shard_names.end()) {
        shard_names.push_back(shard);
      }
    }
  } else if (platform::PathExists(Join(dir, "model.safetensors"))) {
    shard_names.push_back("model.safetensors");
  } else {
    return NotACheckpoint(dir);
  }
  std::sort(shard_names.begin(), shard_names.end());
  for (size_t s = 0; s < shard_names.size(); ++s) {
    WASTE_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> f,
                           SafetensorsFile::Open(Join(dir, shard_names[s])));
    for (const auto& [name, t] : f->tensors()) {
      if (!weight_map.empty()) {
        auto w = weight_map.find(name);
        if (w == weight_map.end() || w->second != shard_names[s]) continue;  // the index decides
      }
      TensorEntry e = t;
      e.shard = static_cast<int>(s);
      c->total_bytes_ += e.bytes;
      c->index_.emplace(name, std::move(e));
    }
    c->shards_.push_back(std::move(f));
  }
  for (const auto& [name, shard] : weight_map) {
    if (!c->index_.count(name)) {
      return FormatError(fmt::format("{}: tensor {} is listed in the index but missing from the shard",
                                     Join(dir, shard), name));
    }
  }
  return c;
}

const TensorEntry* Checkpoint::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &it->second;
}

std::vector<std::string> Checkpoint::Names() const {
  std::vector<std::string> v;
  v.reserve(index_.size());
  for (const auto& kv : index_) v.push_back(kv.first);
  return v;
}

Status Checkpoint::ReadRaw(const TensorEntry& t, std::vector<uint8_t>* out) const {
  out->resize(t.bytes);
  return shards_[t.shard]->Read(t, out->data());
}

}  // namespace waste::convert
