// waste::Convert: checks the whole source up front (config bounds, required
// tensors, expert shapes), then trunk, expert layers, small files,
// codebooks.bin and manifest.json last. Resume state lives in convert.json
// (deterministic content: options, source fingerprint, and the size and
// crc32 of every finished file); a finished file is trusted only when its
// size and crc32 match. Every file is written to a temporary name and
// renamed, so killing a run at any point and rerunning it produces the same
// bytes.
#include <zlib.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/engine_env.h"
#include "container/container.h"
#include "container/tensor_list.h"
#include "convert/passes.h"
#include "convert/source_model.h"
#include "platform/platform.h"
#include "runtime/thread_pool.h"
#include "waste/convert.h"
#include "base/exception_status.h"

namespace waste {
namespace {

using convert::JoinPath;
using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr int kStateVersion = 1;

Result<ExpertQuant> QuantFor(const std::string& name) {
  if (name == "vq3r") return ExpertQuant{3, 8, 256, 8, "VQ3R"};
  if (name == "vq2r") return ExpertQuant{2, 8, 256, 8, "VQ2R"};
  if (name == "vq4p") return ExpertQuant{4, 8, 64, 6, "VQ4P"};
  return ArgError(fmt::format("expert format \"{}\": use vq3r, vq2r or vq4p", name));
}

OJson QuantJson(const ExpertQuant& q) {
  OJson j = OJson::object();
  j["fmt"] = q.fmt_name;
  j["stages"] = q.stages;
  j["vec_dim"] = q.vec_dim;
  j["entries"] = q.entries;
  j["index_bits"] = q.index_bits;
  j["index_block"] = format::kIndexBlockRows;
  if ((q.stages * q.index_bits) % 8 == 0) {
    j["bits_per_weight"] = q.stages * q.index_bits / 8;
  } else {
    j["bits_per_weight"] = q.stages * q.index_bits / 8.0;
  }
  return j;
}

uint32_t Crc(const std::string& s) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(s.data()),
                                     static_cast<uInt>(s.size())));
}

// Identifies the source without reading its tensors: config, tensor names,
// dtypes, shapes and byte counts.
Result<Json> SourceFingerprint(const convert::Checkpoint& ckpt) {
  WASTE_ASSIGN_OR_RETURN(std::string cfg, platform::ReadWholeFile(JoinPath(ckpt.dir(), "config.json")));
  std::string names;
  for (const std::string& n : ckpt.Names()) {
    const convert::TensorEntry* t = ckpt.Find(n);
    names += fmt::format("{}:{}:{}:{};", n, convert::DTypeName(t->dtype), fmt::join(t->shape, "x"), t->bytes);
  }
  return Json{{"config_crc32", Crc(cfg)}, {"tensors_crc32", Crc(names)}, {"bytes", ckpt.total_bytes()}};
}

Status SaveState(const std::string& out, const Json& state) {
  const std::string text = state.dump(1) + "\n";
  return convert::PublishBytes(JoinPath(out, "convert.json"), text);
}

bool FileMatches(const std::string& path, const Json& want) {
  if (!want.is_object() || !want.contains("bytes") || !want.contains("crc32")) return false;
  Result<std::pair<uint64_t, uint32_t>> got = convert::FileCrc(path);
  return got && got->first == want["bytes"].get<uint64_t>() && got->second == want["crc32"].get<uint32_t>();
}

// The manifest head the reader validates the config with (bounds, layer
// kinds, record geometry).
std::string HeadText(const convert::SourceModel& m, const ExpertQuant& q) {
  OJson head = OJson::object();
  head["format_version"] = format::kFormatVersion;
  head["tensor_prefix"] = m.prefix;
  head["config"] = m.config;
  head["expert_quant"] = QuantJson(q);
  return head.dump();
}

