// The chat page at / in a real browser: Debian's chromium, headless, driven
// over the DevTools protocol by puppeteer-core. Sends a message, waits for
// the streamed reply, checks the DOM and saves a screenshot.
// Usage: node chat_page_test.mjs WASTE CONTAINER OUTDIR
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";
import { startServer, check } from "./serve_util.mjs";

const [waste, container, outdir] = process.argv.slice(2);
const server = await startServer(waste, container, ["--max-tokens", "24"]);
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "waste-chromium-"));
let browser;
try {
  browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    userDataDir: profile,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 600 });
  await page.goto(server.url + "/", { waitUntil: "load" });
  check((await page.title()) === "waste chat", "the page loads from the binary");
  await page.waitForFunction(() => document.getElementById("model").textContent === "tiny");
  await page.type("#input", "Hello there");
  await page.click("#send");
  await page.waitForSelector(".assistant.done", { timeout: 30000 });
  const state = await page.evaluate(() => {
    const box = document.querySelector(".assistant.done");
    return {
      user: document.querySelector(".user").textContent,
      reasoning: box.querySelector("details div").textContent,
      reasoningHidden: box.querySelector("details").hidden,
      folded: !box.querySelector("details").open,
      content: box.querySelector(".content").textContent,
      stats: box.querySelector(".stats").textContent,
      finish: box.dataset.finish,
      sendEnabled: !document.getElementById("send").disabled,
      stopDisabled: document.getElementById("stop").disabled,
    };
  });
  check(state.user === "Hello there", "the user's message is shown");
  check(state.reasoning.length + state.content.length > 0, "a streamed reply arrived");
  check(state.reasoning.length === 0 || (!state.reasoningHidden && state.folded), "reasoning is shown folded");
  check(/tok\/s/.test(state.stats) && /expert hit rate/.test(state.stats), "per-reply tok/s and expert hit rate: " + state.stats);
  check(state.finish === "length" || state.finish === "stop", "finish reason recorded: " + state.finish);
  check(state.sendEnabled && state.stopDisabled, "send re-enabled, stop disabled after the reply");
  const shot = path.join(outdir, "chat_page.png");
  await page.screenshot({ path: shot });
  check(fs.statSync(shot).size > 1000, "screenshot saved to " + shot);
} finally {
  if (browser) await browser.close();
  await server.stop();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log("all chat page checks passed");
