// The image-part reader of the server (untrusted input): strict base64,
// data: URL headers, remote and local references, the limits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "image_input.h"

namespace waste::server {
namespace {

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(ImageInput, Base64IsStrict) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(DecodeBase64Strict("aGVsbG8=", &out));
  EXPECT_EQ(out, Bytes("hello"));
  EXPECT_TRUE(DecodeBase64Strict("aGk=", &out) && out == Bytes("hi"));
  EXPECT_TRUE(DecodeBase64Strict("aA==", &out) && out == Bytes("h"));
  EXPECT_TRUE(DecodeBase64Strict("", &out) && out.empty());
  EXPECT_TRUE(DecodeBase64Strict("+/+/", &out) && out.size() == 3);
  for (const char* bad : {"aGVsbG8", "aGVsbG8==", "aGVs bG8=", "aGVs\nbG8=", "a===", "====",
                          "aG=s", "aGk", "aGj=", "aB==", "!!!!", "aGVsbG8=aGk=", "-_-_"}) {
    EXPECT_FALSE(DecodeBase64Strict(bad, &out)) << bad;
  }
}

Json Body(const std::string& url) {
  return {{"messages",
           Json::array({{{"role", "user"},
                         {"content", Json::array({{{"type", "image_url"},
                                                   {"image_url", {{"url", url}}}}})}}})}};
}

TEST(ImageInput, RefusalsNameTheField) {
  VisionOptions on;
  on.enabled = true;
  std::vector<ImageInput> images;
  struct Case {
    std::string url;
    const char* param;
    const char* part;
  } cases[] = {
      {"http://example.com/a.png", "image_url", "not fetched"},
      {"HTTPS://example.com/a.png", "image_url", "not fetched"},
      {"data:image/png,abc", "image_url", "only base64"},
      {"data:image/png;base64,", "image_url", "no image data"},
      {"data:image/png;base64,aGVsbG8", "image_url", "not valid base64"},
      {"data:image/png;base64,aGVsbG8=", "image_url", "messages[0].content[0]"},
      {"data:image/png;charset=utf-8;base64,aGk=", "image_url", "--allow-local-images"},
      {"/etc/passwd", "image_url", "--allow-local-images"},
      {"", "messages[0].content[0]", "no url"},
  };
  for (const Case& c : cases) {
    auto e = CollectImages(Body(c.url), on, &images);
    ASSERT_TRUE(e.has_value()) << c.url;
    EXPECT_EQ(e->status, 400) << c.url;
    EXPECT_EQ(e->param.value_or(""), c.param) << c.url;
    EXPECT_NE(e->message.find(c.part), std::string::npos) << c.url << ": " << e->message;
  }
  VisionOptions off;
  auto e = CollectImages(Body("data:image/png;base64,aGk="), off, &images);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code.value_or(""), "vision_disabled");
  // A local path with the option on: a missing file is named.
  VisionOptions local = on;
  local.allow_local_paths = true;
  e = CollectImages(Body("file:///nonexistent/x.png"), local, &images);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("image not found: /nonexistent/x.png"), std::string::npos) << e->message;
  // The encoded-size limit is checked before decoding.
  VisionOptions small = on;
  small.max_image_bytes = 4;
  e = CollectImages(Body("data:image/png;base64,aGVsbG8h"), small, &images);
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->message.find("larger than"), std::string::npos) << e->message;
}

}  // namespace
}  // namespace waste::server
