// The chat page at / in a real browser: Debian's chromium, headless, driven
// over the DevTools protocol by puppeteer-core. Sends a message, waits for
// the streamed reply, checks the DOM and saves a screenshot; then what a
// person does next: regenerates the reply (the server resumes the prompt
// from its restore point), sets a system prompt, temperature and max
// tokens, reloads the page (the conversation and settings stay), starts a
// new chat, goes back to an earlier one from the list, deletes chats, and,
// on a container with a vision tower (made by waste-gen, $WASTE_GEN),
// attaches an image.
// Usage: node chat_page_test.mjs WASTE CONTAINER OUTDIR
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import puppeteer from "puppeteer-core";
import { bmp, startServer, check } from "./serve_util.mjs";

const [waste, container, outdir] = process.argv.slice(2);
const server = await startServer(waste, container, ["--max-tokens", "24"]);
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "waste-chromium-"));
let browser, visionServer;

// The chat requests the page sends, as the server receives their bodies.
function recordRequests(page) {
  const bodies = [];
  page.on("request", req => {
    if (req.url().endsWith("/v1/chat/completions")) bodies.push(JSON.parse(req.postData()));
  });
  return bodies;
}

// Waits until `count` replies are done and the page is idle again.
async function awaitReplies(page, count) {
  await page.waitForFunction(n => document.querySelectorAll(".assistant.done").length === n &&
                                  !document.getElementById("send").disabled,
                             { timeout: 30000 }, count);
}

const replies = page => page.evaluate(() =>
  [...document.querySelectorAll(".assistant")].map(b => ({
    content: b.querySelector(".content").textContent,
    stats: b.querySelector(".stats").textContent,
  })));

