// comal dashboard: plain JavaScript over the HTTP API (/api), no build step, no third-party code.
// Views: #/ sessions, #/s/ID session timeline + turns chart, #/s/ID/t/N one turn's context,
// #/approvals pending asks, #/api the API's schema; #/run and #/chat/ID are the web interface
// (web.js), which runs and steers agents in the server. Live: /api/events (server-sent events,
// read with fetch so the key travels in a header, never in a URL) re-renders the open view.
"use strict";

const main = document.getElementById("main");
// The key lives in this tab's sessionStorage: it is gone when the tab closes, other tabs and
// origins (another local port) never see it, and it is sent only as a header. Keys an older
// dashboard left in localStorage are removed.
localStorage.removeItem("comal-key");
let key = sessionStorage.getItem("comal-key") || "";

// Bidi overrides and isolates (U+202E shows "exe.txt" for "txt.exe"), zero-width and control
// characters make model or tool text read otherwise than it is: they are shown as visible
// code points instead. Joiners (U+200C, U+200D) stay, scripts and emoji need them.
const HIDDEN = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u00AD\u061C\u180E\u200B\u200E\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F\uFEFF\uFFF9-\uFFFB]/g;
const visible = (c) => "[U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "]";

function esc(value) {
  return String(value ?? "")
    .replace(HIDDEN, visible)
    .replace(/[&<>"']/g, (c) => ({
      "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;",
    }[c]));
}
const fmt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const short = (id) => esc(String(id).slice(0, 8));
const money = (v) => (v === null || v === undefined ? "—" : "$" + Number(v).toFixed(4));
// A session's prompt cost at list prices, or "—" saying why it is unknown (a model without a
// price is never priced at another's rates).
const cost = (s) => (s.cost_usd === null || s.cost_usd === undefined
  ? `<span class="unknown" title="${esc((s.cost_unknown || []).join("; ") || "no measured usage")}">—</span>`
  : money(s.cost_usd));

async function api(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (key) headers["x-comal-key"] = key;
  const response = await fetch(path, { ...options, headers });
  if (response.status === 401) {
    askKey();
    throw new Error("unauthorized");
  }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error ? body.error.message : JSON.stringify(body));
  return body;
}

function askKey() {
  const dialog = document.getElementById("key-dialog");
  if (dialog.open) return;
  dialog.showModal();
  dialog.addEventListener("close", () => {
    key = document.getElementById("key-input").value.trim();
    sessionStorage.setItem("comal-key", key);
    connect();
    render();
  }, { once: true });
}

// -- sessions list ------------------------------------------------------------------------------
const filters = { status: "", q: "" };

async function sessionsView() {
  const params = new URLSearchParams();
  if (filters.status) params.set("status", filters.status);
  if (filters.q) params.set("q", filters.q);
  const data = await api("/api/sessions?" + params);
  // One line a session, readable at 1,400 px and on a phone (narrow screens drop the .wide
  // columns); the measured usage and checkpoints are on the session's own page.
  const rows = data.sessions.map((s) => `
    <tr class="click" data-href="#/s/${esc(s.id)}">
      <td class="who"><span class="mono">${short(s.id)}</span>
        <span class="title" title="${esc(s.title || "")}">${esc(s.title || "")}</span></td>
      <td class="wide">${esc(s.agent)}</td><td class="model">${esc(s.model || "")}</td>
      <td><span class="status ${esc(s.status)}">${esc(s.status)}</span>
        ${s.pending_approvals ? `<span class="badge">${s.pending_approvals} ask</span>` : ""}</td>
      <td class="num">${fmt(s.tokens)}</td>
      <td class="num wide">${fmt(s.requests)}</td>
      <td class="num">${cost(s)}</td><td class="wide">${esc(s.engine)}</td>
      <td class="muted wide">${esc(s.created_at.slice(0, 16).replace("T", " "))}</td>
    </tr>`).join("");
  main.innerHTML = `
    <h1>Sessions</h1>
    <p class="muted">Tenant <b>${esc(data.tenant)}</b>: every conversation the proxy and the agents
      recorded in the ledger. Usage is measured (new input / cache read / output tokens).</p>
    <div class="filters">
      <select id="f-status">
        <option value="">any status</option>
        <option value="active" ${filters.status === "active" ? "selected" : ""}>active</option>
        <option value="finished" ${filters.status === "finished" ? "selected" : ""}>finished</option>
      </select>
      <input id="f-q" placeholder="search id, title, model" value="${esc(filters.q)}">
    </div>
    <table id="sessions">
      <thead><tr><th>session</th><th class="wide">agent</th><th class="model">model</th><th>status</th>
        <th class="num">tokens</th><th class="num wide">requests</th><th class="num">input cost</th>
        <th class="wide">engine</th><th class="wide">started (UTC)</th></tr></thead>
      <tbody>${rows || `<tr><td colspan="9" class="muted">No sessions yet.</td></tr>`}</tbody>
    </table>`;
  document.getElementById("f-status").onchange = (e) => { filters.status = e.target.value; render(); };
  document.getElementById("f-q").onchange = (e) => { filters.q = e.target.value; render(); };
}