// The engine's required tensors against what the trunk will hold, checked
// before any work; so is every format rule (one that can never apply is
// refused: a misspelt name would otherwise change nothing unseen).
Status CheckRequiredTensors(const convert::Checkpoint& ckpt, const convert::SourceModel& m,
                            Manifest manifest, const convert::TrunkFormats& formats) {
  std::vector<bool> rule_won(formats.rules.size(), false), rule_named(formats.rules.size(), false);
  for (const convert::TrunkSource& t : m.trunk) {
    // The logical shape: a packed matrix's header shape is its codes'.
    WASTE_ASSIGN_OR_RETURN(std::vector<int64_t> shape, convert::SourceShape(ckpt, t.source));
    shape = convert::TrunkShapeFor(t, shape);
    TensorInfo info;
    info.name = t.target;
    int rule = -1;
    info.fmt = convert::TrunkFormatFor(t, shape, formats, &rule);
    if (rule >= 0) rule_won[static_cast<size_t>(rule)] = true;
    // The matrices a rule could apply to: those the recipe quantises.
    if (!t.vision && convert::TrunkFormatFor(t, shape, {}) != format::TensorFmt::kF32) {
      for (size_t i = 0; i < formats.rules.size(); ++i) {
        if (t.target.find(formats.rules[i].pattern) != std::string::npos) rule_named[i] = true;
      }
    }
    info.shape = shape;
    manifest.trunk.push_back(std::move(info));
  }
  for (size_t i = 0; i < formats.rules.size(); ++i) {
    const std::string& text = formats.rules[i].text;
    if (rule_named[i] && !rule_won[i]) {
      return ArgError(fmt::format("tensor format rule \"{}\" never applies: every matrix it names is "
                                  "taken by an earlier rule (the first match wins)", text));
    }
    if (!rule_won[i]) {
      return ArgError(fmt::format("tensor format rule \"{}\" matches no quantised trunk matrix of {} "
                                  "(rules apply to 2-D matrices of 65 536 elements or more, by a part "
                                  "of the container name, e.g. shared_experts or self_attn.q_proj)",
                                  text, ckpt.dir()));
    }
  }
  Status st = ValidateRequiredTensors(manifest);
  if (!st.ok()) return FormatError(fmt::format("{}: {}", ckpt.dir(), st.message()));
  return Status::Ok();
}

// A file of a killed first run: the resume state's own temporary (written
// before anything else) or the parts folder, created right after it.
bool IsStartLeftover(const std::filesystem::directory_entry& entry) {
  const std::string name = entry.path().filename().string();
  if (name.starts_with("convert.json.tmp.")) return entry.is_regular_file();
  std::error_code ec;
  return name == "parts" && entry.is_directory() && std::filesystem::is_empty(entry.path(), ec);
}

// Whether convert.json is this converter's resume state (a user's file of
// the same name must not be overwritten or taken for one).
bool IsResumeState(const std::string& path) {
  Result<std::string> text = platform::ReadWholeFile(path);
  if (!text) return false;
  const Json j = Json::parse(*text, nullptr, false);
  return j.is_object() && j.contains("version") && j.contains("source") && j.contains("settings");
}

// OUT may be missing, empty, or a conversion by this converter (complete or
// not: the resume case). Anything else is refused before a byte is written,
// so a mistyped OUT never mixes a container into unrelated files, and OUT
// may not be the checkpoint itself (its tokenizer.model and
// chat_template.jinja would be overwritten). A folder inside SRC is
// allowed: the converter reads only files at the top of SRC and the shards
// the index names, none of which a container file is called.
Status CheckOutDir(const std::string& out, const std::string& src) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(out, ec)) return Status::Ok();
  if (!fs::is_directory(out, ec)) {
    return ArgError(fmt::format("{} is a file, not a directory", out));
  }
  if (fs::equivalent(out, src, ec)) {
    return ArgError(
        fmt::format("{} is the checkpoint directory itself; write the container to another "
                    "directory",
                    out));
  }
  const std::string state_path = JoinPath(out, "convert.json");
  if (fs::exists(state_path, ec)) {
    if (IsResumeState(state_path)) return Status::Ok();
    return ArgError(
        fmt::format("{} is not empty and not a conversion in progress ({} is not waste "
                    "convert's resume state); nothing in it was touched",
                    out, state_path));
  }
  if (fs::exists(JoinPath(out, "manifest.json"), ec)) {
    return ArgError(
        fmt::format("{} already holds a container that this converter did not write "
                    "(manifest.json without convert.json); nothing in it was touched",
                    out));
  }
  for (const fs::directory_entry& entry : fs::directory_iterator(out, ec)) {
    if (!IsStartLeftover(entry)) {
      return ArgError(
          fmt::format("{} is not empty and not a conversion in progress (no convert.json; it "
                      "holds {}); nothing in it was touched: use an empty or new directory",
                      out, entry.path().filename().string()));
    }
  }
  if (ec) return IoError(fmt::format("list {}: {}", out, ec.message()));
  return Status::Ok();
}

