#include "report.h"

#include <fmt/format.h>

#include <cmath>

namespace waste::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

// Length of the valid UTF-8 sequence at the start of `s`, 0 if invalid.
size_t ValidUtf8Prefix(std::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = byte(0);
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() < need) return 0;
  if (byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < need; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
  }
  return need;
}

}  // namespace

const char kPageCacheNote[] =
    "page cache not bypassed on this filesystem — the hit\n"
    "            rate below is partly the kernel's, not the engine's";

std::string DumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string FormatGb(uint64_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / kGiB); }

std::string FormatSize(uint64_t bytes) {
  if (double(bytes) >= kGiB) return FormatGb(bytes);
  // A small budget or cache is not "0 MiB" (the demo model's cache is 0.6).
  if (bytes > 0 && double(bytes) < kMiB) return fmt::format("{:.0f} KiB", double(bytes) / 1024.0);
  return fmt::format("{:.0f} MiB", double(bytes) / kMiB);
}

int HitPercent(uint64_t hit, uint64_t miss) {
  uint64_t total = hit + miss;
  if (total == 0) return 0;
  return static_cast<int>(std::floor(100.0 * double(hit) / double(total) + 0.5));
}

std::string StatsLine(uint64_t tokens, double seconds, uint64_t hit, uint64_t miss) {
  double rate = seconds > 0 ? double(tokens) / seconds : 0.0;
  return fmt::format("[{} tokens, {:.2f} s, {:.2f} tok/s | experts {} hit / {} miss = {}%]", tokens,
                     seconds, rate, hit, miss, HitPercent(hit, miss));
}

namespace {
double Rate(double n, double s) { return s > 0 ? n / s : 0.0; }
double Round4(double v) { return std::round(v * 1e4) / 1e4; }

std::string ReadAmount(uint64_t bytes) {
  if (double(bytes) >= kGiB) return fmt::format("{:.2f} GiB", double(bytes) / kGiB);
  return fmt::format("{:.1f} MiB", double(bytes) / kMiB);
}
}  // namespace

std::string StatsLine(const RunTimings& t) {
  std::string out = "[";
  if (t.load_s >= 0) out += fmt::format("load {:.2f} s | ", t.load_s);
  out += fmt::format("prompt {} tokens, {:.2f} s, {:.2f} tok/s | first token {:.2f} s | ",
                     t.prompt_tokens, t.prompt_s, Rate(double(t.prompt_tokens), t.prompt_s),
                     t.first_token_s);
  out += fmt::format("{} tokens, {:.2f} s, {:.2f} tok/s | experts {} hit / {} miss = {}%, {} read",
                     t.tokens, t.gen_s, Rate(double(t.tokens), t.gen_s), t.hit, t.miss,
                     HitPercent(t.hit, t.miss), ReadAmount(t.bytes_read));
  if (t.drafted > 0) out += fmt::format(" | drafts {} of {} kept", t.draft_kept, t.drafted);
  return out + "]";
}

void AddTimings(const RunTimings& t, Json* j) {
  Json& o = *j;
  if (t.load_s >= 0) o["load_s"] = Round4(t.load_s);
  o["prompt_s"] = Round4(t.prompt_s);
  o["prompt_tok_per_s"] = Round4(Rate(double(t.prompt_tokens), t.prompt_s));
  o["first_token_s"] = Round4(t.first_token_s);
  o["generate_s"] = Round4(t.gen_s);
  const uint64_t lookups = t.hit + t.miss;
  o["hit_rate"] = Round4(lookups > 0 ? double(t.hit) / double(lookups) : 0.0);
  o["total_bytes_read"] = t.bytes_read;
  o["draft_tokens"] = t.drafted;
  o["draft_accepted"] = t.draft_kept;
}

std::string ProgressLine(uint64_t done, uint64_t total, double elapsed_s, const char* what) {
  const double rate = Rate(double(done), elapsed_s);
  const int pct = total > 0 ? int(100.0 * double(done) / double(total)) : 0;
  std::string eta = rate > 0 ? fmt::format("{:.0f} s", double(total - done) / rate) : "?";
  return fmt::format("{} {}/{} tokens ({}%), {:.1f} tok/s, ETA {}", what, done, total, pct, rate,
                     eta);
}

