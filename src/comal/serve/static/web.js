// comal web interface: start, steer and approve an agent that runs in the server. Plain
// JavaScript, no build step, no third-party code. Everything the model, a tool or the ledger
// wrote is put on the page as text (textContent), its control and bidi characters shown as
// code points, as the CLI shows them. Views: #/run (a new session), #/chat/ID (one session).
// Every action is a POST the server judges and receipts as an operation on the api surface;
// each carries the server's token (x-comal-csrf) from GET /api/web. While the agent works, Enter
// sends a message that goes in at its next safe point (steer) and Tab one that waits for its run
// to finish (queue): both are queued in the ledger and shown as queued until the agent takes
// them, as in the TUI; Interrupt stops it now, a running command included.
"use strict";

const web = { info: null, sid: null, stream: null, cursor: null, bubble: null, streamed: "",
  working: false, running: null, call: null };
const WEB_HIDDEN = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u00AD\u061C\u180E\u200B\u200E\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB]/g;
const shown = (value) => String(value ?? "").replace(WEB_HIDDEN, (c) =>
  "[U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "]");

// el("div", {class: "x"}, "text", child): strings become text nodes, never markup.
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" || typeof child === "number" ? document.createTextNode(shown(child)) : child);
  }
  return node;
}

async function webInfo() {
  if (!web.info) web.info = await api("/api/web");
  return web.info;
}

async function post(path, body, again = true) {
  const info = await webInfo();
  try {
    return await api(path, {
      method: "POST",
      headers: { "content-type": "application/json", "x-comal-csrf": info.csrf },
      body: JSON.stringify(body ?? {}),
    });
  } catch (error) {
    // The token is the caller's, derived from the ledger's secret: fetch it once more and try
    // again (a key changed, or the ledger's secret).
    if (!again || !/x-comal-csrf/.test(error.message)) throw error;
    web.info = null;
    return post(path, body, false);
  }
}

// -- a new session --------------------------------------------------------------------------
async function runView() {
  const info = await webInfo();
  const select = (id, values) => el("select", { id }, values.map((v) => el("option", { value: v }, v)));
  const prompt = el("textarea", { id: "new-prompt", rows: "4", placeholder: "What should the agent do?" });
  const problem = el("p", { class: "problem", id: "new-problem" });
  const form = el("form", { class: "card newsession", id: "new-session" },
    el("label", {}, "Workspace", select("new-workspace", info.workspaces)),
    el("label", {}, "Model", select("new-model", info.models)),
    el("label", {}, "Engine", select("new-engine", info.engines)),
    el("label", {}, "Mode", select("new-mode", info.modes)),
    prompt, el("button", { type: "submit", class: "approve" }, "Start"), problem);
  form.querySelector("#new-mode").value = info.mode;
  // The engine comal serve runs (--engine, else the configuration's), not the list's first.
  if (info.engine) form.querySelector("#new-engine").value = info.engine;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const started = await post("/api/sessions", {
        prompt: prompt.value, workspace: form.querySelector("#new-workspace").value,
        model: form.querySelector("#new-model").value, engine: form.querySelector("#new-engine").value,
        mode: form.querySelector("#new-mode").value,
      });
      location.hash = `#/chat/${started.session}`;
    } catch (error) { problem.textContent = shown(error.message); }
  });
  main.replaceChildren(el("h1", {}, "Run an agent"),
    el("p", { class: "muted" }, info.workspaces.length
      ? "The agent runs in this server, in a workspace its operator allows; its calls are judged by the session's policy and the ones it asks about come to you here."
      : "This server runs no agent: its operator lists no workspace (serve.workspaces)."),
    form);
}

// -- one session: chat, approvals, gauge, board and steps, other sessions -------------------
function line(item) {
  if (item.kind === "context") return el("div", { class: "line context" }, "· " + item.text);
  if (item.kind === "call") return el("div", { class: "line call", "data-call": item.call_id || "" }, item.text);
  if (item.kind === "output") return output(item.name, item.text, item.is_error, item.call_id);
  return el("div", { class: `line said ${item.who === "you" ? "you" : "model"}` },
    el("b", {}, item.who + ": "), el("span", { class: "words" }, item.text));
}

function output(name, text, isError, callId = "") {
  const lines = String(text).split("\n").length;
  return el("details", { class: `line output${isError ? " err" : ""}`, "data-call": callId || "" },
    el("summary", {}, `${name || "tool"} output (${lines} line${lines === 1 ? "" : "s"})`),
    el("pre", {}, String(text).slice(0, 20000)));
}

function note(text, kind = "note") {
  add(el("div", { class: `line ${kind}` }, "· " + text));
}

