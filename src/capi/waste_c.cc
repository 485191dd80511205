// The C API (include/waste.h) over the C++ one: a waste_ctx is one Model
// plus one Session. Nothing thrown below escapes (every entry point is a
// firewall); status codes are the Errc values, which equal the reference's.
#include "waste.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "waste/grammar.h"
#include "waste/image.h"
#include "waste/model.h"
#include "waste/waste.h"

struct waste_ctx {
  // Shared by the contexts waste_session_new makes from one opened model;
  // the model closes with the last of them.
  std::shared_ptr<waste::Model> model;
  std::unique_ptr<waste::Session> session;
  std::string detail;  // what waste_error_detail returns; empty = NULL
  std::optional<waste::ExpertFailureInfo> failed_expert;  // waste_failed_expert
  bool logprobs = false;  // waste_set_logprobs
  // waste_gen_params.grammar's token trie, built on first use (hundreds of
  // milliseconds at 163,840 tokens) for the end tokens it was built with.
  std::shared_ptr<const waste::Vocabulary> grammar_vocab;
  std::vector<int> grammar_vocab_ends;
};

namespace {

using waste::Errc;
using waste::Status;

waste_status Code(Errc e) { return static_cast<waste_status>(static_cast<int>(e)); }

// Why the last waste_open / waste_plan_memory on this thread failed: there
// is no context to hold it (waste_error_detail(NULL) returns it).
thread_local std::string g_open_detail;

waste_status FailOpen(const Status& st) {
  g_open_detail = st.message();
  return Code(st.code());
}

// A NULL or empty argument on a context: said through the detail too.
waste_status ArgFail(waste_ctx* ctx, const char* what) {
  if (ctx != nullptr) ctx->detail = what;
  return WASTE_E_ARG;
}

// Records the failure's message as the context's detail, and the expert
// record it concerns, if any.
waste_status Fail(waste_ctx* ctx, const Status& st) {
  if (ctx != nullptr) {
    ctx->detail = st.message();
    ctx->failed_expert = st.failed_expert();
  }
  return Code(st.code());
}

// Every call starts with no detail and no failed expert.
void ClearDetail(waste_ctx* ctx) {
  ctx->detail.clear();
  ctx->failed_expert.reset();
}

// "the output buffer holds 1 id; 3 are needed".
waste_status ShortBuffer(waste_ctx* ctx, size_t cap, size_t need) {
  ctx->detail = "the output buffer holds " + std::to_string(cap) + (cap == 1 ? " id; " : " ids; ") +
                std::to_string(need) + (need == 1 ? " is needed" : " are needed");
  return WASTE_E_ARG;
}

void CopyString(const std::string& s, char* out, size_t cap) {
  size_t n = std::min(s.size(), cap - 1);
  std::memcpy(out, s.data(), n);
  out[n] = '\0';
}

waste_status Tokenize(waste_ctx* ctx, const char* text, int add_bos, bool markup, int32_t* out,
                      size_t cap, size_t* n_out) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (text == nullptr || n_out == nullptr) return ArgFail(ctx, "text and n_out must not be NULL");
  *n_out = 0;
  try {
    ClearDetail(ctx);
    auto ids = ctx->model->Tokenize(text, markup, add_bos != 0);
    if (!ids) return Fail(ctx, ids.error());
    *n_out = ids->size();
    if (ids->size() > cap || (out == nullptr && !ids->empty())) return ShortBuffer(ctx, cap, ids->size());
    std::copy(ids->begin(), ids->end(), out);
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

}  // namespace

extern "C" {

void waste_cfg_init(waste_cfg* cfg) {
  if (cfg == nullptr) return;
  std::memset(cfg, 0, sizeof(*cfg));
  cfg->ctx_tokens = 4096;
  cfg->direct_io = -1;
  cfg->lookahead = -1;
  cfg->io_threads = -1;
  cfg->cache_policy = WASTE_CACHE_DEFAULT;
}

void waste_gen_params_init(waste_gen_params* params) {
  if (params == nullptr) return;
  std::memset(params, 0, sizeof(*params));
  params->max_tokens = 256;
  params->top_p = 1.0f;
}

waste_status waste_open(const char* container_dir, const waste_cfg* cfg, waste_ctx** out) {
  return waste_open_sessions(container_dir, cfg, 1, out);
}

waste_status waste_open_sessions(const char* container_dir, const waste_cfg* cfg,
                                 uint32_t max_sessions, waste_ctx** out) {
  g_open_detail.clear();
  if (out == nullptr) return WASTE_E_ARG;
  *out = nullptr;
  if (container_dir == nullptr) return WASTE_E_ARG;
  try {
    waste_cfg defaults;
    waste_cfg_init(&defaults);
    const waste_cfg& c = cfg != nullptr ? *cfg : defaults;
    waste::Config config;
    config.vision = c.vision != 0;
    config.ram_budget_bytes = c.ram_budget;
    config.ctx_tokens = c.ctx_tokens == 0 ? 4096 : c.ctx_tokens;
    config.threads = c.threads;
    config.cpu_list = c.cpu_list != nullptr ? c.cpu_list : "";
    config.verify_records = c.verify != 0;
    config.direct_io = c.direct_io;
    config.lookahead = c.lookahead;
    config.io_threads = c.io_threads;
    switch (c.cache_policy) {
      case WASTE_CACHE_LRU: config.cache_policy = waste::CachePolicy::kLru; break;
      case WASTE_CACHE_LFRU: config.cache_policy = waste::CachePolicy::kLfru; break;
      case WASTE_CACHE_REUSE_ODDS: config.cache_policy = waste::CachePolicy::kReuseOdds; break;
      default: config.cache_policy = waste::CachePolicy::kDefault; break;
    }
    config.usage_path = c.usage_path != nullptr ? c.usage_path : "";
    config.exclusive_open = c.exclusive_open != 0;
    config.max_sessions = max_sessions == 0 ? 1 : max_sessions;
    if (c.log != nullptr) {
      waste_log_fn fn = c.log;
      void* user = c.log_user;
      config.log = [fn, user](waste::LogLevel level, std::string_view message) {
        std::string m(message);
        fn(user, level == waste::LogLevel::kWarning ? WASTE_LOG_WARN : WASTE_LOG_INFO, m.c_str());
      };
    }
    auto model = waste::Model::Open(container_dir, config);
    if (!model) return FailOpen(model.error());
    auto session = (*model)->NewSession();
    if (!session) return FailOpen(session.error());
    auto* ctx = new (std::nothrow) waste_ctx;
    if (ctx == nullptr) return WASTE_E_OOM;
    ctx->model = std::move(*model);
    ctx->session = std::move(*session);
    *out = ctx;
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_session_new(waste_ctx* ctx, waste_ctx** out) {
  if (out != nullptr) *out = nullptr;
  if (ctx == nullptr || out == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  try {
    auto session = ctx->model->NewSession();
    if (!session) return Fail(ctx, session.error());
    auto* next = new (std::nothrow) waste_ctx;
    if (next == nullptr) return WASTE_E_OOM;
    next->model = ctx->model;
    next->session = std::move(*session);
    next->grammar_vocab = ctx->grammar_vocab;  // immutable: shared, not rebuilt
    next->grammar_vocab_ends = ctx->grammar_vocab_ends;
    *out = next;
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

void waste_close(waste_ctx* ctx) { delete ctx; }

waste_status waste_plan_memory(const char* container_dir, uint32_t ctx_tokens,
                               waste_mem_plan* out) {
  g_open_detail.clear();
  if (container_dir == nullptr || out == nullptr) return WASTE_E_ARG;
  try {
    auto plan = waste::PlanMemory(container_dir, ctx_tokens == 0 ? 4096 : ctx_tokens);
    if (!plan) return FailOpen(plan.error());
    std::memset(out, 0, sizeof(*out));
    out->ctx = plan->ctx;
    out->trunk_bytes = plan->trunk_bytes;
    out->state_bytes = plan->state_bytes;
    out->scratch_bytes = plan->scratch_bytes;
    out->min_expert_cache = plan->min_expert_cache;
    out->floor_bytes = plan->floor_bytes;
    out->working_set_bytes = plan->working_set_bytes;
    out->recommended_bytes = plan->recommended_bytes;
    out->record_bytes = plan->record_bytes;
    out->vision_bytes = plan->vision_bytes;
    out->physical_ram_bytes = plan->physical_ram_bytes;
    out->usable_ram_bytes = plan->usable_ram_bytes;
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_memory_used(const waste_ctx* ctx, waste_mem_used* out) {
  if (ctx == nullptr || out == nullptr) return WASTE_E_ARG;
  waste::MemoryUsage m = ctx->model->memory_used();
  out->trunk_bytes = m.trunk_bytes;
  out->state_bytes = m.state_bytes;
  out->scratch_bytes = m.scratch_bytes;
  out->expert_cache_bytes = m.expert_cache_bytes;
  out->budget_bytes = m.budget_bytes;
  out->slots = m.slots;
  return WASTE_OK;
}

waste_status waste_tokenize(waste_ctx* ctx, const char* text, int add_bos, int32_t* out,
                            size_t cap, size_t* n_out) {
  return Tokenize(ctx, text, add_bos, /*markup=*/false, out, cap, n_out);
}

waste_status waste_tokenize_markup(waste_ctx* ctx, const char* text, int add_bos, int32_t* out,
                                   size_t cap, size_t* n_out) {
  return Tokenize(ctx, text, add_bos, /*markup=*/true, out, cap, n_out);
}

waste_status waste_detokenize(waste_ctx* ctx, const int32_t* ids, size_t n, char* out, size_t cap,
                              size_t* n_out) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  // out == NULL with cap == 0 asks for the length (as waste_tokenize allows).
  if ((ids == nullptr && n > 0) || (out == nullptr && cap > 0)) {
    return ArgFail(ctx, "ids and out must not be NULL when n and cap are not 0");
  }
  try {
    std::vector<int> v(ids, ids + n);
    auto text = ctx->model->Detokenize(v);
    if (!text) return Fail(ctx, text.error());
    if (n_out != nullptr) *n_out = text->size();
    if (text->size() + 1 > cap) {
      ctx->detail = "the output buffer holds " + std::to_string(cap) + " bytes; " +
                    std::to_string(text->size() + 1) + " are needed";
      return WASTE_E_ARG;
    }
    std::memcpy(out, text->data(), text->size());
    out[text->size()] = '\0';
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_generate(waste_ctx* ctx, const int32_t* prompt, size_t n,
                            const waste_gen_params* params, waste_token_cb cb, void* user) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (prompt == nullptr || n == 0) return ArgFail(ctx, "empty prompt");
  try {
    waste_gen_params defaults;
    waste_gen_params_init(&defaults);
    const waste_gen_params& p = params != nullptr ? *params : defaults;
    if (p.n_stop_tokens > 0 && p.stop_tokens == nullptr) return WASTE_E_ARG;
    waste::GenParams gp;
    gp.max_tokens = p.max_tokens <= 0 ? 256 : p.max_tokens;
    gp.temperature = p.temperature;
    gp.top_p = p.top_p <= 0.0f ? 1.0f : p.top_p;
    gp.top_k = p.top_k;
    gp.seed = p.seed;
    gp.stop_tokens.assign(p.stop_tokens, p.stop_tokens + p.n_stop_tokens);
    gp.logprobs = ctx->logprobs;
    std::unique_ptr<waste::BudgetedGrammar> constraint;
    if (p.grammar != nullptr) {
      if (!ctx->model->info().has_tokenizer) {
        ctx->detail = "a grammar needs the container's tokenizer (its tokens' text)";
        return WASTE_E_UNSUPPORTED;
      }
      auto grammar = waste::Grammar::Parse(p.grammar);
      if (!grammar) return ArgFail(ctx, ("grammar: " + grammar.error().message()).c_str());
      // Once the text is complete it may end: end of sequence or a stop token.
      std::vector<int> ends = gp.stop_tokens;
      if (ctx->model->info().eos_id >= 0) ends.push_back(ctx->model->info().eos_id);
      std::sort(ends.begin(), ends.end());
      ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
      if (!ctx->grammar_vocab || ctx->grammar_vocab_ends != ends) {
        ctx->grammar_vocab = waste::Vocabulary::FromModel(*ctx->model, ends);
        ctx->grammar_vocab_ends = ends;
        if (!ctx->grammar_vocab) return WASTE_E_OOM;
      }
      constraint = std::make_unique<waste::BudgetedGrammar>(*grammar, ctx->grammar_vocab,
                                                            gp.max_tokens, std::vector<int>{}, ends);
      gp.constraint = constraint.get();
    }
    std::vector<int> ids(prompt, prompt + n);
    waste::TokenCallback on_token;
    if (cb != nullptr) {
      on_token = [cb, user](const waste::TokenEvent& e) {
        waste_token_info info{};
        info.token_index = e.index;
        info.token = e.token;
        info.logprob = static_cast<float>(e.logprob);
        info.experts_hit = e.experts_hit;
        info.experts_missed = e.experts_missed;
        info.bytes_read = e.bytes_read;
        info.ms_total = e.ms_total;
        info.ms_io = e.ms_io;
        std::string piece(e.piece);  // NUL-terminated copy
        return cb(piece.c_str(), piece.size(), &info, user) == 0;
      };
    }
    auto r = ctx->session->Generate(ids, gp, on_token);
    if (!r) return Fail(ctx, r.error());
    if (*r == waste::FinishReason::kCancelled) {
      ClearDetail(ctx);
      return WASTE_E_CANCELLED;
    }
    // A full context is a normal end with a detail (the reference's rule);
    // so is a grammar left incomplete (the context or max_tokens ran out).
    ctx->detail = ctx->session->error_detail();
    if (constraint && !constraint->complete() && ctx->detail.empty()) {
      ctx->detail = "the output does not complete the grammar: max_tokens ran out first";
    }
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_set_logprobs(waste_ctx* ctx, int enabled) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  ctx->logprobs = enabled != 0;
  return WASTE_OK;
}

waste_status waste_eval(waste_ctx* ctx, const int32_t* ids, size_t n, const float** logits,
                        int32_t* vocab) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (ids == nullptr || n == 0) return ArgFail(ctx, "empty prompt");
  try {
    std::vector<int> v(ids, ids + n);
    auto r = ctx->session->Eval(v);
    if (!r) return Fail(ctx, r.error());
    if (logits != nullptr) *logits = r->data();
    if (vocab != nullptr) *vocab = static_cast<int32_t>(r->size());
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_score(waste_ctx* ctx, const int32_t* ids, size_t n, int32_t next,
                         double* scores) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (ids == nullptr || n == 0) return ArgFail(ctx, "empty prompt");
  if (scores == nullptr && (n > 1 || next >= 0)) return ArgFail(ctx, "scores must not be NULL");
  try {
    std::vector<int> v(ids, ids + n);
    auto r = ctx->session->Score(v, next);
    if (!r) return Fail(ctx, r.error());
    std::copy(r->begin(), r->end(), scores);
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_state_save(waste_ctx* ctx, const char* path) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (path == nullptr) return ArgFail(ctx, "path must not be NULL");
  try {
    Status st = ctx->session->SaveState(path);
    return st.ok() ? WASTE_OK : Fail(ctx, st);
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_state_load(waste_ctx* ctx, const char* path) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (path == nullptr) return ArgFail(ctx, "path must not be NULL");
  try {
    Status st = ctx->session->LoadState(path);
    return st.ok() ? WASTE_OK : Fail(ctx, st);
  } catch (...) {
    return WASTE_E_OOM;
  }
}

void waste_state_reset(waste_ctx* ctx) {
  if (ctx == nullptr) return;
  ctx->session->Reset();
  ClearDetail(ctx);
}

waste_status waste_image_dimensions(const char* path, int32_t* width, int32_t* height) {
  g_open_detail.clear();
  if (path == nullptr || width == nullptr || height == nullptr) return WASTE_E_ARG;
  try {
    auto size = waste::ProbeImageFile(path);
    if (!size) {
      g_open_detail = size.error().message();
      return Code(size.error().code());
    }
    *width = size->width;
    *height = size->height;
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_image_add(waste_ctx* ctx, const char* path, int32_t* n_rows) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (path == nullptr) return ArgFail(ctx, "path must not be NULL");
  try {
    auto rows = ctx->model->AddImage(path);
    if (!rows) return Fail(ctx, rows.error());
    if (n_rows != nullptr) *n_rows = *rows;
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_image_add_bytes(waste_ctx* ctx, const uint8_t* bytes, size_t len,
                                   int32_t* n_rows) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (bytes == nullptr || len == 0) return ArgFail(ctx, "empty image bytes");
  try {
    auto rows = ctx->model->AddImageBytes(std::span<const uint8_t>(bytes, len), "image bytes");
    if (!rows) return Fail(ctx, rows.error());
    if (n_rows != nullptr) *n_rows = *rows;
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_image_expand(waste_ctx* ctx, const int32_t* ids, size_t n, int32_t* out,
                                size_t cap, size_t* n_out) {
  if (ctx == nullptr) return WASTE_E_ARG;
  ClearDetail(ctx);
  if (n_out == nullptr || (ids == nullptr && n > 0) || (out == nullptr && cap > 0)) {
    return ArgFail(ctx, "ids, out and n_out must not be NULL");
  }
  *n_out = 0;
  // Compared as addresses (unrelated pointers have no order in C++).
  const auto at = [](const int32_t* q) { return reinterpret_cast<uintptr_t>(q); };
  if (n > 0 && cap > 0 && at(out) < at(ids + n) && at(ids) < at(out + cap)) {
    return ArgFail(ctx, "out must not overlap ids");
  }
  try {
    auto expanded = ctx->model->ExpandImagePads(std::vector<int>(ids, ids + n));
    if (!expanded) return Fail(ctx, expanded.error());
    *n_out = expanded->size();
    if (expanded->size() > cap) return ShortBuffer(ctx, cap, expanded->size());
    std::copy(expanded->begin(), expanded->end(), out);
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

void waste_image_clear(waste_ctx* ctx) {
  if (ctx == nullptr) return;
  ClearDetail(ctx);
  ctx->model->ClearImages();
}

waste_status waste_model_get_info(const waste_ctx* ctx, waste_model_info* out) {
  if (ctx == nullptr || out == nullptr) return WASTE_E_ARG;
  try {
    const waste::ModelInfo& i = ctx->model->info();
    std::memset(out, 0, sizeof(*out));
    CopyString(i.arch, out->arch, sizeof(out->arch));
    CopyString(i.quantization, out->quant_summary, sizeof(out->quant_summary));
    out->n_layers = i.layers;
    out->n_experts = i.experts;
    out->top_k = i.top_k;
    out->hidden = i.hidden;
    out->vocab = i.vocab;
    out->ctx_max = i.ctx_tokens;
    out->params_total = i.params_total;
    out->params_active = i.params_active;
    out->bos_id = i.bos_id;
    out->eos_id = i.eos_id;
    out->has_tokenizer = i.has_tokenizer ? 1 : 0;
    out->has_chat_template = i.has_chat_template ? 1 : 0;
    return WASTE_OK;
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_save_usage(waste_ctx* ctx, const char* path) {
  if (ctx == nullptr) return WASTE_E_ARG;
  try {
    ClearDetail(ctx);
    Status st = ctx->model->SaveUsage(path != nullptr ? path : "");
    return st.ok() ? WASTE_OK : Fail(ctx, st);
  } catch (...) {
    return WASTE_E_OOM;
  }
}

waste_status waste_get_stats(const waste_ctx* ctx, waste_stats* out) {
  if (ctx == nullptr || out == nullptr) return WASTE_E_ARG;
  waste::Stats s = ctx->session->stats();
  std::memset(out, 0, sizeof(*out));
  out->tokens_generated = s.tokens_generated;
  out->experts_hit = s.experts_hit;
  out->experts_missed = s.experts_missed;
  out->bytes_read = s.bytes_read;
  out->sec_total = s.sec_total;
  out->sec_io = s.sec_io;
  out->direct_io = s.direct_io ? 1 : 0;
  out->prefill_tokens = s.prefill_tokens;
  out->prefill_s = s.prefill_s;
  out->decode_s = s.decode_s;
  out->evictions = s.evictions;
  out->prefetched = s.prefetched;
  out->spec_reads = s.spec_reads;
  return WASTE_OK;
}

uint64_t waste_physical_ram(void) { return waste::PhysicalRam(); }
uint64_t waste_usable_ram(void) { return waste::UsableRam(); }

const char* waste_strerror(waste_status status) {
  switch (status) {
    case WASTE_OK: return "ok";
    case WASTE_E_IO:
    case WASTE_E_FORMAT:
    case WASTE_E_RAM_BUDGET:
    case WASTE_E_OOM:
    case WASTE_E_ARG:
    case WASTE_E_UNSUPPORTED:
    case WASTE_E_CANCELLED:
    case WASTE_E_BUSY:
      return waste::ErrcText(static_cast<Errc>(static_cast<int>(status)));
  }
  return "unknown error";
}

const char* waste_error_detail(const waste_ctx* ctx) {
  if (ctx == nullptr) return g_open_detail.empty() ? nullptr : g_open_detail.c_str();
  if (ctx->detail.empty()) return nullptr;
  return ctx->detail.c_str();
}

int waste_failed_expert(const waste_ctx* ctx, int32_t* layer, int32_t* expert) {
  if (ctx == nullptr || !ctx->failed_expert) return 0;
  if (layer != nullptr) *layer = ctx->failed_expert->layer;
  if (expert != nullptr) *expert = ctx->failed_expert->expert;
  return 1;
}

const char* waste_build_info(void) {
  // Built once; the kernel table it names is fixed for the process.
  static const std::string info = waste::BuildInfo();
  return info.c_str();
}
const char* waste_version(void) { return waste::Version(); }
int waste_version_number(void) { return waste::VersionNumber(); }

}  // extern "C"
