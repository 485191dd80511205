// waste-gen: writes a synthetic container.
//   waste-gen OUT_DIR --preset tiny|kimi-linear|kimi-linear-small|deepseek-v3-tiny|deepseek-v2-tiny|k3-tiny
//             [--seed N] [--tokenizer] [--vq4p] [--trace FILE|none] [--manifest-only] [-q]
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "checkpoint_gen.h"
#include "generator.h"
#include "presets.h"

namespace {

constexpr const char* kUsage =
    "usage: waste-gen OUT_DIR [--preset NAME] [--seed N] [--tokenizer] [--vq4p]\n"
    "                 [--trace FILE|none] [--vision D,HEADS,Q,I,BLOCKS,PH,PW,MAXP]\n"
    "                 [--override JSON] [--manifest-only] [-q]\n"
    "  presets: tiny (default), kimi-linear, kimi-linear-small, deepseek-v3-tiny, deepseek-v2-tiny, k3-tiny\n"
    "  --tokenizer      add tokenizer.model, specials.json and chat.json\n"
    "  --vq4p           experts as 4 stages x 64 entries, 6-bit packed (VQ4P)\n"
    "  --vision SPEC    add a vision tower (K3 presets): D,HEADS,Q,I,BLOCKS,POS_H,POS_W,\n"
    "                   MAX_PATCHES[,q8|q4|f32], e.g. 64,2,64,128,2,8,8,64\n"
    "  --trace FILE     fit router biases to a routing trace (JSON lines); kimi-linear\n"
    "                   presets use the project's trace by default, 'none' turns it off\n"
    "  --override JSON  a JSON merge patch applied to the preset's config, e.g.\n"
    "                   '{\"num_experts\":16,\"n_group\":4,\"topk_group\":2}' (null deletes a key)\n"
    "  --manifest-only  write manifest.json alone (exact offsets; no data files)\n"
    "  --checkpoint     write a checkpoint in the family's published layout instead of a\n"
    "                   container (config.json, index, safetensors shards) for waste convert;\n"
    "                   with --dtype bf16|fp8|mxfp4|int4 (fp8: every *_proj matrix e4m3 with\n"
    "                   32x32 block scales; mxfp4: routed experts; int4: routed experts\n"
    "                   pack-quantized as Kimi-K2-Thinking, --int4-group N columns per scale,\n"
    "                   default 32), --shards N, --vocab N,\n"
    "                   --override JSON (merged into the preset's config)\n";

std::string Count(uint64_t n) {
  if (n >= 1000000000ull) return fmt::format("{:.2f} B", n / 1e9);
  return fmt::format("{:.2f} M", n / 1e6);
}

std::string Bytes(uint64_t n) {
  if (n >= 1000000000ull) return fmt::format("{:.2f} GB", n / 1e9);
  return fmt::format("{:.2f} MB", n / 1e6);
}

int Usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "waste-gen: %s\n", why.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

int Run(int argc, char** argv) {
  waste::gen::GenOptions o;
  waste::gen::CheckpointOptions co;
  bool checkpoint = false;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--preset") {
      const char* v = value();
      if (v == nullptr) return Usage("--preset needs a name");
      o.preset = v;
    } else if (a == "--seed") {
      const char* v = value();
      char* end = nullptr;
      if (v == nullptr) return Usage("--seed needs a number");
      unsigned long long s = std::strtoull(v, &end, 10);
      if (end == v || *end != '\0') return Usage(fmt::format("--seed {}: not a number", v));
      o.seed = s;
    } else if (a == "--trace") {
      const char* v = value();
      if (v == nullptr) return Usage("--trace needs a file (or none)");
      o.trace = v;
    } else if (a == "--checkpoint") {
      checkpoint = true;
    } else if (a == "--dtype") {
      const char* v = value();
      std::string_view d = v == nullptr ? "" : v;
      if (d == "bf16") {
        co.dtype = waste::gen::CheckpointDType::kBf16;
      } else if (d == "fp8") {
        co.dtype = waste::gen::CheckpointDType::kFp8;
      } else if (d == "mxfp4") {
        co.dtype = waste::gen::CheckpointDType::kMxfp4;
      } else if (d == "int4") {
        co.dtype = waste::gen::CheckpointDType::kInt4;
      } else {
        return Usage("--dtype takes bf16, fp8, mxfp4 or int4");
      }
    } else if (a == "--int4-group") {
      const char* v = value();
      char* end = nullptr;
      const long g = v == nullptr ? 0 : std::strtol(v, &end, 10);
      if (v == nullptr || end == v || *end != '\0' || g < 1 || g > 1 << 20) {
        return Usage(fmt::format("--int4-group {}: not a positive number of columns", v == nullptr ? "" : v));
      }
      co.int4_group = static_cast<int>(g);
    } else if (a == "--override") {
      const char* v = value();
      if (v == nullptr) return Usage("--override needs a JSON object");
      co.override_json = v;
      o.override_json = v;
    } else if (a == "--shards" || a == "--vocab") {
      const char* v = value();
      if (v == nullptr) return Usage(fmt::format("{} needs a number", a));
      (a == "--shards" ? co.shards : co.vocab) = std::atoi(v);
    } else if (a == "--vision") {
      const char* v = value();
      if (v == nullptr) return Usage("--vision needs D,HEADS,Q,I,BLOCKS,POS_H,POS_W,MAX_PATCHES");
      o.vision = v;
    } else if (a == "--tokenizer") {
      o.tokenizer = true;
    } else if (a == "--vq4p") {
      o.vq4p = true;
    } else if (a == "--manifest-only") {
      o.manifest_only = true;
    } else if (a == "-q" || a == "--quiet") {
      quiet = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return Usage(fmt::format("unknown option {}", a));
    } else if (o.out_dir.empty()) {
      o.out_dir = std::string(a);
    } else {
      return Usage(fmt::format("unexpected argument {}", a));
    }
  }
  if (o.out_dir.empty()) return Usage("missing OUT_DIR");
  if (!quiet) o.log = [](const std::string& line) { std::fprintf(stderr, "  %s\n", line.c_str()); };
  if (checkpoint) {
    co.out_dir = o.out_dir;
    co.preset = o.preset;
    co.seed = o.seed;
    co.tokenizer = o.tokenizer;
    auto r = waste::gen::GenerateCheckpoint(co);
    if (!r) {
      std::fprintf(stderr, "waste-gen: %s\n", r.error().ToString().c_str());
      return 1;
    }
    if (!quiet) {
      std::fprintf(stderr, "%s: %s checkpoint, %d tensors, %s\n", o.out_dir.c_str(), o.preset.c_str(),
                   r->tensors, Bytes(r->bytes).c_str());
    }
    return 0;
  }

  auto t0 = std::chrono::steady_clock::now();
  auto report = waste::gen::Generate(o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!report) {
    std::fprintf(stderr, "waste-gen: %s\n", report.error().ToString().c_str());
    return 1;
  }
  if (!quiet) {
    std::fprintf(stderr, "%s: %s, %s params (%s active), %s in %.1f s\n  %s\n",
                 o.out_dir.c_str(), o.preset.c_str(), Count(report->params.total).c_str(),
                 Count(report->params.active).c_str(), Bytes(report->bytes).c_str(), secs,
                 report->routing.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "waste-gen: %s\n", e.what());
    return 1;
  }
}
