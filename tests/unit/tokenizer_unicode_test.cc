// Slow: pre-tokenization agrees with tools/tokenizer_ref.py (Python `regex`,
// the upstream pattern verbatim) for every Unicode scalar value, each placed
// in contexts that exercise every branch of the pattern. The only allowed
// differences are code points that this PCRE2's Unicode tables leave
// unassigned (the regex module may know a newer Unicode version).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "text/pretokenizer.h"

namespace waste {
namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 63));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 63));
    *out += static_cast<char>(0x80 | (cp & 63));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 63));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 63));
    *out += static_cast<char>(0x80 | (cp & 63));
  }
}

// One case per code point c: "a c A c c 1 c ␠ c 'S c 一 c \n" without the
// spaces: after a lower and an upper letter, doubled, after a digit, after
// a space, before a contraction and around Han.
std::string CaseFor(uint32_t cp) {
  std::string c;
  AppendUtf8(cp, &c);
  return "a" + c + "A" + c + c + "1" + c + " " + c + "'S" + c + "\xe4\xb8\x80" + c + "\n";
}

std::string Hex(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

TEST(TokenizerUnicode, EveryCodePointAgreesWithTheReference) {
#ifdef _WIN32
  GTEST_SKIP() << "runs on POSIX hosts";
#else
  std::vector<uint32_t> cps;
  std::string data;
  for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == '\n') continue;
    cps.push_back(cp);
    data += CaseFor(cp);
  }
  const std::filesystem::path file =
      std::filesystem::path(testing::TempDir()) /
      ("waste_tokenizer_codepoints_" + std::to_string(getpid()) + ".txt");
  std::ofstream(file, std::ios::binary)
      .write(data.data(), static_cast<std::streamsize>(data.size()));
  const std::string cmd = std::string(WASTE_PYTHON) + " " + WASTE_SOURCE_DIR +
                          "/tools/tokenizer_ref.py --pieces '" + file.string() + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 3 || code == 126 || code == 127) GTEST_SKIP() << WASTE_PYTHON << ": " << out;
  ASSERT_EQ(code, 0) << out.substr(0, 2000);

  int err;
  PCRE2_SIZE off;
  pcre2_code* unassigned =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(R"(\p{Cn})"), PCRE2_ZERO_TERMINATED,
                    PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, nullptr);
  ASSERT_NE(unassigned, nullptr);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  const PreTokenizer* pre = PreTokenizer::Get().value();
  std::stringstream lines(out);
  size_t i = 0, newer_unicode = 0, failures = 0;
  size_t pos = 0;
  for (std::string ref; std::getline(lines, ref); ++i) {
    ASSERT_LT(i, cps.size());
    const size_t end = data.find('\n', pos) + 1;
    std::string ours;
    pre->Split(std::string_view(data).substr(pos, end - pos), [&](std::string_view piece) {
      if (!ours.empty()) ours += '|';
      ours += Hex(piece);
    });
    pos = end;
    if (ours == ref) continue;
    std::string c;
    AppendUtf8(cps[i], &c);
    if (pcre2_match(unassigned, reinterpret_cast<PCRE2_SPTR>(c.data()), c.size(), 0, 0, md,
                    nullptr) > 0) {
      ++newer_unicode;
      continue;
    }
    if (++failures <= 20)
      ADD_FAILURE() << "U+" << std::hex << cps[i] << ": ours " << ours << " ref " << ref;
  }
  EXPECT_EQ(i, cps.size());
  std::error_code ec;
  std::filesystem::remove(file, ec);
  EXPECT_EQ(failures, 0u);
  char version[32] = {};
  pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version);
  RecordProperty("unassigned_in_pcre2_unicode", std::to_string(newer_unicode));
  std::printf("PCRE2 Unicode %s: %zu code points differ only because they are unassigned there\n",
              version, newer_unicode);
  pcre2_match_data_free(md);
  pcre2_code_free(unassigned);
#endif
}

}  // namespace
}  // namespace waste
