// A C++ host: one model, two conversations. Each session keeps its own
// state; a snapshot taken after a shared prefix is restored into the
// second session instead of prefilling the prefix again.
// Usage: sessions CONTAINER_DIR
#include <cstdio>
#include <string>
#include <vector>

#include <waste/model.h>
#include <waste/waste.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CONTAINER_DIR\n", argv[0]);
    return 2;
  }
  std::fprintf(stderr, "waste %s\n", waste::Version());
  waste::Config config;
  config.max_sessions = 2;  // the budget keeps room for two conversations
  auto model = waste::Model::Open(argv[1], config);
  if (!model) {
    std::fprintf(stderr, "open: %s\n", model.error().ToString().c_str());
    return 1;
  }
  auto first = (*model)->NewSession();
  auto second = (*model)->NewSession();
  if (!first || !second) {
    std::fprintf(stderr, "session: %s\n",
                 (first ? second.error() : first.error()).ToString().c_str());
    return 1;
  }
  auto prefix = (*model)->Tokenize("hello", /*markup=*/false, /*add_bos=*/false);
  if (!prefix) {  // a container without a tokenizer: use raw ids
    prefix = std::vector<int>{1, 17, 42};
  }
  if (!(*first)->Eval(*prefix)) return 1;
  auto snapshot = (*first)->Snapshot();
  if (!snapshot || !(*second)->Restore(*snapshot).ok()) return 1;

  waste::GenParams params;
  params.max_tokens = 8;
  for (waste::Session* s : {first->get(), second->get()}) {
    std::vector<int> turn = {s == first->get() ? 5 : 6};
    std::string text;
    auto reason = s->Generate(turn, params, [&](const waste::TokenEvent& e) {
      text.append(e.piece);
      return true;
    });
    if (!reason) {
      std::fprintf(stderr, "generate: %s\n", reason.error().ToString().c_str());
      return 1;
    }
    std::printf("session at position %d stopped (%s): %zu bytes\n", s->position(),
                waste::FinishReasonName(*reason), text.size());
  }
  return 0;
}
