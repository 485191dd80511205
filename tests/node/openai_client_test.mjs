// `waste serve` through the official openai npm client: models, chat
// blocking and streaming, a tools round trip, response_format json_schema
// returning JSON that validates (also through the SDK's zod helper, with
// regex and bounds), and errors the client turns into typed
// exceptions. Usage: node openai_client_test.mjs WASTE CONTAINER
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";
import { startServer, check } from "./serve_util.mjs";

const [waste, container, work] = process.argv.slice(2);
const server = await startServer(waste, container);
try {
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });

  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === "tiny", "models.list names the served model");

  const chat = await client.chat.completions.create({
    model: "tiny", messages: [{ role: "user", content: "Hello" }], max_tokens: 12 });
  check(chat.choices[0].message.role === "assistant", "blocking chat returns an assistant message");
  check(chat.usage.completion_tokens === 12 && chat.choices[0].finish_reason === "length",
        "blocking chat: usage and finish_reason");

  const stream = await client.chat.completions.create({
    model: "tiny", messages: [{ role: "user", content: "Hello" }], max_tokens: 12, stream: true,
    stream_options: { include_usage: true } });
  let text = "", finish = null, usage = null;
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta;
    if (d?.content) text += d.content;
    if (d?.reasoning_content) text += d.reasoning_content;
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  const blockingText = (chat.choices[0].message.content ?? "") + (chat.choices[0].message.reasoning_content ?? "");
  check(text === blockingText, "streamed deltas concatenate to the blocking reply");
  check(finish === "length" && usage?.completion_tokens === 12, "stream ends with finish_reason and usage");
  check(!text.includes("\uFFFD") || blockingText.includes("\uFFFD"), "no replacement characters from split pieces");

  // The common loop reads chunk.choices[0] unguarded: without include_usage
  // no chunk may have empty choices; the finish chunk carries `waste`.
  const plain = await client.chat.completions.create({
    model: "tiny", messages: [{ role: "user", content: "Hello" }], max_tokens: 12, stream: true });
  let plainText = "", plainChunks = 0, wasteTokens = null;
  for await (const chunk of plain) {
    const d = chunk.choices[0].delta;
    plainText += (d.content ?? "") + (d.reasoning_content ?? "");
    if (chunk.choices[0].finish_reason) wasteTokens = chunk.waste?.tokens_generated;
    ++plainChunks;
  }
  check(plainText === blockingText, "stream without include_usage: choices[0] on every chunk");
  check(wasteTokens === 12, "the finish chunk's waste counts this request's tokens");

  // /v1/completions streamed: text chunks concatenate to the blocking text.
  const cmpl = await client.completions.create({ model: "tiny", prompt: "Once upon a", max_tokens: 16 });
  const cstream = await client.completions.create({
    model: "tiny", prompt: "Once upon a", max_tokens: 16, stream: true,
    stream_options: { include_usage: true } });
  let ctext = "", cfinish = null, cusage = null;
  for await (const chunk of cstream) {
    if (chunk.choices.length) {
      ctext += chunk.choices[0].text;
      if (chunk.choices[0].finish_reason) cfinish = chunk.choices[0].finish_reason;
    }
    if (chunk.usage) cusage = chunk.usage;
  }
  check(ctext === cmpl.choices[0].text && cfinish === cmpl.choices[0].finish_reason,
        "streamed completion equals the blocking one");
  check(cusage?.completion_tokens === 16, "streamed completion reports usage");

  // Sampling without a seed differs between requests; a seed repeats.
  const sample = async (extra) => (await client.completions.create({
    model: "tiny", prompt: "Once", max_tokens: 24, temperature: 1.0, ...extra })).choices[0].text;
  const unseeded = new Set([await sample({}), await sample({}), await sample({})]);
  check(unseeded.size > 1, "temperature 1 without seed varies");
  check(await sample({ seed: 9 }) === await sample({ seed: 9 }), "the same seed repeats");

  // n: several choices, blocking and through the client's stream helper,
  // which assembles each choice from the chunks carrying its index.
  const nParams = { model: "tiny", messages: [{ role: "user", content: "Hello" }], max_tokens: 10,
                    temperature: 1.0, seed: 4, n: 3 };
  const three = await client.chat.completions.create(nParams);
  check(three.choices.length === 3 && three.choices.every((c, i) => c.index === i),
        "n 3: three choices, indexed 0..2");
  const oneOfThree = await client.chat.completions.create({ ...nParams, n: 1 });
  check(three.choices[0].message.content === oneOfThree.choices[0].message.content,
        "n 3: the first choice is the n 1 reply with the same seed");
  const assembled = await client.beta.chat.completions.stream(nParams).finalChatCompletion();
  check(assembled.choices.length === 3 &&
        assembled.choices.every((c, i) => c.message.content === three.choices[i].message.content &&
                                c.finish_reason === three.choices[i].finish_reason),
        "n 3 streamed: the client's stream helper assembles the blocking choices");
  const best = await client.completions.create({
    model: "tiny", prompt: "Once", max_tokens: 8, temperature: 1.0, seed: 2, n: 1, best_of: 3 });
  check(best.choices.length === 1 && typeof best.choices[0].text === "string",
        "completions best_of 3: one choice returned");
  const batch = await client.completions.create({
    model: "tiny", prompt: ["Once", "Twice"], max_tokens: 6, temperature: 1.0, seed: 2, n: 2 });
  const twice = await client.completions.create({
    model: "tiny", prompt: "Twice", max_tokens: 6, temperature: 1.0, seed: 2, n: 2 });
  check(batch.choices.length === 4 && batch.choices.every((c, i) => c.index === i) &&
        batch.choices[2].text === twice.choices[0].text && batch.choices[3].text === twice.choices[1].text,
        "a list of two prompts with n 2: four choices, the second prompt's at 2 and 3");

  // Log probabilities as the client types them.
  const withLogprobs = await client.chat.completions.create({
    model: "tiny", messages: [{ role: "user", content: "Hello" }], max_tokens: 6,
    logprobs: true, top_logprobs: 2 });
  const entries = withLogprobs.choices[0].logprobs?.content ?? [];
  check(entries.length > 0 && entries.every((e) => typeof e.token === "string" &&
        e.logprob <= 0 && Array.isArray(e.bytes) && e.top_logprobs.length === 2),
        "chat logprobs: an entry per token with two alternatives");
  const streamedEntries = [];
  for await (const chunk of await client.chat.completions.create({
    model: "tiny", messages: [{ role: "user", content: "Hello" }], max_tokens: 6,
    logprobs: true, top_logprobs: 2, stream: true })) {
    for (const e of chunk.choices[0]?.logprobs?.content ?? []) streamedEntries.push(e);
  }
  check(JSON.stringify(streamedEntries) === JSON.stringify(entries),
        "streamed chat logprobs equal the blocking ones");
  const echoed = await client.completions.create({
    model: "tiny", prompt: "Once upon", max_tokens: 0, echo: true, logprobs: 1 });
  const lp = echoed.choices[0].logprobs;
  check(echoed.choices[0].text === "Once upon" && lp.token_logprobs[0] === null &&
        lp.token_logprobs.length === lp.tokens.length && lp.token_logprobs.slice(1).every((v) => v <= 0),
        "completions echo with max_tokens 0 scores the prompt");

  // The Responses API through the client's own methods and types.
  const resp = await client.responses.create({ model: "tiny", input: "Hello", max_output_tokens: 12 });
  const sameChat = await client.chat.completions.create({
    model: "tiny", messages: [{ role: "user", content: "Hello" }], max_tokens: 12 });
  check(resp.object === "response" && resp.output_text === (sameChat.choices[0].message.content ?? ""),
        "responses.create: output_text equals the chat reply to the same prompt");
  let streamedText = "", lastEvent = "";
  for await (const ev of await client.responses.create({
    model: "tiny", input: "Hello", max_output_tokens: 12, stream: true })) {
    if (ev.type === "response.output_text.delta") streamedText += ev.delta;
    lastEvent = ev.type;
  }
  check(streamedText === resp.output_text &&
        (lastEvent === "response.completed" || lastEvent === "response.incomplete"),
        "streamed response events rebuild the text and end with the response");
  // Log probabilities of the output text, as the client asks for them.
  const scored = await client.responses.create({
    model: "tiny", input: "Hello", max_output_tokens: 12, reasoning: { effort: "none" },
    include: ["message.output_text.logprobs"], top_logprobs: 2 });
  const part = scored.output.find((item) => item.type === "message")?.content[0];
  check(part && part.logprobs.length > 0 && part.logprobs.every((e) =>
          e.logprob <= 0 && e.top_logprobs.length === 2 && Array.isArray(e.bytes)) &&
        Buffer.from(part.logprobs.flatMap((e) => e.bytes)).toString("utf8") === part.text,
        "responses.create with include logprobs: one entry per token of the output text");
  try {
    await client.responses.create({ model: "tiny", input: "x", previous_response_id: "resp_1" });
    check(false, "previous_response_id is refused");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === "previous_response_id",
          "400 names previous_response_id");
  }

  for (const [params, field] of [[{ top_logprobs: 2 }, "top_logprobs"],
                                 [{ tool_choice: "bogus" }, "tool_choice"]]) {
    try {
      await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "x" }],
        max_tokens: 1, ...params });
      check(false, `${field} is refused`);
    } catch (e) {
      check(e instanceof OpenAI.BadRequestError && e.param === field, `400 names ${field}`);
    }
  }

  // Tools: the client sends the call it got back and the tool's result.
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
  const round = await client.chat.completions.create({
    model: "tiny", max_tokens: 8, tools,
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_a", type: "function",
        function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris" }) } }] },
      { role: "tool", tool_call_id: "call_a", content: "18C, sunny" },
    ] });
  check(round.choices[0].message.role === "assistant", "tools round trip is accepted and answered");
  for (const call of round.choices[0].message.tool_calls ?? []) {
    JSON.parse(call.function.arguments);
  }

  const schema = { type: "object", properties: { name: { type: "string", maxLength: 10 },
    age: { type: "integer" }, ok: { type: "boolean" } }, required: ["name", "age", "ok"],
    additionalProperties: false };
  for (const seed of [1, 2, 3]) {
    const r = await client.chat.completions.create({
      model: "tiny", messages: [{ role: "user", content: "A person as JSON." }], max_tokens: 120,
      temperature: 1.0, seed, response_format: { type: "json_schema",
        json_schema: { name: "person", schema, strict: true } } });
    const v = JSON.parse(r.choices[0].message.content);
    check(typeof v.name === "string" && v.name.length <= 10 && Number.isInteger(v.age) &&
          typeof v.ok === "boolean" && Object.keys(v).length === 3,
          `json_schema reply validates (seed ${seed}): ${r.choices[0].message.content}`);
  }

  // The SDK's structured-output helper with a zod schema, as applications
  // write it: regex, integer and number bounds become pattern, minimum,
  // maximum and exclusiveMinimum, which the server enforces.
  const Person = z.object({
    code: z.string().regex(/^[A-Z]{2}-\d{3}$/),
    age: z.number().int().min(18).max(120),
    score: z.number().positive().max(1),
  });
  for (const seed of [1, 2]) {
    const parsed = await client.beta.chat.completions.parse({
      model: "tiny", messages: [{ role: "user", content: "A person as JSON." }], max_tokens: 160,
      temperature: 1.0, seed, response_format: zodResponseFormat(Person, "person") });
    const p = parsed.choices[0].message.parsed;
    check(p !== null && Person.safeParse(p).success,
          `zodResponseFormat with regex and bounds parses and validates (seed ${seed}): ` +
          parsed.choices[0].message.content);
  }

  try {
    await client.chat.completions.create({ model: "tiny", messages: [], max_tokens: 1 });
    check(false, "empty messages is refused");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === "messages", "400 names the field (messages)");
  }
  try {
    await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "x" }],
      temperature: 5 });
    check(false, "temperature 5 is refused");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === "temperature", "400 names the field (temperature)");
  }
  const keyed = await startServer(waste, container, ["--api-key", "sekret"]);
  try {
    const bad = new OpenAI({ baseURL: keyed.url + "/v1", apiKey: "wrong", maxRetries: 0 });
    try {
      await bad.models.list();
      check(false, "a wrong key is refused");
    } catch (e) {
      check(e instanceof OpenAI.AuthenticationError, "401 on a wrong key");
    }
    const good = new OpenAI({ baseURL: keyed.url + "/v1", apiKey: "sekret", maxRetries: 0 });
    check((await good.models.list()).data.length === 1, "the right key is accepted");
  } finally {
    await keyed.stop();
  }
  // --parallel 2: a short stream started while a long one runs is served
  // beside it (it ends first), and both texts are each request's alone.
  const par = await startServer(waste, container, ["--parallel", "2"]);
  try {
    const c = new OpenAI({ baseURL: par.url + "/v1", apiKey: "unused", maxRetries: 0 });
    const longReq = { model: "tiny", prompt: "In the beginning", max_tokens: 400, temperature: 0 };
    const shortReq = { model: "tiny", prompt: "And it came to pass", max_tokens: 16, temperature: 0 };
    const longAlone = (await c.completions.create(longReq)).choices[0].text;
    check(longAlone.length > 200, "--parallel 2: the long request's reply is long (the check below needs it)");
    const shortAlone = (await c.completions.create(shortReq)).choices[0].text;
    const arrivals = [];
    const streamText = async (req, label, onFirst) => {
      let text = "";
      for await (const chunk of await c.completions.create({ ...req, stream: true })) {
        if (text === "" && onFirst) onFirst();
        text += chunk.choices[0]?.text ?? "";
        arrivals.push(label);
      }
      arrivals.push(label + " done");
      return text;
    };
    // On a loaded machine the long stream can end before the short one has
    // been sent at all; the order is asked of the best of three rounds,
    // the texts of every round.
    let shortFirst = false, sameTexts = true;
    for (let round = 0; round < 3 && !shortFirst; ++round) {
      arrivals.length = 0;
      let startShort;
      const shortStarted = new Promise(r => { startShort = r; });
      const longText = streamText(longReq, "long", () => startShort());
      await shortStarted;
      const shortText = await streamText(shortReq, "short");
      shortFirst = !arrivals.includes("long done");
      const longFinal = await longText;
      sameTexts = sameTexts && shortText === shortAlone && longFinal === longAlone;
    }
    check(shortFirst, "--parallel 2: the short stream ended while the long one still ran");
    check(sameTexts, "--parallel 2: both streamed texts equal each request alone");
  } finally {
    await par.stop();
  }
  // --prompt-cache: a long system prompt prefilled before a restart is
  // reused after it (cached_tokens), and the reply is the same.
  {
    const { mkdtempSync, rmSync } = await import("node:fs");
    const dir = mkdtempSync((work ?? "/tmp") + "/prompt-cache-");
    const req = {
      model: "tiny", max_tokens: 6, temperature: 0,
      messages: [{ role: "system", content: "Thou art a helpful assistant. ".repeat(30) },
                 { role: "user", content: "Speak." }],
    };
    const ask = async () => {
      const srv = await startServer(waste, container, ["--prompt-cache", dir]);
      try {
        const c = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "unused", maxRetries: 0 });
        return await c.chat.completions.create(req);
      } finally {
        check(await srv.stop() === 0, "the server with --prompt-cache exits 0 on SIGINT");
      }
    };
    try {
      const first = await ask();
      const second = await ask();
      const cached = second.usage.prompt_tokens_details?.cached_tokens ?? 0;
      check(first.usage.prompt_tokens_details?.cached_tokens === 0 && cached >= 128,
            `--prompt-cache: the prefix survives a restart (${cached} of ${second.usage.prompt_tokens} tokens reused)`);
      check(second.choices[0].message.content === first.choices[0].message.content,
            "--prompt-cache: the reply after the restart is the same");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  // --prompt-cache with one slot: a conversation the slot gave up to another
  // is stored, and its next turn (the client's own loop: messages.push of
  // the reply) has its point loaded back rather than prefilled again.
  {
    const { mkdtempSync, rmSync } = await import("node:fs");
    const dir = mkdtempSync((work ?? "/tmp") + "/prompt-store-");
    const srv = await startServer(waste, container, ["--prompt-cache", dir]);
    try {
      const c = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "unused", maxRetries: 0 });
      const ask = (messages) => c.chat.completions.create({ model: "tiny", max_tokens: 6, temperature: 0, messages });
      const a = [{ role: "system", content: "Thou art a patient tutor. ".repeat(14) },
                 { role: "user", content: "Explain prefixes." }];
      const first = await ask(a);
      await ask([{ role: "system", content: "Thou art a terse oracle. ".repeat(12) },
                 { role: "user", content: "Explain suffixes." }]);
      a.push(first.choices[0].message, { role: "user", content: "And infixes?" });
      const next = await ask(a);
      const ownPoint = Math.floor((first.usage.prompt_tokens - 1) / 128) * 128;
      const cached = next.usage.prompt_tokens_details?.cached_tokens ?? 0;
      const loads = (await (await fetch(srv.url + "/metrics")).text())
        .match(/\nwaste_prompt_cache_loads_total (\d+)/)?.[1];
      check(ownPoint >= 128 && cached >= ownPoint && loads === "1",
            `--prompt-cache: a conversation the slot gave up comes back from the store (${cached} of ${next.usage.prompt_tokens} tokens, ${loads} load)`);
    } finally {
      check(await srv.stop() === 0, "the server with stored points exits 0 on SIGINT");
      rmSync(dir, { recursive: true, force: true });
    }
  }
  // Follow-on prefill: the client's own loop (messages.push of the reply
  // message it got), and the next turn resumes past the first reply — more
  // cached tokens than the first turn's own restore point — while the
  // server without follow-on answers it identically from scratch.
  {
    const metric = async (url, name) => {
      const text = await (await fetch(url + "/metrics")).text();
      const m = text.match(new RegExp("\\n" + name + " (\\d+)"));
      return m ? Number(m[1]) : -1;
    };
    const conversation = async (srv, probeOnly) => {
      const c = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "unused", maxRetries: 0 });
      const ask = (messages, max_tokens) => c.chat.completions.create({
        model: "tiny", messages, max_tokens, temperature: 0, reasoning_effort: "none" });
      // A system prompt whose prompt ends late in a 128-token chunk, so
      // the reply crosses the next boundary.
      let messages = null, prompt = 0;
      for (let pad = 0; pad < 200; pad += 3) {
        messages = [{ role: "system", content: "s".repeat(200 + pad) + " be brief" },
                    { role: "user", content: "What is a prefix? Say it in one line." }];
        prompt = (await ask(messages, 1)).usage.prompt_tokens;
        if (prompt % 128 >= 104) break;
      }
      const before = await metric(srv.url, "waste_follow_on_prefills_total");
      const first = await ask(messages, 40);
      messages.push(first.choices[0].message);
      for (let i = 0; i < 400 && !probeOnly &&
           await metric(srv.url, "waste_follow_on_prefills_total") <= before; ++i) {
        await new Promise(r => setTimeout(r, 10));
      }
      messages.push({ role: "user", content: "And a suffix?" });
      const second = await ask(messages, 8);
      return { prompt, second, followed: await metric(srv.url, "waste_follow_on_cached_tokens_total") };
    };
    const on = await startServer(waste, container);
    let withFollowOn;
    try {
      withFollowOn = await conversation(on, false);
    } finally {
      await on.stop();
    }
    const cached = withFollowOn.second.usage.prompt_tokens_details?.cached_tokens ?? 0;
    const ownPoint = Math.floor((withFollowOn.prompt - 1) / 128) * 128;
    check(cached > ownPoint && withFollowOn.followed === cached,
          `follow-on: the second turn resumed past the reply (${cached} cached tokens, the first ` +
          `turn's own point ${ownPoint})`);
    const off = await startServer(waste, container, ["--no-follow-on"]);
    try {
      const without = await conversation(off, true);
      check(without.second.choices[0].message.content === withFollowOn.second.choices[0].message.content &&
            (without.second.usage.prompt_tokens_details?.cached_tokens ?? 0) <= ownPoint,
            "follow-on: the second turn's reply equals the one without follow-on");
    } finally {
      await off.stop();
    }
  }
  // Predicted outputs (`prediction`) on a server that drafts: the reply is
  // the one without it, and usage counts the guesses kept from it. Sampled
  // (seeded), so the random model's reply does not cycle: the conversation
  // alone gives few guesses.
  const drafting = await startServer(waste, container, ["--draft", "8"]);
  try {
    const c = new OpenAI({ baseURL: drafting.url + "/v1", apiKey: "unused", maxRetries: 0 });
    const ask = prediction => c.chat.completions.create({
      model: "tiny", messages: [{ role: "user", content: "Rewrite it." }], max_tokens: 48,
      temperature: 1, seed: 2, reasoning_effort: "none",
      ...(prediction === undefined ? {} : { prediction: { type: "content", content: prediction } }) });
    const first = await ask();
    const reply = first.choices[0].message.content ?? "";
    const predicted = await ask(reply);
    const kept = predicted.usage.completion_tokens_details?.accepted_prediction_tokens ?? -1;
    const keptBefore = first.usage.completion_tokens_details?.accepted_prediction_tokens ?? -1;
    check(predicted.choices[0].message.content === first.choices[0].message.content,
          "prediction: the reply is the one without it");
    check(kept > keptBefore && kept >= 0,
          `prediction: more guesses kept with it (${kept} against ${keptBefore})`);
    check(Number.isInteger(predicted.usage.completion_tokens_details?.rejected_prediction_tokens),
          "prediction: rejected_prediction_tokens reported");
  } finally {
    await drafting.stop();
  }
  // Ctrl-C during a long generation: the request is answered 503 and the
  // server exits 0 promptly (not after the 4000 tokens).
  const busy = await startServer(waste, container);
  try {
    const c = new OpenAI({ baseURL: busy.url + "/v1", apiKey: "unused", maxRetries: 0 });
    const long = c.completions.create({ model: "tiny", prompt: "x", max_tokens: 4000 })
      .then(() => 200, e => e.status);
    await new Promise(r => setTimeout(r, 150));
    const t0 = Date.now();
    const code = await busy.stop();
    const took = Date.now() - t0;
    const status = await long;
    check(code === 0 && took < 3000, `SIGINT stops promptly with exit 0 (${took} ms, exit ${code})`);
    check(status === 503 || status === 200, `the running request is answered (${status})`);
  } finally {
    await busy.stop();
  }
} finally {
  await server.stop();
}
console.log("all openai client checks passed");
