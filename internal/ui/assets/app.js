// Rath web UI: read-only views over the coordinator's /v1 API. No
// dependencies; every string from the API is inserted as text, never HTML.
"use strict";

const state = { config: { auth: false, jaeger_url: "" }, source: null, timer: null, agentFilter: "" };
// usage caches the usage of output versions (immutable) by id.
const usage = new Map();
const SVGNS = "http://www.w3.org/2000/svg";

function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid == null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

function s(tag, attrs, ...kids) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  for (const kid of kids) el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  return el;
}

class Unauthorized extends Error {}

async function api(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  if (resp.status === 401) throw new Unauthorized("unauthorized");
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error((body.error && body.error.message) || resp.statusText);
  return body;
}

const view = () => document.getElementById("view");
const short = (id) => (id ? String(id).slice(-8) : ""); // UUIDv7s share their time prefix
const when = (t) => (t ? new Date(t).toLocaleString() : "");
const statusEl = (st, id) => h("span", { class: "status " + st, id }, st);

function agentOf(run) {
  try {
    const t = typeof run.target === "string" ? JSON.parse(run.target) : run.target;
    if (t && (t.name || (t.agent && t.agent.name))) return t.name || t.agent.name;
    if (run.workflow) {
      const m = /^name:\s*(\S+)/m.exec(run.workflow);
      return "workflow " + (m ? m[1] : "");
    }
    return run.kind || "";
  } catch (e) {
    return "";
  }
}

function stopLive() {
  if (state.source) { state.source.close(); state.source = null; }
  if (state.timer) { clearInterval(state.timer); state.timer = null; }
}

function showError(err) {
  if (err instanceof Unauthorized) return showLogin();
  view().replaceChildren(h("p", { class: "error" }, String(err.message || err)));
}

function showLogin() {
  stopLive();
  const frag = document.getElementById("login-tpl").content.cloneNode(true);
  view().replaceChildren(frag);
  const why = new URLSearchParams(location.search).get("login");
  if (why) document.getElementById("login-error").textContent = why === "failed" ? "That token was not accepted." : "Enter a token.";
}

// ---- runs list --------------------------------------------------------

async function runsPage(filter) {
  state.agentFilter = filter || "";
  const table = h("table", { id: "runs" },
    h("thead", {}, h("tr", {}, ["Run", "Status", "Agent", "Steps", "Tokens", "Created"].map((c) => h("th", {}, c)))),
    h("tbody"));
  view().replaceChildren(
    h("h1", {}, "Runs", state.agentFilter ? h("span", { class: "muted" }, "  agent: " + state.agentFilter) : ""),
    h("p", { class: "muted" }, "Refreshes every 3 seconds. Click a run to see its session graph."), table);
  const load = async () => {
    const { runs } = await api("/v1/runs?limit=100");
    const rows = runs
      .filter((r) => !state.agentFilter || agentOf(r).toLowerCase().includes(state.agentFilter.toLowerCase()))
      .map((r) => {
        const tokens = h("td", { class: "tokens", title: "tokens of the output's transcript (prompt + completion)" });
        if (r.output) fillUsage(tokens, r.output);
        return h("tr", { "data-run": r.id },
          h("td", {}, h("a", { href: "#/run/" + r.id, class: "mono" }, r.id)),
          h("td", {}, statusEl(r.status)),
          h("td", {}, agentOf(r)),
          h("td", {}, r.steps ? r.steps.length : ""),
          tokens,
          h("td", { class: "muted" }, when(r.created_at)));
      });
    table.tBodies[0].replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No runs yet."))]));
  };
  await load();
  state.timer = setInterval(() => load().catch(() => {}), 3000);
}

// fillUsage writes the token usage of version id into cell, fetching it
// once per version.
async function fillUsage(cell, id) {
  if (!usage.has(id)) {
    usage.set(id, api("/v1/sessions/" + encodeURIComponent(id)).then((v) => v.usage || null).catch(() => null));
  }
  const u = await usage.get(id);
  if (u) {
    cell.textContent = String(u.total_tokens);
    cell.title = `prompt ${u.prompt_tokens}, completion ${u.completion_tokens} (the output's transcript)`;
  }
}