try {
  browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    userDataDir: profile,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage();
  const bodies = recordRequests(page);
  await page.setViewport({ width: 900, height: 600 });
  await page.goto(server.url + "/", { waitUntil: "load" });
  check((await page.title()) === "waste chat", "the page loads from the binary");
  await page.waitForFunction(() => document.getElementById("model").textContent === "tiny");
  check(await page.$eval("#attach", b => b.hidden), "no image button without --vision");
  // Long enough that the prompt passes a restore point (128 tokens).
  const first = "Hello there, ".repeat(60).trim();
  await page.type("#input", first);
  await page.click("#send");
  await awaitReplies(page, 1);
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
  check(state.user === first, "the user's message is shown");
  check(state.reasoning.length + state.content.length > 0, "a streamed reply arrived");
  check(state.reasoning.length === 0 || (!state.reasoningHidden && state.folded), "reasoning is shown folded");
  check(/tok\/s/.test(state.stats) && /expert hit rate/.test(state.stats), "per-reply tok/s and expert hit rate: " + state.stats);
  check(/prompt \d+ tokens \(0 cached\)/.test(state.stats), "the prompt's size and what was cached: " + state.stats);
  check(state.finish === "length" || state.finish === "stop", "finish reason recorded: " + state.finish);
  check(state.sendEnabled && state.stopDisabled, "send re-enabled, stop disabled after the reply");
  const shot = path.join(outdir, "chat_page.png");
  await page.screenshot({ path: shot });
  check(fs.statSync(shot).size > 1000, "screenshot saved to " + shot);

  // Regenerate: the same conversation again (greedy: the same reply), its
  // prompt resumed by the server from the restore point the first left.
  await page.click(".assistant .regenerate");
  await awaitReplies(page, 1);
  const again = await replies(page);
  check(again.length === 1 && again[0].content === state.content, "Regenerate replaces the reply (greedy: the same text)");
  check(JSON.stringify(bodies[1].messages) === JSON.stringify(bodies[0].messages),
        "Regenerate sends the conversation without the old reply");
  const cached = Number((again[0].stats.match(/\((\d+) cached\)/) || [])[1]);
  check(cached >= 128, "the regenerated prompt was resumed by the server: " + again[0].stats);

  // Settings go into the next request.
  await page.click("#settings summary");
  await page.type("#system", "Answer briefly.");
  await page.type("#temperature", "0.7");
  await page.type("#max-tokens", "5");
  await page.$eval("#max-tokens", e => e.dispatchEvent(new Event("change")));
  await page.$eval("#temperature", e => e.dispatchEvent(new Event("change")));
  await page.$eval("#system", e => e.dispatchEvent(new Event("change")));
  await page.type("#input", "And then?");
  await page.click("#send");
  await awaitReplies(page, 2);
  const sent = bodies.at(-1);
  check(sent.messages[0].role === "system" && sent.messages[0].content === "Answer briefly." &&
        sent.temperature === 0.7 && sent.max_tokens === 5, "system prompt, temperature and max tokens are sent");
  check(sent.messages.length === 4 && sent.messages[3].content === "And then?",
        "the whole conversation is sent: system, user, assistant, user");
  check(/^[0-5] tokens/.test((await replies(page))[1].stats), "max tokens 5 bounds the reply");


  // A reload keeps the conversation and the settings.
  await page.reload({ waitUntil: "load" });
  const restored = await page.evaluate(() => ({
    users: document.querySelectorAll(".user").length,
    assistants: document.querySelectorAll(".assistant.done").length,
    system: document.getElementById("system").value,
    temperature: document.getElementById("temperature").value,
    regenerate: document.querySelectorAll(".regenerate").length,
  }));
  check(restored.users === 2 && restored.assistants === 2 && restored.regenerate === 1,
        "after a reload the conversation is shown, the last reply regenerable");
  check(restored.system === "Answer briefly." && restored.temperature === "0.7", "after a reload the settings are kept");

  // A thinking budget goes with thinking on, and the server keeps to it:
  // the reasoning shown is the one the server gives that request.
  if (!(await page.$eval("#settings", e => e.open))) await page.click("#settings summary");
  await page.type("#thinking-budget", "2");
  await page.$eval("#thinking-budget", e => e.dispatchEvent(new Event("change")));
  await page.$eval("#max-tokens", e => { e.value = ""; e.dispatchEvent(new Event("change")); });
  // Greedy, so that the same request sent again gives the same reply.
  await page.$eval("#temperature", e => { e.value = ""; e.dispatchEvent(new Event("change")); });
  await page.type("#input", "Think briefly.");
  await page.click("#send");
  await awaitReplies(page, 3);
  const budgeted = bodies.at(-1);
  check(budgeted.reasoning?.max_tokens === 2 && budgeted.thinking === true,
        "the thinking budget is sent as reasoning.max_tokens: " + JSON.stringify(budgeted.reasoning));
  const shownThought = await page.evaluate(() =>
    document.querySelectorAll(".assistant")[2].querySelector("details div").textContent);
  const direct = await (await fetch(server.url + "/v1/chat/completions", { method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ ...budgeted, stream: false, stream_options: undefined }) })).json();
  check(direct.usage.completion_tokens_details.reasoning_tokens <= 2 &&
        (direct.choices[0].message.reasoning_content ?? "") === shownThought,
        `the reply's thinking kept to the budget: ${direct.usage.completion_tokens_details.reasoning_tokens} ` +
        `tokens, shown ${JSON.stringify(shownThought)}`);

  // Markdown in a reply is rendered from DOM nodes (a random model writes
  // none, so a stored conversation brings it); nothing in it runs.
  const markdown = "# Title\nSome **bold**, *it* and `x<y`.\n\n```js\nlet a = '<b>';\n```\n\n" +
    "- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n" +
    "<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\"> " +
    "[site](https://example.com) [bad](javascript:window.pwned=3)";
  // Stored the way an older page kept its one conversation ("waste-chat"),
  // which a newer page takes into its list of chats.
  await page.evaluate(md => {
    localStorage.removeItem("waste-chats");
    localStorage.setItem("waste-chat", JSON.stringify([
      { role: "user", content: "Format this" }, { role: "assistant", content: md, finish: "stop" }]));
  }, markdown);
  await page.reload({ waitUntil: "load" });
  const migrated = await page.evaluate(() => ({
    old: localStorage.getItem("waste-chat"), kept: JSON.parse(localStorage.getItem("waste-chats")),
    listed: [...document.querySelectorAll("#chat-list li")].map(li => li.textContent) }));
  check(migrated.old === null && migrated.kept.chats.length === 1 &&
        migrated.kept.chats[0].messages[0].content === "Format this" &&
        JSON.stringify(migrated.listed) === JSON.stringify(["Format this\u00d7"]),
        "an older page's conversation becomes a chat of the list: " + JSON.stringify(migrated.listed));
  const md = await page.evaluate(() => {
    const c = document.querySelector(".assistant .content");
    return {
      h: c.querySelector("h3")?.textContent, strong: c.querySelector("strong")?.textContent,
      em: c.querySelector("em")?.textContent, code: c.querySelector("p code")?.textContent,
      pre: c.querySelector("pre code")?.textContent, lang: c.querySelector("pre code")?.dataset.lang,
      copy: !!c.querySelector("pre button.copy"), items: c.querySelectorAll("ul li").length,
      cell: c.querySelector("td")?.textContent, links: [...c.querySelectorAll("a")].map(a => a.href),
      elements: c.querySelectorAll("script, img").length, pwned: window.pwned, text: c.textContent,
    };
  });
  check(md.h === "Title" && md.strong === "bold" && md.em === "it" && md.code === "x<y",
        "markdown: heading, bold, italics and inline code");
  check(md.pre === "let a = '<b>';" && md.lang === "js" && md.copy, "markdown: a fenced code block with a Copy button");
  check(md.items === 2 && md.cell === "1", "markdown: a list and a table");
  check(md.elements === 0 && md.pwned === undefined && md.text.includes("<script>window.pwned = 1</script>"),
        "HTML in a reply stays text: no element made, nothing run");
  check(JSON.stringify(md.links) === JSON.stringify(["https://example.com/"]) &&
        md.text.includes("[bad](javascript:window.pwned=3)"), "only http(s) links become links");
  await page.screenshot({ path: path.join(outdir, "chat_page_markdown.png") });

  // New chat: nothing of the old conversation is shown or sent.
  await page.click("#new");
  check(await page.$eval("#log", l => l.children.length) === 0, "New chat empties the page");
  await page.type("#input", "Hi");
  await page.click("#send");
  await awaitReplies(page, 1);
  const fresh = bodies.at(-1).messages;
  check(fresh.length === 2 && fresh[0].role === "system" && fresh[1].content === "Hi",
        "after New chat only the system prompt and the new message are sent");

  // The list of chats: newest first, the open one marked; an earlier one
  // opens with its messages, and what is sent next is its conversation.
  const listed = () => page.evaluate(() => [...document.querySelectorAll("#chat-list li")].map(li =>
    ({ title: li.querySelector(".open").textContent, current: li.classList.contains("current") })));
  let list = await listed();
  check(JSON.stringify(list) === JSON.stringify([{ title: "Hi", current: true }, { title: "Format this", current: false }]),
        "the new chat is listed first and marked open: " + JSON.stringify(list));
  await page.click("#chat-list li:nth-child(2) .open");
  const reopened = await page.evaluate(() => ({
    users: [...document.querySelectorAll(".user")].map(u => u.textContent),
    h: document.querySelector(".assistant .content h3")?.textContent,
    regenerate: document.querySelectorAll(".regenerate").length }));
  check(JSON.stringify(reopened.users) === JSON.stringify(["Format this"]) && reopened.h === "Title" &&
        reopened.regenerate === 1, "an earlier chat opens with its messages, its last reply regenerable");
  await page.type("#input", "More");
  await page.click("#send");
  await awaitReplies(page, 2);
  const continued = bodies.at(-1).messages.map(m => m.content);
  check(continued.length === 4 && continued[1] === "Format this" && continued[2] === markdown &&
        continued[3] === "More", "the opened chat's conversation is what is sent");
  list = await listed();
  check(list[0].title === "Format this" && list[0].current && list[1].title === "Hi",
        "the chat written in last comes first: " + JSON.stringify(list));

  // A reload keeps the list and the chat that was open.
  await page.reload({ waitUntil: "load" });
  check(JSON.stringify(await listed()) === JSON.stringify(list) &&
        await page.$$eval(".user", u => u.map(x => x.textContent).join("|")) === "Format this|More",
        "after a reload the list and the open chat are kept");

  // Editing a message: the replies after it are dropped, the edited
  // conversation is sent and answered; its images would stay.
  await page.hover(".user");
  await page.click(".user .edit");
  await page.waitForSelector(".user textarea.editing");
  check(await page.$eval(".user textarea.editing", t => t.value) === "Format this", "Edit opens the message's text");
  await page.$eval(".user textarea.editing", t => { t.value = "Format that"; });
  await page.click(".user .edit-actions button");
  await awaitReplies(page, 1);
  const edited = bodies.at(-1).messages.map(m => m.content);
  check(edited.length === 2 && edited[1] === "Format that", "the edited message is sent without what followed it");
  check(await page.$$eval(".user", u => u.map(x => x.textContent).join("|")) === "Format that" &&
        await page.$$eval(".assistant", a => a.length) === 1, "the page shows the edited message and its new reply");
  await page.reload({ waitUntil: "load" });
  check(await page.$$eval(".user", u => u.map(x => x.textContent).join("|")) === "Format that",
        "the edit is kept across a reload");
  list = await listed();
  check(list[0].title === "Format that", "the list names the chat by its edited first message");

  // Deleting: another chat goes from the list only; the open one gives way
  // to the next in the list; the last leaves an empty page.
  await page.click("#chat-list li:nth-child(2) .delete");
  list = await listed();
  check(list.length === 1 && list[0].title === "Format that" && await page.$$eval(".user", u => u.length) === 1,
        "deleting another chat leaves the open one as it is");
  await page.click("#chat-list li:nth-child(1) .delete");
  check((await listed()).length === 0 && await page.$eval("#log", l => l.children.length) === 0,
        "deleting the open chat, the last one, leaves an empty page");
  await page.reload({ waitUntil: "load" });
  check((await listed()).length === 0, "deleted chats stay deleted after a reload");

  // Storage full (images are large): said in the list, nothing breaks, and
  // what was saved before is what a reload brings.
  await page.type("#input", "Kept");
  await page.click("#send");
  await awaitReplies(page, 1);
  const full = await page.evaluate(() => {
    chat.messages.push({ role: "user", content: "x".repeat(12 * 1024 * 1024) });
    save();
    return !document.getElementById("storage-full").hidden;
  });
  check(full, "a save over the storage quota is reported in the list");
  await page.reload({ waitUntil: "load" });
  check(await page.$$eval(".user", u => u.map(x => x.textContent).join("|")) === "Kept" &&
        await page.$eval("#storage-full", e => e.hidden), "after a failed save a reload brings the last saved state");

  // Images, on a server started with --vision.
  const gen = process.env.WASTE_GEN;
  if (!gen || !fs.existsSync(gen)) {
    console.log("SKIP (image part): WASTE_GEN does not name the waste-gen binary");
  } else {
    const dir = path.join(outdir, "k3-vision-page");
    fs.rmSync(dir, { recursive: true, force: true });
    execFileSync(gen, [dir, "--preset", "k3-tiny", "--tokenizer", "--seed", "7", "--vision",
                       "32,2,48,64,2,4,6,36", "-q"]);
    visionServer = await startServer(waste, dir, ["--vision", "--max-tokens", "8"]);
    const vpage = await browser.newPage();
    const vbodies = recordRequests(vpage);
    await vpage.goto(visionServer.url + "/", { waitUntil: "load" });
    await vpage.click("#new");  // the profile's stored conversation is the other server's
    await vpage.waitForFunction(() => !document.getElementById("attach").hidden);
    check(true, "the image button shows with --vision");
    const image = path.join(outdir, "page-image.bmp");
    fs.writeFileSync(image, bmp(64, 48));
    const [chooser] = await Promise.all([vpage.waitForFileChooser(), vpage.click("#attach")]);
    await chooser.accept([image]);
    await vpage.waitForSelector("#attached img");
    await vpage.type("#input", "What is this?");
    await vpage.click("#send");
    await awaitReplies(vpage, 1);
    const parts = vbodies.at(-1).messages.at(-1).content;
    check(Array.isArray(parts) && parts[0].type === "image_url" &&
          parts[0].image_url.url.startsWith("data:image/bmp;base64,") && parts[1].text === "What is this?",
          "the image goes as a data: URL part before the text");
    const shown = await vpage.evaluate(() => ({
      img: document.querySelectorAll(".user img").length,
      attached: document.querySelectorAll("#attached img").length,
      stats: document.querySelector(".assistant .stats").textContent,
    }));
    check(shown.img === 1 && shown.attached === 0, "the image is shown in the message and no longer attached");
    const promptTokens = Number((shown.stats.match(/prompt (\d+) tokens/) || [])[1]);
    check(promptTokens > 12, "the image's rows are in the prompt: " + shown.stats);
  }
} finally {
  if (browser) await browser.close();
  await server.stop();
  if (visionServer) await visionServer.stop();
  fs.rmSync(profile, { recursive: true, force: true });
}
console.log("all chat page checks passed");
