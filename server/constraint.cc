#include "constraint.h"

namespace waste::server {

BudgetedConstraint::BudgetedConstraint(std::shared_ptr<const Grammar> grammar,
                                       std::shared_ptr<const Vocabulary> vocab, int max_tokens)
    : matcher_(std::move(grammar), std::move(vocab)), max_tokens_(max_tokens) {
  UpdateClosing();
}

void BudgetedConstraint::UpdateClosing() {
  // Each step of closing mode shortens the shortest ending by at least one
  // byte, so the tokens left must cover it (plus one spare).
  matcher_.SetClosing(max_tokens_ - used_ <= matcher_.MinBytesToEnd() + 1);
}

void BudgetedConstraint::Accept(int token) noexcept {
  matcher_.Accept(token);
  ++used_;
  UpdateClosing();
}

std::optional<ApiError> ReplyGrammar(const PreparedChat& chat, const ChatFormat& format,
                                     std::shared_ptr<const Grammar>* out) {
  out->reset();
  const RenderedPrompt& p = chat.prompt;
  if (format.kind != ChatFormat::Kind::kXtml || p.response_format == ResponseFormat::kText) {
    return std::nullopt;
  }
  std::string schema = p.response_format == ResponseFormat::kJsonObject || p.schema.is_null()
                           ? std::string(R"({"type": "object"})")
                           : Dump(p.schema, JsonStyle::kCompact);
  auto gbnf = Grammar::JsonSchemaToGbnf(schema);
  if (!gbnf) {
    return BadRequest("response_format.json_schema: " + gbnf.error().message(), "response_format");
  }
  // The schema's grammar becomes the response body of the XTML reply.
  std::string text = *gbnf;
  text.replace(0, text.find("::="), "json-root ");
  const XtmlMarkers& m = format.markers;
  auto tok = [](int id) { return "<[" + std::to_string(id) + "]>"; };
  std::string root = "root ::= ";
  if (p.think_channel) {
    root += "[^]* " + tok(m.close) + " \"think\" " + tok(m.sep) + " " + tok(m.open) +
            " \"response\" " + tok(m.sep) + " ";
  }
  root += "json-root " + tok(m.end_of_msg) + "\n";
  auto grammar = Grammar::Parse(root + text);
  if (!grammar) {
    return ApiError{500, "server_error", "reply grammar: " + grammar.error().message(),
                    std::nullopt, std::nullopt};
  }
  *out = *grammar;
  return std::nullopt;
}

}  // namespace waste::server
