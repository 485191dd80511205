// A Kimi-K2-style container (no chat.json; the tokenizer has Kimi's turn
// and tool-call markers, so the server picks its built-in kimi format)
// through the official openai npm client: the format reported, a forced
// call blocking and streamed (the SDK's stream helper assembling the
// tool-call deltas), arguments that are valid JSON of the tool's schema,
// and the call's id sent back with its result. The container is the tiny
// fixture with its specials renamed to Kimi's markers (same ids).
// Usage: node openai_kimi_tools_test.mjs WASTE CONTAINER WORKDIR
import OpenAI from "openai";
import { cpSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServer, check } from "./serve_util.mjs";

const [waste, fixture, work] = process.argv.slice(2);
const container = join(work, "kimi-tools-container");
rmSync(container, { recursive: true, force: true });
cpSync(fixture, container, { recursive: true });
const renamed = {
  305: "<|tool_call_end|>", 307: "<|im_end|>", 308: "<|im_user|>", 309: "<|im_assistant|>",
  310: "<|im_system|>", 311: "<|tool_calls_section_begin|>", 312: "<|tool_calls_section_end|>",
  313: "<|tool_call_begin|>", 314: "<|tool_call_argument_begin|>", 315: "<|im_middle|>",
};
const specials = JSON.parse(readFileSync(join(container, "specials.json"), "utf8"));
for (const s of specials) if (renamed[s.id]) s.text = renamed[s.id];
writeFileSync(join(container, "specials.json"), JSON.stringify(specials));
rmSync(join(container, "chat.json"), { force: true });

const server = await startServer(waste, container);
try {
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });
  const models = await client.models.list();
  check(models.data[0].waste?.chat_format === "kimi", "the built-in kimi format is reported");

  const tools = [{
    type: "function",
    function: {
      name: "add", description: "Adds two integers",
      parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } },
                    required: ["a", "b"] },
    },
  }];
  const messages = [{ role: "user", content: "What is 2 + 3?" }];
  const chat = await client.chat.completions.create({
    model: "tiny", messages, tools, tool_choice: "required", max_tokens: 80, temperature: 1, seed: 7 });
  const choice = chat.choices[0];
  check(choice.finish_reason === "tool_calls", "a forced call ends with finish_reason tool_calls");
  const call = choice.message.tool_calls?.[0];
  check(call?.function.name === "add" && /^functions\.add:\d+$/.test(call.id),
        "the call names the tool, with Kimi's id (" + call?.id + ")");
  const args = JSON.parse(call.function.arguments);
  check(Number.isInteger(args.a) && Number.isInteger(args.b), "its arguments are the schema's JSON");

  const stream = client.beta.chat.completions.stream({
    model: "tiny", messages, tools, tool_choice: { type: "function", function: { name: "add" } },
    max_tokens: 80, temperature: 1, seed: 7 });
  const final = await stream.finalChatCompletion();
  const streamed = final.choices[0].message.tool_calls?.[0];
  check(streamed?.function.name === "add" && streamed.id === call.id &&
        streamed.function.arguments === call.function.arguments,
        "streamed, the SDK assembles the same call");

  const after = await client.chat.completions.create({
    model: "tiny", max_tokens: 4, tools,
    messages: [...messages, choice.message,
               { role: "tool", tool_call_id: call.id, content: String(args.a + args.b) }] });
  check(after.choices[0].message.role === "assistant" && after.usage.prompt_tokens > chat.usage.prompt_tokens,
        "the call and its result go back into the conversation");

  let refused = null;
  try {
    await client.chat.completions.create({
      model: "tiny", messages, tools, tool_choice: { type: "function", function: { name: "nope" } } });
  } catch (e) {
    refused = e;
  }
  check(refused instanceof OpenAI.BadRequestError && refused.param === "tool_choice",
        "naming an undeclared tool is a 400 naming tool_choice");
} finally {
  await server.stop();
}
