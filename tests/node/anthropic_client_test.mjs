// `waste serve` through the official Anthropic client (@anthropic-ai/sdk),
// as editors and agents written for Claude use it: messages.create
// blocking, the raw event stream and the stream helper, thinking, stop
// sequences, a prefill, a forced tool call (blocking and streamed) and its
// round trip, countTokens, the model list, the thinking budget, typed
// errors, and the key in either header.
// Usage: node anthropic_client_test.mjs WASTE CONTAINER WORKDIR
import Anthropic from "@anthropic-ai/sdk";
import { startServer, check } from "./serve_util.mjs";

const [waste, container] = process.argv.slice(2);
const server = await startServer(waste, container, ["--max-tokens", "24"]);
let keyed;
const textOf = (message) => message.content.filter((b) => b.type === "text").map((b) => b.text).join("");
const thinkingOf = (message) =>
  message.content.filter((b) => b.type === "thinking").map((b) => b.thinking).join("");
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
try {
  // The SDK appends /v1/messages to the base URL itself.
  const client = new Anthropic({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
  const hello = [{ role: "user", content: "Hello" }];
  const plain = { model: "tiny", max_tokens: 12, messages: hello, thinking: { type: "disabled" } };

  const msg = await client.messages.create(plain);
  check(msg.type === "message" && msg.role === "assistant" && msg.id.startsWith("msg_") && msg.model === "tiny",
        "messages.create returns an assistant message: " + msg.id);
  check(Array.isArray(msg.content) && msg.content.length > 0 && msg.content.every((b) => b.type === "text"),
        "thinking disabled: the content is text blocks only");
  check(["end_turn", "max_tokens"].includes(msg.stop_reason) && msg.stop_sequence === null &&
        msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0,
        "stop_reason and usage: " + msg.stop_reason + " " + JSON.stringify(msg.usage));
  // The same prompt on the OpenAI route: the same greedy text.
  const chat = await (await fetch(server.url + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: hello, max_tokens: 12, thinking: false }) })).json();
  const text = textOf(msg);
  check(text.length > 0 && text === (chat.choices[0].message.content ?? ""),
        "the text equals the chat route's reply to the same prompt");

  // The SDK's stream helper: text events and the final message it assembles.
  const stream = client.messages.stream(plain);
  let streamed = "";
  stream.on("text", (delta) => { streamed += delta; });
  const final = await stream.finalMessage();
  check(streamed === text, "the stream helper's text events concatenate to the blocking text");
  check(same(final.content, msg.content) && final.stop_reason === msg.stop_reason &&
        final.usage.output_tokens === msg.usage.output_tokens,
        "the stream helper's final message: the blocking content, stop_reason and usage");

  // Thinking on (the model's default, so the reply has a thinking block):
  // the stream helper's thinking events rebuild it.
  const thinkingParams = { model: "tiny", max_tokens: 12, messages: hello };
  const thought = await client.messages.create(thinkingParams);
  const thinking = thinkingOf(thought);
  check(thought.content.some((b) => b.type === "thinking") &&
        thought.content.every((b) => b.type !== "thinking" ||
                               (typeof b.thinking === "string" && typeof b.signature === "string")),
        "thinking on: a thinking block with string thinking and signature");
  let streamedThinking = "";
  const tstream = client.messages.stream(thinkingParams);
  tstream.on("thinking", (delta) => { streamedThinking += delta; });
  const tfinal = await tstream.finalMessage();
  check(thinking.length > 0 && streamedThinking === thinking && same(tfinal.content, thought.content),
        "thinking deltas rebuild the blocking thinking block");

  // The raw events as the SDK parses them: message_start with empty
  // content, each block opened, filled and closed in order (a thinking
  // block ends with its signature_delta), then message_delta with the
  // stop reason and usage, and message_stop last.
  const events = [];
  for await (const ev of await client.messages.create({ ...thinkingParams, stream: true })) events.push(ev);
  const types = events.map((e) => e.type);
  let inOrder = types[0] === "message_start" && types.at(-2) === "message_delta" && types.at(-1) === "message_stop" &&
                same(events[0].message.content, []) && events[0].message.usage.input_tokens === thought.usage.input_tokens;
  let open = null, next = 0, lastDelta = null;
  const blocks = [];
  for (const ev of events.slice(1, -2)) {
    if (ev.type === "content_block_start") {
      inOrder &&= open === null && ev.index === next;
      open = ev.index; lastDelta = null;
      blocks.push(ev.content_block.type);
    } else if (ev.type === "content_block_delta") {
      inOrder &&= ev.index === open;
      lastDelta = ev.delta.type;
    } else if (ev.type === "content_block_stop") {
      inOrder &&= ev.index === open && (blocks.at(-1) !== "thinking" || lastDelta === "signature_delta");
      open = null; ++next;
    } else {
      inOrder = false;
    }
  }
  const delta = events.at(-2);
  check(inOrder && open === null && same(blocks, thought.content.map((b) => b.type)) &&
        delta.delta.stop_reason === thought.stop_reason && delta.usage.output_tokens === thought.usage.output_tokens,
        "raw stream events: " + [...new Set(types)].join(", ") + " in order");

  // A stop sequence from inside the reply ends it there, blocking and
  // streamed (the streamed text must not show a held-back partial match).
  const at = [...text].findIndex((c, i, a) => i > 0 && /[ -~]/.test(c) && /[ -~]/.test(a[i + 1] ?? ""));
  if (at < 0) {
    console.log("SKIP (stop_sequences): no two printable ASCII characters in the middle of " + JSON.stringify(text));
  } else {
    const stop = [...text].slice(at, at + 2).join("");
    const stopParams = { ...plain, stop_sequences: [stop] };
    const cut = await client.messages.create(stopParams);
    check(cut.stop_reason === "stop_sequence" && cut.stop_sequence === stop &&
          textOf(cut) === text.slice(0, text.indexOf(stop)),
          `stop_sequences ${JSON.stringify(stop)}: stop_reason stop_sequence, the text cut before it`);
    let cutStreamed = "";
    const sstream = client.messages.stream(stopParams);
    sstream.on("text", (d) => { cutStreamed += d; });
    const sfinal = await sstream.finalMessage();
    check(cutStreamed === textOf(cut) && sfinal.stop_reason === "stop_sequence" && sfinal.stop_sequence === stop,
          "stop_sequences streamed: the same cut text, stop_reason and stop_sequence");
  }

  // A prefill: the reply continues the assistant's text (greedy: the
  // first character, one token here, then the rest of the same reply).
  const head = text.slice(0, 1);
  const prefilled = await client.messages.create({ ...plain, max_tokens: 11,
    messages: [...hello, { role: "assistant", content: head }] });
  check(head + textOf(prefilled) === text, "a last assistant message is continued (prefill)");

  // A forced tool call, blocking and streamed (input_json_delta), and its round trip.
  const tools = [{ name: "get_weather", description: "Weather", input_schema: {
    type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
  const ask = [{ role: "user", content: "Weather in Paris?" }];
  const toolParams = { model: "tiny", max_tokens: 160, messages: ask, tools,
                       tool_choice: { type: "tool", name: "get_weather" } };
  const forced = await client.messages.create(toolParams);
  const use = forced.content.find((b) => b.type === "tool_use");
  check(forced.stop_reason === "tool_use" && use?.name === "get_weather" && typeof use.id === "string" &&
        use.input !== null && typeof use.input === "object" && typeof use.input.city === "string",
        "a forced tool call: a tool_use block whose input follows the schema: " + JSON.stringify(use?.input));
  let partialJson = "";
  const toolStream = client.messages.stream(toolParams);
  toolStream.on("inputJson", (partial) => { partialJson += partial; });
  const toolFinal = await toolStream.finalMessage();
  const streamedUse = toolFinal.content.find((b) => b.type === "tool_use");
  check(toolFinal.stop_reason === "tool_use" && streamedUse?.name === "get_weather" &&
        same(streamedUse.input, use.input) && same(JSON.parse(partialJson), use.input),
        "the forced tool call streamed: input_json_delta pieces parse to the blocking input");
  const answer = await client.messages.create({ model: "tiny", max_tokens: 8, tools, messages: [
    ...ask, { role: "assistant", content: forced.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18C, sunny" }] }] });
  check(answer.type === "message" && answer.role === "assistant",
        "the tool result goes back as a tool_result block (answered 200)");

  // countTokens: the prompt as messages.create reads it (input_tokens
  // excludes the tokens read from the cache, as Anthropic counts them).
  const total = (m) => m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0);
  const counted = await client.messages.countTokens({ model: "tiny", messages: hello });
  check(counted.input_tokens === total(thought),
        "countTokens counts the prompt messages.create read: " + counted.input_tokens);
  const countedOff = await client.messages.countTokens({ model: "tiny", messages: hello, thinking: { type: "disabled" } });
  check(countedOff.input_tokens === total(msg), "countTokens with thinking disabled: " + countedOff.input_tokens);
  const countedTools = await client.messages.countTokens({ model: "tiny", messages: ask, tools,
                                                          tool_choice: toolParams.tool_choice });
  check(countedTools.input_tokens === total(forced),
        `countTokens with tools and tool_choice: ${countedTools.input_tokens} (the call read ` +
        `${forced.usage.input_tokens} + ${forced.usage.cache_read_input_tokens} from the cache)`);

  // The model list as the SDK pages it, and one model by id.
  const models = [];
  for await (const m of client.models.list()) models.push(m);
  check(models.length === 1 && models[0].type === "model" && models[0].id.length > 0 &&
        !Number.isNaN(Date.parse(models[0].created_at)) && models[0].max_input_tokens > 0,
        "models.list: the one model served, in Anthropic's shape: " + JSON.stringify(models[0]));
  const retrieved = await client.models.retrieve(models[0].id);
  check(same(retrieved, models[0]), "models.retrieve gives the listed model");
  try {
    await client.models.retrieve("claude-nonexistent");
    check(false, "an unknown model is refused");
  } catch (e) {
    check(e instanceof Anthropic.NotFoundError && e.error?.error?.type === "not_found_error",
          "an unknown model: NotFoundError, Anthropic's shape");
  }

  // thinking.budget_tokens caps the reasoning: greedy, the capped
  // reasoning is the uncapped one's first tokens.
  const story = [{ role: "user", content: "Tell me a story." }];
  const free = await client.messages.create({ model: "tiny", max_tokens: 20, messages: story,
                                              thinking: { type: "enabled", budget_tokens: 1024 } });
  const capped = await client.messages.create({ model: "tiny", max_tokens: 20, messages: story,
                                                thinking: { type: "enabled", budget_tokens: 3 } });
  check(thinkingOf(capped).length > 0 && thinkingOf(free).startsWith(thinkingOf(capped)) &&
        thinkingOf(capped).length < thinkingOf(free).length && capped.content.some((b) => b.type === "text"),
        `budget_tokens 3 closes the reasoning early and the model answers: ` +
        `${JSON.stringify(thinkingOf(capped))} of ${JSON.stringify(thinkingOf(free))}`);

  // Adaptive thinking and an effort, as the current SDK's clients send them.
  const adaptive = await client.messages.create({ model: "tiny", max_tokens: 12, messages: hello,
    thinking: { type: "adaptive" }, output_config: { effort: "high" } });
  check(adaptive.type === "message" && adaptive.content.some((b) => b.type === "thinking"),
        "thinking adaptive with output_config.effort: a thinking block");
  // Structured output through output_config.format.
  const structured = await client.messages.create({ model: "tiny", max_tokens: 60, messages: hello,
    thinking: { type: "disabled" }, output_config: { format: { type: "json_schema",
      schema: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"],
                additionalProperties: false } } } });
  check(typeof JSON.parse(textOf(structured)).ok === "boolean",
        "output_config.format: the text is the JSON the schema asks for: " + textOf(structured));

  // Errors: typed by the SDK, in Anthropic's shape on the wire.
  try {
    await client.messages.create({ model: "tiny", max_tokens: 8, messages: [
      { role: "user", content: [{ type: "document", source: { type: "text", media_type: "text/plain", data: "x" } }] }] });
    check(false, "a document block is refused");
  } catch (e) {
    check(e instanceof Anthropic.BadRequestError && e.status === 400 && e.error?.type === "error" &&
          e.error?.error?.type === "invalid_request_error", "an unsupported block: BadRequestError, Anthropic's shape");
  }
  // A bad request to the stream helper is refused before any event.
  try {
    await client.messages.stream({ ...plain, temperature: 5 }).finalMessage();
    check(false, "temperature 5 is refused");
  } catch (e) {
    check(e instanceof Anthropic.BadRequestError && e.error?.error?.type === "invalid_request_error",
          "a bad streamed request: BadRequestError before the stream");
  }
  // The SDK refuses a request without max_tokens itself: fetch sends it.
  const raw = await fetch(server.url + "/v1/messages", { method: "POST",
    headers: { "Content-Type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: hello }) });
  const body = await raw.json();
  check(raw.status === 400 && body.type === "error" && body.error.type === "invalid_request_error",
        "a request without max_tokens: 400 in Anthropic's shape");

  // The key, in whichever header the SDK sends it (this SDK version:
  // Authorization: Bearer; older ones: X-Api-Key), and in X-Api-Key alone
  // as curl examples and other Anthropic clients send it.
  keyed = await startServer(waste, container, ["--api-key", "secret", "--max-tokens", "4"]);
  let sent = null;
  const recording = (url, init) => { sent = new Headers(init?.headers); return fetch(url, init); };
  const tiny = { model: "tiny", max_tokens: 2, messages: hello };
  const viaSdk = (apiKey) => new Anthropic({ baseURL: keyed.url, apiKey, maxRetries: 0, fetch: recording });
  const viaXApiKey = (apiKey) => new Anthropic({ baseURL: keyed.url, apiKey, maxRetries: 0, fetch: recording,
    defaultHeaders: { "X-Api-Key": apiKey, Authorization: null } });
  check((await viaSdk("secret").messages.create(tiny)).type === "message",
        "the right key as the SDK sends it is accepted (" +
        (sent.has("x-api-key") ? "x-api-key" : "authorization: " + sent.get("authorization")?.split(" ")[0]) + ")");
  check((await viaXApiKey("secret").messages.create(tiny)).type === "message" &&
        sent.get("x-api-key") === "secret" && !sent.has("authorization"),
        "the right key in x-api-key alone is accepted");
  for (const [label, c] of [["as the SDK sends it", viaSdk("wrong")], ["in x-api-key alone", viaXApiKey("wrong")]]) {
    try {
      await c.messages.create(tiny);
      check(false, `a wrong key ${label} is refused`);
    } catch (e) {
      check(e instanceof Anthropic.AuthenticationError && e.status === 401 &&
            e.error?.error?.type === "authentication_error", `a wrong key ${label}: AuthenticationError (401)`);
    }
  }
} finally {
  await server.stop();
  if (keyed) await keyed.stop();
}
console.log("all Anthropic client checks passed");
