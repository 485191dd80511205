#include "image_input.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>

#include "base/base64.h"
#include "waste/image.h"

namespace waste::server {
namespace {

ApiError ImageError(const std::string& msg, const char* code = nullptr) {
  return BadRequest(msg, "image_url",
                    code ? std::optional<std::string>(code) : std::nullopt);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool StartsWithNoCase(const std::string& s, const char* prefix) {
  return Lower(s.substr(0, std::char_traits<char>::length(prefix))) == prefix;
}

// The reference of an image part: a string, or an object's url, else path,
// else data. Empty when there is none.
std::string Reference(const Json& part, const std::string& type) {
  auto it = part.find(type);
  if (it == part.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_object()) return "";
  for (const char* key : {"url", "path", "data"}) {
    auto v = it->find(key);
    if (v != it->end() && v->is_string() && !v->get_ref<const std::string&>().empty()) {
      return v->get<std::string>();
    }
  }
  return "";
}

// "data:<mime>?(;base64)?," at the start (case-insensitive). Sets the
// payload offset and whether ";base64" was there; false when the header
// has any other parameter (then it is not a data URL we read).
bool ParseDataUrl(const std::string& url, size_t* payload, bool* base64) {
  if (!StartsWithNoCase(url, "data:")) return false;
  size_t i = 5;
  while (i < url.size() && (std::isalnum(static_cast<unsigned char>(url[i])) || url[i] == '/' ||
                            url[i] == '+' || url[i] == '-' || url[i] == '.' || url[i] == '_')) {
    ++i;
  }
  *base64 = false;
  if (url.size() - i >= 7 && Lower(url.substr(i, 7)) == ";base64") {
    *base64 = true;
    i += 7;
  }
  if (i >= url.size() || url[i] != ',') return false;
  *payload = i + 1;
  return true;
}

std::optional<ApiError> ReadLocal(std::string path, const VisionOptions& options,
                                  std::vector<uint8_t>* bytes) {
  if (!options.allow_local_paths) {
    return ImageError(
        "local image paths are disabled; start the server with --allow-local-images to read "
        "images off its filesystem, or send a base64 data: URL");
  }
  if (StartsWithNoCase(path, "file://")) path = path.substr(7);
  if (path.size() >= 1 && path[0] == '~' && (path.size() == 1 || path[1] == '/')) {
    if (const char* home = std::getenv("HOME")) path = home + path.substr(1);
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return ImageError("image not found: " + path);
  uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || size > options.max_image_bytes) {
    return ImageError("image " + path + " is larger than the server's limit of " +
                      std::to_string(options.max_image_bytes) + " bytes");
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return ImageError("cannot read image: " + path);
  bytes->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  return std::nullopt;
}

std::optional<ApiError> Resolve(const std::string& ref, const VisionOptions& options,
                                std::vector<uint8_t>* bytes) {
  size_t payload = 0;
  bool base64 = false;
  if (ParseDataUrl(ref, &payload, &base64)) {
    if (!base64) return ImageError("only base64 data: URLs are supported");
    std::string data = ref.substr(payload);
    if (data.empty()) return ImageError("image_url holds no image data");
    // 4 base64 characters carry 3 bytes: refuse before decoding.
    if (data.size() / 4 * 3 > options.max_image_bytes) {
      return ImageError("image is larger than the server's limit of " +
                        std::to_string(options.max_image_bytes) + " bytes");
    }
    if (!DecodeBase64Strict(data, bytes)) {
      return ImageError(
          "image_url is not valid base64: only the base64 alphabet with '=' padding at the end "
          "is allowed (no whitespace or line breaks)");
    }
    if (bytes->empty()) return ImageError("image_url holds no image data");
    return std::nullopt;
  }
  if (StartsWithNoCase(ref, "http://") || StartsWithNoCase(ref, "https://")) {
    return ImageError(
        "remote image URLs are not fetched by this server: it would make the server issue "
        "requests to addresses its clients pick. Send the image as a base64 data: URL instead.");
  }
  return ReadLocal(ref, options, bytes);
}

}  // namespace

bool DecodeBase64Strict(const std::string& in, std::vector<uint8_t>* out) {
  out->clear();
  if (in.size() % 4 != 0) return false;
  out->reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    const bool last = i + 4 == in.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      if (c == '=' && last && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return false;  // data after '='
      v[k] = Base64Value(c);
      if (v[k] < 0) return false;
    }
    uint32_t n = (uint32_t(v[0]) << 18) | (uint32_t(v[1]) << 12) | (uint32_t(v[2]) << 6) | uint32_t(v[3]);
    // Canonical padding: the bits a '=' hides must be zero.
    if (pad == 1 && (v[2] & 0x3) != 0) return false;
    if (pad == 2 && (v[1] & 0xf) != 0) return false;
    out->push_back(static_cast<uint8_t>(n >> 16));
    if (pad < 2) out->push_back(static_cast<uint8_t>(n >> 8));
    if (pad < 1) out->push_back(static_cast<uint8_t>(n));
  }
  return true;
}

std::optional<ApiError> CollectImages(const Json& body, const VisionOptions& options,
                                      std::vector<ImageInput>* out) {
  out->clear();
  auto messages = body.find("messages");
  if (messages == body.end() || !messages->is_array()) return std::nullopt;
  size_t i = 0;
  for (const Json& m : *messages) {
    std::string at = "messages[" + std::to_string(i++) + "]";
    auto content = m.find("content");
    if (content == m.end() || !content->is_array()) continue;
    size_t j = 0;
    for (const Json& part : *content) {
      std::string pat = at + ".content[" + std::to_string(j++) + "]";
      auto type = part.find("type");
      if (type == part.end() || !type->is_string() || !IsImagePart(type->get<std::string>())) {
        continue;
      }
      if (!options.enabled) {
        return BadRequest(
            "this server was started without the vision tower; restart it with --vision to "
            "accept images",
            std::nullopt, "vision_disabled");
      }
      std::string ref = Reference(part, type->get<std::string>());
      if (ref.empty()) return BadRequest(pat + " is an image with no url", pat);
      if (out->size() >= static_cast<size_t>(kMaxQueuedImages)) {
        return BadRequest("a request may carry at most " + std::to_string(kMaxQueuedImages) +
                              " images",
                          "messages");
      }
      ImageInput img;
      img.where = pat;
      if (auto e = Resolve(ref, options, &img.bytes)) return e;
      Result<ImageDimensions> dims = ProbeImageBytes(img.bytes, pat);
      if (!dims) {
        return ImageError("the image in " + pat + " cannot be used: " + dims.error().message(),
                          "invalid_image");
      }
      img.width = dims->width;
      img.height = dims->height;
      out->push_back(std::move(img));
    }
  }
  return std::nullopt;
}

}  // namespace waste::server
