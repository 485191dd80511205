#include "grammar_option.h"


#include "waste/files.h"

namespace waste::cli {

Result<std::shared_ptr<const Grammar>> LoadGrammarOption(const Options& o) noexcept {
  const bool schema = !o.json_schema_file.empty();
  const std::string& path = schema ? o.json_schema_file : o.grammar_file;
  if (path.empty()) return std::shared_ptr<const Grammar>();
  const std::string flag = schema ? "--json-schema " : "--grammar ";
  // The one file-reading rule (waste/files.h): a regular file, size-capped.
  Result<std::string> read = ReadRegularFile(path, kMaxPromptFileBytes, flag + "file");
  if (!read) return IoError(read.error().message());
  const std::string& text = *read;
  Result<std::shared_ptr<const Grammar>> g =
      schema ? Grammar::FromJsonSchema(text) : Grammar::Parse(text);
  // A grammar the user wrote is a bad argument, not a bad container.
  if (!g) {
    Errc code = g.error().code() == Errc::kFormat ? Errc::kArg : g.error().code();
    return Status(code, flag + path + ": " + g.error().message());
  }
  return g;
}

BudgetedGrammar::BudgetedGrammar(const Engine& engine, std::shared_ptr<const Grammar> grammar,
                                 std::vector<int> end_ids, int max_tokens)
    : matcher_(std::move(grammar), Vocabulary::FromEngine(engine, end_ids)),
      max_tokens_(max_tokens) {
  matcher_.SetEndTokens(std::move(end_ids));
  UpdateClosing();
}

void BudgetedGrammar::UpdateClosing() {
  // Each closing step shortens the shortest ending by at least one byte, so
  // the tokens left must cover it (plus the end token).
  matcher_.SetClosing(max_tokens_ - used_ <= matcher_.MinBytesToEnd() + 1);
}

void BudgetedGrammar::Accept(int token) noexcept {
  matcher_.Accept(token);
  ++used_;
  UpdateClosing();
}

}  // namespace waste::cli
