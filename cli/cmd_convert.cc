// `waste convert SRC OUT`: a thin front end over waste/convert.h with its
// own option parsing (it takes no engine options). Progress: a bar with ETA and throughput on a
// terminal, one JSON object per line with --json, plain lines otherwise.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "host.h"
#include "waste/convert.h"

namespace waste::cli {
namespace {

std::string Duration(double s) {
  if (s < 0) return "?";
  const int t = static_cast<int>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

void PrintProgress(const ConvertProgress& p, bool json, bool tty) {
  if (json) {
    nlohmann::ordered_json j = {{"phase", p.phase},
                                {"layer", p.layer},
                                {"layers_done", p.layers_done},
                                {"layers_total", p.layers_total},
                                {"experts_done", p.experts_done},
                                {"experts_total", p.experts_total},
                                {"elapsed_s", p.elapsed_s},
                                {"eta_s", p.eta_s},
                                {"source_gb_per_s", p.source_gb_per_s},
                                {"message", p.message}};
    std::fprintf(stdout, "%s\n", j.dump().c_str());
    std::fflush(stdout);
    return;
  }
  if (p.phase == "layer" || p.phase == "done" || p.phase == "finish") {
    std::fprintf(stderr, "%s%s\n", tty ? "\r\033[K" : "", p.message.c_str());
    return;
  }
  if (!tty) return;  // plain logs get the per-layer lines only
  const double frac = p.experts_total > 0 ? static_cast<double>(p.experts_done) / p.experts_total : 0;
  const int width = 30, fill = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(fill), '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r\033[K[%s] %5.1f%% %s layer %d  %d/%d experts  %.2f GB/s  eta %s",
               bar.c_str(), 100 * frac, p.phase.c_str(), p.layer, p.experts_done, p.experts_total,
               p.source_gb_per_s, Duration(p.eta_s).c_str());
  std::fflush(stderr);
}

// A layer number: decimal digits and nothing else (std::stoi would take
// "2x" as 2 and "1-2-3" as the range 1-2).
std::optional<int> LayerNumber(const std::string& s) {
  if (s.empty() || s.size() > 6 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::stoi(s);
}

// "1,2,5-7" -> {1, 2, 5, 6, 7}; a malformed part or a reversed range sets
// *error (naming the option and the part) instead of being read some other way.
std::vector<int> ParseLayers(const std::string& s, std::string* error) {
  std::vector<int> out;
  if (s.empty()) return out;
  size_t p = 0;
  while (true) {
    const size_t e = s.find(',', p);
    const std::string part = s.substr(p, e == std::string::npos ? std::string::npos : e - p);
    const size_t dash = part.find('-');
    const std::optional<int> a = LayerNumber(part.substr(0, dash));
    const std::optional<int> b = dash == std::string::npos ? a : LayerNumber(part.substr(dash + 1));
    if (!a || !b) {
      *error = fmt::format("--layers: \"{}\" is not a layer number or range (e.g. 1,3-5)", part);
      return {};
    }
    if (*a > *b) {
      *error = fmt::format("--layers: \"{}\" is a reversed range (write {}-{})", part, *b, *a);
      return {};
    }
    for (int l = *a; l <= *b; ++l) out.push_back(l);
    if (e == std::string::npos) break;
    p = e + 1;
  }
  return out;
}

// --tensor-format PART=FORMAT, checked as text here so that a malformed rule
// is a usage error (exit 2) like every other bad option value; whether a
// rule names a matrix of the checkpoint is the converter's to say.
std::optional<TensorFormatRule> ParseFormatRule(const std::string& r, std::string* error) {
  const size_t eq = r.rfind('=');
  if (eq == std::string::npos) {
    *error = fmt::format("--tensor-format: \"{}\" is not PART=FORMAT (e.g. shared_experts=q8g)", r);
    return std::nullopt;
  }
  TensorFormatRule rule{r.substr(0, eq), r.substr(eq + 1)};
  if (rule.pattern.empty()) {
    *error = fmt::format("--tensor-format: \"{}\" has an empty PART (e.g. shared_experts=q8g)", r);
    return std::nullopt;
  }
  if (rule.format != "f32" && rule.format != "q8g" && rule.format != "q4g") {
    *error = fmt::format("--tensor-format: \"{}\": the format must be f32, q8g or q4g", r);
    return std::nullopt;
  }
  return rule;
}

// Option values that are wrong in themselves, found before any file is
// read; "" when all are fine.
std::string CheckValues(const ConvertOptions& o) {
  if (o.threads < 0) {
    return fmt::format(
        "--threads: {} is not a thread count (a positive number; 0 or none: every CPU)", o.threads);
  }
  if (o.train_vectors < 1) {
    return fmt::format("--train-vectors: {} is not a vector count (1 or more; default 262144)",
                       o.train_vectors);
  }
  return "";
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "waste convert: %s\n", message.c_str());
  return 2;
}

}  // namespace

int ConvertMain(const std::vector<std::string>& args) {
  CLI::App app("Convert a published checkpoint (safetensors, Hugging Face layout) into a waste container",
               "waste convert");
  ConvertOptions o;
  std::string layers;
  bool json = false;
  app.add_option("SRC", o.source_dir, "checkpoint directory (config.json, safetensors)")->required();
  app.add_option("OUT", o.out_dir, "container directory (created; a rerun resumes)")->required();
  app.add_option("--layers", layers, "expert layers to convert now, e.g. 1,2,5-7 (default all)");
  app.add_option("--threads", o.threads, "worker threads (default: every CPU)");
  app.add_option("--expert-format", o.expert_format, "vq3r (default), vq2r or vq4p")
      ->check(CLI::IsMember({"vq3r", "vq2r", "vq4p"}));
  app.add_option("--seed", o.seed, "seed of the codebook training (default 0)");
  app.add_flag("--trunk8", o.trunk8, "store every quantised trunk matrix Q8G (default Q4G)");
  std::vector<std::string> format_rules;
  app.add_option("--tensor-format", format_rules,
                 "PART=f32|q8g|q4g: store the quantised trunk matrices whose name contains PART so, "
                 "e.g. shared_experts=q8g (repeatable; the first match wins; before --trunk8)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  auto* tv = app.add_option("--train-vectors", o.train_vectors, "codebook training vectors per layer and kind");
  app.add_flag("--reference-recipe", o.reference_recipe,
               "emulate the reference converter's recipe (same size; for quality comparisons)");
  bool no_rotate = false;
  app.add_flag("--no-rotate", no_rotate,
               "store the residual stream as the checkpoint has it (default: a rotated basis with the "
               "norm gains folded in, the same model with lower quantisation error)");
  app.add_flag("--json", json, "progress and the summary as JSON lines on stdout");
  std::vector<std::string> rev(args.rbegin(), args.rend());
  try {
    app.parse(rev);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.reference_recipe && tv->count() == 0) o.train_vectors = 300000;  // the reference's T
  o.rotate_residual = !no_rotate;
  std::string err;
  for (const std::string& r : format_rules) {
    std::optional<TensorFormatRule> rule = ParseFormatRule(r, &err);
    if (!rule) return UsageError(err);
    o.tensor_formats.push_back(*rule);
  }
  o.layers = ParseLayers(layers, &err);
  if (!err.empty()) return UsageError(err);
  err = CheckValues(o);
  if (!err.empty()) return UsageError(err);
  const bool tty = !json && StderrIsTerminal();
  o.progress = [&](const ConvertProgress& p) { PrintProgress(p, json, tty); };
  Result<ConvertReport> r = Convert(o);
  if (!r) {
    if (tty) std::fputs("\n", stderr);
    std::fprintf(stderr, "waste convert: %s\n", r.error().message().c_str());
    return 1;
  }
  const ConvertReport& rep = *r;
  if (json) {
    nlohmann::ordered_json layers_j = nlohmann::ordered_json::array();
    for (const ConvertLayerReport& l : rep.layers) {
      layers_j.push_back({{"layer", l.layer}, {"cached", l.cached}, {"seconds", l.seconds},
                          {"train_cpu_s", l.train_cpu_s}, {"encode_cpu_s", l.encode_cpu_s},
                          {"rel_error", {l.rel_error[0], l.rel_error[1], l.rel_error[2]}}});
    }
    nlohmann::ordered_json j = {{"phase", "summary"}, {"complete", rep.complete}, {"family", rep.family},
                                {"layers_total", rep.layers_total}, {"layers_finished", rep.layers_finished},
                                {"trunk_cached", rep.trunk_cached}, {"trunk_rel_error", rep.trunk_rel_error},
                                {"seconds", rep.seconds}, {"source_bytes_read", rep.source_bytes_read},
                                {"peak_rss_bytes", rep.peak_rss_bytes}, {"threads", rep.threads},
                                {"rotation_block", rep.rotation_block},
                                {"rotation_skipped", rep.rotation_skipped}, {"layers", layers_j}};
    std::fprintf(stdout, "%s\n", j.dump().c_str());
  } else {
    if (!rep.rotation_skipped.empty()) {
      std::fprintf(stderr, "waste convert: residual stream not rotated: %s\n", rep.rotation_skipped.c_str());
    }
    const std::string basis = rep.rotation_block > 0
                                  ? ", residual stream rotated (Walsh-Hadamard blocks of " +
                                        std::to_string(rep.rotation_block) + ")"
                                  : "";
    std::fprintf(stderr, "%s: %s, %d/%d expert layers, trunk error %.2f%%%s, %.1f s, %.1f MB read, peak RSS %.0f MiB, %d threads\n",
                 o.out_dir.c_str(), rep.complete ? "complete" : "incomplete (rerun to continue)",
                 rep.layers_finished, rep.layers_total, 100 * rep.trunk_rel_error, basis.c_str(), rep.seconds,
                 rep.source_bytes_read / 1e6, rep.peak_rss_bytes / 1048576.0, rep.threads);
  }
  return 0;
}

}  // namespace waste::cli
