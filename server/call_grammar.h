// The grammar of the tool calls a constrained XTML reply may make
// (constraint.h composes it into the forced and the lazy reply grammars).
// A call names a declared tool and carries its arguments in either of the
// two forms K3's format has:
//
// * typed `argument` elements, one per key — the form K3's encoder writes
//   for an arguments object, so the form the model writes (and the one it
//   was trained on): <|open|>argument key="city" type="string"<|sep|>Paris
//   <|close|>argument<|sep|>, a string raw, other values as JSON;
// * one <json type="object"> block holding the whole arguments value.
//
// Both are held to the tool's `parameters` schema: typed elements name
// declared keys only, each at most once, every required key present, and
// each value matches its property's schema. A tool whose schema the typed
// form cannot express (a property without one plain type, a keyword the
// compiler lacks) gets the block form only.
#pragma once

#include <string>

#include "render.h"
#include "reply_parser.h"

namespace waste::server {

// GBNF defining `tool-call`: the alternation over the calls a reply may
// make (only the forced tool when tool_choice names one and `only_forced`,
// else every declared tool), with each tool's rules under a prefix of its
// own. Empty when no tool qualifies.
std::string CallRules(const RenderedPrompt& p, const XtmlMarkers& m, bool only_forced);

// The same for Kimi's tool calls (reply_parser.h KimiToolMarkers): each
// alternative is <|tool_call_begin|>functions.NAME:N<|tool_call_argument_begin|>
// ARGS<|tool_call_end|>, ARGS one JSON value of the tool's parameters
// schema (any object when the compiler cannot take the schema).
std::string KimiCallRules(const RenderedPrompt& p, const KimiToolMarkers& k, bool only_forced);

// A GBNF string literal holding `text` byte for byte.
std::string GbnfLiteral(const std::string& text);

}  // namespace waste::server
