/* The C API (include/waste.h) driven from C, the way a host written for
 * the reference drives it: plan, open, tokenize the fixture strings (plain,
 * with BOS, markup, round trip), greedy-generate the fixture prompt, and
 * compare with what the reference produced on warp-tiny-tok
 * (tokenize.json, greedy16.json). Also the error contract: status texts,
 * short buffers, cancellation, state save/load; constrained generation
 * (waste_gen_params.grammar); images on warp-tiny-vision against the
 * reference's expansion, logits and greedy reply.
 * Exit 0 = pass, 1 = failure, 77 = skipped (fixtures absent). */
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "waste.h"

static int failures = 0;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

static char* ReadFile(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = (char*)malloc((size_t)n + 1);
  if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
    fclose(f);
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* --- just enough JSON: find a key after *pos, read an int array or a string */

static const char* FindKey(const char* from, const char* key) {
  char pattern[64];
  snprintf(pattern, sizeof(pattern), "\"%s\"", key);
  const char* p = strstr(from, pattern);
  if (p == NULL) return NULL;
  p += strlen(pattern);
  while (*p == ' ' || *p == ':' || *p == '\n') ++p;
  return p;
}

static size_t ReadInts(const char* p, int32_t* out, size_t cap) {
  size_t n = 0;
  if (p == NULL || *p != '[') return 0;
  ++p;
  while (*p != ']' && *p != '\0') {
    char* end;
    long v = strtol(p, &end, 10);
    if (end == p) {
      ++p;
      continue;
    }
    if (n < cap) out[n] = (int32_t)v;
    ++n;
    p = end;
  }
  return n;
}

static void PutUtf8(unsigned cp, char** o) {
  if (cp < 0x80) {
    *(*o)++ = (char)cp;
  } else if (cp < 0x800) {
    *(*o)++ = (char)(0xC0 | (cp >> 6));
    *(*o)++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *(*o)++ = (char)(0xE0 | (cp >> 12));
    *(*o)++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *(*o)++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *(*o)++ = (char)(0xF0 | (cp >> 18));
    *(*o)++ = (char)(0x80 | ((cp >> 12) & 0x3F));
    *(*o)++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *(*o)++ = (char)(0x80 | (cp & 0x3F));
  }
}

/* A JSON string at p (which points at the opening quote), decoded to UTF-8
 * into out (cap bytes); returns the decoded length. */
static size_t ReadString(const char* p, char* out, size_t cap) {
  char* o = out;
  if (p == NULL || *p != '"') return 0;
  ++p;
  while (*p != '"' && *p != '\0' && (size_t)(o - out) + 5 < cap) {
    if (*p != '\\') {
      *o++ = *p++;
      continue;
    }
    ++p;
    switch (*p) {
      case 'n': *o++ = '\n'; break;
      case 't': *o++ = '\t'; break;
      case 'r': *o++ = '\r'; break;
      case 'b': *o++ = '\b'; break;
      case 'f': *o++ = '\f'; break;
      case 'u': {
        unsigned cp = (unsigned)strtoul((char[]){p[1], p[2], p[3], p[4], 0}, NULL, 16);
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u') {
          unsigned lo = (unsigned)strtoul((char[]){p[3], p[4], p[5], p[6], 0}, NULL, 16);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          p += 6;
        }
        PutUtf8(cp, &o);
        break;
      }
      default: *o++ = *p; break;
    }
    ++p;
  }
  *o = '\0';
  return (size_t)(o - out);
}

static int SameIds(const int32_t* a, size_t na, const int32_t* b, size_t nb) {
  return na == nb && (na == 0 || memcmp(a, b, na * sizeof(int32_t)) == 0);
}

/* --- token callback -------------------------------------------------------- */

struct Collected {
  int32_t ids[64];
  size_t n;
  size_t stop_after; /* cancel once this many arrived (0 = never) */
  size_t bytes;
  float logprobs[64]; /* info->logprob of each token */
};

static int Collect(const char* piece, size_t len, const waste_token_info* info, void* user) {
  struct Collected* c = (struct Collected*)user;
  if (c->n < 64) c->ids[c->n] = info->token;
  if (c->n < 64) c->logprobs[c->n] = info->logprob;
  ++c->n;
  c->bytes += len;
  (void)piece;
  return c->stop_after != 0 && c->n >= c->stop_after;
}