Result<ConvertReport> Run(const ConvertOptions& o) {
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  ConvertReport report;
  WASTE_ASSIGN_OR_RETURN(ExpertQuant quant, QuantFor(o.expert_format));
  WASTE_ASSIGN_OR_RETURN(convert::TrunkFormats trunk_formats,
                         convert::ParseTrunkFormats(o.trunk8, o.tensor_formats));
  if (o.train_vectors < 1 || o.kmeans_iterations < 1) {
    return ArgError("training vectors and k-means iterations must be positive");
  }
  // WASTE_CONVERT_REFINE_ROUNDS overrides the option, for measurements
  // (recorded in the resume settings all the same).
  int refine_rounds = EnvInt("WASTE_CONVERT_REFINE_ROUNDS", o.refine_rounds);
  if (refine_rounds < 0 || refine_rounds > 64) return ArgError("refinement rounds must be in [0, 64]");
  if (o.reference_recipe) refine_rounds = 0;
  WASTE_ASSIGN_OR_RETURN(std::unique_ptr<convert::Checkpoint> ckpt, convert::Checkpoint::Open(o.source_dir));
  WASTE_TRY(CheckOutDir(o.out_dir, o.source_dir));
  WASTE_ASSIGN_OR_RETURN(convert::SourceModel model, convert::DescribeSource(*ckpt));
  report.family = std::string(model.family->key);
  WASTE_ASSIGN_OR_RETURN(Manifest head, ParseManifestConfig(HeadText(model, quant),
                                                            JoinPath(o.source_dir, "config.json")));
  const ModelConfig& cfg = head.config;
  std::vector<int> cfg_moe;
  for (int l = 0; l < cfg.n_layers; ++l) {
    if (cfg.ffn_kind[l] == FfnKind::kMoe) cfg_moe.push_back(l);
  }
  if (cfg_moe != model.moe_layers) {
    return FormatError(fmt::format("{}: the config makes layers [{}] MoE, the tensors layers [{}]",
                                   o.source_dir, fmt::join(cfg_moe, ","), fmt::join(model.moe_layers, ",")));
  }
  WASTE_ASSIGN_OR_RETURN(format::RecordLayout layout,
                         format::ComputeRecordLayout(cfg.moe.inter, cfg.expert_in(), cfg.quant));
  WASTE_TRY(CheckRequiredTensors(*ckpt, model, head, trunk_formats));
  convert::ResidualBasis basis;
  if (o.rotate_residual && !o.reference_recipe) {
    WASTE_ASSIGN_OR_RETURN(basis, convert::ResidualBasis::Plan(*ckpt, model, cfg, o.seed));
    report.rotation_block = basis.block();
    report.rotation_skipped = basis.why_not();
  }
  // A tokenizer.json that cannot be converted fails now, not after the layers.
  if (!platform::PathExists(JoinPath(ckpt->dir(), "tiktoken.model")) &&
      !platform::PathExists(JoinPath(ckpt->dir(), "tokenizer.model")) &&
      platform::PathExists(JoinPath(ckpt->dir(), "tokenizer.json"))) {
    Result<convert::HfTokenizerFiles> tok = convert::LoadHfTokenizer(ckpt->dir());
    if (!tok) return tok.error();
  }

  std::vector<int> todo = o.layers.empty() ? model.moe_layers : o.layers;
  std::sort(todo.begin(), todo.end());
  todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
  for (int l : todo) {
    if (std::find(model.moe_layers.begin(), model.moe_layers.end(), l) == model.moe_layers.end()) {
      return ArgError(fmt::format("layer {} is not an expert layer (those are {})", l,
                                  fmt::join(model.moe_layers, ",")));
    }
  }

  // Resume state.
  WASTE_ASSIGN_OR_RETURN(Json fingerprint, SourceFingerprint(*ckpt));
  Json settings = {{"expert_format", o.expert_format}, {"seed", o.seed}, {"trunk8", o.trunk8},
                   {"train_vectors", o.train_vectors}, {"kmeans_iterations", o.kmeans_iterations},
                   {"reference_recipe", o.reference_recipe}, {"refine_rounds", refine_rounds}};
  // Recorded only when rotating (and the rules only when given), so that a
  // --no-rotate run without rules has the settings an older waste wrote and
  // resumes its conversions.
  if (basis.enabled()) settings["residual_basis"] = basis.Describe();
  if (!o.tensor_formats.empty()) {
    Json rules = Json::array();
    for (const TensorFormatRule& r : o.tensor_formats) rules.push_back({r.pattern, r.format});
    settings["tensor_formats"] = rules;
  }
  Json state = {{"version", kStateVersion}, {"source", fingerprint}, {"settings", settings},
                {"layers", Json::object()}};
  const std::string state_path = JoinPath(o.out_dir, "convert.json");
  if (platform::PathExists(state_path)) {
    WASTE_ASSIGN_OR_RETURN(std::string text, platform::ReadWholeFile(state_path));
    Json old;
    try {
      old = Json::parse(text);
    } catch (const std::exception&) {
      old = Json();
    }
    if (old.is_object() && old.value("version", 0) == kStateVersion && old["source"] == fingerprint &&
        old["settings"] == settings) {
      state = old;  // same source, same settings: finished files may be reused
    } else if (old.is_object() && old.contains("settings") && old["settings"] != settings) {
      // Rotation is the one setting an older waste could not have recorded.
      const bool old_rotated = old["settings"].is_object() && old["settings"].contains("residual_basis");
      const std::string hint = !old_rotated && basis.enabled()   ? " (started without the residual rotation: "
                                                                   "add --no-rotate to resume it)"
                               : old_rotated && !basis.enabled() ? " (started with the residual rotation)"
                                                                 : "";
      return ArgError(fmt::format("{} holds a conversion with other settings ({}){}; use the same "
                                  "settings or another output directory",
                                  o.out_dir, old["settings"].dump(), hint));
    } else if (old.is_object() && old.contains("source") && old["source"] != fingerprint) {
      return ArgError(fmt::format("{} holds a conversion of another checkpoint; use another output "
                                  "directory", o.out_dir));
    }
  }
  // OUT first, then the state, then parts/: a run killed in between leaves
  // what CheckOutDir recognises as a conversion that has started.
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  if (ec) return IoError(fmt::format("create {}: {}", o.out_dir, ec.message()));
  WASTE_TRY(SaveState(o.out_dir, state));
  std::filesystem::create_directories(JoinPath(o.out_dir, "parts"), ec);
  if (ec) return IoError(fmt::format("create {}: {}", JoinPath(o.out_dir, "parts"), ec.message()));
  // Leftovers of a killed run: temporaries never become part of the container.
  for (const std::string& d : {o.out_dir, JoinPath(o.out_dir, "parts")}) {
    for (const auto& entry : std::filesystem::directory_iterator(d, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".partial") || name.find(".tmp.") != std::string::npos) {
        std::filesystem::remove(entry.path(), ec);
      }
    }
  }

  const int threads =
      ResolveThreadCount(o.threads > 0 ? o.threads : ThreadsFromEnv(), platform::AllowedCpus());
  report.threads = threads;
  WASTE_ASSIGN_OR_RETURN(std::unique_ptr<ThreadPool> pool, ThreadPool::Create(threads));

  ConvertProgress prog;
  std::atomic<int> experts_done{0};
  uint64_t source_bytes = 0;
  auto emit = [&](const std::string& phase, int layer, const std::string& msg) {
    if (!o.progress) return;
    prog.phase = phase;
    prog.layer = layer;
    prog.experts_done = experts_done.load();
    prog.elapsed_s = elapsed();
    prog.eta_s = prog.experts_done > 0 && prog.experts_total > 0
                     ? prog.elapsed_s * (prog.experts_total - prog.experts_done) / prog.experts_done
                     : -1;
    prog.source_gb_per_s = prog.elapsed_s > 0 ? source_bytes / 1e9 / prog.elapsed_s : 0;
    prog.message = msg;
    o.progress(prog);
  };

  // Which layers are finished and sound.
  auto layer_done = [&](int l) {
    const std::string key = std::to_string(l);
    if (!state["layers"].contains(key)) return false;
    const Json& e = state["layers"][key];
    return FileMatches(JoinPath(o.out_dir, fmt::format("experts-L{}.bin", l)), e["bank"]) &&
           FileMatches(JoinPath(o.out_dir, fmt::format("parts/codebooks-L{}.bin", l)), e["part"]);
  };
  std::vector<int> run_layers;
  for (int l : todo) {
    if (layer_done(l)) {
      ConvertLayerReport lr;
      lr.layer = l;
      lr.cached = true;
      for (int k = 0; k < 3; ++k) lr.rel_error[k] = state["layers"][std::to_string(l)]["rel_error"][k];
      report.layers.push_back(lr);
    } else {
      state["layers"].erase(std::to_string(l));
      run_layers.push_back(l);
    }
  }
  prog.layers_total = static_cast<int>(todo.size());
  prog.layers_done = static_cast<int>(todo.size() - run_layers.size());
  prog.experts_total = static_cast<int>(run_layers.size()) * model.n_experts;

  // Trunk.
  if (state.contains("trunk") && FileMatches(JoinPath(o.out_dir, "trunk.bin"), state["trunk"])) {
    report.trunk_cached = true;
    report.trunk_rel_error = state["trunk"].value("rel_error", 0.0);
  } else {
    state.erase("trunk");
    WASTE_ASSIGN_OR_RETURN(convert::TrunkResult tr,
                           convert::WriteTrunk(*ckpt, model, trunk_formats, basis, o.reference_recipe, o.out_dir,
                                               pool.get(),
                                               [&](int done, int total) {
                                                 emit("trunk", -1, fmt::format("{}/{} tensors", done, total));
                                               }));
    source_bytes += tr.source_bytes;
    report.trunk_rel_error = tr.norm > 0 ? std::sqrt(tr.err / tr.norm) : 0;
    state["trunk"] = {{"bytes", tr.bytes}, {"crc32", tr.crc}, {"index", tr.index},
                      {"rel_error", report.trunk_rel_error}};
    WASTE_TRY(SaveState(o.out_dir, state));
  }

  // Expert layers. Codebook bases are fixed by the layer's rank among all
  // expert layers, so a subset run or a resumed run numbers them the same.
  for (int l : run_layers) {
    const auto lt0 = Clock::now();
    convert::LayerJob job;
    job.layer = l;
    job.codebook_base = 3 * quant.stages *
                        static_cast<int>(std::find(model.moe_layers.begin(), model.moe_layers.end(), l) -
                                         model.moe_layers.begin());
    job.quant = cfg.quant;
    job.layout = layout;
    job.train_vectors = o.train_vectors;
    job.kmeans_iterations = o.kmeans_iterations;
    job.seed = o.seed;
    job.reference = o.reference_recipe;
    job.refine_rounds = refine_rounds;
    job.basis = &basis;
    const uint64_t before = source_bytes;
    WASTE_ASSIGN_OR_RETURN(convert::LayerResult lr,
                           convert::ConvertLayer(*ckpt, model, job, o.out_dir, pool.get(), &experts_done,
                                                 [&] { emit("experts", l, ""); }));
    source_bytes = before + lr.source_bytes;
    ConvertLayerReport rep;
    rep.layer = l;
    rep.seconds = std::chrono::duration<double>(Clock::now() - lt0).count();
    rep.train_cpu_s = lr.train_cpu_s;
    rep.encode_cpu_s = lr.encode_cpu_s;
    Json rel = Json::array();
    for (int k = 0; k < 3; ++k) {
      rep.rel_error[k] = lr.norm[k] > 0 ? std::sqrt(lr.err[k] / lr.norm[k]) : 0;
      rel.push_back(rep.rel_error[k]);
      rep.refine_error[k] = lr.refine_error[k];
      rep.refine_kept[k] = lr.refine_kept[k];
    }
    report.layers.push_back(rep);
    state["layers"][std::to_string(l)] = {{"bank", {{"bytes", lr.bank_bytes}, {"crc32", lr.bank_crc}}},
                                          {"part", {{"bytes", lr.part_bytes}, {"crc32", lr.part_crc}}},
                                          {"codebook_base", job.codebook_base},
                                          {"rel_error", rel}};
    WASTE_TRY(SaveState(o.out_dir, state));
    ++prog.layers_done;
    emit("layer", l, fmt::format("layer {}: {:.1f} s, error gate {:.2f}% up {:.2f}% down {:.2f}%", l,
                                 rep.seconds, 100 * rep.rel_error[0], 100 * rep.rel_error[1],
                                 100 * rep.rel_error[2]));
  }
  std::sort(report.layers.begin(), report.layers.end(),
            [](const ConvertLayerReport& a, const ConvertLayerReport& b) { return a.layer < b.layer; });

  report.layers_total = static_cast<int>(model.moe_layers.size());
  for (int l : model.moe_layers) report.layers_finished += state["layers"].contains(std::to_string(l)) ? 1 : 0;
  report.source_bytes_read = source_bytes;

  if (report.layers_finished == report.layers_total) {
    emit("finish", -1, "small files, codebooks, manifest");
    WASTE_ASSIGN_OR_RETURN(std::vector<std::string> sidecars, convert::WriteSidecars(*ckpt, model, o.out_dir));
    (void)sidecars;
    // codebooks.bin: the parts at their bases, in layer order.
    std::string books;
    for (int l : model.moe_layers) {
      const Json& e = state["layers"][std::to_string(l)];
      if (!FileMatches(JoinPath(o.out_dir, fmt::format("parts/codebooks-L{}.bin", l)), e["part"])) {
        return FormatError(fmt::format("{}: codebook part of layer {} changed under the converter",
                                       o.out_dir, l));
      }
      WASTE_ASSIGN_OR_RETURN(std::string part, platform::ReadWholeFile(
                                                   JoinPath(o.out_dir, fmt::format("parts/codebooks-L{}.bin", l))));
      books += part;
    }
    WASTE_TRY(convert::PublishBytes(JoinPath(o.out_dir, "codebooks.bin"), books));
    OJson root = OJson::object();
    root["format_version"] = format::kFormatVersion;
    root["arch"] = model.arch;
    root["tensor_prefix"] = model.prefix;
    root["config"] = model.config;
    root["expert_quant"] = QuantJson(cfg.quant);
    OJson layers = OJson::object();
    for (int l : model.moe_layers) {
      const Json& e = state["layers"][std::to_string(l)];
      layers[std::to_string(l)] = {{"file", fmt::format("experts-L{}.bin", l)},
                                   {"experts", model.n_experts},
                                   {"bytes", e["bank"]["bytes"]},
                                   {"codebook_base", e["codebook_base"]}};
    }
    root["layers"] = layers;
    root["trunk"] = OJson::parse(state["trunk"]["index"].dump());
    // Informative (the engine reads the weights as stored): what waste
    // verify --source needs to compare the weights with their source.
    if (basis.enabled()) root["residual_basis"] = OJson::parse(basis.Describe().dump());
    const std::string text = root.dump(1) + "\n";
    // Never publish a manifest our own reader refuses.
    WASTE_ASSIGN_OR_RETURN(Manifest m, ParseManifest(text, JoinPath(o.out_dir, "manifest.json")));
    WASTE_TRY(ValidateTrunkIndex(m, state["trunk"]["bytes"].get<uint64_t>()));
    WASTE_TRY(ValidateRequiredTensors(m));
    WASTE_TRY(convert::PublishBytes(JoinPath(o.out_dir, "manifest.json"), text));
    report.complete = true;
  }
  report.seconds = elapsed();
  report.peak_rss_bytes = platform::PeakRssBytes();
  emit("done", -1, report.complete ? "container complete" : fmt::format("{} of {} expert layers finished",
                                                                       report.layers_finished,
                                                                       report.layers_total));
  return report;
}

}  // namespace

Result<ConvertReport> Convert(const ConvertOptions& options) noexcept {
  try {
    return Run(options);
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kIo, fmt::format("conversion failed: {}", e.what()));
  }
}

}  // namespace waste