function add(node) {
  const box = document.getElementById("transcript");
  if (!box) return;
  box.append(node);
  box.scrollTop = box.scrollHeight;
}

function diff(text) {
  const pre = el("pre", { class: "diff" });
  for (const l of String(text).split("\n")) {
    const cls = l.startsWith("+++") || l.startsWith("---") ? "head" : l.startsWith("@@") ? "hunk"
      : l.startsWith("+") ? "add" : l.startsWith("-") ? "del" : "";
    pre.append(el("span", { class: cls }, l + "\n"));
  }
  return pre;
}

function approvalCard(a) {
  if (document.querySelector(`.ask[data-id="${a.id}"]`)) return;
  const what = approvalWhat(a);
  const answer = async (granted, always = false) => {
    card.querySelectorAll("button").forEach((b) => { b.disabled = true; });
    try {
      await post(`/api/sessions/${web.sid}/approvals/${a.id}`, { granted, always });
      card.remove();
    } catch (error) { card.append(el("p", { class: "problem" }, error.message)); }
  };
  const path = a.arguments && typeof a.arguments.path === "string" ? " " + a.arguments.path : "";
  // The answer first, under the title: a long diff scrolls in its own box below it, so the
  // buttons stay on screen (1400 x 900 and up).
  const card = el("div", { class: "card ask", "data-id": a.id },
    el("div", { class: "asktitle" }, `Approve ${a.operation}${path}?`),
    el("div", { class: "buttons" },
      el("button", { class: "approve", onclick: () => answer(true) }, "Allow once"),
      a.always ? el("button", { class: "always", onclick: () => answer(true, true) }, "Always") : null,
      el("button", { class: "deny", onclick: () => answer(false) }, "Deny")),
    what,
    el("div", { class: "muted" }, `${a.actor.kind} ${a.actor.id} proposes it · effects: ${(a.effects || []).map((e) => e.kind).join(", ") || "none"} · asked by rule ${a.rule}${a.reason ? ` (${a.reason})` : ""}`),
    a.always ? el("div", { class: "muted" }, `always: adds the rule allow ${a.always}`) : null);
  document.getElementById("asks").append(card);
  card.scrollIntoView({ block: "nearest" });
}

// What an approval would do, as the person reads it: a Write's or Edit's diff, a command, else
// the arguments. The dashboard's Approvals page shows the same.
function approvalWhat(a) {
  const command = a.arguments && typeof a.arguments.command === "string" ? a.arguments.command : null;
  return a.change ? diff(a.change)
    : command !== null ? el("pre", { class: "command" }, "$ " + command)
    : el("pre", { class: "arguments" }, JSON.stringify(a.arguments, null, 1));
}

async function gauge() {
  const g = await api(`/api/sessions/${web.sid}/gauge`);
  const box = document.getElementById("gauge");
  if (!box) return;
  const parts = [];
  if (g.utilization !== undefined) {
    const mark = g.measured ? "" : " ~";
    const bar = el("div", { class: `bar${g.over_threshold ? " over" : ""}` });
    bar.style.width = Math.min(100, g.utilization * 100).toFixed(1) + "%";
    parts.push(el("div", { class: "meter", title: g.basis || "" }, bar),
      el("span", { id: "gauge-text" }, `ctx ${(g.utilization * 100).toFixed(0)}%${mark} · ${fmt(g.input)}/${fmt(g.window)} tokens · ${g.measured ? "measured" : "estimated"} · ${g.engine}`));
  } else if (g.error) parts.push(el("span", {}, `[${g.error.code}] ${g.error.message}`));
  parts.push(el("span", { id: "gauge-model" }, ` · ${g.model || "model ?"}${g.mode ? " · " + g.mode : ""}${g.effort ? " · effort " + g.effort : ""}`));
  if (g.board) parts.push(el("span", {}, " · " + g.board));
  parts.push(el("span", { id: "state", class: g.working ? "working" : "" }, g.working ? " · working…" : g.live ? " · ready" : " · not running here"));
  box.replaceChildren(...parts);
}

function steps(list) {
  return el("ul", { class: "steps" }, list.map((s) => el("li", {},
    el("span", {}, `step #${s.n} ${s.outcome} (${s.status}): ${String(s.objective).slice(0, 90)}`),
    s.work && s.work.steps.length ? steps(s.work.steps) : null)));
}