struct Text {
  char buf[1024];
  size_t n;
  int32_t last;
  int32_t eos; /* its piece is not part of the text */
};

static int CollectText(const char* piece, size_t len, const waste_token_info* info, void* user) {
  struct Text* t = (struct Text*)user;
  t->last = info->token;
  if (info->token == t->eos) return 0;
  if (t->n + len < sizeof(t->buf)) {
    memcpy(t->buf + t->n, piece, len);
    t->n += len;
    t->buf[t->n] = '\0';
  }
  return 0;
}

/* Whole-file float32 read: the count, or 0. */
static size_t ReadFloats(const char* path, float* out, size_t cap) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return 0;
  size_t n = fread(out, sizeof(float), cap, f);
  fclose(f);
  return n;
}

/* Images through the C API on warp-tiny-vision: the probe, the queue, the
 * expansion and the eval/generate that splice the rows, against what the
 * reference produced through the same calls. */
static void CheckImages(const char* fixtures_root) {
  char dir[1024], path[1200];
  snprintf(dir, sizeof(dir), "%s/warp-tiny-vision", fixtures_root);
  snprintf(path, sizeof(path), "%s/container/manifest.json", dir);
  FILE* probe = fopen(path, "rb");
  if (probe == NULL) {
    printf("SKIP (images part): fixture set warp-tiny-vision not found under %s\n", fixtures_root);
    return;
  }
  fclose(probe);
  char photo_a[1200], photo_b[1200], container[1200];
  snprintf(photo_a, sizeof(photo_a), "%s/images/photo_a.png", dir);
  snprintf(photo_b, sizeof(photo_b), "%s/images/photo_b.jpg", dir);
  snprintf(container, sizeof(container), "%s/container", dir);
  int32_t w = 0, h = 0;
  CHECK(waste_image_dimensions(photo_a, &w, &h) == WASTE_OK && w == 300 && h == 200);
  CHECK(waste_image_dimensions(photo_b, &w, &h) == WASTE_OK && w == 45 && h == 80);
  CHECK(waste_image_dimensions(container, &w, &h) == WASTE_E_IO);
  CHECK(waste_error_detail(NULL) != NULL);
  CHECK(waste_image_dimensions("/nonexistent/image.png", &w, &h) == WASTE_E_IO);
  CHECK(waste_image_dimensions(photo_a, NULL, &h) == WASTE_E_ARG);

  waste_cfg cfg;
  waste_cfg_init(&cfg);
  waste_ctx* plain = NULL;
  CHECK(waste_open(container, &cfg, &plain) == WASTE_OK);  /* vision off */
  if (plain != NULL) {
    int32_t rows = 0, pad = 730, expanded[4];
    size_t n_expanded = 0;
    unsigned char byte = 0;
    CHECK(waste_image_add(plain, photo_a, &rows) == WASTE_E_UNSUPPORTED);
    CHECK(waste_image_add_bytes(plain, &byte, 1, &rows) == WASTE_E_UNSUPPORTED);
    CHECK(waste_image_expand(plain, &pad, 1, expanded, 4, &n_expanded) == WASTE_E_UNSUPPORTED);
    CHECK(waste_error_detail(plain) != NULL);
    waste_close(plain);
  }
  cfg.vision = 1;
  waste_mem_plan plan;
  /* The reference's figure for this fixture (its extra/memplan.json). */
  CHECK(waste_plan_memory(container, 4096, &plan) == WASTE_OK && plan.vision_bytes == 202466304u);
  waste_ctx* ctx = NULL;
  CHECK(waste_open(container, &cfg, &ctx) == WASTE_OK && ctx != NULL);
  if (ctx == NULL) return;
  int32_t raw[128], want[128], out[128];
  snprintf(path, sizeof(path), "%s/prompt_raw_ids.json", dir);
  char* json = ReadFile(path);
  size_t n_raw = json ? ReadInts(json, raw, 128) : 0;
  free(json);
  snprintf(path, sizeof(path), "%s/prompt_ids.json", dir);
  json = ReadFile(path);
  size_t n_want = json ? ReadInts(json, want, 128) : 0;
  free(json);
  CHECK(n_raw == 53 && n_want == 69);
  int32_t rows_a = 0, rows_b = 0;
  size_t n_out = 0;
  /* No image queued yet: the two pads have nothing to expand into. */
  CHECK(waste_image_expand(ctx, raw, n_raw, out, 128, &n_out) == WASTE_E_ARG);
  CHECK(waste_image_add(ctx, photo_a, &rows_a) == WASTE_OK && rows_a == 15);
  CHECK(waste_image_add(ctx, photo_b, &rows_b) == WASTE_OK && rows_b == 3);
  CHECK(waste_image_expand(ctx, raw, n_raw, out, 10, &n_out) == WASTE_E_ARG && n_out == 69);
  CHECK(waste_image_expand(ctx, raw, n_raw, raw + 1, 100, &n_out) == WASTE_E_ARG);  /* overlap */
  CHECK(waste_image_expand(ctx, raw, n_raw, out, 128, &n_out) == WASTE_OK);
  CHECK(SameIds(out, n_out, want, n_want));
  /* One eval over the expanded prompt: the reference's last logits. */
  const float* logits = NULL;
  int32_t vocab = 0;
  CHECK(waste_eval(ctx, out, n_out, &logits, &vocab) == WASTE_OK && vocab == 768);
  static float ref[768];
  snprintf(path, sizeof(path), "%s/logits_last.f32", dir);
  CHECK(ReadFloats(path, ref, 768) == 768);
  if (logits != NULL && vocab == 768) {
    float max_ref = 0, max_diff = 0;
    for (int i = 0; i < 768; ++i) {
      if (fabsf(ref[i]) > max_ref) max_ref = fabsf(ref[i]);
      if (fabsf(logits[i] - ref[i]) > max_diff) max_diff = fabsf(logits[i] - ref[i]);
    }
    printf("images: last logits max |diff| %.3g (max |ref| %.3g)\n", max_diff, max_ref);
    CHECK(max_diff <= 1e-3f * max_ref);
  }
  /* The call that spliced the rows dropped the queue (the reference's rule). */
  CHECK(waste_image_expand(ctx, raw, n_raw, out, 128, &n_out) == WASTE_E_ARG);
  /* Greedy generation on a reset context with the images added again. */
  waste_state_reset(ctx);
  CHECK(waste_image_add(ctx, photo_a, &rows_a) == WASTE_OK);
  CHECK(waste_image_add(ctx, photo_b, &rows_b) == WASTE_OK);
  CHECK(waste_image_expand(ctx, raw, n_raw, out, 128, &n_out) == WASTE_OK);
  snprintf(path, sizeof(path), "%s/greedy16.json", dir);
  json = ReadFile(path);
  int32_t reply[32];
  size_t n_reply = json ? ReadInts(FindKey(json, "generate_temp0"), reply, 32) : 0;
  free(json);
  CHECK(n_reply == 16);
  waste_gen_params gp;
  waste_gen_params_init(&gp);
  gp.max_tokens = 16;
  struct Collected got = {{0}, 0, 0, 0, {0}};
  CHECK(waste_generate(ctx, out, n_out, &gp, Collect, &got) == WASTE_OK);
  CHECK(SameIds(got.ids, got.n, reply, n_reply));
  printf("images: greedy reply %s the reference\n",
         SameIds(got.ids, got.n, reply, n_reply) ? "equal to" : "DIFFERENT FROM");
  /* An image from memory: the same rows as from its file; bytes that are
   * no image are an I/O error with a detail. waste_state_reset keeps the
   * queue, waste_image_clear drops it. */
  char* jpeg = NULL;
  size_t jpeg_len = 0;
  {
    FILE* f = fopen(photo_b, "rb");
    if (f != NULL) {
      fseek(f, 0, SEEK_END);
      jpeg_len = (size_t)ftell(f);
      fseek(f, 0, SEEK_SET);
      jpeg = (char*)malloc(jpeg_len);
      if (jpeg != NULL && fread(jpeg, 1, jpeg_len, f) != jpeg_len) jpeg_len = 0;
      fclose(f);
    }
  }
  int32_t rows_mem = 0;
  CHECK(jpeg != NULL && jpeg_len > 0);
  if (jpeg != NULL) {
    CHECK(waste_image_add_bytes(ctx, (const uint8_t*)jpeg, jpeg_len, &rows_mem) == WASTE_OK &&
          rows_mem == 3);
    CHECK(waste_image_add_bytes(ctx, (const uint8_t*)jpeg, 40, NULL) == WASTE_E_IO);
    CHECK(waste_error_detail(ctx) != NULL);
  }
  free(jpeg);
  waste_state_reset(ctx);
  int32_t one_pad[] = {730};
  CHECK(waste_image_expand(ctx, one_pad, 1, out, 128, &n_out) == WASTE_OK && n_out == 3);
  waste_image_clear(ctx);
  CHECK(waste_image_expand(ctx, one_pad, 1, out, 128, &n_out) == WASTE_E_ARG);
  CHECK(waste_image_expand(ctx, NULL, 0, out, 128, &n_out) == WASTE_OK && n_out == 0);
  CHECK(waste_image_expand(ctx, one_pad, 1, out, 128, NULL) == WASTE_E_ARG);
  waste_close(ctx);
}

