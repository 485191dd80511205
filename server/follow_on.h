// What a conversation's tokens will most likely share with other requests:
// the follow-on prefill's guess (session_pool.h, "Follow-on prefill"), the
// tokens its next request will start with (this request's messages, the
// reply as a client sends it back, and the start of whatever message comes
// next); and its shared prefix (system prompt and tools), what a new
// conversation of the same client starts with.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "json_text.h"
#include "prepare.h"
#include "waste/waste.h"

namespace waste::server {

// `body` is the chat request as rendered (its messages, tools, thinking
// and format fields), `reply` the assistant message the server answered
// (ChatTurn::Message). The reply goes back as the client will most likely
// send it: with its reasoning only when the request's latest assistant
// message carries reasoning (clients that echo it do so every turn; most
// drop it, and with none to go by it is dropped), with its tool calls as
// they were answered. The guess is the longest token prefix shared by the
// conversation rendered with two different next messages (a user's, or
// the results of the reply's tool calls), so it ends where any next
// message's own tokens begin. Empty when nothing can be guessed (the
// conversation has images, the rendering fails).
std::vector<int> NextTurnPrefix(const Engine& engine, const ChatFormat& format, const Json& body,
                                const Json& reply);

// How many leading tokens of `prompt` (this request's) other conversations
// most likely share with it: its leading system (and developer) messages
// and its tools, as rendered, up to where a first user message's own
// tokens would begin (the longest prefix shared by the request's leading
// system messages rendered with two different user messages), as far as
// `prompt` starts with them. SessionPool::Prepare keeps a restore point
// there (session_pool.h, "Shared-prefix points"). 0 when the request has
// no messages, or when the rendering fails.
size_t SharedPrefixLength(const Engine& engine, const ChatFormat& format, const Json& body,
                          std::span<const int> prompt);

}  // namespace waste::server