async function work() {
  const w = await api(`/api/sessions/${web.sid}/work`);
  const box = document.getElementById("work");
  if (!box) return;
  const items = w.board.items.map((i) => el("li", { class: `item ${i.status}` },
    el("span", { class: "pill" }, i.status), ` #${i.id} ${i.text}`));
  box.replaceChildren(el("h2", {}, "Board"),
    items.length ? el("ul", { class: "board", id: "board" }, items) : el("p", { class: "muted", id: "board" }, "No board items yet."),
    el("h2", {}, "Work steps"),
    w.steps.length ? steps(w.steps) : el("p", { class: "muted" }, "No work steps."));
}

async function others(q = "") {
  const data = await api("/api/sessions?limit=30" + (q ? "&q=" + encodeURIComponent(q) : ""));
  const list = document.getElementById("others");
  if (!list) return;
  list.replaceChildren(...data.sessions.filter((s) => !s.parent).map((s) => el("li", {},
    el("a", { href: `#/chat/${s.id}` }, `${s.id.slice(0, 8)} ${s.title || ""}`),
    el("span", { class: `status ${s.status}` }, s.status))));
}

async function transcript() {
  const data = await api(`/api/sessions/${web.sid}/transcript`);
  // The events to follow are the ones after this transcript was read (none is missed).
  if (web.cursor === null) web.cursor = data.last_event;
  const box = document.getElementById("transcript");
  box.replaceChildren(...data.lines.map(line));
  box.scrollTop = box.scrollHeight;
  web.bubble = null;
  web.running = null;
  const queued = document.getElementById("queued");
  if (queued) queued.replaceChildren();
  (data.queued || []).forEach(queuedLine);
  await syncAsks();
}

// A message sent while the agent worked, until it goes in (the "delivered" event).
function queuedLine(q) {
  const box = document.getElementById("queued");
  if (!box || box.querySelector(`[data-queued="${q.queued}"]`)) return;
  const when = q.mode === "queue" ? "after this run" : "after the running call";
  box.append(el("div", { class: `line said queued ${q.mode}`, "data-queued": q.queued },
    el("b", {}, `queued (${when}): `), el("span", { class: "words" }, q.prompt)));
}

function delivered(q) {
  const item = document.querySelector(`#queued [data-queued="${q.queued}"]`);
  if (item) item.remove();
  web.bubble = null;
  add(el("div", { class: "line said you" }, el("b", {}, "you: "), el("span", { class: "words" }, q.prompt)));
}

// A running call's output as it comes; its result (the "output" event) replaces it.
function runningOutput(data) {
  if (!web.running) {
    web.running = el("pre", { class: "line running-output" });
    add(web.running);
  }
  const text = web.running.textContent + shown(data.stream === "stderr" ? "[stderr] " + data.text : data.text);
  web.running.textContent = text.length > 20000 ? "…" + text.slice(-20000) : text;
  const box = document.getElementById("transcript");
  if (box) box.scrollTop = box.scrollHeight;
}

async function syncAsks() {
  const asks = await api(`/api/sessions/${web.sid}/asks`);
  const box = document.getElementById("asks");
  if (!box) return;
  box.replaceChildren();
  asks.approvals.forEach(approvalCard);
}

function onEvent(kind, data) {
  if (kind === "hello") { web.working = !!data.working; return; }
  if (data.id) web.cursor = data.id;
  if (kind === "delta") {
    if (!web.bubble) {
      web.bubble = el("span", { class: "words" });
      add(el("div", { class: "line said model streaming" }, el("b", {}, "comal: "), web.bubble));
    }
    web.bubble.textContent += shown(data.text);
  } else if (kind === "streamed") web.bubble = null;
  else if (kind === "call") {
    web.call = null; // a new call: the next judgment names it
    add(line({ kind: "call", text: callText(data.name, data.arguments), call_id: "" }));
  }
  else if (kind === "judged") { web.call = data.call_id; settleCall(data.call_id); markCall("running"); }
  else if (kind === "executed") web.call = data.call_id;
  else if (kind === "result") { markCall("done"); note(data.text, "result"); }
  else if (kind === "output_delta") runningOutput(data);
  else if (kind === "output") {
    if (web.running) { web.running.remove(); web.running = null; }
    // The transcript read when the page opened may hold this output already (the events
    // after it are followed from a mark read first): shown once.
    if (!shownAlready("output", web.call)) add(output("", data.text, false, web.call || ""));
  }
  else if (kind === "queued") queuedLine(data);
  else if (kind === "delivered") delivered(data);
  else if (kind === "interrupting") note("interrupting: the agent stops now");
  else if (kind === "approval") approvalCard({ ...data.request, session: web.sid });
  else if (kind === "note" || kind === "warn") note(data.text, kind);
  else if (kind === "turn") gauge();
  else if (kind === "working") { web.working = true; gauge(); syncAsks(); }
  else if (kind === "crashed") { note(`the worker crashed: ${data.type}: ${data.message}`, "warn"); gauge(); }
  else if (kind === "stopped") {
    web.working = false;
    const status = document.getElementById("session-status");
    if (status) status.textContent = data.status === "finished" ? "finished" : "active";
    if (data.error) note(`[${data.error.code}] ${data.error.message}`, "warn");
    else if (data.status !== "finished") note(`stopped: ${data.status}`);
    transcript().then(gauge).then(work);
  } else if (kind === "work" || kind === "child_started" || kind === "child_finished") {
    if (kind !== "work") note(`${kind.replace("_", " ")}: ${data.child}`);
    work(); gauge();
  } else if (kind === "compaction") { note(`compaction: ${data.stand_ins} stand-in(s) in the ledger`); gauge(); }
  else if (kind === "ledger") gauge();
}

