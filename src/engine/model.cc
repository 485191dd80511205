// Model: opens a container once (trunk, kernels, thread pool, expert cache
// and readers, tokenizer) and hands out sessions against the memory
// budget. Like every file implementing include/waste/, an exception
// firewall: nothing thrown below escapes a public function.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <functional>
#include <new>

#include <fmt/format.h>

#include "engine/container_tokenizer_internal.h"
#include "engine/memplan_internal.h"
#include "engine/model_core.h"
#include "engine/model_info.h"
#include "platform/cpu_list.h"
#include "platform/platform.h"
#include "streaming/expert_reader.h"
#include "streaming/hotlist.h"
#include "text/chat_template.h"
#include "vision/preprocess.h"
#include "vision/vision_context.h"
#include "waste/model.h"

namespace waste {
namespace {

// Whether `text` is one of the tokenizer's special tokens (false without
// one): what picks a built-in chat format (ChatTemplate::Stock).
std::function<bool(std::string_view)> IsSpecialText(const Tokenizer* tokenizer) {
  return [tokenizer](std::string_view text) {
    if (tokenizer == nullptr) return false;
    const auto& specials = tokenizer->specials();
    return std::any_of(specials.begin(), specials.end(),
                       [&](const SpecialToken& s) { return s.text == text; });
  };
}


std::atomic<uint64_t> g_next_model_id{1};

std::string Size(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

// Config's policy, or, when the config leaves the default,
// WASTE_CACHE_POLICY=reuse-odds|lfru|lru|lfu-history (`want`); reuse-odds
// when neither names one.
Replacement ResolveReplacement(CachePolicy policy, const std::string& want) {
  switch (policy) {
    case CachePolicy::kLru: return Replacement::kLru;
    case CachePolicy::kLfru: return Replacement::kLfru;
    case CachePolicy::kReuseOdds: return Replacement::kReuseOdds;
    case CachePolicy::kDefault: break;
  }
  if (want == "lru") return Replacement::kLru;
  if (want == "lfru") return Replacement::kLfru;
  if (want == "lfu-history" || want == "history") return Replacement::kLfuHistory;
  return Replacement::kReuseOdds;
}

Status CheckCpus(const std::string& list, std::vector<int>* cpus) {
  if (list.empty()) return Status::Ok();
  WASTE_ASSIGN_OR_RETURN(*cpus, platform::ParseCpuList(list));
  if (!platform::kHaveAffinity) {
    return UnsupportedError("binding threads to CPUs needs Linux or Windows");
  }
  std::vector<int> allowed = platform::AllowedCpus();
  if (allowed.empty()) return Status::Ok();
  for (int c : *cpus) {
    if (!std::binary_search(allowed.begin(), allowed.end(), c)) {
      return ArgError(fmt::format("CPU {} is not available to this process", c));
    }
  }
  return Status::Ok();
}

// Hands a warning to the host's sink, if any (the library never prints).
void Log(const Config& config, LogLevel level, const std::string& message) {
  if (!config.log) return;
  try {
    config.log(level, message);
  } catch (...) {
    // A throwing sink loses its message, never the open.
  }
}

Result<std::shared_ptr<ModelCore>> OpenCore(const std::string& dir, const Config& config) {
  auto m = std::make_shared<ModelCore>();
  m->config = config;
  if (m->config.ctx_tokens == 0) return ArgError("ctx_tokens must be > 0");
  if (config.draft_tokens < 0 || config.draft_tokens > kMaxDraftTokens) {
    return ArgError("draft_tokens is " + std::to_string(config.draft_tokens) +
                    ": must be 0 (off) to " + std::to_string(kMaxDraftTokens));
  }
  m->config.max_sessions = std::max<uint32_t>(1, config.max_sessions);
  m->options = ResolveOptions(config);
  const EngineOptions& o = m->options;

  // CPU list first: a malformed list fails before any allocation.
  std::vector<int> cpus;
  WASTE_TRY(CheckCpus(o.cpu_list, &cpus));

  // The lock comes before planning (ENGINE.md §5.9); a failed open releases it.
  if (config.exclusive_open) {
    WASTE_ASSIGN_OR_RETURN(m->lock, platform::DirLock::Acquire(dir));
  }
  // The same plan `waste plan` and `waste serve --plan` print.
  WASTE_ASSIGN_OR_RETURN(m->plan, PlanMemoryForOpen(dir, m->config));
  if (m->plan.vision_included) m->vision_bytes = m->plan.vision_bytes;
  WASTE_ASSIGN_OR_RETURN(m->budget, ResolveBudget(m->plan, config.ram_budget_bytes));
  // The snapshots' room is the host's to use, not a session's.
  m->session_reserve = m->plan.state_bytes + m->plan.scratch_bytes - m->plan.snapshot_bytes;
  if (m->budget.over_cap) {
    Log(config, LogLevel::kWarning,
        fmt::format("the budget of {} leaves under a quarter of the {} of usable RAM to the rest "
                    "of the system; expect swapping",
                    Size(m->budget.budget_bytes), Size(m->plan.usable_ram_bytes)));
  }

  ContainerOptions copts;
  copts.verify_crc = o.verify;
  copts.direct_io = o.direct_io;
  copts.huge_pages = o.huge_pages;
  WASTE_ASSIGN_OR_RETURN(m->container, Container::Open(dir, copts));
  if (o.direct_io && !m->container->direct_io()) {
    Log(config, LogLevel::kInfo,
        "cache-bypass reads are unavailable for this container's files; expert records go "
        "through the page cache");
  }
  const ModelConfig& cfg = m->container->config();
  WASTE_ASSIGN_OR_RETURN(m->weights, ResolveWeights(*m->container));
  if (config.vision && vision::HasVisionTower(m->container->trunk_index())) {
    WASTE_ASSIGN_OR_RETURN(m->vision, vision::VisionContext::Open(*m->container));
  } else {
    m->vision_bytes = 0;
  }

  int threads = ResolveThreadCount(o.threads, cpus);
  WASTE_ASSIGN_OR_RETURN(m->pool, ThreadPool::Create(threads, cpus, o.spin_us));
  m->table = o.force_baseline ? kernels::BuildKernelTable(kernels::Isa::kBaseline)
                              : kernels::ActiveKernels();
  if (o.profile) m->profiler = std::make_unique<Profiler>();
  m->ops = std::make_unique<Ops>(m->table, m->pool.get(), m->profiler.get());

  // The cache gets what the budget leaves after the plan's trunk and the
  // sessions' state and scratch, in whole padded slots (ENGINE.md §4.2, §5.1).
  const uint64_t cache_bytes = m->budget.budget_bytes - m->plan.floor_bytes + m->plan.min_expert_cache;
  SlotLayout layout = PlanSlots(m->container->max_record_bytes(), cache_bytes,
                                static_cast<uint64_t>(std::max(1, cfg.moe.top_k)) + 1);
  // A slot per record the container holds is all a cache can use.
  uint64_t records = 0;
  for (int l = 0; l < cfg.n_layers; ++l) {
    if (m->container->is_moe_layer(l)) records += static_cast<uint64_t>(m->container->bank(l).experts);
  }
  layout.slots = std::min(layout.slots, records);
  ExpertCacheOptions co;
  co.policy = ResolveReplacement(config.cache_policy, o.cache_policy);
  co.verify_crc = o.verify;
  co.io = ResolveIoChoice(o.io_threads, o.io_depth, o.io_backend, o.io_fixed_buffers);
  co.trace_path = o.cache_trace;
  co.huge_pages = o.huge_pages;
  WASTE_ASSIGN_OR_RETURN(m->cache, ExpertCache::Create(*m->container, layout, co));

  WASTE_ASSIGN_OR_RETURN(m->tokenizer, LoadModelTokenizer(dir, cfg));

  m->info = DescribeModel(*m->container);
  m->info.has_tokenizer = m->tokenizer != nullptr;
  m->info.has_chat_template =
      platform::PathExists(dir + "/chat.json") ||
      (m->tokenizer && ChatTemplate::Stock(IsSpecialText(m->tokenizer.get())).has_value());
  m->info.bos_id = m->tokenizer ? m->tokenizer->bos_id() : -1;
  m->info.eos_id = m->tokenizer ? m->tokenizer->eos_id()
                                : (cfg.eos_token_id > 0 ? cfg.eos_token_id : -1);
  m->info.ctx_tokens = m->config.ctx_tokens;
  m->info.bounded_context = cfg.n_mla_layers() > 0;
  m->totals.direct_io = m->container->direct_io();
  m->id = g_next_model_id.fetch_add(1);

  m->usage_path = config.usage_path.empty() ? dir + "/usage.waste" : config.usage_path;
  // The hotlist warms through the reader threads while the caller goes on
  // (ENGINE.md §5.8 W); WASTE_WARM_WAIT=1 waits for it (benchmarks that
  // want a fully warm cache before the clock starts).
  WarmFromHotlist(m->usage_path, *m->container, *m->cache);
  if (o.warm_wait) m->cache->Drain();
  return m;
}

}  // namespace

uint64_t ModelCore::SessionCharge(uint32_t ctx) const {
  const ModelConfig& cfg = container->config();
  // A mark's size does not depend on the context (the plan's own figure).
  return StateBytes(cfg, ctx) + EstimateScratchBytes(cfg, ctx) +
         (plan.marks_included ? plan.mark_bytes * plan.marks_per_session : 0) +
         plan.draft_record_bytes;
}

void ModelCore::FillCacheStats(Stats* s) const {
  ExpertCacheCounters c = cache->counters();
  s->experts_hit = c.hits;
  s->experts_missed = c.misses;
  s->bytes_read = c.bytes_read;
  s->evictions = c.evictions;
  s->sec_io = c.read_seconds;
  s->prefetched = c.prefetched;
  s->spec_reads = c.spec_reads;
  s->spec_used = c.spec_used;
  s->warm_reads = c.warm_reads;
  s->read_waits = c.waits;
  s->io_reads = c.io_reads;
  s->io_bytes = c.io_bytes;
  s->io_busy_s = c.io_busy_seconds;
  s->io_backend = IoBackendName(cache->backend());
  s->io_threads = cache->io_threads();
  s->io_depth = cache->io_depth();
  s->io_fixed_buffers = cache->fixed_buffers();
  s->cache_policy = ReplacementName(cache->policy());
  s->huge_pages = cache->huge_pages();
  s->direct_io = container->direct_io();
  if (profiler) s->phase_seconds = profiler->Breakdown();
}

Model::Model(std::shared_ptr<ModelCore> core) noexcept : core_(std::move(core)) {}
Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::Open(const std::string& container_dir,
                                           const Config& config) noexcept {
  try {
    auto core = OpenCore(container_dir, config);
    if (!core) return core.error();
    return std::unique_ptr<Model>(new Model(std::move(*core)));
  } catch (const std::bad_alloc&) {
    // Name the floor and the RAM this process may use (ENGINE.md §4.3).
    std::string why;
    try {
      Result<MemPlan> p = PlanMemory(container_dir, config.ctx_tokens);
      if (p) {
        why = fmt::format(" (the model's floor at a context of {} tokens is {} bytes; usable "
                          "RAM {} bytes)",
                          config.ctx_tokens, p->floor_bytes, p->usable_ram_bytes);
      }
    } catch (...) {
    }
    return OomError("allocation failed while opening the model" + why);
  } catch (const std::exception& e) {
    return IoError(fmt::format("unexpected failure while opening: {}", e.what()));
  }
}

Result<std::unique_ptr<Session>> Model::NewSession(const SessionOptions& options) noexcept {
  try {
    ModelCore& m = *core_;
    auto s = std::make_unique<SessionCore>();
    s->ctx = options.ctx_tokens == 0 ? m.config.ctx_tokens : options.ctx_tokens;
    s->charge = m.SessionCharge(s->ctx);
    {
      std::lock_guard<std::mutex> lock(m.acct_mu);
      if (m.session_charged + s->charge > m.session_reserve) {
        return Status(Errc::kRamBudget,
                      fmt::format("a session of {} tokens needs {} of state and scratch, but the "
                                  "budget keeps {} for sessions and {} open sessions use {} — "
                                  "close one, or open the model with a larger max_sessions",
                                  s->ctx, Size(s->charge), Size(m.session_reserve),
                                  m.sessions.size(), Size(m.session_charged)));
      }
      m.session_charged += s->charge;
      s->model = core_;  // from here on ~SessionCore returns the charge
      m.sessions.insert(s.get());
    }
    const ModelConfig& cfg = m.container->config();
    s->state = std::make_unique<SessionState>(cfg, s->ctx);
    s->state->set_container_id(m.container->fingerprint());
    s->forward = std::make_unique<Forward>(*m.container, m.weights, *s->state, *m.cache, s->ctx,
                                           m.options.lookahead);
    if (m.vision) s->forward->embedding_override = &m.vision->queue();
    s->Report();
    return std::unique_ptr<Session>(new Session(std::move(s)));
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed while creating a session");
  } catch (const std::exception& e) {
    return IoError(fmt::format("unexpected failure while creating a session: {}", e.what()));
  }
}

const ModelInfo& Model::info() const noexcept { return core_->info; }
const MemPlan& Model::plan() const noexcept { return core_->plan; }

MemoryUsage Model::memory_used() const noexcept {
  const ModelCore& m = *core_;
  MemoryUsage u;
  u.trunk_bytes = m.container->resident_trunk_bytes();
  // The cache's own bookkeeping (slot table, index, hint list) is scratch.
  u.scratch_bytes = m.cache->metadata_bytes() + m.vision_bytes;
  {
    std::lock_guard<std::mutex> lock(m.acct_mu);
    for (const SessionCore* s : m.sessions) {
      u.state_bytes += s->reported_state;
      u.scratch_bytes += s->reported_scratch;
    }
    u.sessions = static_cast<uint32_t>(m.sessions.size());
  }
  u.expert_cache_bytes = m.cache->allocated_bytes();
  u.slots = m.cache->slots();
  u.budget_bytes = m.budget.budget_bytes;
  u.budget_defaulted = m.budget.defaulted;
  u.max_sessions = m.plan.sessions;
  u.session_reserve_bytes = m.session_reserve;
  return u;
}

Stats Model::stats() const noexcept {
  try {
    Stats s;
    {
      std::lock_guard<std::mutex> lock(core_->acct_mu);
      s = core_->totals;
    }
    core_->FillCacheStats(&s);
    return s;
  } catch (...) {
    return {};
  }
}

std::string Model::backend_name() const noexcept {
  try {
    return core_->table.name;
  } catch (...) {
    return {};
  }
}
int Model::threads() const noexcept { return core_->pool->size(); }

Result<std::vector<int>> Model::Tokenize(std::string_view text, bool markup,
                                         bool add_bos) const noexcept {
  if (!core_->tokenizer) return UnsupportedError("this container has no tokenizer");
  try {
    std::vector<int> ids;
    if (add_bos) ids.push_back(core_->tokenizer->bos_id());
    std::vector<int> body = core_->tokenizer->Encode(text, markup);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

Result<std::optional<ChatTemplate>> Model::FindChatTemplate() const noexcept {
  return ChatTemplate::ForContainer(core_->container->dir(), IsSpecialText(core_->tokenizer.get()));
}

Result<std::vector<int>> Model::TokenizeSegments(std::span<const PromptSegment> segments,
                                                 bool add_bos) const noexcept {
  if (!core_->tokenizer) return UnsupportedError("this container has no tokenizer");
  try {
    std::vector<int> ids;
    if (add_bos) ids.push_back(core_->tokenizer->bos_id());
    AppendSegmentTokens(*core_->tokenizer, segments, &ids);
    return ids;
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

Result<std::string> Model::Detokenize(std::span<const int> ids) const noexcept {
  if (!core_->tokenizer) return UnsupportedError("this container has no tokenizer");
  for (int id : ids) {  // as Eval and Generate refuse them
    if (id < 0 || id >= core_->info.vocab) {
      return ArgError(fmt::format("token id {} is outside the vocabulary (0..{})", id,
                                  core_->info.vocab - 1));
    }
  }
  try {
    return core_->tokenizer->Decode(ids);
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

std::string Model::TokenPiece(int id) const noexcept {
  if (!core_->tokenizer) return {};
  try {
    return std::string(core_->tokenizer->Piece(id));
  } catch (...) {
    return {};
  }
}

Status Model::SaveUsage(const std::string& path) const noexcept {
  try {
    const std::string& p = path.empty() ? core_->usage_path : path;
    uint64_t tokens = 0;
    {
      std::lock_guard<std::mutex> lock(core_->acct_mu);
      tokens = core_->totals.prefill_tokens + core_->totals.tokens_generated;
    }
    return WriteHotlist(p, *core_->cache, tokens);
  } catch (const std::exception& e) {
    return IoError(e.what());
  }
}

// --- Images (docs/VISION.md): thin forwards to vision::VisionContext. -------

static Status NoVision(const ModelCore& m) {
  if (!m.config.vision) {
    return UnsupportedError("images need the model opened with vision on (Config::vision)");
  }
  return UnsupportedError("this container has no vision tower");
}

bool Model::has_vision() const noexcept { return core_->vision != nullptr; }

int Model::media_pad_id() const noexcept {
  return core_->vision ? core_->vision->queue().pad_id() : -1;
}

Result<int> Model::AddImage(const std::string& path) noexcept {
  ModelCore& m = *core_;
  if (!m.vision) return NoVision(m);
  try {
    std::lock_guard<FairMutex> run(m.run_mu);  // the tower runs on the model's pool
    return m.vision->AddFile(*m.ops, path);
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed while encoding " + path);
  } catch (const std::exception& e) {
    return IoError(e.what());
  }
}

Result<int> Model::AddImageBytes(std::span<const uint8_t> bytes, std::string_view name) noexcept {
  ModelCore& m = *core_;
  if (!m.vision) return NoVision(m);
  try {
    std::lock_guard<FairMutex> run(m.run_mu);
    return m.vision->AddBytes(*m.ops, bytes, name);
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed while encoding an image");
  } catch (const std::exception& e) {
    return IoError(e.what());
  }
}

// The queue is read and changed under the run lock: the calls of other
// sessions read it (ImageQueue::Take) while they run.
Result<std::vector<int>> Model::ExpandImagePads(std::span<const int> ids) const noexcept {
  if (!core_->vision) return NoVision(*core_);
  try {
    std::lock_guard<FairMutex> run(core_->run_mu);
    return core_->vision->queue().Expand(ids);
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

Result<int> Model::ImageTokens(ImageDimensions size) const noexcept {
  if (!core_->vision) return NoVision(*core_);
  if (size.width <= 0 || size.height <= 0) return ArgError("image size must be positive");
  const vision::VisionConfig& c = core_->vision->tower().config();
  return vision::ChoosePatchGrid(size.width, size.height, c.max_patches).tokens();
}

int Model::queued_images() const noexcept {
  if (!core_->vision) return 0;
  std::lock_guard<FairMutex> run(core_->run_mu);
  return static_cast<int>(core_->vision->queue().images());
}

void Model::ClearImages() noexcept {
  if (!core_->vision) return;
  std::lock_guard<FairMutex> run(core_->run_mu);
  core_->vision->queue().Clear();
}

}  // namespace waste