std::string SmallCacheHint(uint64_t expert_cache, uint64_t working_set, const std::string& model) {
  if (working_set == 0 || expert_cache >= working_set) return "";
  return fmt::format(
      "waste: hint: the expert cache ({}) is smaller than one token's working set ({}): every "
      "token re-reads its experts from disk. A larger --budget helps; `waste plan {}` shows "
      "the recommendation",
      FormatSize(expert_cache), FormatSize(working_set), model);
}

std::string BudgetNote(const MemoryUsage& used, uint64_t usable) {
  uint64_t total =
      used.trunk_bytes + used.state_bytes + used.scratch_bytes + used.expert_cache_bytes;
  std::string of = usable > 0 ? " of " + FormatGb(usable) : "";
  // The budget is `waste plan`'s "default budget"; what opening allocated
  // can be less (whole cache slots, no more slots than records).
  const std::string budget =
      used.budget_bytes > 0 ? fmt::format("the default budget {}, ", FormatSize(used.budget_bytes)) : "";
  return fmt::format("waste: no --budget: {}using {}{} (expert cache {})", budget, FormatSize(total),
                     of, FormatSize(used.expert_cache_bytes));
}

std::string OverCapWarning(uint64_t allocated, uint64_t usable, const std::string& model) {
  if (usable == 0) return "";
  uint64_t cap = usable - usable / 4;
  if (allocated <= cap) return "";
  return fmt::format(
      "waste: the engine holds {}, leaving under 25% of the {} this process may use\n"
      "waste: the OS may page the expert cache out and throughput then collapses; "
      "`waste plan {}` shows the floor",
      FormatGb(allocated), FormatGb(usable), model);
}

std::string PlanText(const std::string& name, const MemPlan& plan, const PlanBudget& budget) {
  auto row = [](const char* label, uint64_t bytes) {
    return fmt::format("  {:<22}{:>12}\n", label, FormatSize(bytes));
  };
  std::string sessions;
  if (plan.sessions > 1 || plan.snapshots > 0) {
    sessions = fmt::format(", {} session{}", plan.sessions, plan.sessions == 1 ? "" : "s");
  }
  if (plan.snapshots > 0) {
    sessions += fmt::format(" + {} snapshot{}", plan.snapshots, plan.snapshots == 1 ? "" : "s");
  }
  std::string out = fmt::format("memory plan for {} (ctx {}{})\n\n", name, plan.ctx, sessions);
  out += row("resident trunk", plan.trunk_bytes);
  out += row("KDA state + KV cache", plan.state_bytes);
  out += row("scratch", plan.scratch_bytes);
  out += row("minimum expert cache", plan.min_expert_cache);
  out += "  ---------------------------------\n";
  out += row("FLOOR", plan.floor_bytes);
  std::string rec = row("recommended", plan.recommended_bytes);
  rec.pop_back();
  const std::string pad(38, ' ');
  out += rec + "   (floor + 3x a token's working set,\n" + pad + "capped at every expert the\n" +
         pad + "container holds; below one\n" + pad + "working set the cache keeps\n" + pad +
         "nothing alive between tokens)\n";
  if (plan.vision_included) {
    out += fmt::format("  scratch includes {} for vision (tower, image queue, one decoded image)\n",
                       FormatSize(plan.vision_bytes));
  } else if (plan.vision_bytes > 0) {
    // What opening with --image adds to scratch, floor and recommendation.
    out += fmt::format("  --image adds {} (vision tower, image queue, one decoded image)\n",
                       FormatSize(plan.vision_bytes));
  }
  if (plan.marks_included) {
    out += fmt::format("  state includes {} of rewind marks ({} cop{} of the KDA state per session)\n",
                       FormatSize(plan.mark_bytes * plan.marks_per_session * plan.sessions),
                       plan.marks_per_session, plan.marks_per_session == 1 ? "y" : "ies");
  } else if (plan.mark_bytes > 0 && plan.sessions == 1 && plan.snapshots == 0) {
    // chat copies the recurrent state before each message (docs/CLI.md).
    out += fmt::format("  `waste chat` adds {} (its rewind mark: a copy of the KDA state)\n",
                       FormatSize(plan.mark_bytes));
  }
  if (plan.draft_record_bytes > 0) {
    out += fmt::format(
        "  scratch includes {} for --draft (each guess's logits, and what taking one back "
        "needs)\n",
        FormatSize(plan.draft_record_bytes * plan.sessions));
  }
  out += "\n";
  if (plan.usable_ram_bytes > 0) {
    out += fmt::format("  usable RAM {} ({})\n", FormatGb(plan.usable_ram_bytes),
                       plan.usable_ram_source.empty() ? "physical" : plan.usable_ram_source);
  }
  if (budget.below_floor) {
    out += fmt::format("  budget {} is BELOW the floor — open would fail\n",
                       FormatSize(budget.budget));
  } else if (budget.given) {
    // The engine never allocates slots beyond the records the container has.
    const bool all = plan.all_experts_bytes > 0 && budget.expert_cache > plan.all_experts_bytes;
    const uint64_t cache = all ? plan.all_experts_bytes : budget.expert_cache;
    out += fmt::format("  budget {} -> expert cache {}{}\n", FormatSize(budget.budget),
                       FormatSize(cache),
                       all ? " (every expert the container holds; the rest is not allocated)" : "");
    // What opening would allocate (the cache holds the floor's minimum).
    const uint64_t allocated = plan.floor_bytes - plan.min_expert_cache + cache;
    const uint64_t usable = plan.usable_ram_bytes;
    if (usable > 0 && allocated > usable - usable / 4) {
      out += fmt::format(
          "  warning: that leaves under 25% of the usable {} to the OS; the expert cache may be "
          "paged out, and throughput then collapses\n",
          FormatGb(plan.usable_ram_bytes));
    }
  } else {
    out += fmt::format("  default budget {} -> expert cache {}\n", FormatSize(budget.budget),
                       FormatSize(budget.expert_cache));
  }
  return out;
}