function callText(name, args) {
  try {
    const a = JSON.parse(args);
    if (a && typeof a.command === "string") return `→ ${name}  $ ${a.command}`;
    if (a && typeof a.path === "string") return `→ ${name}(${a.path})`;
  } catch (error) { /* arguments that are not JSON are shown as they are */ }
  return `→ ${name} ${String(args).slice(0, 300)}`;
}

function shownAlready(kind, callId) {
  return !!callId && [...document.querySelectorAll(`#transcript .line.${kind}[data-call]`)]
    .some((node) => node.dataset.call === callId);
}

// A call's line drawn by its live event (no id yet) takes the id its judgment names; when the
// transcript already showed that call, the live line was the same call again and goes.
function settleCall(callId) {
  const fresh = [...document.querySelectorAll('#transcript .line.call[data-call=""]')].pop();
  if (!fresh || !callId) return;
  if (shownAlready("call", callId)) fresh.remove();
  else fresh.dataset.call = callId;
}

function markCall(state) {
  const calls = document.querySelectorAll("#transcript .line.call:not(.done)");
  const last = calls[calls.length - 1];
  if (last) { last.classList.remove("running"); last.classList.add(state); }
}

async function follow(sid) {
  if (web.stream) web.stream.abort();
  const controller = new AbortController();
  web.stream = controller;
  try {
    const after = web.cursor === null ? "" : `?after=${web.cursor}`;
    const response = await fetch(`/api/sessions/${sid}/live${after}`, {
      headers: key ? { "x-comal-key": key } : {}, signal: controller.signal,
    });
    if (!response.ok || !response.body) throw new Error(`live: ${response.status}`);
    await readEvents(response, onEvent);
  } catch (error) {
    if (controller.signal.aborted) return;
  }
  // The server went away (a restart): follow again, from the ledger.
  if (web.stream === controller) setTimeout(() => {
    if (web.stream === controller && web.sid === sid) {
      // Read the transcript again (what was missed is there), and follow from there.
      web.cursor = null; web.info = null;
      transcript().catch(() => {}).then(() => follow(sid));
    }
  }, 1000);
}

// The modes are the operator's (serve.modes): a page cannot widen them.
const help = () => `commands: /model ID, /effort LEVEL, /mode ${(web.info ? web.info.modes : ["read-only", "ask"]).join("|")}, /name TEXT, /context, /state, /compact, /cost, /resume (continue without a new prompt), # TEXT (remember it for this agent), /memory [WORDS], /forget ID [why], /help; anything else is a prompt`;

