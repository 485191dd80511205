// Images in chat requests: the image parts of `messages` resolved to bytes
// (base64 data: URLs; server-side paths only with --allow-local-images),
// their stored size probed from the header, and every refusal an
// OpenAI-shaped 400 naming the field. Runs on the request's HTTP thread,
// before the request waits for the engine; the engine thread decodes and
// encodes the bytes (Engine::AddImageBytes) just before generating.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api_error.h"
#include "json_text.h"

namespace waste::server {

struct VisionOptions {
  bool enabled = false;             // --vision and a model with a tower
  bool allow_local_paths = false;   // --allow-local-images
  size_t max_image_bytes = 32u << 20;  // one image's encoded size
};

struct ImageInput {
  std::vector<uint8_t> bytes;  // the encoded file (PNG, JPEG, ...)
  int width = 0;               // stored size, from the header
  int height = 0;
  std::string where;           // "messages[0].content[1]" for messages
};

// A content part carrying an image ("image" or OpenAI's "image_url").
// Inline: the validation and the renderers use it without the decoder.
inline bool IsImagePart(const std::string& type) { return type == "image" || type == "image_url"; }

// Every image part of `body.messages`, in conversation order. Assumes the
// messages passed ValidateMessages.
std::optional<ApiError> CollectImages(const Json& body, const VisionOptions& options,
                                      std::vector<ImageInput>* out);

// Strict base64 (RFC 4648 alphabet, '=' padding only at the end, no
// whitespace). False on anything else.
bool DecodeBase64Strict(const std::string& in, std::vector<uint8_t>* out);

// The text that stands for "the next image" inside message text (K3's
// convention); replaced by media blocks when a request has images.
inline constexpr const char* kImagePlaceholder = "<|kimi_image_placeholder|>";

}  // namespace waste::server
