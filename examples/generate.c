/* A C host: plan, open, tokenize a prompt, greedy-generate and print the
 * text as it comes. Build against an installed waste:
 *   cc generate.c $(pkg-config --cflags --libs --static waste) -o generate
 * Usage: generate CONTAINER_DIR [PROMPT] */
#include <stdio.h>
#include <string.h>

#include <waste.h>

static int PrintPiece(const char* piece, size_t len, const waste_token_info* info, void* user) {
  (void)info;
  (void)user;
  fwrite(piece, 1, len, stdout);
  fflush(stdout);
  return 0; /* go on */
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CONTAINER_DIR [PROMPT]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "hello world";
  waste_mem_plan plan;
  waste_status st = waste_plan_memory(argv[1], 4096, &plan);
  if (st != WASTE_OK) {
    fprintf(stderr, "plan: %s\n", waste_strerror(st));
    return 1;
  }
  fprintf(stderr, "%s; floor %.1f MiB\n", waste_build_info(), plan.floor_bytes / 1048576.0);

  waste_cfg cfg;
  waste_cfg_init(&cfg);
  waste_ctx* ctx = NULL;
  st = waste_open(argv[1], &cfg, &ctx);
  if (st != WASTE_OK) {
    fprintf(stderr, "open: %s\n", waste_strerror(st));
    return 1;
  }
  int32_t ids[1024];
  size_t n = 0;
  st = waste_tokenize(ctx, prompt, 0, ids, sizeof(ids) / sizeof(ids[0]), &n);
  if (st == WASTE_OK) {
    waste_gen_params params;
    waste_gen_params_init(&params);
    params.max_tokens = 16;
    fputs(prompt, stdout);
    st = waste_generate(ctx, ids, n, &params, PrintPiece, NULL);
    putchar('\n');
  }
  if (st != WASTE_OK) {
    const char* detail = waste_error_detail(ctx);
    fprintf(stderr, "%s%s%s\n", waste_strerror(st), detail ? ": " : "", detail ? detail : "");
  }
  waste_close(ctx);
  return st == WASTE_OK ? 0 : 1;
}