// Memory a person manages (DRV-7), as the TUI's: "# TEXT" remembers a note for this session's
// agent instead of sending a prompt; /memory lists the agent's memories (/memory WORDS searches
// them), /forget ID [why] forgets one. The server says back where the note went.
const MEMORY = /^(#|\/memory(\s|$)|\/forget(\s|$))/;
async function memory(text) {
  add(el("div", { class: "line said you" }, el("b", {}, "you: "), text));
  const base = `/api/sessions/${web.sid}/memories`;
  let done;
  if (text.startsWith("#")) {
    const fact = text.slice(1).trim();
    if (!fact) { note("# needs the fact to remember, e.g. # deploys go through scripts/ship.sh"); return; }
    done = await post(base, { text: fact });
  } else if (text.startsWith("/forget")) {
    const [id, ...why] = text.slice("/forget".length).trim().split(/\s+/);
    if (!/^\d+$/.test(id)) { note("/forget needs a memory's id, e.g. /forget 42 it moved (/memory lists them)"); return; }
    done = await post(`${base}/${id}/forget`, { why: why.join(" ") });
  } else {
    const words = text.slice("/memory".length).trim();
    done = await api(words ? `${base}?q=${encodeURIComponent(words)}` : base);
  }
  add(el("pre", { class: "line command-output memory" }, done.text));
}

async function send(text, queue = false) {
  if (text === "/help") { note(help()); return; }
  if (MEMORY.test(text)) { await memory(text); return; }
  if (text === "/resume") { await post(`/api/sessions/${web.sid}/prompts`, {}); return; }
  if (text.startsWith("/")) {
    const [name, ...rest] = text.slice(1).split(" ");
    const value = rest.join(" ").trim();
    const args = ["model", "effort", "mode", "name"].includes(name) ? { [name]: value } : {};
    add(el("div", { class: "line said you" }, el("b", {}, "you: "), text));
    const done = await post(`/api/sessions/${web.sid}/commands/${encodeURIComponent(name)}`, args);
    add(el("pre", { class: "line command-output" }, done.text));
    gauge();
    return;
  }
  const done = await post(`/api/sessions/${web.sid}/prompts`, queue ? { prompt: text, queue } : { prompt: text });
  // While the agent works the prompt is queued (202): shown as such until it goes in.
  if (done.observations && done.observations.queued) {
    queuedLine({ queued: done.observations.queued, mode: done.observations.mode, prompt: text });
  } else {
    add(el("div", { class: "line said you" }, el("b", {}, "you: "), text));
  }
}

async function chatView(sid) {
  const [info, allowed] = await Promise.all([api(`/api/sessions/${sid}`), webInfo()]);
  web.sid = sid;
  // The model picker: the operator's models; choosing one is /model.
  const models = el("select", { id: "model-picker", title: "/model" },
    el("option", { value: "" }, "model…"), allowed.models.map((m) => el("option", { value: m }, m)));
  models.addEventListener("change", () => {
    if (models.value) send(`/model ${models.value}`).catch((e) => { problem.textContent = shown(e.message); });
    models.value = "";
  });
  const input = el("textarea", { id: "prompt", rows: "2",
    placeholder: "Ask, # to remember, or /help (while it works: Enter steers, Tab queues for after the run)" });
  const problem = el("p", { class: "problem", id: "problem" });
  const form = el("form", { id: "prompt-form" }, input,
    el("div", { class: "buttons" }, el("button", { type: "submit", class: "approve" }, "Send"),
      el("button", { type: "button", id: "interrupt", title: "Stop the agent now, a running command included", onclick: () => post(`/api/sessions/${sid}/interrupt`).catch((e) => { problem.textContent = shown(e.message); }) }, "Interrupt"),
      el("button", { type: "button", id: "resume", title: "Continue without a new prompt, as comal --resume does", onclick: () => post(`/api/sessions/${sid}/prompts`, {}).catch((e) => { problem.textContent = shown(e.message); }) }, "Resume"),
      models),
    problem);
  const submit = async (queue) => {
    const text = input.value.trim();
    if (!text) return;
    input.value = "";
    problem.textContent = "";
    try { await send(text, queue); } catch (error) { problem.textContent = shown(error.message); }
  };
  form.addEventListener("submit", (event) => { event.preventDefault(); submit(false); });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
    // Tab while the agent works: the message waits for its run to finish (Codex's Tab).
    else if (event.key === "Tab" && !event.shiftKey && web.working && input.value.trim()
             && !input.value.trim().startsWith("/")) { event.preventDefault(); submit(true); }
  });
  const search = el("input", { id: "session-search", placeholder: "search sessions" });
  search.addEventListener("input", () => others(search.value));
  main.replaceChildren(el("div", { class: "chat" },
    el("section", { class: "talk" },
      el("h1", {}, info.title || sid.slice(0, 8)),
      el("div", { class: "muted" }, `${info.id} · `, el("span", { id: "session-status" }, info.status), " · ",
        el("a", { href: `#/s/${sid}` }, "what the model saw, per turn")),
      el("div", { id: "gauge", class: "gauge" }),
      el("div", { id: "transcript", class: "transcript" }),
      el("div", { id: "queued", class: "queued" }),
      el("div", { id: "asks" }), form),
    el("aside", { class: "side" }, el("div", { id: "work" }),
      el("h2", {}, "Sessions"), search, el("ul", { id: "others", class: "others" }))));
  web.cursor = null;
  await transcript();
  await Promise.all([gauge(), work(), others()]);
  follow(sid);
  input.focus();
}

window.comalWeb = {
  render(hash) {
    let m;
    if ((m = hash.match(/^#\/chat\/([^/]+)$/))) return chatView(m[1]);
    if (web.stream) { web.stream.abort(); web.stream = null; }
    return runView();
  },
  leave() { if (web.stream) { web.stream.abort(); web.stream = null; } web.sid = null; },
};