static void CheckTokenizeCases(waste_ctx* ctx, const char* json) {
  static char text[4096], want_detok[4096], got_detok[4096];
  int32_t want[512], got[512];
  int cases = 0;
  const char* p = strstr(json, "\"cases\"");
  while (p != NULL && (p = FindKey(p, "text")) != NULL) {
    size_t len = ReadString(p, text, sizeof(text));
    size_t n_out = 0, n_want;
    /* Plain, with BOS, markup; each against the reference's ids. */
    n_want = ReadInts(FindKey(p, "ids"), want, 512);
    CHECK(waste_tokenize(ctx, text, 0, got, 512, &n_out) == WASTE_OK);
    CHECK(SameIds(got, n_out, want, n_want));
    n_want = ReadInts(FindKey(p, "ids_bos"), want, 512);
    CHECK(waste_tokenize(ctx, text, 1, got, 512, &n_out) == WASTE_OK);
    CHECK(SameIds(got, n_out, want, n_want));
    n_want = ReadInts(FindKey(p, "ids_markup"), want, 512);
    CHECK(waste_tokenize_markup(ctx, text, 0, got, 512, &n_out) == WASTE_OK);
    CHECK(SameIds(got, n_out, want, n_want));
    /* And back to the same bytes. */
    size_t want_len = ReadString(FindKey(p, "detok"), want_detok, sizeof(want_detok));
    n_want = ReadInts(FindKey(p, "ids"), want, 512);
    CHECK(waste_detokenize(ctx, want, n_want, got_detok, sizeof(got_detok), &n_out) == WASTE_OK);
    CHECK(n_out == want_len && memcmp(got_detok, want_detok, want_len) == 0);
    (void)len;
    ++cases;
    p = FindKey(p, "detok");
  }
  printf("tokenize.json: %d cases\n", cases);
  CHECK(cases >= 5);
}