// ---- run page ---------------------------------------------------------

async function runPage(id) {
  const events = h("ul", { id: "events" });
  const graphWrap = h("div", { id: "graph-wrap" });
  const panel = h("aside", { id: "panel", class: "card" }, h("p", { class: "muted" }, "Click a version in the graph to see its transcript, tool calls, files and trace."));
  const meta = h("div", { class: "meta", id: "run-meta" });
  view().replaceChildren(
    h("h1", {}, "Run ", h("span", { class: "mono" }, id)),
    meta,
    h("div", { class: "layout" },
      h("div", {}, graphWrap, h("h2", {}, "Live events"), h("div", { class: "card" }, events)),
      panel));
  const refresh = async () => {
    const run = await api("/v1/runs/" + encodeURIComponent(id));
    meta.replaceChildren(
      h("span", {}, h("b", {}, "status"), statusEl(run.status, "status")),
      h("span", {}, h("b", {}, "agent"), agentOf(run)),
      h("span", {}, h("b", {}, "input"), h("a", { href: "#/session/" + run.input, class: "mono" }, short(run.input))),
      run.output ? h("span", {}, h("b", {}, "output"), h("a", { href: "#/session/" + run.output, class: "mono" }, short(run.output))) : "",
      h("span", {}, h("b", {}, "steps"), run.steps ? run.steps.length : 0),
      run.error ? h("span", { class: "error" }, run.error) : "",
      h("span", { class: "muted" }, when(run.created_at)));
    const g = await api("/v1/runs/" + encodeURIComponent(id) + "/graph?format=json");
    drawGraph(graphWrap, g, panel);
    return run;
  };
  const run = await refresh();
  if (["succeeded", "failed", "canceled", "timed_out"].includes(run.status)) {
    events.append(h("li", { class: "muted" }, "The run has ended."));
  }
  // Live: the run's events over SSE (EventSource sends the UI cookie).
  const src = new EventSource("/v1/runs/" + encodeURIComponent(id) + "/events");
  state.source = src;
  let pending = null;
  const onEvent = (e) => {
    let data = {};
    try { data = JSON.parse(e.data); } catch (err) { /* keep empty */ }
    const type = data.type || e.type;
    if (type === "step.token") return;
    events.append(h("li", { "data-type": type }, h("span", { class: "t" }, new Date().toLocaleTimeString()), type, data.step_id ? "  " + data.step_id : ""));
    events.scrollTop = events.scrollHeight;
    if (!pending) pending = setTimeout(() => { pending = null; refresh().catch(showError); }, 150);
    // The stream replays the run from its start and ends after its end
    // event; a waiting run's stream ends at run.waiting, and EventSource
    // reopens it after the last event (Last-Event-ID) to follow the run on.
    if (["run.completed", "run.failed", "run.canceled", "run.timed_out"].includes(type)) src.close();
  };
  for (const t of ["run.submitted", "step.started", "step.committed", "step.failed", "step.tool_call", "step.tool_result",
    "step.memory_recall", "run.completed", "run.failed", "run.canceled", "run.timed_out", "run.waiting", "message"]) {
    src.addEventListener(t, onEvent);
  }
  src.onerror = () => { if (src.readyState === EventSource.CLOSED) state.source = null; };
}

async function sessionPage(id) {
  const graphWrap = h("div", { id: "graph-wrap" });
  const panel = h("aside", { id: "panel", class: "card" });
  view().replaceChildren(h("h1", {}, "Session ", h("span", { class: "mono" }, id)),
    h("div", { class: "layout" }, graphWrap, panel));
  const g = await api("/v1/sessions/" + encodeURIComponent(id) + "/graph?format=json");
  drawGraph(graphWrap, g, panel);
  showVersion(panel, id, g);
}

// ---- graph ------------------------------------------------------------