// -- one session ----------------------------------------------------------------------------
function turnsChart(sessionId, turns) {
  if (!turns.length) return `<p class="muted">No model requests recorded yet.</p>`;
  // Room on the right for the last label; bars narrow (to 1 px, no gap) before they overflow.
  const width = 1180, height = 220, pad = 44, right = 28;
  // What reached the model, measured: the proxy's own count of what it sent, else the usage the
  // provider reported (an imported transcript records only that: nothing was assembled).
  const measured = (t) => t.input_tokens ?? (t.usage.new_input ?? 0) + (t.usage.cache_read ?? 0) + (t.usage.cache_write ?? 0);
  const imported = turns.every((t) => t.session_tokens == null && t.stage == null);
  const top = Math.max(...turns.map((t) => Math.max(t.session_tokens || 0, measured(t), t.window || 0)), 1);
  const step = (width - pad - right) / turns.length;
  const gap = step >= 8 ? 4 : step >= 3 ? 1 : 0;
  const bar = Math.max(1, Math.min(36, step - gap));
  // One label every `every` turns, at least 30 px apart, always the last one too.
  const every = Math.max(1, Math.ceil(30 / step));
  const y = (v) => height - 24 - ((v || 0) / top) * (height - 44);
  const parts = [];
  const windowLine = turns.find((t) => t.window);
  if (windowLine) {
    const wy = y(windowLine.window);
    parts.push(`<line x1="${pad}" x2="${width}" y1="${wy}" y2="${wy}" stroke="#c8443a" stroke-dasharray="4 3"/>`);
    parts.push(`<text x="${pad + 4}" y="${wy - 4}">window ${fmt(windowLine.window)}</text>`);
  }
  turns.forEach((t, i) => {
    const x = pad + i * step;
    const sent = measured(t);
    const full = t.session_tokens ?? sent;
    // A checkpoint derived at this turn or one still standing in for older history: either
    // way the turn was not sent verbatim.
    const color = imported ? "var(--measured)" : t.checkpoint ? "var(--ckpt)" : t.referenced.length ? "var(--ref)" : "var(--sent)";
    parts.push(`<a href="#/s/${esc(sessionId)}/t/${t.turn}">
      <rect x="${x}" y="${y(full)}" width="${bar}" height="${height - 24 - y(full)}" fill="var(--full)"><title>turn ${t.turn}: full history ${fmt(full)}</title></rect>
      <rect class="sent" x="${x + bar * 0.2}" y="${y(sent)}" width="${bar * 0.6}" height="${height - 24 - y(sent)}" fill="${color}"><title>turn ${t.turn}: sent ${fmt(sent)} (${esc(t.stage || "")})</title></rect></a>`);
    const last = i === turns.length - 1;
    if (last || (i % every === 0 && turns.length - 1 - i >= every / 2)) {
      parts.push(`<text x="${x + bar / 2}" y="${height - 8}" text-anchor="middle">${t.turn}</text>`);
    }
  });
  parts.push(`<text x="0" y="${y(top) + 4}">${fmt(top)}</text><text x="0" y="${height - 24}">0</text>`);
  const legend = imported
    ? `<span><i style="background:var(--measured)"></i>input the provider measured (an imported
        run: the agent sent it, comal assembled nothing)</span>`
    : `<span><i style="background:var(--full)"></i>full history</span>
    <span><i style="background:var(--sent)"></i>sent verbatim</span>
    <span><i style="background:var(--ref)"></i>with references</span>
    <span><i style="background:var(--ckpt)"></i>behind a checkpoint</span>`;
  return `<div class="legend">${legend}</div>
    <svg id="turns-chart" width="100%" viewBox="0 0 ${width} ${height}">${parts.join("")}</svg>`;
}