int main(void) {
  const char* fixtures = WASTE_FIXTURES_DIR "/warp-tiny-tok";
  char path[1024];
  snprintf(path, sizeof(path), "%s/container/manifest.json", fixtures);
  FILE* probe = fopen(path, "rb");
  if (probe == NULL) {
    printf("SKIP: fixture set warp-tiny-tok not found under %s\n", WASTE_FIXTURES_DIR);
    return 77;
  }
  fclose(probe);
  char container[1024];
  snprintf(container, sizeof(container), "%s/container", fixtures);

  /* Status codes and texts are the reference's. */
  CHECK(strcmp(waste_strerror(WASTE_OK), "ok") == 0);
  CHECK(strcmp(waste_strerror(WASTE_E_RAM_BUDGET), "RAM budget below the model's floor") == 0);
  CHECK(strcmp(waste_strerror(WASTE_E_CANCELLED), "cancelled by callback") == 0);
  CHECK(strcmp(waste_strerror((waste_status)-42), "unknown error") == 0);
  CHECK(waste_version_number() == WASTE_VERSION_NUMBER);
  CHECK(strcmp(waste_version(), WASTE_VERSION_STRING) == 0);
  CHECK(strncmp(waste_build_info(), "WASTE " WASTE_VERSION_STRING " (container v0", 24) == 0);
  CHECK(waste_physical_ram() > 0 && waste_usable_ram() > 0);

  /* Plan, then a budget under the floor is refused. */
  waste_mem_plan plan;
  CHECK(waste_plan_memory(container, 4096, &plan) == WASTE_OK);
  CHECK(plan.ctx == 4096 && plan.floor_bytes > 0);
  CHECK(plan.floor_bytes ==
        plan.trunk_bytes + plan.state_bytes + plan.scratch_bytes + plan.min_expert_cache);
  CHECK(plan.recommended_bytes >= plan.floor_bytes);
  waste_cfg cfg;
  waste_cfg_init(&cfg);
  waste_ctx* ctx = NULL;
  cfg.ram_budget = plan.floor_bytes - 1;
  CHECK(waste_open(container, &cfg, &ctx) == WASTE_E_RAM_BUDGET && ctx == NULL);
  cfg.ram_budget = 0;
  waste_status st = waste_open(container, &cfg, &ctx);
  CHECK(st == WASTE_OK && ctx != NULL);
  if (ctx == NULL) return 1;

  waste_model_info info;
  CHECK(waste_model_get_info(ctx, &info) == WASTE_OK);
  CHECK(strcmp(info.arch, "kimi-linear") == 0);
  CHECK(info.n_layers == 4 && info.n_experts == 8 && info.top_k == 2 && info.vocab == 316);
  CHECK(info.bos_id == 305 && info.eos_id == 307 && info.ctx_max == 4096);
  CHECK(info.params_total == 1129124 && info.params_active == 646308);
  waste_mem_used used;
  CHECK(waste_memory_used(ctx, &used) == WASTE_OK);
  CHECK(used.trunk_bytes == plan.trunk_bytes && used.state_bytes == plan.state_bytes);
  CHECK(used.scratch_bytes <= plan.scratch_bytes && used.slots > 0);

  /* Tokenizer against the reference's ids. */
  snprintf(path, sizeof(path), "%s/tokenize.json", fixtures);
  char* tokenize_json = ReadFile(path);
  CHECK(tokenize_json != NULL);
  if (tokenize_json != NULL) CheckTokenizeCases(ctx, tokenize_json);
  free(tokenize_json);
  int32_t small[2];
  size_t n_out = 0;
  CHECK(waste_tokenize(ctx, "hello world", 0, small, 2, &n_out) == WASTE_E_ARG && n_out == 5);
  char tiny[4];
  int32_t hello[] = {284, 269, 265, 108, 100};
  CHECK(waste_detokenize(ctx, hello, 5, tiny, sizeof(tiny), &n_out) == WASTE_E_ARG && n_out == 11);
  CHECK(waste_detokenize(ctx, hello, 5, tiny, 0, &n_out) == WASTE_E_ARG);

  /* Greedy generation equals the reference's waste_generate(temp 0, 16). */
  snprintf(path, sizeof(path), "%s/greedy16.json", fixtures);
  char* greedy_json = ReadFile(path);
  CHECK(greedy_json != NULL);
  int32_t prompt[64], want[64];
  size_t n_prompt = greedy_json ? ReadInts(FindKey(greedy_json, "prompt_ids"), prompt, 64) : 0;
  size_t n_want =
      greedy_json ? ReadInts(FindKey(greedy_json, "greedy16_via_generate"), want, 64) : 0;
  free(greedy_json);
  CHECK(n_prompt == 16 && n_want > 0);
  waste_gen_params gp;
  waste_gen_params_init(&gp);
  gp.max_tokens = 16;
  struct Collected got = {{0}, 0, 0, 0};
  CHECK(waste_generate(ctx, prompt, n_prompt, &gp, Collect, &got) == WASTE_OK);
  CHECK(SameIds(got.ids, got.n, want, n_want));
  printf("greedy: %zu ids, %s the reference\n", got.n,
         SameIds(got.ids, got.n, want, n_want) ? "equal to" : "DIFFERENT FROM");
  waste_stats stats;
  CHECK(waste_get_stats(ctx, &stats) == WASTE_OK);
  CHECK(stats.tokens_generated == got.n && stats.sec_total > 0);

  /* Save, generate, reload, generate again: the same continuation. */
  char state_path[1024];
  snprintf(state_path, sizeof(state_path), "%s/waste_c_api_test_%d.state",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)WASTE_VERSION_NUMBER);
  CHECK(waste_state_save(ctx, state_path) == WASTE_OK);
  int32_t next[] = {5, 6, 7};
  gp.max_tokens = 6;
  struct Collected a = {{0}, 0, 0, 0}, b = {{0}, 0, 0, 0};
  CHECK(waste_generate(ctx, next, 3, &gp, Collect, &a) == WASTE_OK);
  CHECK(waste_state_load(ctx, state_path) == WASTE_OK);
  CHECK(waste_generate(ctx, next, 3, &gp, Collect, &b) == WASTE_OK);
  CHECK(a.n == b.n && SameIds(a.ids, a.n, b.ids, b.n));
  remove(state_path);

  /* Cancellation, grammar refusal, bad ids, eval. */
  waste_state_reset(ctx);
  struct Collected c = {{0}, 0, 2, 0};
  CHECK(waste_generate(ctx, prompt, n_prompt, &gp, Collect, &c) == WASTE_E_CANCELLED);
  CHECK(c.n == 2);
  /* A grammar: the text is one of its sentences and ends there (end of
   * sequence is the only token allowed once it is complete). */
  waste_state_reset(ctx);
  gp.grammar = "root ::= (\"yes\" | \"no\") \"!\" | \"maybe\"";
  gp.max_tokens = 12;
  struct Text text = {{0}, 0, -1, 307};
  CHECK(waste_generate(ctx, prompt, n_prompt, &gp, CollectText, &text) == WASTE_OK);
  printf("grammar: generated \"%s\"\n", text.buf);
  CHECK(strcmp(text.buf, "yes!") == 0 || strcmp(text.buf, "no!") == 0 ||
        strcmp(text.buf, "maybe") == 0);
  CHECK(text.last == 307);  /* ended by end of sequence, not by the budget */
  CHECK(waste_error_detail(ctx) == NULL);
  /* A grammar longer than the budget: what fits, WASTE_OK, and a detail. */
  waste_state_reset(ctx);
  gp.grammar = "root ::= \"abcdefghijklmnopqrstuvwxyz\"";
  gp.max_tokens = 4;
  struct Text cut = {{0}, 0, -1, 307};
  CHECK(waste_generate(ctx, prompt, n_prompt, &gp, CollectText, &cut) == WASTE_OK);
  CHECK(cut.n > 0 && strncmp(cut.buf, "abcdefghijklmnopqrstuvwxyz", cut.n) == 0);
  CHECK(waste_error_detail(ctx) != NULL &&
        strstr(waste_error_detail(ctx), "does not complete the grammar") != NULL);
  gp.max_tokens = 12;
  /* One that does not compile: E_ARG naming the problem. */
  gp.grammar = "root ::= (\"unclosed\"";
  CHECK(waste_generate(ctx, prompt, n_prompt, &gp, NULL, NULL) == WASTE_E_ARG);
  CHECK(waste_error_detail(ctx) != NULL && strstr(waste_error_detail(ctx), "grammar") != NULL);
  gp.grammar = NULL;
  gp.max_tokens = 6;
  int32_t bad[] = {1, 99999};
  CHECK(waste_generate(ctx, bad, 2, &gp, NULL, NULL) == WASTE_E_ARG);
  CHECK(waste_error_detail(ctx) != NULL);
  waste_state_reset(ctx);
  const float* logits = NULL;
  int32_t vocab = 0;
  CHECK(waste_eval(ctx, prompt, n_prompt, &logits, &vocab) == WASTE_OK);
  CHECK(logits != NULL && vocab == 316);
  double expect_last = 0; /* log p(want[0]) after the prompt, for waste_score */
  if (logits != NULL) {
    int best = 0;
    for (int i = 1; i < vocab; ++i) if (logits[i] > logits[best]) best = i;
    CHECK(best == want[0]);
    double max = logits[0], sum = 0;
    for (int i = 1; i < vocab; ++i) if (logits[i] > max) max = logits[i];
    for (int i = 0; i < vocab; ++i) sum += exp((double)logits[i] - max);
    expect_last = (double)logits[want[0]] - max - log(sum);
  }
  /* waste_score: the prompt scored again from an empty state, with the
   * greedy next token as `next`: its score is the log-softmax maximum. */
  waste_state_reset(ctx);
  double scores[64];
  CHECK(n_prompt < 64);
  CHECK(waste_score(ctx, prompt, n_prompt, want[0], scores) == WASTE_OK);
  for (size_t i = 0; i < n_prompt; ++i) CHECK(scores[i] <= 0.0 && scores[i] > -1e9);
  CHECK(fabs(scores[n_prompt - 1] - expect_last) < 1e-9);
  CHECK(waste_score(ctx, prompt, 0, -1, scores) == WASTE_E_ARG);
  /* waste_set_logprobs: each token's log-probability; the first greedy
   * token's is the log-softmax maximum after the prompt. Off: 0. */
  waste_state_reset(ctx);
  CHECK(waste_set_logprobs(ctx, 1) == WASTE_OK);
  gp.max_tokens = 4;
  struct Collected lp = {{0}, 0, 0, 0, {0}};
  CHECK(waste_generate(ctx, prompt, n_prompt, &gp, Collect, &lp) == WASTE_OK);
  CHECK(lp.n == 4 && fabs(lp.logprobs[0] - (float)expect_last) < 1e-5);
  for (size_t i = 0; i < lp.n; ++i) CHECK(lp.logprobs[i] <= 0.0f && lp.logprobs[i] > -1e9f);
  waste_state_reset(ctx);
  CHECK(waste_set_logprobs(ctx, 0) == WASTE_OK);
  struct Collected off = {{0}, 0, 0, 0, {0}};
  CHECK(waste_generate(ctx, prompt, n_prompt, &gp, Collect, &off) == WASTE_OK);
  CHECK(off.n == 4 && off.logprobs[0] == 0.0f && SameIds(off.ids, off.n, lp.ids, lp.n));
  CHECK(waste_set_logprobs(NULL, 1) == WASTE_E_ARG);
  /* An argument failure replaces the previous call's detail. */
  int32_t far[] = {1, 99999};
  CHECK(waste_eval(ctx, far, 2, &logits, &vocab) == WASTE_E_ARG);
  CHECK(waste_error_detail(ctx) != NULL && strstr(waste_error_detail(ctx), "99999") != NULL);
  CHECK(waste_eval(ctx, prompt, 0, &logits, &vocab) == WASTE_E_ARG);
  CHECK(waste_error_detail(ctx) != NULL && strstr(waste_error_detail(ctx), "99999") == NULL);
  /* Detokenize: the length query, and ids outside the vocabulary. */
  size_t need = 0;
  CHECK(waste_detokenize(ctx, prompt, n_prompt, NULL, 0, &need) == WASTE_E_ARG && need > 0);
  CHECK(waste_detokenize(ctx, far, 2, NULL, 0, &need) == WASTE_E_ARG);
  /* A model opened for one session has no room for a second. */
  waste_ctx* extra = NULL;
  CHECK(waste_session_new(ctx, &extra) == WASTE_E_RAM_BUDGET && extra == NULL);
  CHECK(waste_error_detail(ctx) != NULL);
  waste_close(ctx);
  waste_close(NULL);

  /* Two conversations on one model: each its own state, the same greedy
   * continuation whatever the other does; the model outlives the context
   * that opened it. */
  waste_ctx* first = NULL;
  waste_ctx* second = NULL;
  waste_ctx* third = NULL;
  CHECK(waste_open_sessions(container, &cfg, 2, &first) == WASTE_OK && first != NULL);
  if (first != NULL) {
    CHECK(waste_session_new(first, &second) == WASTE_OK && second != NULL);
    CHECK(waste_session_new(first, &third) == WASTE_E_RAM_BUDGET && third == NULL);
    gp.max_tokens = 16;
    struct Collected one = {{0}, 0, 0, 0, {0}}, other = {{0}, 0, 0, 0, {0}};
    int32_t unrelated[] = {5, 6, 7, 8, 9};
    CHECK(waste_generate(first, prompt, n_prompt, &gp, Collect, &one) == WASTE_OK);
    if (second != NULL) {
      gp.max_tokens = 4;
      CHECK(waste_generate(first, unrelated, 5, &gp, NULL, NULL) == WASTE_OK);
      gp.max_tokens = 16;
      waste_close(first);  /* the second conversation keeps the model */
      first = NULL;
      CHECK(waste_generate(second, prompt, n_prompt, &gp, Collect, &other) == WASTE_OK);
      CHECK(SameIds(one.ids, one.n, want, n_want) && SameIds(other.ids, other.n, want, n_want));
      size_t ids_n = 0;
      int32_t ids_buf[8];
      CHECK(waste_tokenize(second, "hello", 0, ids_buf, 8, &ids_n) == WASTE_OK && ids_n > 0);
      waste_close(second);
    }
    waste_close(first);
  }
  waste_ctx* none = NULL;
  CHECK(waste_open(NULL, &cfg, &none) == WASTE_E_ARG && none == NULL);
  /* A failed open says why through waste_error_detail(NULL). */
  CHECK(waste_open("/nonexistent/waste/container", &cfg, &none) != WASTE_OK && none == NULL);
  CHECK(waste_error_detail(NULL) != NULL &&
        strstr(waste_error_detail(NULL), "/nonexistent/waste/container") != NULL);

  CheckImages(WASTE_FIXTURES_DIR);

  if (failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