function layout(g) {
  const layer = new Map();
  const parents = new Map();
  for (const e of g.edges || []) {
    if (!parents.has(e.to)) parents.set(e.to, []);
    parents.get(e.to).push(e.from);
  }
  // Nodes come in creation order: parents before children.
  for (const n of g.nodes) {
    const ps = (parents.get(n.id) || []).filter((p) => layer.has(p));
    layer.set(n.id, ps.length ? Math.max(...ps.map((p) => layer.get(p))) + 1 : 0);
  }
  const rows = new Map();
  const pos = new Map();
  for (const n of g.nodes) {
    const l = layer.get(n.id);
    const r = rows.get(l) || 0;
    rows.set(l, r + 1);
    pos.set(n.id, { x: 20 + l * 200, y: 20 + r * 78 });
  }
  return { pos, width: 40 + (Math.max(0, ...layer.values()) + 1) * 200, height: 40 + Math.max(1, ...rows.values()) * 78 };
}

function drawGraph(wrap, g, panel) {
  const W = 160, H = 54;
  const { pos, width, height } = layout(g);
  const svg = s("svg", { id: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "session graph" });
  // Fit the container's width; never scale up.
  svg.style.maxWidth = width + "px";
  svg.style.width = "100%";
  svg.style.height = "auto";
  svg.append(s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
    s("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa3b2" }))));
  for (const e of g.edges || []) {
    const a = pos.get(e.from), b = pos.get(e.to);
    if (!a || !b) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
    svg.append(s("path", { class: "edge " + e.kind, d: `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)" }));
  }
  for (const n of g.nodes) {
    const p = pos.get(n.id);
    const cls = ["node", n.status, g.output === n.id ? "output" : ""].join(" ");
    const node = s("g", { class: cls, "data-id": n.id, transform: `translate(${p.x},${p.y})`, tabindex: "0" },
      s("title", {}, `${n.op} ${n.id}\n${n.agent || ""} ${n.model || ""}\ntokens ${n.own_tokens}/${n.tokens}`),
      s("rect", { width: W, height: H }),
      s("text", { class: "op", x: 10, y: 16 }, (n.op + (n.labels && n.labels.length ? " · " + n.labels.slice(0, 2).join(", ") : "")).slice(0, 26)),
      s("text", { class: "label", x: 10, y: 32 }, (n.agent || (n.op === "create" || n.op === "root" ? "input" : n.op)).slice(0, 20)),
      s("text", { class: "sub", x: 10, y: 46 }, short(n.id) + (n.own_tokens ? "  +" + n.own_tokens + " tok" : "")));
    node.addEventListener("click", () => {
      svg.querySelectorAll(".node.selected").forEach((x) => x.classList.remove("selected"));
      node.classList.add("selected");
      showVersion(panel, n.id, g).catch(showError);
    });
    svg.append(node);
  }
  wrap.replaceChildren(svg);
}

// ---- version panel ----------------------------------------------------

function chunkView(c) {
  const p = c.payload || {};
  const body = [];
  if (c.kind === "assistant") {
    if (p.content) body.push(h("pre", {}, p.content));
    for (const call of p.tool_calls || []) {
      body.push(h("div", { class: "call" }, h("b", {}, "→ " + call.function.name), " ", h("code", {}, call.function.arguments), h("span", { class: "muted" }, "  " + call.id)));
    }
  } else if (c.kind === "tool_result") {
    body.push(h("div", { class: "call" }, h("b", {}, "← " + p.name), h("span", { class: "muted" }, "  " + p.tool_call_id)), h("pre", {}, p.content));
  } else if (typeof p.content === "string") {
    body.push(h("pre", {}, p.content));
  } else {
    body.push(h("pre", {}, JSON.stringify(p, null, 2)));
  }
  return h("div", { class: "chunk " + c.kind, "data-kind": c.kind }, h("div", { class: "kind" }, c.kind), body);
}

async function showVersion(panel, id, g) {
  panel.replaceChildren(h("p", { class: "muted" }, "Loading " + short(id) + "…"));
  const v = await api("/v1/sessions/" + encodeURIComponent(id));
  const prod = v.producer || {};
  const parent = (v.parents || [])[0];
  const out = [
    h("h2", {}, v.op + " ", h("span", { class: "mono" }, v.id)),
    h("div", { class: "meta" },
      prod.agent ? h("span", {}, h("b", {}, "agent"), prod.agent) : "",
      prod.model ? h("span", {}, h("b", {}, "model"), prod.model) : "",
      prod.run ? h("span", {}, h("b", {}, "run"), h("a", { href: "#/run/" + prod.run, class: "mono" }, short(prod.run))) : "",
      prod.worker ? h("span", {}, h("b", {}, "worker"), prod.worker) : "",
      h("span", {}, h("b", {}, "tokens"), v.usage ? v.usage.total_tokens : 0),
      h("span", {}, h("b", {}, "transcript"), v.len + " chunks")),
  ];
  if (prod.trace_id) {
    out.push(state.config.jaeger_url
      ? h("p", {}, h("a", { id: "trace-link", href: state.config.jaeger_url + "/trace/" + prod.trace_id, target: "_blank", rel: "noopener" }, "Open trace " + short(prod.trace_id) + " in Jaeger"))
      : h("p", { class: "muted" }, "trace ", h("span", { class: "mono" }, prod.trace_id)));
  }
  const chunks = v.chunks || [];
  const memory = chunks.filter((c) => c.kind === "memory_recall");
  if (memory.length) out.push(h("h2", {}, "Memory hits"), memory.map(chunkView));
  out.push(h("h2", {}, "Chunks this version added (" + chunks.length + ")"), h("div", { id: "chunks" }, chunks.map(chunkView)));
  const transcript = h("div", {});
  const det = h("details", {}, h("summary", {}, "Full transcript (" + v.len + ")"), transcript);
  det.addEventListener("toggle", async () => {
    if (!det.open || transcript.childElementCount) return;
    const t = await api("/v1/sessions/" + encodeURIComponent(id) + "/transcript");
    transcript.replaceChildren(...t.chunks.map(chunkView));
  });
  out.push(det);
  const files = h("div", { id: "files" });
  out.push(h("h2", {}, "Workspace"), files);
  panel.replaceChildren(...out.flat());
  try {
    const f = await api("/v1/sessions/" + encodeURIComponent(id) + "/files");
    if (!f.snapshot) {
      files.append(h("p", { class: "muted" }, "No workspace files."));
    } else {
      files.append(h("p", { class: "muted" }, `${f.files} files, ${f.bytes} bytes`),
        h("table", { class: "files" }, h("tbody", {}, f.entries.map((e) => h("tr", {}, h("td", { class: "mono" }, e.path), h("td", {}, e.type), h("td", {}, e.size != null ? e.size : ""))))));
      if (parent) {
        const d = await api("/v1/sessions/" + encodeURIComponent(parent) + "/diff?to=" + encodeURIComponent(id));
        files.append(h("h2", {}, "Diff from parent " + short(parent)),
          d.changes.length ? h("ul", {}, d.changes.map((c) => h("li", { class: "change " + c.kind }, c.kind + " " + c.path))) : h("p", { class: "muted" }, "No changes."));
      }
    }
  } catch (err) {
    files.append(h("p", { class: "muted" }, "Files unavailable: " + err.message));
  }
}

// ---- routing ----------------------------------------------------------

async function route() {
  stopLive();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [, page, arg] = hash.split("/");
  try {
    if (page === "run" && arg) await runPage(decodeURIComponent(arg));
    else if (page === "session" && arg) await sessionPage(decodeURIComponent(arg));
    else if (page === "agent") await runsPage(decodeURIComponent(arg || ""));
    else await runsPage("");
  } catch (err) {
    showError(err);
  }
}

document.getElementById("search").addEventListener("submit", (e) => {
  e.preventDefault();
  const q = document.getElementById("q").value.trim();
  if (!q) return;
  if (/^run_/.test(q)) location.hash = "#/run/" + encodeURIComponent(q);
  else if (/^[0-9a-f]{8}-[0-9a-f]{4}-/i.test(q)) location.hash = "#/session/" + encodeURIComponent(q);
  else location.hash = "#/agent/" + encodeURIComponent(q);
});

window.addEventListener("hashchange", route);
(async () => {
  try {
    state.config = await api("/ui/config.json");
  } catch (e) { /* defaults */ }
  if (state.config.auth) document.getElementById("logout").hidden = false;
  route();
})();