function entryItem(e) {
  const calls = e.calls.map((c) => `<span class="pill">${esc(c.name)}</span>`).join("");
  const result = e.result_of ? `<span class="pill ${e.is_error ? "err" : ""}">result of ${esc(e.result_of)}</span>` : "";
  return `<li class="${esc(e.role)}"><div class="head">#${e.seq} · ${esc(e.role)} · ${fmt(e.tokens)} tokens ${calls}${result}</div>
    <pre>${esc(e.preview)}</pre></li>`;
}

async function sessionView(id) {
  const [info, entries, turns, receipts, checkpoints, events] = await Promise.all([
    api(`/api/sessions/${id}`),
    api(`/api/sessions/${id}/entries?limit=5000`),
    api(`/api/sessions/${id}/turns`),
    api(`/api/sessions/${id}/receipts`),
    api(`/api/sessions/${id}/checkpoints`),
    api(`/api/sessions/${id}/events`),
  ]);
  const items = entries.entries.map((e) => ({ at: e.created_at, seq: e.seq, html: entryItem(e) }));
  for (const r of receipts.receipts) {
    // The label the house gives every surface: "approved by user ana", never the mode that asked.
    const judged = esc(r.label || "");
    items.push({ at: r.created_at, seq: Infinity, html: `<li class="receipt"><div class="head">receipt · ${esc(r.operation)} ${esc(r.call_id)} · ${esc(r.status)} · ${judged}</div></li>` });
  }
  for (const c of checkpoints.checkpoints) {
    items.push({ at: c.created_at, seq: Infinity, html: `<li class="checkpoint"><div class="head">checkpoint · covers #${c.first_seq}–#${c.last_seq} · ${fmt(c.tokens)} tokens</div><pre>${esc(c.text.slice(0, 600))}</pre></li>` });
  }
  for (const ev of events.events) {
    if (ev.kind === "proxy_instructions") continue;
    items.push({ at: ev.created_at, seq: Infinity, html: `<li class="event"><div class="head">event · ${esc(ev.kind)}</div><pre>${esc(JSON.stringify(ev.body).slice(0, 300))}</pre></li>` });
  }
  items.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : a.seq - b.seq));
  const turnLinks = turns.turns.map((t) => `<a href="#/s/${esc(id)}/t/${t.turn}">${t.turn}</a>`).join(" ");
  main.innerHTML = `
    <h1>Session <span class="mono">${esc(info.id)}</span></h1>
    <div class="muted"><a id="open-chat" href="#/chat/${esc(info.id)}">Open the chat</a> · ${esc(info.agent)} · ${esc(info.model || "")} · engine ${esc(info.engine)}
      ${info.parent ? ` · branch of <a href="#/s/${esc(info.parent)}">${short(info.parent)}</a>` : ""}</div>
    <div class="card stats">
      <div class="stat"><b><span class="status ${esc(info.status)}">${esc(info.status)}</span></b><span>status</span></div>
      <div class="stat"><b>${fmt(info.entries)}</b><span>entries</span></div>
      <div class="stat"><b>${fmt(info.tokens)}</b><span>history tokens</span></div>
      <div class="stat"><b>${fmt(info.requests)}</b><span>requests</span></div>
      <div class="stat"><b>${fmt(info.usage.new_input)} / ${fmt(info.usage.cache_read)}</b><span>measured input / cached</span></div>
      <div class="stat"><b>${fmt(info.usage.output)}</b><span>measured output</span></div>
      <div class="stat"><b>${cost(info)}</b><span>input cost</span></div>
      <div class="stat"><b>${fmt(info.checkpoints)}</b><span>checkpoints</span></div>
    </div>
    <h2>What the model saw, per turn</h2>
    <div class="card">${turnsChart(id, turns.turns)}<div class="turns muted">turns: ${turnLinks}</div></div>
    <h2>Timeline</h2>
    <ul class="timeline">${items.map((i) => i.html).join("")}</ul>`;
}