Json PlanJson(const MemPlan& plan, const PlanBudget& budget) {
  Json j;
  j["ctx"] = plan.ctx;
  j["trunk_bytes"] = plan.trunk_bytes;
  j["state_bytes"] = plan.state_bytes;
  j["scratch_bytes"] = plan.scratch_bytes;
  j["min_expert_cache"] = plan.min_expert_cache;
  j["floor_bytes"] = plan.floor_bytes;
  j["recommended_bytes"] = plan.recommended_bytes;
  if (plan.vision_bytes > 0) j["vision_bytes"] = plan.vision_bytes;
  j["working_set_bytes"] = plan.working_set_bytes;
  j["physical_ram_bytes"] = plan.physical_ram_bytes;
  j["usable_ram_bytes"] = plan.usable_ram_bytes;
  if (budget.given) {
    j["budget_bytes"] = budget.budget;
    if (budget.below_floor) {
      j["expert_cache_bytes"] = -1;
    } else {
      j["expert_cache_bytes"] = budget.expert_cache;
    }
  }
  // waste additions (new keys only; §1.7 W)
  j["record_bytes"] = plan.record_bytes;
  j["usable_ram_source"] = plan.usable_ram_source;
  j["sessions"] = plan.sessions;
  j["session_bytes"] = plan.session_bytes;
  j["snapshots"] = plan.snapshots;
  j["snapshot_bytes"] = plan.snapshot_bytes;
  j["rewind_mark_bytes"] = plan.mark_bytes;
  j["marks_included"] = plan.marks_included;
  j["marks_per_session"] = plan.marks_per_session;
  j["vision_included"] = plan.vision_included;
  j["draft_bytes_per_token"] = plan.draft_bytes_per_token;
  j["draft_record_bytes"] = plan.draft_record_bytes;
  if (!budget.given) {
    j["default_budget_bytes"] = budget.budget;
    j["default_expert_cache_bytes"] = budget.expert_cache;
  }
  return j;
}

