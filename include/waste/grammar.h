// Constrained decoding: a grammar that masks the sampler's candidates
// token by token, so the output is valid by construction.
//
// Grammar text is GBNF-like (the notation llama.cpp made common):
//
//   root   ::= "{" ws pair ("," ws pair)* "}"      # rules; `root` starts
//   pair   ::= string ":" ws value
//   digit  ::= [0-9]          # classes: ranges, [^...] negation, \n \t \\ \] \xHH \uHHHH
//   any    ::= [^]            # ... [^] is any character
//   x      ::= a | b c        # alternation, sequence, ( ... ) grouping
//   y      ::= x? x* x+ x{2} x{1,3} x{2,}             # repetition
//   end    ::= <[163586]>     # one token by id (a control token)
//
// Literals and classes match Unicode characters (UTF-8 aware; a token may
// end inside a character). Token terminals match only that token id, and
// the ids named in `opaque_tokens` of a Vocabulary never match as text.
//
// JSON Schema (draft 2020-12 subset) compiles to a grammar: type,
// properties, required, additionalProperties, enum, const, items,
// prefixItems, minItems/maxItems, anyOf/oneOf (oneOf is treated as anyOf),
// $ref/$defs/definitions (local), nullable types, string formats date,
// time, date-time, uuid, email (simplified), minLength/maxLength, pattern
// (ECMA-262 without lookaround or back references; a search, as JSON
// Schema says), and minimum/maximum/exclusiveMinimum/exclusiveMaximum
// (integers exactly; numbers soundly: a fractional bound is met from the
// next whole number on). Any other keyword that constrains values is
// refused with kUnsupported naming it (annotations such as title,
// description, default, examples, $schema, $id are ignored).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "waste/chat.h"
#include "waste/export.h"
#include "waste/status.h"

namespace waste {

class Engine;
class Model;

// Implemented by anything that restricts which tokens may come next.
// Engine::Generate calls Allows() on the token it would pick; only when
// that token is forbidden does it call Mask() and pick again, so the
// common case costs one check. Accept() is called with every generated
// token in order.
class WASTE_EXPORT TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  virtual bool Allows(int token) noexcept = 0;
  // Sets the logit of every forbidden token to -infinity.
  virtual void Mask(std::span<float> logits) noexcept = 0;
  virtual void Accept(int token) noexcept = 0;
};

struct GrammarData;  // compiled rules (src/grammar/)

class WASTE_EXPORT Grammar {
 public:
  // GBNF text -> grammar; kFormat with the line and what is wrong.
  static Result<std::shared_ptr<const Grammar>> Parse(std::string_view text) noexcept;
  // A JSON Schema (JSON text) -> grammar for one JSON value matching it,
  // without surrounding whitespace. kUnsupported names an unsupported
  // keyword ("unsupported JSON Schema keyword 'patternProperties' at
  // /properties/a"); kFormat a malformed schema.
  static Result<std::shared_ptr<const Grammar>> FromJsonSchema(std::string_view schema) noexcept;
  // The GBNF that FromJsonSchema compiles (for --json-schema and tests).
  static Result<std::string> JsonSchemaToGbnf(std::string_view schema) noexcept;
  // The same with every rule renamed `rule_prefix` + name (its start rule
  // is `rule_prefix` + "root"), so that several schemas can be combined in
  // one grammar (one per tool) without their rule names colliding.
  static Result<std::string> JsonSchemaToGbnf(std::string_view schema,
                                              std::string_view rule_prefix) noexcept;
  // GBNF text with every rule it defines renamed `prefix` + name (and every
  // reference to it); literals, classes and comments are left alone.
  static Result<std::string> PrefixRules(std::string_view gbnf, std::string_view prefix) noexcept;
  // Any JSON object (response_format json_object).
  static std::shared_ptr<const Grammar> AnyJsonObject() noexcept;

  const GrammarData& data() const noexcept { return *data_; }
  explicit Grammar(std::shared_ptr<const GrammarData> data) : data_(std::move(data)) {}

 private:
  std::shared_ptr<const GrammarData> data_;
};

