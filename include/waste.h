/* waste.h — the C API: one opened container plus one conversation per
 * waste_ctx, with the reference engine's function names, status codes and
 * call order, so hosts written against the reference (its Python server
 * drives this surface through ctypes) build and behave the same here.
 * docs/EMBEDDING.md lists what differs and why.
 *
 * Conventions. Every fallible call returns a waste_status (0 = WASTE_OK,
 * negative = error; waste_strerror gives the fixed text, waste_error_detail
 * the specific reason). Token ids are int32_t. Lengths are size_t. Output
 * buffers come with their capacity; a buffer that is too small gives
 * WASTE_E_ARG and, where there is an n_out, the length needed. Strings the
 * library returns stay valid as documented and are never freed by the
 * caller. The library never prints and never exits; pass a log callback in
 * waste_cfg to receive its warnings.
 *
 * Threading. One waste_ctx is used by one thread at a time. Different
 * contexts are independent (each opens its own model); the C++ API
 * (waste/model.h) shares one model among many sessions. */
#ifndef WASTE_H_
#define WASTE_H_

#include <stddef.h>
#include <stdint.h>

#include "waste/export.h"
#include "waste/version.h"

#ifdef __cplusplus
extern "C" {
#endif


typedef enum waste_status {
  WASTE_OK = 0,
  WASTE_E_IO = -1,          /* "I/O error" */
  WASTE_E_FORMAT = -2,      /* "malformed container" */
  WASTE_E_RAM_BUDGET = -3,  /* "RAM budget below the model's floor" */
  WASTE_E_OOM = -4,         /* "out of memory" */
  WASTE_E_ARG = -5,         /* "invalid argument" */
  WASTE_E_UNSUPPORTED = -6, /* "unsupported" */
  WASTE_E_CANCELLED = -7,   /* "cancelled by callback" */
  WASTE_E_BUSY = -8         /* "container is already open in another process" */
} waste_status;

typedef struct waste_ctx waste_ctx;

/* Log levels of waste_cfg.log. */
enum { WASTE_LOG_INFO = 0, WASTE_LOG_WARN = 1 };
typedef void (*waste_log_fn)(void* user, int level, const char* message);

/* Cache replacement (waste_cfg.cache_policy). */
/* WASTE_CACHE_DEFAULT: the engine's choice (reuse-odds unless
 * WASTE_CACHE_POLICY names another); results never depend on the policy. */
enum { WASTE_CACHE_LFRU = 0, WASTE_CACHE_LRU = 1, WASTE_CACHE_REUSE_ODDS = 2,
       WASTE_CACHE_DEFAULT = 3 };

/* Open-time choices. Call waste_cfg_init first, then change fields. 0 / NULL
 * / -1 mean "engine chooses" where stated; the environment (WASTE_THREADS,
 * WASTE_DIRECT, ...) fills those, an explicit value always wins. */
typedef struct waste_cfg {
  uint64_t ram_budget;      /* bytes; 0 = default rule */
  uint32_t ctx_tokens;      /* context capacity; 0 = 4096 */
  int32_t threads;          /* 0 = WASTE_THREADS, else every allowed CPU */
  const char* cpu_list;     /* "0-5,8"; NULL = WASTE_CPUS, else unbound */
  int32_t verify;           /* 1 = crc32 every record read */
  int32_t direct_io;        /* -1 = WASTE_DIRECT (default on), 0 off, 1 on */
  int32_t lookahead;        /* -1 = WASTE_LOOKAHEAD (default 6) */
  int32_t io_threads;       /* -1 = WASTE_IO_THREADS (default 2) */
  int32_t cache_policy;     /* WASTE_CACHE_* (default WASTE_CACHE_DEFAULT) */
  const char* usage_path;   /* hotlist; NULL = <container>/usage.waste */
  int32_t exclusive_open;   /* 1 = refuse a container open in another process */
  int32_t vision;           /* 1 = load the vision tower (waste_image_*) */
  waste_log_fn log;         /* NULL = warnings are dropped */
  void* log_user;
} waste_cfg;

/* The memory plan from manifest.json alone (no weights read). */
typedef struct waste_mem_plan {
  uint32_t ctx;
  uint64_t trunk_bytes;
  uint64_t state_bytes;
  uint64_t scratch_bytes;
  uint64_t min_expert_cache;
  uint64_t floor_bytes;
  uint64_t working_set_bytes;
  uint64_t recommended_bytes;
  uint64_t record_bytes;
  uint64_t vision_bytes;
  uint64_t physical_ram_bytes;
  uint64_t usable_ram_bytes;
} waste_mem_plan;

/* What an open context holds. */
typedef struct waste_mem_used {
  uint64_t trunk_bytes;
  uint64_t state_bytes;
  uint64_t scratch_bytes;
  uint64_t expert_cache_bytes; /* slots x padded slot size, really allocated */
  uint64_t budget_bytes;
  uint64_t slots;
} waste_mem_used;

typedef struct waste_model_info {
  char arch[32];            /* "kimi-linear", "kimi-k3", ... */
  char quant_summary[64];   /* "experts VQ3R, trunk Q4G/Q8G/F32" */
  int32_t n_layers;
  int32_t n_experts;
  int32_t top_k;
  int32_t hidden;
  int32_t vocab;
  uint32_t ctx_max;         /* the context opened (waste_cfg.ctx_tokens) */
  uint64_t params_total;
  uint64_t params_active;
  int32_t bos_id;           /* -1 when none */
  int32_t eos_id;           /* -1 when none */
  int32_t has_tokenizer;
  int32_t has_chat_template;
} waste_model_info;

/* Counters since open. */
typedef struct waste_stats {
  uint64_t tokens_generated;
  uint64_t experts_hit;
  uint64_t experts_missed;
  uint64_t bytes_read;
  double sec_total;         /* prefill + decode wall time of generate calls */
  double sec_io;            /* time blocked waiting for expert reads */
  int32_t direct_io;        /* 0 when some bank fell back to buffered reads */
  /* Beyond the reference: */
  uint64_t prefill_tokens;
  double prefill_s;
  double decode_s;
  uint64_t evictions;
  uint64_t prefetched;
  uint64_t spec_reads;
} waste_stats;

/* Per generated token, passed to the token callback. */
typedef struct waste_token_info {
  int32_t token_index;      /* 0-based within the generate call */
  int32_t token;
  float logprob;            /* with waste_set_logprobs(ctx, 1): log p(token), else 0 */
  uint64_t experts_hit;
  uint64_t experts_missed;
  uint64_t bytes_read;
  double ms_total;
  double ms_io;             /* of ms_total, the time spent waiting for expert reads */
} waste_token_info;

/* Called once per generated token with its raw bytes (`piece`, `len`
 * bytes, NUL-terminated; a UTF-8 character may be split across calls).
 * Return 0 to go on, non-zero to stop: waste_generate then returns
 * WASTE_E_CANCELLED at once. */
typedef int (*waste_token_cb)(const char* piece, size_t len, const waste_token_info* info,
                              void* user);

typedef struct waste_gen_params {
  int32_t max_tokens;       /* <= 0 = 256 */
  float temperature;        /* <= 0 = greedy */
  float top_p;              /* <= 0 or >= 1 = off */
  int32_t top_k;            /* 0 = off */
  uint64_t seed;            /* 0 = the fixed default seed */
  const int32_t* stop_tokens;
  size_t n_stop_tokens;
  /* NULL, or a grammar (GBNF: `root ::= ...`, the dialect of `waste run
   * --grammar`, docs/CLI.md) the generated text must follow: each token is
   * checked; as max_tokens runs short only tokens that bring the end closer
   * are allowed; once nothing more can follow, only end of sequence or a
   * stop token may. Output the budget (or the context) cut before it was
   * complete still returns WASTE_OK, with waste_error_detail saying so. A
   * grammar that does not compile is WASTE_E_ARG with the reason in
   * waste_error_detail; a container without a tokenizer WASTE_E_UNSUPPORTED. */
  const char* grammar;
} waste_gen_params;

WASTE_EXPORT void waste_cfg_init(waste_cfg* cfg);
WASTE_EXPORT void waste_gen_params_init(waste_gen_params* params);

WASTE_EXPORT waste_status waste_open(const char* container_dir, const waste_cfg* cfg,
                                     waste_ctx** out);
WASTE_EXPORT void waste_close(waste_ctx* ctx);
/* Ours: several conversations on one opened model. waste_open_sessions is
 * waste_open with room in the RAM budget for `max_sessions` sessions (each
 * its state and scratch at ctx_tokens; 0 = 1, what waste_open reserves).
 * waste_session_new gives another context on ctx's model: its own
 * conversation (state, position, waste_set_logprobs), everything else
 * shared (weights, expert cache, tokenizer). Every call takes a context,
 * so each conversation is driven as the first one is; contexts may be used
 * from different threads (one thread per context at a time), and the
 * model runs their calls one at a time. waste_close closes one
 * conversation; the model closes with the last. WASTE_E_RAM_BUDGET when
 * the sessions the model was opened for are all open
 * (waste_error_detail(ctx) says how many). */
WASTE_EXPORT waste_status waste_open_sessions(const char* container_dir, const waste_cfg* cfg,
                                              uint32_t max_sessions, waste_ctx** out);
WASTE_EXPORT waste_status waste_session_new(waste_ctx* ctx, waste_ctx** out);

WASTE_EXPORT waste_status waste_plan_memory(const char* container_dir, uint32_t ctx_tokens,
                                            waste_mem_plan* out);
WASTE_EXPORT waste_status waste_memory_used(const waste_ctx* ctx, waste_mem_used* out);

/* Text to ids: plain (every byte through pre-tokenization and BPE) or
 * markup (special strings become their ids). add_bos puts the BOS id first.
 * `cap` ids fit in `out`; the count goes to *n_out (also when too small). */
WASTE_EXPORT waste_status waste_tokenize(waste_ctx* ctx, const char* text, int add_bos,
                                         int32_t* out, size_t cap, size_t* n_out);
WASTE_EXPORT waste_status waste_tokenize_markup(waste_ctx* ctx, const char* text, int add_bos,
                                                int32_t* out, size_t cap, size_t* n_out);
/* Ids to bytes, NUL-terminated; *n_out = length without the NUL (the length
 * needed when `cap` is too small, which returns WASTE_E_ARG; out NULL with
 * cap 0 asks for it). Ids outside the vocabulary are WASTE_E_ARG. */
WASTE_EXPORT waste_status waste_detokenize(waste_ctx* ctx, const int32_t* ids, size_t n,
                                           char* out, size_t cap, size_t* n_out);

/* Prefill `prompt` then sample up to max_tokens tokens. WASTE_OK also when
 * the context filled up mid-generation (waste_error_detail says so). */
WASTE_EXPORT waste_status waste_generate(waste_ctx* ctx, const int32_t* prompt, size_t n,
                                         const waste_gen_params* params, waste_token_cb cb,
                                         void* user);
/* Ours: from the next waste_generate on, fill waste_token_info.logprob
 * with the token's log-probability (natural log) under the model's own
 * distribution: the log-softmax of the raw logits, before temperature,
 * top-p/top-k or any other sampling choice. Off by default: it costs a pass
 * over the vocabulary per token (under a millisecond at 163,840 tokens). */
WASTE_EXPORT waste_status waste_set_logprobs(waste_ctx* ctx, int enabled);
/* Feeds `ids`; *logits = the last position's logits (valid until the next
 * call on ctx), *vocab = their count. */
WASTE_EXPORT waste_status waste_eval(waste_ctx* ctx, const int32_t* ids, size_t n,
                                     const float** logits, int32_t* vocab);
/* Feeds `ids` as waste_eval does and scores them (Session::Score):
 * scores[i] = log p(ids[i+1] | everything before it) in nats, i < n-1; with
 * next >= 0 (the id after `ids`, not fed) also scores[n-1] = log p(next).
 * `scores` holds n-1 doubles, or n when next >= 0. */
WASTE_EXPORT waste_status waste_score(waste_ctx* ctx, const int32_t* ids, size_t n, int32_t next,
                                      double* scores);

WASTE_EXPORT waste_status waste_state_save(waste_ctx* ctx, const char* path);
WASTE_EXPORT waste_status waste_state_load(waste_ctx* ctx, const char* path);
WASTE_EXPORT void waste_state_reset(waste_ctx* ctx);

WASTE_EXPORT waste_status waste_model_get_info(const waste_ctx* ctx, waste_model_info* out);

/* Images (models with a vision tower; the context opened with
 * waste_cfg.vision = 1, else WASTE_E_UNSUPPORTED). docs/VISION.md.
 * The stored width and height from an image file's header (PNG, JPEG,
 * BMP, ...; no decode, no context): WASTE_E_IO when unreadable or not an
 * accepted image. */
WASTE_EXPORT waste_status waste_image_dimensions(const char* path, int32_t* width,
                                                 int32_t* height);
/* Decodes the image and runs the tower now; its rows wait in the model's
 * queue for the prompt that shows it. *n_rows = its rows (the pad's
 * length after waste_image_expand; n_rows may be NULL). At most 32 queued
 * (WASTE_E_ARG). */
WASTE_EXPORT waste_status waste_image_add(waste_ctx* ctx, const char* path, int32_t* n_rows);
/* The same from bytes in memory (beyond the reference). */
WASTE_EXPORT waste_status waste_image_add_bytes(waste_ctx* ctx, const uint8_t* bytes, size_t len,
                                                int32_t* n_rows);
/* Replaces the k-th media pad of `ids` by as many pads as the k-th queued
 * image has rows; WASTE_E_ARG when the pads and the queued images differ
 * in number, or `out` (which must not overlap `ids`) is shorter than
 * *n_out, which is set to the length needed. The eval/generate call that
 * feeds the expanded prompt splices the rows and then drops the queue. */
WASTE_EXPORT waste_status waste_image_expand(waste_ctx* ctx, const int32_t* ids, size_t n,
                                             int32_t* out, size_t cap, size_t* n_out);
/* Drops the queue (waste_state_reset keeps it). */
WASTE_EXPORT void waste_image_clear(waste_ctx* ctx);
/* Writes the learned hotlist; NULL path = waste_cfg.usage_path. */
WASTE_EXPORT waste_status waste_save_usage(waste_ctx* ctx, const char* path);
WASTE_EXPORT waste_status waste_get_stats(const waste_ctx* ctx, waste_stats* out);

WASTE_EXPORT uint64_t waste_physical_ram(void);
WASTE_EXPORT uint64_t waste_usable_ram(void);

WASTE_EXPORT const char* waste_strerror(waste_status status);
/* The reason of the last failure (or of a full context) on ctx, or NULL;
 * valid until the next call on ctx. With ctx NULL: why the last waste_open,
 * waste_plan_memory or waste_image_dimensions on this thread failed (there
 * is no context to ask), or NULL; valid until the next of those calls on
 * this thread. */
WASTE_EXPORT const char* waste_error_detail(const waste_ctx* ctx);
/* 1 when the last failure on ctx was one routed expert record's (a read
 * error, a short read, a damaged record, a checksum mismatch), storing its
 * layer and expert index through the pointers that are not NULL; 0 (nothing
 * stored) after a call that succeeded or failed for another reason. Read
 * this rather than parsing waste_error_detail's "expert E of layer L: ...". */
WASTE_EXPORT int waste_failed_expert(const waste_ctx* ctx, int32_t* layer, int32_t* expert);
/* "WASTE 0.1.0 (container v0, backend AVX-512, crc32 zlib, x86_64)". */
WASTE_EXPORT const char* waste_build_info(void);
/* The library's version string ("0.1.0"), which may differ from the
 * header's WASTE_VERSION_STRING when linked dynamically. */
WASTE_EXPORT const char* waste_version(void);
WASTE_EXPORT int waste_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* WASTE_H_ */
