// Images through the official openai npm client: `waste serve --vision` on
// a K3-shaped container with a generated vision tower (waste-gen, path in
// $WASTE_GEN), an image_url content part as the client sends it, the image
// rows counted in usage, prefix reuse reported in usage, and a remote URL
// refused as a typed 400 naming image_url.
// Usage: node openai_vision_test.mjs WASTE CONTAINER WORKDIR (CONTAINER unused)
import OpenAI from "openai";
import { execFileSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { bmp, startServer, check } from "./serve_util.mjs";

const [waste, , work] = process.argv.slice(2);
const gen = process.env.WASTE_GEN;
if (!gen || !existsSync(gen)) {
  console.log("SKIP: WASTE_GEN does not name the waste-gen binary");
  process.exit(77);
}
const dir = work + "/k3-vision";
rmSync(dir, { recursive: true, force: true });
execFileSync(gen, [dir, "--preset", "k3-tiny", "--tokenizer", "--seed", "7", "--vision",
                   "32,2,48,64,2,4,6,36", "-q"]);

// A 64x48 BMP: several image rows under this tower's budget.
const url = "data:image/bmp;base64," + bmp(64, 48).toString("base64");

const server = await startServer(waste, dir, ["--vision", "--parallel", "2"]);
try {
  const client = new OpenAI({ baseURL: server.url + "/v1", apiKey: "unused", maxRetries: 0 });
  const ask = (content) => client.chat.completions.create({
    model: "tiny", max_tokens: 6, messages: [{ role: "user", content }] });
  const text = await ask([{ type: "text", text: "What is in the picture?" }]);
  const withImage = await ask([{ type: "text", text: "What is in the picture?" },
                               { type: "image_url", image_url: { url } }]);
  check(withImage.choices[0].message.role === "assistant", "a request with an image_url part is answered");
  check(withImage.usage.prompt_tokens > text.usage.prompt_tokens + 2,
        `the image's rows count as prompt tokens (${withImage.usage.prompt_tokens} vs ${text.usage.prompt_tokens})`);
  const again = await ask([{ type: "text", text: "What is in the picture?" },
                           { type: "image_url", image_url: { url } }]);
  check(JSON.stringify(again.choices) === JSON.stringify(withImage.choices),
        "the same image request twice gives the same reply");
  check(typeof again.usage.prompt_tokens_details?.cached_tokens === "number",
        "usage reports prompt_tokens_details.cached_tokens");
  try {
    await ask([{ type: "image_url", image_url: { url: "https://example.com/cat.png" } }]);
    check(false, "a remote image URL is refused");
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.param === "image_url" &&
          /not fetched/.test(e.message), "400 for a remote URL names image_url");
  }
} finally {
  await server.stop();
}
console.log("all openai vision checks passed");
