// `waste serve` through the official Anthropic client (@anthropic-ai/sdk),
// as editors and agents written for Claude use it: messages.create
// blocking, the stream helper, thinking, stop sequences, a forced tool call
// and its round trip, a prefill, countTokens, typed errors, and the key in
// x-api-key. Usage: node anthropic_client_test.mjs WASTE CONTAINER WORKDIR
import Anthropic from "@anthropic-ai/sdk";
import { startServer, check } from "./serve_util.mjs";

const [waste, container] = process.argv.slice(2);
const server = await startServer(waste, container, ["--max-tokens", "24"]);
let keyed;
const textOf = (message) => message.content.filter((b) => b.type === "text").map((b) => b.text).join("");
try {
  // The SDK appends /v1/messages to the base URL itself.
  const client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
  const hello = [{ role: "user", content: "Hello" }];

  const msg = await client.messages.create({
    model: "tiny", max_tokens: 12, messages: hello, thinking: { type: "disabled" } });
  check(msg.type === "message" && msg.role === "assistant" && msg.id.startsWith("msg_"),
        "messages.create returns an assistant message: " + msg.id);
  check(["end_turn", "max_tokens"].includes(msg.stop_reason) && msg.usage.input_tokens > 0 &&
        msg.usage.output_tokens > 0, "stop_reason and usage: " + JSON.stringify(msg.usage));
  // The same prompt on the OpenAI route: the same greedy text.
  const chat = await (await fetch(server.url + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: hello, max_tokens: 12, thinking: false }) })).json();
  const text = textOf(msg);
  check(text.length > 0 && text === (chat.choices[0].message.content ?? ""),
        "the text equals the chat route's reply to the same prompt");

  // The SDK's stream helper: text events and the final message.
  const stream = client.messages.stream({ model: "tiny", max_tokens: 12, messages: hello,
                                          thinking: { type: "disabled" } });
  let streamed = "";
  stream.on("text", (delta) => { streamed += delta; });
  const final = await stream.finalMessage();
  check(streamed === text && textOf(final) === text && final.stop_reason === msg.stop_reason,
        "the stream helper's text and final message equal the blocking reply");

  // Thinking on (the model's default): thinking blocks, rebuilt by the stream.
  const thought = await client.messages.create({ model: "tiny", max_tokens: 12, messages: hello });
  const thinking = thought.content.filter((b) => b.type === "thinking").map((b) => b.thinking).join("");
  let streamedThinking = "";
  const tstream = client.messages.stream({ model: "tiny", max_tokens: 12, messages: hello });
  tstream.on("thinking", (delta) => { streamedThinking += delta; });
  const tfinal = await tstream.finalMessage();
  check(thinking.length > 0 && streamedThinking === thinking &&
        JSON.stringify(tfinal.content) === JSON.stringify(thought.content),
        "thinking blocks, streamed as thinking deltas");

  // A stop sequence from inside the reply ends it there.
  const at = [...text].findIndex((c, i, a) => i > 0 && /[ -~]/.test(c) && /[ -~]/.test(a[i + 1] ?? ""));
  if (at < 0) {
    console.log("SKIP (stop_sequences): no two printable characters in the reply");
  } else {
    const stop = [...text].slice(at, at + 2).join("");
    const cut = await client.messages.create({ model: "tiny", max_tokens: 12, messages: hello,
                                               thinking: { type: "disabled" }, stop_sequences: [stop] });
    check(cut.stop_reason === "stop_sequence" && cut.stop_sequence === stop &&
          textOf(cut) === text.slice(0, text.indexOf(stop)),
          `stop_sequences ${JSON.stringify(stop)}: stop_reason stop_sequence, the text cut before it`);
  }

  // A prefill: the reply continues the assistant's text (greedy: the
  // first character, one token here, then the rest of the same reply).
  const head = text.slice(0, 1);
  const prefilled = await client.messages.create({ model: "tiny", max_tokens: 11, thinking: { type: "disabled" },
    messages: [...hello, { role: "assistant", content: head }] });
  check(head + textOf(prefilled) === text, "a last assistant message is continued (prefill)");

  // A forced tool call, and its round trip.
  const tools = [{ name: "get_weather", description: "Weather", input_schema: {
    type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
  const ask = [{ role: "user", content: "Weather in Paris?" }];
  const forced = await client.messages.create({ model: "tiny", max_tokens: 160, messages: ask, tools,
                                                tool_choice: { type: "tool", name: "get_weather" } });
  const use = forced.content.find((b) => b.type === "tool_use");
  check(forced.stop_reason === "tool_use" && use?.name === "get_weather" && typeof use.input.city === "string",
        "a forced tool call: a tool_use block whose input follows the schema: " + JSON.stringify(use?.input));
  const answer = await client.messages.create({ model: "tiny", max_tokens: 8, tools, messages: [
    ...ask, { role: "assistant", content: forced.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18C, sunny" }] }] });
  check(answer.type === "message", "the tool result goes back as a tool_result block");

  // countTokens: the prompt as messages.create reads it.
  const counted = await client.messages.countTokens({ model: "tiny", messages: hello, thinking: { type: "disabled" } });
  check(counted.input_tokens === msg.usage.input_tokens + (msg.usage.cache_read_input_tokens ?? 0),
        "countTokens counts the prompt messages.create read: " + counted.input_tokens);

  // Errors: typed by the SDK, in Anthropic's shape on the wire.
  try {
    await client.messages.create({ model: "tiny", max_tokens: 8, messages: [
      { role: "user", content: [{ type: "document", source: { type: "text", media_type: "text/plain", data: "x" } }] }] });
    check(false, "a document block is refused");
  } catch (e) {
    check(e instanceof Anthropic.BadRequestError && e.error?.type === "error" &&
          e.error?.error?.type === "invalid_request_error", "an unsupported block: BadRequestError, Anthropic's shape");
  }
  const raw = await fetch(server.url + "/v1/messages", { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ messages: hello }) });
  const body = await raw.json();
  check(raw.status === 400 && body.type === "error" && body.error.type === "invalid_request_error",
        "a request without max_tokens: 400 in Anthropic's shape");

  // The key as the SDK sends it (x-api-key).
  keyed = await startServer(waste, container, ["--api-key", "secret", "--max-tokens", "4"]);
  const good = new Anthropic({ baseURL: keyed.url, apiKey: "secret", maxRetries: 0 });
  check((await good.messages.create({ model: "tiny", max_tokens: 2, messages: hello })).type === "message",
        "the right key in x-api-key is accepted");
  try {
    await new Anthropic({ baseURL: keyed.url, apiKey: "wrong", maxRetries: 0 }).messages.create({
      model: "tiny", max_tokens: 2, messages: hello });
    check(false, "a wrong key is refused");
  } catch (e) {
    check(e instanceof Anthropic.AuthenticationError, "a wrong key: AuthenticationError (401)");
  }
} finally {
  await server.stop();
  if (keyed) await keyed.stop();
}
console.log("all Anthropic client checks passed");