// The token pieces of a vocabulary in a byte trie, built once per model
// and shared by every matcher (hundreds of milliseconds at 163,840 tokens).
class WASTE_EXPORT Vocabulary {
 public:
  // `pieces[id]` = the token's bytes. `opaque_tokens`: control tokens that
  // never match as text (markers, end of sequence).
  static std::shared_ptr<const Vocabulary> Build(std::vector<std::string> pieces,
                                                 std::vector<int> opaque_tokens) noexcept;
  static std::shared_ptr<const Vocabulary> FromEngine(const Engine& engine,
                                                      std::vector<int> opaque_tokens) noexcept;
  static std::shared_ptr<const Vocabulary> FromModel(const Model& model,
                                                     std::vector<int> opaque_tokens) noexcept;
  struct Impl;
  const Impl& impl() const noexcept { return *impl_; }
  explicit Vocabulary(std::unique_ptr<Impl> impl);
  ~Vocabulary();

 private:
  std::unique_ptr<Impl> impl_;
};

// One generation's position in a grammar.
class WASTE_EXPORT GrammarMatcher : public TokenConstraint {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab);
  ~GrammarMatcher() override;

  bool Allows(int token) noexcept override;
  void Mask(std::span<float> logits) noexcept override;
  void Accept(int token) noexcept override;

  // Text input (tests, `waste run --grammar` checks): false when the bytes
  // cannot continue the grammar (the state is then unchanged).
  bool AcceptText(std::string_view bytes) noexcept;
  // The input so far is a complete sentence of the grammar.
  bool CanEnd() const noexcept;
  // Nothing more may follow (complete and no continuation possible).
  bool MustEnd() const noexcept;
  // No continuation possible at all (a forced token broke the grammar).
  bool Dead() const noexcept;
  // Fewest bytes that complete the sentence from here (0 when CanEnd()).
  int MinBytesToEnd() const noexcept;
  // Forbid tokens that do not bring the end closer; set when the token
  // budget runs short so a reply always ends valid.
  void SetClosing(bool closing) noexcept { closing_ = closing; }
  // Forbid tokens after which the shortest ending is longer than `limit`
  // bytes (-1: no limit). Set from the tokens left, it keeps a generation
  // from opening something (another array item, another tool call) that
  // the budget could no longer finish; SetClosing alone acts too late for
  // such a token.
  void SetMaxBytesToEnd(int limit) noexcept { max_dist_ = limit; }
  // Tokens allowed once the sentence is complete (the engine stops on
  // them: end of sequence, a chat format's stop marker).
  void SetEndTokens(std::vector<int> ids) noexcept;

  struct State;

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::unique_ptr<State> state_;
  bool closing_ = false;
  int max_dist_ = -1;
};

// A "lazy" grammar: the output is free until one of `triggers` is
// generated; from the token after it the grammar applies, and once the
// grammar is complete (nothing more may follow) the output is free again
// until the next trigger. With no triggers it applies from the start and
// to the end, like GrammarMatcher. Used for tool calls: free text until
// the model opens an element, then the element must be a valid call.
class WASTE_EXPORT TriggeredGrammarMatcher : public TokenConstraint {
 public:
  TriggeredGrammarMatcher(std::shared_ptr<const Grammar> grammar,
                          std::shared_ptr<const Vocabulary> vocab, std::vector<int> triggers);
  ~TriggeredGrammarMatcher() override;

  bool Allows(int token) noexcept override;
  void Mask(std::span<float> logits) noexcept override;
  void Accept(int token) noexcept override;

  // The grammar applies now (a trigger came and it is not complete yet).
  bool active() const noexcept { return active_ != nullptr; }
  // How many times a trigger started the grammar.
  int activations() const noexcept { return activations_; }
  // The running matcher, or null while the output is free.
  const GrammarMatcher* matcher() const noexcept { return active_.get(); }
  // 0 while free; see GrammarMatcher.
  int MinBytesToEnd() const noexcept;
  void SetClosing(bool closing) noexcept;
  void SetMaxBytesToEnd(int limit) noexcept;
  void SetEndTokens(std::vector<int> ids) noexcept;

 private:
  void Activate() noexcept;
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const Vocabulary> vocab_;
  std::vector<int> triggers_;
  std::vector<int> end_tokens_;
  std::unique_ptr<GrammarMatcher> active_;
  bool closing_ = false;
  int max_dist_ = -1;
  int activations_ = 0;
};