// -- one turn -------------------------------------------------------------------------------
async function turnView(id, n) {
  const [turns, entries] = await Promise.all([
    api(`/api/sessions/${id}/turns`),
    api(`/api/sessions/${id}/entries?limit=5000`),
  ]);
  const t = turns.turns[n];
  if (!t) { main.innerHTML = `<p>No turn ${esc(n)}.</p>`; return; }
  const sent = new Set();
  for (const [a, b] of t.sent_seqs || []) for (let s = a; s <= b; s++) sent.add(s);
  const referenced = new Set(t.referenced || []);
  const bounded = new Set(t.bounded || []);
  const [cf, cl] = t.checkpoint || [-1, -2];
  const before = t.entry_id ? entries.entries.filter((e) => e.id < t.entry_id) : entries.entries;
  const width = 1180, rowH = 18, cols = Math.max(1, Math.min(before.length, 60));
  const cell = Math.floor(width / cols);
  const kind = (e) => referenced.has(e.id) ? "ref" : bounded.has(e.id) ? "bound"
    : sent.has(e.seq) ? "sent" : (e.seq >= cf && e.seq <= cl) ? "ckpt" : "full";
  const counts = { sent: 0, ref: 0, bound: 0, ckpt: 0, full: 0 };
  const cells = before.map((e, i) => {
    const k = kind(e); counts[k] += e.tokens;
    const x = (i % cols) * cell, y = Math.floor(i / cols) * (rowH + 4);
    return `<rect class="cell ${k}" x="${x}" y="${y}" width="${cell - 3}" height="${rowH}" fill="var(--${k})"><title>#${e.seq} ${esc(e.role)} ${fmt(e.tokens)} tokens: ${k}</title></rect>`;
  }).join("");
  const rows = Math.ceil(before.length / cols);
  main.innerHTML = `
    <h1>Turn ${esc(n)} of <a class="mono" href="#/s/${esc(id)}">${short(id)}</a></h1>
    <div class="card stats">
      <div class="stat"><b>${esc(t.stage || "–")}</b><span>engine stage</span></div>
      <div class="stat"><b>${fmt(t.input_tokens)}</b><span>input sent</span></div>
      <div class="stat"><b>${fmt(t.session_tokens)}</b><span>full history + instructions</span></div>
      <div class="stat"><b>${fmt(t.window)}</b><span>window</span></div>
      <div class="stat"><b>${fmt(t.usage.new_input)} / ${fmt(t.usage.cache_read)}</b><span>measured input / cached</span></div>
      <div class="stat"><b>${t.referenced.length}</b><span>references</span></div>
      <div class="stat"><b>${t.checkpoint ? `#${t.checkpoint[0]}–#${t.checkpoint[1]}` : "–"}</b><span>checkpoint covers</span></div>
      <div class="stat"><b>${t.max_tokens ? `${fmt(t.max_tokens.client)} → ${fmt(t.max_tokens.upstream)}` : "–"}</b><span>max output tokens</span></div>
    </div>
    <h2>The history at this turn, entry by entry</h2>
    <div class="legend"><span><i style="background:var(--sent)"></i>sent verbatim (${fmt(counts.sent)} tokens)</span>
      <span><i style="background:var(--ref)"></i>sent as an exact reference (${fmt(counts.ref)})</span>
      <span><i style="background:var(--bound)"></i>bounded head + tail (${fmt(counts.bound)})</span>
      <span><i style="background:var(--ckpt)"></i>behind the checkpoint (${fmt(counts.ckpt)})</span></div>
    <div class="card"><svg id="turn-chart" width="100%" viewBox="0 0 ${width} ${Math.max(rows, 1) * (rowH + 4)}">${cells}</svg></div>
    <p class="muted">Every entry stays in the ledger byte for byte; references and the checkpoint
      name the EvidenceRead call that returns the exact bytes.</p>`;
}

// -- approvals ------------------------------------------------------------------------------
// Each pending ask as the chat shows it (web.js): a Write's or Edit's diff, a command, else the
// arguments; the answer's buttons beside its title.
async function approvalsView() {
  const data = await api("/api/approvals");
  const cards = data.approvals.map((a) => {
    const answer = async (granted) => {
      // post() (web.js) sends the server's CSRF token with the answer.
      await post(`/api/approvals/${a.session}/${a.id}`, { granted });
      render();
    };
    const path = a.arguments && typeof a.arguments.path === "string" ? " " + a.arguments.path : "";
    return el("div", { class: "card approval", "data-id": a.id },
      el("div", { class: "approval-head" },
        el("div", { class: "what" }, el("b", {}, `${a.operation}${path}`), " · session ",
          el("a", { href: `#/s/${a.session}` }, a.session.slice(0, 8))),
        el("button", { class: "approve", "data-answer": "true", onclick: () => answer(true) }, "Approve"),
        el("button", { class: "deny", "data-answer": "false", onclick: () => answer(false) }, "Deny")),
      approvalWhat(a),
      el("div", { class: "muted" }, `proposed by ${a.actor.kind} ${a.actor.id} · rule ${a.rule}${a.reason ? ` (${a.reason})` : ""} · effects ${a.effects.map((e) => e.kind).join(", ")}`));
  });
  main.replaceChildren(el("h1", {}, "Approvals"),
    el("p", { class: "muted" }, "A running agent's calls that its policy sends to a human. Your answer is recorded with your identity as this server authenticated it."),
    ...(cards.length ? cards : [el("p", { class: "muted", id: "no-approvals" }, "Nothing is waiting for an answer.")]));
}

