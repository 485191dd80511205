// Engine: implements include/waste/engine.h on top of the container, the
// kernels, the expert cache and the forward pass. This file is the
// exception firewall: nothing thrown below escapes a public function.
#include "waste/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

#include <fmt/format.h>

#include "text/chat_template.h"
#include "container/container.h"
#include "base/engine_env.h"
#include "streaming/expert_cache.h"
#include "streaming/expert_reader.h"
#include "model/forward.h"
#include "streaming/hotlist.h"
#include "kernels/kernel_table.h"
#include "model/layer_weights.h"
#include "engine/model_info.h"
#include "runtime/ops.h"
#include "platform/cpu_list.h"
#include "platform/platform.h"
#include "model/sampler.h"
#include "model/session_state.h"
#include "runtime/thread_pool.h"
#include "text/tokenizer.h"

namespace waste {

using Clock = std::chrono::steady_clock;

static double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Engine::Impl {
  Config config;
  EngineOptions options;
  MemPlan plan;
  BudgetResolution budget;
  std::unique_ptr<Container> container;
  ModelWeights weights;
  std::unique_ptr<ThreadPool> pool;
  kernels::KernelTable table;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<Profiler> profiler;  // WASTE_PROFILE=1
  std::unique_ptr<ExpertCache> cache;
  std::unique_ptr<SessionState> state;
  std::unique_ptr<Forward> forward;
  std::unique_ptr<Tokenizer> tokenizer;
  ModelInfo info;
  Stats stats;
  std::string detail;
  std::string usage_path;
  int pending = -1;  // emitted by Generate but not yet fed (fed on next use)

  Status CheckIds(std::span<const int> ids) const {
    for (int id : ids) {
      if (id < 0 || id >= info.vocab) {
        return ArgError(fmt::format("token id {} is outside the vocabulary (0..{})", id,
                                    info.vocab - 1));
      }
    }
    return Status::Ok();
  }

  std::string ContextFull() const {
    return fmt::format(
        "context of {} tokens is full at position {} — reset the conversation or open with a "
        "larger ctx_tokens",
        config.ctx_tokens, state->pos() + (pending >= 0 ? 1 : 0));
  }

  // Feeds `ids` (prefixed by the pending token, if any).
  Status Feed(std::span<const int> ids, bool want_logits) {
    std::vector<int> all;
    std::span<const int> run = ids;
    if (pending >= 0) {
      all.reserve(ids.size() + 1);
      all.push_back(pending);
      all.insert(all.end(), ids.begin(), ids.end());
      run = all;
    }
    if (run.empty()) return Status::Ok();
    Status st = forward->Run(*ops, run, want_logits);
    pending = -1;
    if (!st.ok()) detail = st.message();
    return st;
  }

  Status Flush() { return pending >= 0 ? Feed({}, false) : Status::Ok(); }
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

// Config's policy, or WASTE_CACHE_POLICY=lfru|lru|lfu-history when the
// config leaves the default.
static Replacement ResolveReplacement(CachePolicy policy) {
  if (policy == CachePolicy::kLru) return Replacement::kLru;
  const char* env = std::getenv("WASTE_CACHE_POLICY");
  std::string want = env != nullptr ? env : "";
  if (want == "lru") return Replacement::kLru;
  if (want == "lfu-history" || want == "history") return Replacement::kLfuHistory;
  return Replacement::kLfru;
}

static Result<std::unique_ptr<Engine::Impl>> OpenImpl(const std::string& dir, const Config& config) {
  auto impl = std::make_unique<Engine::Impl>();
  impl->config = config;
  if (impl->config.ctx_tokens == 0) return ArgError("ctx_tokens must be > 0");
  impl->options = ResolveOptions(config);
  const EngineOptions& o = impl->options;

  // CPU list first: a malformed list fails before any allocation.
  std::vector<int> cpus;
  if (!o.cpu_list.empty()) {
    WASTE_ASSIGN_OR_RETURN(cpus, platform::ParseCpuList(o.cpu_list));
    if (!platform::kHaveAffinity) {
      return UnsupportedError("--cpus: binding threads to CPUs needs Linux or Windows");
    }
    std::vector<int> allowed = platform::AllowedCpus();
    if (!allowed.empty()) {
      for (int c : cpus) {
        if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
          return ArgError(fmt::format("--cpus: CPU {} is not available to this process", c));
        }
      }
    }
  }

  WASTE_ASSIGN_OR_RETURN(impl->plan, PlanMemory(dir, impl->config.ctx_tokens));
  WASTE_ASSIGN_OR_RETURN(impl->budget, ResolveBudget(impl->plan, config.ram_budget_bytes));

  ContainerOptions copts;
  copts.verify_crc = o.verify;
  copts.direct_io = o.direct_io;
  WASTE_ASSIGN_OR_RETURN(impl->container, Container::Open(dir, copts));
  const ModelConfig& cfg = impl->container->config();
  WASTE_ASSIGN_OR_RETURN(impl->weights, ResolveWeights(*impl->container));

  int threads = ResolveThreadCount(o.threads, cpus);
  WASTE_ASSIGN_OR_RETURN(impl->pool, ThreadPool::Create(threads, cpus));
  impl->table = o.force_baseline ? kernels::BuildKernelTable(kernels::Isa::kBaseline)
                                 : kernels::ActiveKernels();
  if (o.profile) impl->profiler = std::make_unique<Profiler>();
  impl->ops = std::make_unique<Ops>(impl->table, impl->pool.get(), impl->profiler.get());

  // The cache gets what the budget leaves after the plan's trunk, state and
  // scratch, in whole padded slots (ENGINE.md §4.2, §5.1).
  const uint64_t cache_bytes =
      impl->budget.budget_bytes - impl->plan.floor_bytes + impl->plan.min_expert_cache;
  SlotLayout layout = PlanSlots(impl->container->max_record_bytes(), cache_bytes,
                                static_cast<uint64_t>(std::max(1, cfg.moe.top_k)) + 1);
  // A slot per record the container holds is all a cache can use.
  uint64_t records = 0;
  for (int l = 0; l < cfg.n_layers; ++l) {
    if (impl->container->is_moe_layer(l)) records += static_cast<uint64_t>(impl->container->bank(l).experts);
  }
  layout.slots = std::min(layout.slots, records);
  ExpertCacheOptions co;
  co.policy = ResolveReplacement(config.cache_policy);
  co.verify_crc = o.verify;
  co.io = ResolveIoChoice(o.io_threads);
  WASTE_ASSIGN_OR_RETURN(impl->cache, ExpertCache::Create(*impl->container, layout, co));
  impl->state = std::make_unique<SessionState>(cfg, impl->config.ctx_tokens);
  impl->forward = std::make_unique<Forward>(*impl->container, impl->weights, *impl->state,
                                            *impl->cache, impl->config.ctx_tokens, o.lookahead);

  auto tok = Tokenizer::Load(dir);
  if (tok) {
    impl->tokenizer = std::make_unique<Tokenizer>(std::move(*tok));
    if (cfg.eos_token_id > 0) impl->tokenizer->set_eos_id(cfg.eos_token_id);
  } else if (tok.error().code() != Errc::kUnsupported) {
    return tok.error();
  }

  impl->info = DescribeModel(*impl->container);
  impl->info.has_tokenizer = impl->tokenizer != nullptr;
  impl->info.has_chat_template = platform::PathExists(dir + "/chat.json");
  impl->info.bos_id = impl->tokenizer ? impl->tokenizer->bos_id() : -1;
  impl->info.eos_id = impl->tokenizer ? impl->tokenizer->eos_id()
                                      : (cfg.eos_token_id > 0 ? cfg.eos_token_id : -1);
  impl->info.ctx_tokens = impl->config.ctx_tokens;
  impl->info.bounded_context = impl->state->bounded();
  impl->stats.direct_io = impl->container->direct_io();

  impl->usage_path = config.usage_path.empty() ? dir + "/usage.waste" : config.usage_path;
  // The hotlist warms through the reader threads while the caller goes on
  // (ENGINE.md §5.8 W); WASTE_WARM_WAIT=1 waits for it (benchmarks that
  // want a fully warm cache before the clock starts).
  WarmFromHotlist(impl->usage_path, *impl->container, *impl->cache);
  if (EnvFlag("WASTE_WARM_WAIT")) impl->cache->Drain();
  return impl;
}

Result<std::unique_ptr<Engine>> Engine::Open(const std::string& container_dir,
                                             const Config& config) noexcept {
  try {
    auto impl = OpenImpl(container_dir, config);
    if (!impl) return impl.error();
    return std::unique_ptr<Engine>(new Engine(std::move(*impl)));
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed while opening the model");
  } catch (const std::exception& e) {
    return IoError(fmt::format("unexpected failure while opening: {}", e.what()));
  }
}

const ModelInfo& Engine::info() const noexcept { return impl_->info; }

MemoryUsage Engine::memory_used() const noexcept {
  MemoryUsage m;
  m.trunk_bytes = impl_->container->resident_trunk_bytes();
  m.state_bytes = impl_->state->bytes();
  // The cache's own bookkeeping (slot table, index, hint list) is scratch.
  m.scratch_bytes = impl_->forward->scratch_bytes() + impl_->cache->metadata_bytes();
  m.expert_cache_bytes = impl_->cache->allocated_bytes();
  m.slots = impl_->cache->slots();
  m.budget_bytes = impl_->budget.budget_bytes;
  m.budget_defaulted = impl_->budget.defaulted;
  return m;
}

Stats Engine::stats() const noexcept {
  Stats s = impl_->stats;
  ExpertCacheCounters c = impl_->cache->counters();
  s.experts_hit = c.hits;
  s.experts_missed = c.misses;
  s.bytes_read = c.bytes_read;
  s.evictions = c.evictions;
  s.sec_io = c.read_seconds;
  s.prefetched = c.prefetched;
  s.spec_reads = c.spec_reads;
  s.spec_used = c.spec_used;
  s.warm_reads = c.warm_reads;
  s.read_waits = c.waits;
  s.io_reads = c.io_reads;
  s.io_bytes = c.io_bytes;
  s.io_busy_s = c.io_busy_seconds;
  s.io_backend = IoBackendName(impl_->cache->backend());
  s.io_threads = impl_->cache->io_threads();
  s.io_depth = impl_->cache->io_depth();
  s.io_fixed_buffers = impl_->cache->fixed_buffers();
  s.cache_policy = ReplacementName(impl_->cache->policy());
  if (impl_->profiler) s.phase_seconds = impl_->profiler->Breakdown();
  return s;
}

std::string Engine::backend_name() const noexcept { return impl_->table.name; }
int Engine::threads() const noexcept { return impl_->pool->size(); }
int Engine::position() const noexcept {
  return impl_->state->pos() + (impl_->pending >= 0 ? 1 : 0);
}
const std::string& Engine::error_detail() const noexcept { return impl_->detail; }

Result<std::vector<int>> Engine::Tokenize(std::string_view text, bool markup,
                                          bool add_bos) const noexcept {
  if (!impl_->tokenizer) return UnsupportedError("this container has no tokenizer");
  try {
    std::vector<int> ids;
    if (add_bos) ids.push_back(impl_->tokenizer->bos_id());
    std::vector<int> body = impl_->tokenizer->Encode(text, markup);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

Result<std::vector<int>> Engine::TokenizeSegments(std::span<const PromptSegment> segments,
                                                  bool add_bos) const noexcept {
  if (!impl_->tokenizer) return UnsupportedError("this container has no tokenizer");
  try {
    std::vector<int> ids;
    if (add_bos) ids.push_back(impl_->tokenizer->bos_id());
    AppendSegmentTokens(*impl_->tokenizer, segments, &ids);
    return ids;
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

Result<std::string> Engine::Detokenize(std::span<const int> ids) const noexcept {
  if (!impl_->tokenizer) return UnsupportedError("this container has no tokenizer");
  try {
    return impl_->tokenizer->Decode(ids);
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

std::string Engine::TokenPiece(int id) const noexcept {
  if (!impl_->tokenizer) return {};
  try {
    return std::string(impl_->tokenizer->Piece(id));
  } catch (...) {
    return {};
  }
}

Result<std::span<const float>> Engine::Eval(std::span<const int> ids) noexcept {
  Impl& m = *impl_;
  m.detail.clear();
  try {
    if (ids.empty()) return ArgError("empty prompt");
    WASTE_TRY(m.CheckIds(ids));
    int64_t need = static_cast<int64_t>(ids.size()) + (m.pending >= 0 ? 1 : 0);
    if (m.state->room() < need) {
      m.detail = m.ContextFull();
      return ArgError(m.detail);
    }
    WASTE_TRY(m.Feed(ids, true));
    return std::span<const float>(m.forward->logits());
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed during eval");
  } catch (const std::exception& e) {
    return IoError(e.what());
  }
}

Status Engine::Generate(std::span<const int> prompt, const GenParams& params,
                        const TokenCallback& on_token) noexcept {
  Impl& m = *impl_;
  m.detail.clear();
  try {
    if (prompt.empty()) return ArgError("empty prompt");
    WASTE_TRY(m.CheckIds(prompt));
    int64_t need = static_cast<int64_t>(prompt.size()) + (m.pending >= 0 ? 1 : 0);
    // One position is kept for the first sampled token.
    if (m.state->room() <= need) {
      m.detail = m.ContextFull();
      return ArgError(m.detail);
    }
    SamplerParams sp{params.temperature, params.top_p, params.top_k, params.seed};
    Sampler sampler(sp);
    auto t0 = Clock::now();
    WASTE_TRY(m.Feed(prompt, true));
    auto t1 = Clock::now();
    m.stats.prefill_s += Seconds(t0, t1);
    m.stats.prefill_tokens += prompt.size();
    m.stats.sec_total += Seconds(t0, t1);
    int tok = sampler.Sample(m.forward->logits());
    const int eos = m.info.eos_id;
    for (int t = 0; t < params.max_tokens; ++t) {
      auto ts = Clock::now();
      ExpertCacheCounters before = m.cache->counters();
      // The token is emitted now but fed lazily: the step that feeds the
      // last token of a call would produce logits nobody reads.
      bool stop = tok == eos || std::find(params.stop_tokens.begin(), params.stop_tokens.end(),
                                          tok) != params.stop_tokens.end();
      bool last = stop || t + 1 == params.max_tokens;
      m.pending = tok;
      ++m.stats.tokens_generated;
      Status step;
      if (!last) {
        if (m.state->room() < 1) {
          m.detail = m.ContextFull();
          last = true;
        } else {
          step = m.Feed({}, true);
        }
      }
      auto te = Clock::now();
      double dt = Seconds(ts, te);
      m.stats.decode_s += dt;
      m.stats.sec_total += dt;
      ExpertCacheCounters after = m.cache->counters();
      TokenEvent ev;
      ev.index = t;
      ev.token = tok;
      std::string piece = m.tokenizer ? std::string(m.tokenizer->Piece(tok)) : std::string();
      ev.piece = piece;
      ev.experts_hit = after.hits - before.hits;
      ev.experts_missed = after.misses - before.misses;
      ev.bytes_read = after.bytes_read - before.bytes_read;
      ev.ms_total = dt * 1000.0;
      if (on_token && !on_token(ev)) return Status(Errc::kCancelled, "cancelled by callback");
      if (!step.ok()) return step;
      if (last) break;
      tok = sampler.Sample(m.forward->logits());
    }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed during generation");
  } catch (const std::exception& e) {
    return IoError(e.what());
  }
}

Status Engine::SaveState(const std::string& path) const noexcept {
  try {
    WASTE_TRY(impl_->Flush());
    return impl_->state->Save(path, impl_->forward->last_hidden());
  } catch (const std::exception& e) {
    return IoError(e.what());
  }
}

Status Engine::LoadState(const std::string& path) noexcept {
  try {
    Status st = impl_->state->Load(path);
    if (st.ok()) impl_->pending = -1;
    return st;
  } catch (const std::exception& e) {
    return IoError(e.what());
  }
}

void Engine::ResetState() noexcept {
  impl_->state->Reset();
  impl_->pending = -1;
  impl_->detail.clear();
}

Status Engine::SaveUsage(const std::string& path) const noexcept {
  try {
    const std::string& p = path.empty() ? impl_->usage_path : path;
    return WriteHotlist(p, *impl_->cache, impl_->stats.prefill_tokens + impl_->stats.tokens_generated);
  } catch (const std::exception& e) {
    return IoError(e.what());
  }
}

}  // namespace waste