// A grammar under a token budget, as generation uses it: the output must
// be a sentence of the grammar — from the first token, or after each of
// `triggers` (TriggeredGrammarMatcher: free text until one is generated) —
// and must still be complete when `max_tokens` run out: once the tokens
// left barely cover the shortest way to the end, only tokens that bring the
// end closer are allowed, and no token may open what the tokens left could
// not finish. `end_tokens` are allowed once the sentence is complete (the
// engine stops on them: end of sequence, a chat format's stop marker).
// What `waste run --grammar`, the server's response_format and tool calls
// and the C API's waste_gen_params.grammar use. One per generation.
class WASTE_EXPORT BudgetedGrammar : public TokenConstraint {
 public:
  BudgetedGrammar(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                  int max_tokens, std::vector<int> triggers = {},
                  std::vector<int> end_tokens = {});
  bool Allows(int token) noexcept override { return matcher_.Allows(token); }
  void Mask(std::span<float> logits) noexcept override { matcher_.Mask(logits); }
  void Accept(int token) noexcept override;
  const TriggeredGrammarMatcher& matcher() const noexcept { return matcher_; }
  // The output so far is complete (free text counts as complete).
  bool complete() const noexcept;

 private:
  void UpdateClosing() noexcept;
  TriggeredGrammarMatcher matcher_;
  int max_tokens_;
  int used_ = 0;
};

// Leaves only `token` possible: every other logit becomes -infinity, and
// `token` keeps its logit, or 0 where another constraint had forbidden it
// (a forced token wins). A token outside `logits` changes nothing. What
// the reasoning caps (ThinkTagBudget, the server's XTML one) force with.
WASTE_EXPORT void KeepOnlyToken(std::span<float> logits, int token) noexcept;

// A cap on the reasoning of a model that thinks in text tags at the start
// of its reply (ChatTemplate::think_open/think_close: DeepSeek-R1,
// Kimi-K2-Thinking): once the reply, having opened with the open tag, has
// spent `budget` tokens in it, the next tokens are forced to `close_ids`
// (the close tag and a blank line, as these models write them) and the
// model answers with what it has thought so far. The tags are found in the
// tokens' text (`piece`), whether the tokenizer has them as special tokens
// or not; a reply that does not open with the tag is never touched, nor
// one whose model closed it first. `inner` (not owned, may be null) is the
// generation's other constraint: a token must satisfy both, and where the
// other forbids the forced token the cap wins. What `waste serve`'s
// reasoning budget and `waste run/chat --reasoning-budget` use for such
// models. One per generation.
class WASTE_EXPORT ThinkTagBudget : public TokenConstraint {
 public:
  ThinkTagBudget(int budget, std::string think_open, std::string think_close,
                 std::vector<int> close_ids, std::function<std::string(int)> piece,
                 TokenConstraint* inner = nullptr);
  // For `tmpl`'s think tags on `engine`'s tokenizer (the close tag as one
  // token where it is a special one, then "\n\n" as text); null when the
  // template has no think tags, the tokenizer cannot spell them, or memory
  // ran out. It reads pieces through `engine`, which must outlive it.
  static std::unique_ptr<ThinkTagBudget> ForTemplate(const Engine& engine, const ChatTemplate& tmpl,
                                                     int budget,
                                                     TokenConstraint* inner = nullptr) noexcept;

  bool Allows(int token) noexcept override;
  void Mask(std::span<float> logits) noexcept override;
  void Accept(int token) noexcept override;

  // The budget ran out and the cap closed the reasoning (or is closing it).
  bool closed_early() const noexcept { return forced_ > 0; }
  // The reasoning has ended, or there is none (by the model or the cap).
  bool done() const noexcept { return state_ == State::kDone; }

 private:
  int Forced() const noexcept;

  enum class State { kStart, kThinking, kDone };
  int budget_;
  std::string open_, close_;
  std::vector<int> close_ids_;
  std::function<std::string(int)> piece_;
  TokenConstraint* inner_;
  State state_ = State::kStart;
  std::string text_;   // kStart: the reply so far; kThinking: its last bytes
  int spent_ = 0;      // tokens generated inside the reasoning
  size_t forced_ = 0;  // close_ids_ already emitted
};

}  // namespace waste