// -- the API's schema -----------------------------------------------------------------------
async function apiView() {
  const response = await fetch("/openapi.json");
  const schema = await response.json();
  const rows = [];
  for (const [path, methods] of Object.entries(schema.paths || {})) {
    for (const [method, op] of Object.entries(methods)) {
      const params = (op.parameters || []).map((p) => `${esc(p.name)}${p.required ? "" : "?"}`).join(", ");
      const body = op.requestBody ? " · JSON body" : "";
      rows.push(`<tr><td class="mono">${esc(method.toUpperCase())}</td><td class="mono">${esc(path)}</td>
        <td>${esc(op.summary || "")}</td><td class="mono">${params}${body}</td></tr>`);
    }
  }
  main.innerHTML = `<h1>${esc(schema.info.title)} API</h1>
    <p class="muted">${esc(schema.info.description || "")} Send the proxy key as the
      <code>x-comal-key</code> header. The full schema: <a href="/openapi.json">/openapi.json</a>.</p>
    <table id="api"><thead><tr><th>method</th><th>path</th><th>what</th><th>parameters</th></tr></thead>
      <tbody>${rows.join("")}</tbody></table>`;
}

// -- routing --------------------------------------------------------------------------------
let rendering = Promise.resolve();

function render() {
  rendering = rendering.then(async () => {
    const hash = location.hash || "#/";
    const here = hash.startsWith("#/approvals") ? "approvals" : hash.startsWith("#/api") ? "api"
      : hash.startsWith("#/run") || hash.startsWith("#/chat") ? "run" : "sessions";
    for (const a of document.querySelectorAll("nav a[data-nav]")) {
      a.classList.toggle("active", a.dataset.nav === here);
    }
    try {
      let m;
      if (here === "run") await window.comalWeb.render(hash);
      else window.comalWeb.leave();
      if (here === "run") { /* the web interface (web.js) drew it */ }
      else if (hash.startsWith("#/approvals")) await approvalsView();
      else if (hash.startsWith("#/api")) await apiView();
      else if ((m = hash.match(/^#\/s\/([^/]+)\/t\/(\d+)$/))) await turnView(m[1], Number(m[2]));
      else if ((m = hash.match(/^#\/s\/([^/]+)$/))) await sessionView(m[1]);
      else await sessionsView();
    } catch (error) {
      if (error.message !== "unauthorized") main.innerHTML = `<p class="muted">${esc(error.message)}</p>`;
    }
  });
  return rendering;
}

// -- live updates ---------------------------------------------------------------------------
let live = null;

function onChange(data) {
  const badge = document.getElementById("approval-count");
  badge.textContent = String(data.approvals.length);
  badge.classList.toggle("hidden", data.approvals.length === 0);
  // The chat view follows its own session's events (web.js); redrawing it would lose them.
  if (!(location.hash || "").startsWith("#/chat")) render();
}

// Server-sent events read from a fetch (EventSource cannot send the key header): calls
// onEvent(kind, data) for each event with data, until the stream ends. The web page uses it too.
async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = /\r?\n\r?\n/.exec(buffer))) {
      const lines = buffer.slice(0, end.index).split(/\r?\n/);
      buffer = buffer.slice(end.index + end[0].length);
      const kind = (lines.find((l) => l.startsWith("event:")) || "event: message").slice(6).trim();
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data) onEvent(kind, JSON.parse(data));
    }
  }
}

async function connect() {
  if (live) live.abort();
  const controller = new AbortController();
  live = controller;
  const dot = document.getElementById("live");
  try {
    const response = await fetch("/api/events", {
      headers: key ? { "x-comal-key": key } : {},
      signal: controller.signal,
    });
    if (response.status === 401) {
      askKey(); // which connects again with the key
      return;
    }
    if (!response.ok || !response.body) throw new Error(`events: ${response.status}`);
    dot.classList.add("on");
    await readEvents(response, (event, data) => { if (event === "change") onChange(data); });
  } catch (error) {
    if (controller.signal.aborted) return;
  }
  dot.classList.remove("on");
  // As EventSource does: try again a little later.
  if (live === controller) setTimeout(() => { if (live === controller) connect(); }, 3000);
}

document.addEventListener("click", (event) => {
  const row = event.target.closest("tr[data-href]");
  if (row) location.hash = row.dataset.href;
});
window.addEventListener("hashchange", render);
connect();
render();