std::string FormatParams(uint64_t params) {
  const double p = double(params);
  if (p >= 1e12) return fmt::format("{:.2f} T", p / 1e12);
  if (p >= 1e9) return fmt::format("{:.2f} B", p / 1e9);
  if (p >= 1e6) return fmt::format("{:.2f} M", p / 1e6);
  return fmt::format("{:.1f} K", p / 1e3);
}

std::string InfoText(const std::string& build_line, const ModelInfo& info, const MemoryUsage& used,
                     const std::string& backend, int threads, bool direct_io) {
  auto row = [](const char* label, const std::string& value) {
    return fmt::format("  {:<14}{}\n", label, value);
  };
  std::string out = build_line + "\n\n";
  out += row("arch", info.arch.empty() ? "unknown" : info.arch);
  out += row("layers", std::to_string(info.layers));
  out += row("experts", fmt::format("{} (top-{})", info.experts, info.top_k));
  out += row("hidden", std::to_string(info.hidden));
  out += row("parameters", FormatParams(info.params_total) + " total, " +
                               FormatParams(info.params_active) + " active/token");
  out += row("quantization", info.quantization);
  out += row("expert cache", FormatSize(used.expert_cache_bytes));
  // waste additions below the reference's lines
  out += row("vocab", std::to_string(info.vocab));
  out += row("context", info.bounded_context ? std::to_string(info.ctx_tokens) + " tokens"
                                             : std::string("unbounded (no per-position KV)"));
  out += row("threads", std::to_string(threads));
  out += row("backend", backend);
  out += row("checks", fmt::format("{} trunk values, scales and codebook entries finite at "
                                   "open; logits checked every step",
                                   info.finite_checked_values));
  if (!direct_io) {
    out += row("note",
               "page cache not bypassed on this filesystem: expert hit rates\n"
               "                include the kernel's cache");
  }
  return out;
}

Json InfoJson(const std::string& engine_version, const ModelInfo& info, const MemoryUsage& used,
              const std::string& backend, int threads, bool direct_io) {
  Json j;
  j["engine"] = engine_version;
  j["arch"] = info.arch.empty() ? "unknown" : info.arch;
  j["layers"] = info.layers;
  j["experts"] = info.experts;
  j["top_k"] = info.top_k;
  j["hidden"] = info.hidden;
  j["params_total"] = info.params_total;
  j["params_active"] = info.params_active;
  j["quantization"] = info.quantization;
  j["expert_cache_bytes"] = used.expert_cache_bytes;
  j["vocab"] = info.vocab;
  j["ctx"] = info.ctx_tokens;
  j["expert_cache_slots"] = used.slots;
  j["budget_bytes"] = used.budget_bytes;
  j["trunk_bytes"] = used.trunk_bytes;
  j["state_bytes"] = used.state_bytes;
  j["scratch_bytes"] = used.scratch_bytes;
  j["backend"] = backend;
  j["threads"] = threads;
  j["direct_io"] = direct_io;
  j["bos_id"] = info.bos_id;  // -1: none (no tokenizer)
  j["eos_id"] = info.eos_id;
  j["finite_checked_values"] = info.finite_checked_values;
  return j;
}

std::string DisplayPiece(std::string_view bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (c == '\r') {
      out += "\\r";
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("<byte 0x{:02X}>", c);
      ++i;
    } else {
      size_t n = ValidUtf8Prefix(bytes.substr(i));
      if (n == 0) {
        out += fmt::format("<byte 0x{:02X}>", c);
        ++i;
      } else {
        out.append(bytes.substr(i, n));
        i += n;
      }
    }
  }
  return out;
}

std::string EscapeControls(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char ch : bytes) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7F)) {
      out.push_back(ch);
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

std::string EvalRow(int id, float logit, double prob, std::string_view piece) {
  return fmt::format("  {:6d}  {:8.4f}  {:7.4f}  {}", id, logit, prob, DisplayPiece(piece));
}

}  // namespace waste::cli
