// Rath web UI: read-only views over the coordinator's /v1 API. No
// dependencies; every string from the API is inserted as text, never HTML.
"use strict";

const state = { config: { auth: false, jaeger_url: "" }, source: null, timer: null, agentFilter: "", graph: { zoom: 0, left: 0, top: 0 } };
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

// post sends a decision (POST path with body as JSON). The UI header and
// the page's own Origin let the UI cookie authenticate it (the review
// route only; internal/coordinator/ui.go).
async function post(path, body) {
  const resp = await fetch(path, {
    method: "POST", credentials: "same-origin", body: JSON.stringify(body),
    headers: { Accept: "application/json", "Content-Type": "application/json", "X-Rath-UI": "1" },
  });
  const out = await resp.json().catch(() => ({}));
  if (!resp.ok) throw new Error((out.error && out.error.message) || resp.statusText);
  return out;
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

// runDetail caches GET /v1/runs/{id} (the run with its steps) by run id;
// an ended run's entry is kept, a live one's refetched on each refresh.
const runDetail = new Map();
const ended = (st) => ["succeeded", "failed", "canceled", "timed_out"].includes(st);

// eventTime formats an event's own time (never the time it arrived).
function eventTime(t) {
  const d = new Date(t);
  if (isNaN(d)) return "";
  return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

// stepsCell shows a run's steps: a chip per step (status colour, key,
// details in its title), the first maxChips of them, then a count by state.
function stepsCell(cell, run) {
  const steps = run.steps || [];
  const maxChips = 8;
  const byStatus = {};
  for (const st of steps) byStatus[st.status] = (byStatus[st.status] || 0) + 1;
  const chips = steps.slice(0, maxChips).map((st) => h("span", {
    class: "chip " + st.status, "data-step": st.id,
    title: `${st.key}: ${st.status}${st.worker ? " on " + st.worker : ""}, attempt ${st.attempts}` +
      (st.started_at ? `\nstarted ${when(st.started_at)}` : "") + (st.finished_at ? `\nfinished ${when(st.finished_at)}` : "") +
      (st.error ? `\n${st.error}` : ""),
  }, stepName(st, run)));
  const more = steps.length > maxChips
    ? h("span", { class: "muted more" }, ` +${steps.length - maxChips} · ` + Object.entries(byStatus).map(([k, n]) => `${n} ${k}`).join(", "))
    : "";
  cell.replaceChildren(h("span", { class: "count" }, String(steps.length)), " ", ...chips, more);
}

// stepName is a step's short name: its agent's name, else its key's last
// part.
function stepName(st, run) {
  try {
    const t = st.target ? (typeof st.target === "string" ? JSON.parse(st.target) : st.target) : null;
    if (t && t.agent && t.agent.name) return t.agent.name;
    if (t && t.kind && t.kind !== "agent") return t.kind;
  } catch (e) { /* fall through */ }
  if (run && !st.target) {
    const a = agentOf(run);
    if (a) return a;
  }
  const parts = String(st.key || st.id || "").split("/");
  return parts[parts.length - 1] || "step";
}

// each runs fn over items, at most n at a time.
async function each(items, n, fn) {
  const queue = items.slice();
  const next = async () => {
    while (queue.length) await fn(queue.shift()).catch(() => {});
  };
  await Promise.all(Array.from({ length: Math.min(n, queue.length) }, next));
}

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
    const shown = runs.filter((r) => !state.agentFilter || agentOf(r).toLowerCase().includes(state.agentFilter.toLowerCase()));
    const cells = new Map();
    const rows = shown.map((r) => {
      const tokens = h("td", { class: "tokens", title: "tokens of the output's transcript (prompt + completion)" });
      if (r.output) fillUsage(tokens, r.output);
      const steps = h("td", { class: "steps" });
      const known = runDetail.get(r.id);
      if (known) stepsCell(steps, known);
      cells.set(r.id, steps);
      return h("tr", { "data-run": r.id },
        h("td", {}, h("a", { href: "#/run/" + r.id, class: "mono" }, r.id)),
        h("td", {}, statusEl(r.status)),
        h("td", {}, agentOf(r)),
        steps,
        tokens,
        h("td", { class: "muted" }, when(r.created_at)));
    });
    table.tBodies[0].replaceChildren(...(rows.length ? rows : [h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No runs yet."))]));
    // The list has no steps: fetch each run that is live, or not yet
    // known as ended (an ended run's steps no longer change).
    const stale = shown.filter((r) => { const k = runDetail.get(r.id); return !k || !ended(k.status) || k.status !== r.status; });
    await each(stale, 4, async (r) => {
      const full = await api("/v1/runs/" + encodeURIComponent(r.id));
      runDetail.set(r.id, full);
      const cell = cells.get(r.id);
      if (cell && cell.isConnected) stepsCell(cell, full);
    });
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

// versionInfo caches GET /v1/sessions/{id} (versions are immutable).
const versionInfo = new Map();
function version(id) {
  if (!versionInfo.has(id)) versionInfo.set(id, api("/v1/sessions/" + encodeURIComponent(id)).catch((err) => { versionInfo.delete(id); throw err; }));
  return versionInfo.get(id);
}

// traceURL links a step to its spans in Jaeger: the trace recorded on its
// version, with the step's spans (rath.step.id) found by uiFind.
function traceURL(traceID, stepID) {
  if (!state.config.jaeger_url || !traceID) return "";
  return state.config.jaeger_url + "/trace/" + encodeURIComponent(traceID) + (stepID ? "?uiFind=" + encodeURIComponent(stepID) : "");
}

// spanSearch searches Jaeger for the workers' spans with attribute key =
// value (rath.run.id, rath.step.id).
function spanSearch(key, value) {
  if (!state.config.jaeger_url) return "";
  return state.config.jaeger_url + "/search?service=rath-worker&limit=100&tags=" + encodeURIComponent(JSON.stringify({ [key]: value }));
}

// runTraceSearch searches Jaeger for every span of a run.
const runTraceSearch = (runID) => spanSearch("rath.run.id", runID);

async function runPage(id) {
  const events = h("ul", { id: "events" });
  const graphWrap = h("div", { id: "graph-wrap" });
  const panel = h("aside", { id: "panel", class: "card" }, h("p", { class: "muted" }, "Click a version in the graph to see its transcript, tool calls, files and trace; click a dashed node to follow a step in progress."));
  const meta = h("div", { class: "meta", id: "run-meta" });
  const waiting = h("section", { id: "waiting", class: "card wait", hidden: true });
  const stepsBox = h("div", { id: "steps" });
  view().replaceChildren(
    h("h1", {}, "Run ", h("span", { class: "mono" }, id)),
    meta, waiting,
    h("div", { class: "layout" },
      h("div", {}, graphWrap,
        h("h2", {}, "Live events"), h("div", { class: "card" }, events),
        h("h2", {}, "Steps"), stepsBox),
      panel));
  // live holds what the events say about each step not yet committed:
  // its state, the text streamed so far and its tool calls.
  const live = new Map();
  const liveOf = (stepID) => {
    if (!live.has(stepID)) live.set(stepID, { id: stepID, status: "pending", text: "", calls: [], since: "" });
    return live.get(stepID);
  };
  // pending: the calls a waiting step paused before, by step id.
  const pending = new Map();
  const ctx = { run: null, graph: null, panel, live, selected: null };
  state.graph = { zoom: 0, left: 0, top: 0 };

  const refresh = async () => {
    const run = await api("/v1/runs/" + encodeURIComponent(id));
    ctx.run = run;
    const search = runTraceSearch(run.id);
    meta.replaceChildren(
      h("span", {}, h("b", {}, "status"), statusEl(run.status, "status")),
      h("span", {}, h("b", {}, "agent"), agentOf(run)),
      h("span", {}, h("b", {}, "input"), h("a", { href: "#/session/" + run.input, class: "mono" }, short(run.input))),
      run.output ? h("span", {}, h("b", {}, "output"), h("a", { href: "#/session/" + run.output, class: "mono" }, short(run.output))) : "",
      h("span", {}, h("b", {}, "steps"), run.steps ? run.steps.length : 0),
      run.error ? h("span", { class: "error" }, run.error) : "",
      h("span", { class: "muted" }, when(run.created_at)),
      search ? h("a", { id: "run-traces", href: search, target: "_blank", rel: "noopener" }, "Traces of this run in Jaeger") : "");
    for (const st of run.steps || []) {
      if (st.status === "committed" || st.status === "failed" || st.status === "canceled") live.delete(st.id);
      else {
        // Queued, running, waiting or needs_review: a pending node until
        // it commits.
        const l = liveOf(st.id);
        // The stored state is the truth once it moved past the events'
        // (a decided review makes a needs_review step pending again).
        const paused = (x) => x === "waiting" || x === "needs_review";
        if (paused(st.status) || paused(l.status) || l.status === "pending") l.status = st.status;
        if (!l.since && st.started_at) l.since = st.started_at;
      }
    }
    // A step followed in the panel that has committed: show its version.
    const followed = panel.dataset.live;
    if (followed && !live.has(followed)) {
      const st = (run.steps || []).find((x) => x.id === followed);
      ctx.selected = null;
      if (st && st.output) showVersion(panel, st.output, null).catch(showError);
    }
    const g = await api("/v1/runs/" + encodeURIComponent(id) + "/graph?format=json");
    ctx.graph = g;
    drawRunGraph(graphWrap, ctx);
    drawWaiting(waiting, run, pending, () => refresh().catch(showError));
    drawSteps(stepsBox, run);
    return run;
  };
  const run = await refresh();
  if (ended(run.status)) {
    events.append(h("li", { class: "muted" }, "The run has ended."));
  }
  // Live: the run's events over SSE (EventSource sends the UI cookie).
  const src = new EventSource("/v1/runs/" + encodeURIComponent(id) + "/events");
  state.source = src;
  let redraw = null;
  const later = () => { if (!redraw) redraw = setTimeout(() => { redraw = null; refresh().catch(showError); }, 150); };
  // A step's events stored as one message (a batch) stream with an id on
  // the last alone. A stream cut inside a batch reopens after the last id
  // this page saw, the one before the batch, and the server sends the
  // batch again from its first event: those this page has shown already
  // are skipped. An event is known by its type and data (its time is
  // stamped to the nanosecond); only the events since the last id are kept.
  let lastID = "";
  const sinceID = new Set();
  const onEvent = (e) => {
    if (e.lastEventId !== lastID) { lastID = e.lastEventId; sinceID.clear(); }
    const key = e.type + "\n" + e.data;
    if (sinceID.has(key)) return;
    sinceID.add(key);
    let ev = {};
    try { ev = JSON.parse(e.data); } catch (err) { /* keep empty */ }
    const type = ev.type || e.type;
    const data = ev.data || {};
    const step = ev.step_id ? liveOf(ev.step_id) : null;
    switch (type) {
      case "step.token":
        if (step) { step.text += data.text || ""; if (step.status === "pending") step.status = "running"; updateLive(ctx, step); }
        return; // tokens are not listed
      case "step.started":
        if (step) { step.status = "running"; step.since = ev.time; step.worker = data.worker; step.attempt = data.attempt; step.text = ""; step.calls = []; }
        break;
      case "step.tool_call":
        if (step) step.calls.push({ id: data.call_id, name: data.name, args: data.arguments, round: data.round });
        break;
      case "step.tool_result":
        if (step) {
          const c = step.calls.find((x) => x.id === data.call_id);
          if (c) { c.done = true; c.ok = data.ok; c.error = data.error_kind; }
        }
        break;
      case "step.waiting":
      case "run.waiting":
        if (step) step.status = "waiting";
        if (ev.step_id) pending.set(ev.step_id, { version: data.version, calls: data.pending || [], time: ev.time });
        break;
      case "step.needs_review":
      case "run.needs_review":
        if (step) step.status = "needs_review";
        break;
      case "review.decided":
        if (step) step.status = "pending";
        break;
      case "approval.decided": {
        const p = pending.get(ev.step_id);
        if (p) p.calls = p.calls.filter((c) => c.call_id !== data.call_id);
        break;
      }
      case "step.continued":
        pending.delete(ev.step_id);
        live.delete(ev.step_id);
        break;
      case "step.committed":
      case "step.failed":
        if (ev.step_id) live.delete(ev.step_id);
        break;
      default:
    }
    if (step) updateLive(ctx, step);
    events.append(h("li", { "data-type": type, "data-time": ev.time || "" },
      h("time", { class: "t", datetime: ev.time || "", title: ev.time ? new Date(ev.time).toISOString() : "" }, ev.time ? eventTime(ev.time) : ""),
      type, ev.step_id ? "  " + ev.step_id : "",
      type === "step.tool_call" ? "  → " + data.name : "", type === "step.tool_result" ? "  ← " + data.name + (data.ok === false ? " (failed)" : "") : "",
      type === "step.needs_review" ? "  ? " + (data.tool || "") + " " + (data.call_id || "") : "",
      type === "review.decided" ? "  " + (data.decision || "") + " " + (data.call_id || "") : ""));
    events.scrollTop = events.scrollHeight;
    later();
    // The stream replays the run from its start and ends after its end
    // event; a waiting run's stream ends at run.waiting (or
    // run.needs_review), and EventSource
    // reopens it after the last event (Last-Event-ID) to follow the run on.
    if (["run.completed", "run.failed", "run.canceled", "run.timed_out"].includes(type)) src.close();
  };
  for (const t of ["run.submitted", "step.started", "step.token", "step.committed", "step.failed", "step.tool_call", "step.tool_result",
    "step.memory_recall", "step.waiting", "run.waiting", "approval.decided", "step.continued", "step.changed", "run.changes_accepted",
    "step.needs_review", "run.needs_review", "review.decided",
    "events.missing", "run.completed", "run.failed", "run.canceled", "run.timed_out", "message"]) {
    src.addEventListener(t, onEvent);
  }
  src.onerror = () => { if (src.readyState === EventSource.CLOSED) state.source = null; };
}

// drawWaiting shows, for a waiting or needs_review run, which calls wait
// and the exact commands that decide them; a review also has buttons.
// The box is kept, with what was typed in it, while what it shows is the
// same (the page redraws on every event). decided refreshes the page.
function drawWaiting(box, run, pending, decided) {
  const waitingSteps = (run.steps || []).filter((st) => st.status === "waiting");
  const reviews = run.reviews || [];
  const review = run.status === "needs_review" || reviews.length > 0;
  if (run.status !== "waiting" && !waitingSteps.length && !review) {
    box.hidden = true; box.replaceChildren(); delete box.dataset.key; return;
  }
  const key = JSON.stringify([run.id, run.status, reviews, waitingSteps.map((st) => [st.id, st.output, (pending.get(st.id) || {}).calls])]);
  if (!box.hidden && box.dataset.key === key) return;
  box.dataset.key = key;
  const kids = [];
  if (review) kids.push(...reviewRows(run, reviews, decided));
  if (run.status === "waiting" || waitingSteps.length) kids.push(...approvalRows(run, waitingSteps, pending));
  box.classList.toggle("review", review);
  box.replaceChildren(...kids);
  box.hidden = false;
}

// approvalRows: the calls waiting steps paused before, with the rathctl
// commands that approve or reject them.
function approvalRows(run, waitingSteps, pending) {
  const rows = [];
  for (const st of waitingSteps) {
    const p = pending.get(st.id);
    const calls = p ? p.calls : [];
    rows.push(h("h3", {}, "Step ", h("span", { class: "mono" }, st.key || st.id), st.output ? h("span", { class: "muted" }, "  version " + short(st.output)) : ""));
    if (!calls.length) {
      rows.push(h("p", { class: "muted" }, "The calls it waits on are not in the event stream any more; decide them all:"),
        cmd(`rathctl approve ${run.id}`), cmd(`rathctl reject ${run.id} --reason "…"`));
    }
    for (const c of calls) {
      rows.push(h("div", { class: "pending-call", "data-call": c.call_id },
        h("div", {}, h("b", {}, c.tool), " ", h("span", { class: "mono muted" }, c.call_id)),
        h("pre", { class: "args" }, c.arguments || ""),
        cmd(`rathctl approve ${run.id} --call ${c.call_id}`),
        cmd(`rathctl reject ${run.id} --call ${c.call_id} --reason "…"`)));
    }
  }
  if (!waitingSteps.length) rows.push(h("p", { class: "muted" }, "A step waits; reload to see which."));
  return [h("h2", {}, "Waiting for a decision"),
    h("p", { class: "muted" }, "Nothing of this run executes until each call below is approved or rejected (a reason is required to reject; the model reads it)."), ...rows];
}

// reviewRows: the ambiguous calls a needs_review run's steps stopped on
// (tool, arguments, round, worker), the rathctl review commands, and
// buttons that POST /v1/runs/{id}/review (retry; skip with a result; fail
// with a reason).
function reviewRows(run, reviews, decided) {
  const rows = [h("h2", {}, "Needs review"),
    h("p", { class: "muted" }, "A worker started the call below and died before recording its result, and the tool is not declared idempotent: " +
      "whether its effect happened is unknown. Nothing of this run executes until a review decides: retry runs the call again, " +
      "skip uses the result you give without running it, fail fails the step with a reason.")];
  if (!reviews.length) rows.push(h("p", { class: "muted" }, "A step needs a review; reload to see which."));
  const many = reviews.length > 1;
  for (const c of reviews) {
    const st = (run.steps || []).find((x) => x.id === c.step_id);
    const call = many ? ` --call ${c.call_id}` : "";
    const result = h("textarea", { class: "result", rows: "2", "aria-label": "result (JSON) to skip with", placeholder: '{"ok": true}' });
    const reason = h("input", { class: "reason", type: "text", "aria-label": "reason to fail with", placeholder: "why the step fails" });
    const msg = h("p", { class: "review-msg", role: "status" });
    const buttons = [];
    const decide = (decision) => async () => {
      const body = { call_id: c.call_id, decision };
      msg.className = "review-msg error";
      if (decision === "skip") {
        try { body.result = JSON.parse(result.value); } catch (e) { msg.textContent = "result: not valid JSON (the JSON the tool would have returned)"; return; }
      }
      if (decision === "fail") {
        body.reason = reason.value.trim();
        if (!body.reason) { msg.textContent = "reason: required to fail the step"; return; }
      }
      buttons.forEach((b) => { b.disabled = true; });
      msg.textContent = "";
      try {
        const res = await post("/v1/runs/" + encodeURIComponent(run.id) + "/review", body);
        msg.className = "review-msg muted";
        msg.textContent = `${res.decision}: recorded; step ${res.step ? res.step.status : ""}.`;
        decided();
      } catch (err) {
        msg.textContent = String(err.message || err);
        buttons.forEach((b) => { b.disabled = false; });
      }
    };
    const btn = (decision, label) => {
      const b = h("button", { type: "button", "data-decision": decision, onclick: decide(decision) }, label);
      buttons.push(b);
      return b;
    };
    rows.push(h("h3", {}, "Step ", h("span", { class: "mono" }, st ? st.key : c.step_id), st && st.worker ? h("span", { class: "muted" }, "  last on " + st.worker) : ""),
      h("div", { class: "pending-call review-call", "data-call": c.call_id, "data-step": c.step_id },
        h("div", {}, h("b", { class: "tool" }, c.tool), " ", h("span", { class: "mono muted" }, c.call_id),
          h("span", { class: "muted" }, `  round ${c.round} · started on worker `), h("span", { class: "mono worker" }, c.worker || "?")),
        h("pre", { class: "args" }, c.arguments || ""),
        cmd(`rathctl review ${run.id}${call} --retry`),
        cmd(`rathctl review ${run.id}${call} --skip --result '{…}'`),
        cmd(`rathctl review ${run.id}${call} --fail --reason '…'`),
        h("div", { class: "decide" },
          h("div", {}, btn("retry", "Retry the call")),
          h("div", {}, result, btn("skip", "Skip with this result")),
          h("div", {}, reason, btn("fail", "Fail the step"))),
        msg));
  }
  return rows;
}

function cmd(text) {
  return h("div", { class: "cmd" }, h("code", {}, text));
}

// drawSteps lists the run's steps with their state, times, version and a
// link to their spans in Jaeger.
function drawSteps(box, run) {
  const steps = run.steps || [];
  const limit = box.dataset.all ? steps.length : 25;
  const rows = steps.slice(0, limit).map((st) => {
    const trace = h("td", { class: "trace" });
    // Until its version records a trace id, a step links a search for
    // its spans (rath.step.id).
    if (state.config.jaeger_url) {
      trace.append(h("a", { class: "search", href: spanSearch("rath.step.id", st.id), target: "_blank", rel: "noopener" }, "search"));
    }
    if (st.output && state.config.jaeger_url) {
      version(st.output).then((v) => {
        const tid = v.producer && v.producer.trace_id;
        if (tid) trace.replaceChildren(h("a", { class: "span", href: traceURL(tid, st.id), target: "_blank", rel: "noopener" }, "span " + short(tid)));
      }).catch(() => {});
    }
    const took = st.started_at && st.finished_at ? ((new Date(st.finished_at) - new Date(st.started_at)) / 1000).toFixed(2) + " s" : "";
    return h("tr", { "data-step": st.id },
      h("td", { class: "mono" }, st.key),
      h("td", {}, statusEl(st.status)),
      h("td", {}, stepName(st, run)),
      h("td", {}, st.worker || ""),
      h("td", { class: "muted" }, st.started_at ? when(st.started_at) : ""),
      h("td", {}, took),
      h("td", {}, st.output ? h("a", { href: "#/session/" + st.output, class: "mono" }, short(st.output)) : ""),
      trace);
  });
  const kids = [h("table", { class: "steps" },
    h("thead", {}, h("tr", {}, ["Key", "Status", "Agent", "Worker", "Started", "Took", "Version", "Jaeger"].map((c) => h("th", {}, c)))),
    h("tbody", {}, rows))];
  if (steps.length > limit) {
    kids.push(h("button", { class: "link", onclick: () => { box.dataset.all = "1"; drawSteps(box, run); } }, `Show all ${steps.length} steps`));
  }
  if (!state.config.jaeger_url) kids.push(h("p", { class: "muted" }, "Set RATH_JAEGER_URL on the coordinator to link each step to its spans in Jaeger."));
  box.replaceChildren(...kids);
}

async function sessionPage(id) {
  const graphWrap = h("div", { id: "graph-wrap" });
  const panel = h("aside", { id: "panel", class: "card" });
  view().replaceChildren(h("h1", {}, "Session ", h("span", { class: "mono" }, id)),
    h("div", { class: "layout" }, graphWrap, panel));
  const g = await api("/v1/sessions/" + encodeURIComponent(id) + "/graph?format=json");
  state.graph = { zoom: 0, left: 0, top: 0 };
  drawRunGraph(graphWrap, { graph: g, panel, live: new Map(), run: null });
  showVersion(panel, id, g);
}

// ---- graph ------------------------------------------------------------

const NODE_W = 168, NODE_H = 58, COL_W = 208, ROW_H = 74, PAD = 20;
// MIN_ZOOM is the smallest zoom the page opens at: node labels (13 px)
// stay at least 10 px high. The zoom-out button goes further.
const MIN_ZOOM = 0.8;

// layout places nodes in columns by lineage (a child right of its
// parents) and rows that follow the parent: a fan-out's branches stack
// in rows, each branch's steps stay on its row, and a chain of merges
// (fan-in) stacks in one column next to the branches it merges, so a
// fan-out of n branches is n rows high and a few columns wide.
function layout(nodes, edges) {
  const parents = new Map();
  for (const e of edges) {
    if (!parents.has(e.to)) parents.set(e.to, []);
    parents.get(e.to).push(e);
  }
  const op = new Map(nodes.map((n) => [n.id, n.op]));
  const col = new Map(), row = new Map(), used = new Map();
  const take = (c, r) => {
    if (!used.has(c)) used.set(c, new Set());
    const u = used.get(c);
    while (u.has(r)) r++;
    u.add(r);
    return r;
  };
  // Nodes come in creation order: parents before children.
  for (const n of nodes) {
    const ps = (parents.get(n.id) || []).filter((e) => col.has(e.from)).sort((a, b) => a.ordinal - b.ordinal).map((e) => e.from);
    let c = 0, pref = 0;
    if (ps.length) {
      const merge = n.op === "merge";
      for (const p of ps) c = Math.max(c, merge && op.get(p) === "merge" ? col.get(p) : col.get(p) + 1);
      const lead = merge ? (ps.filter((p) => op.get(p) !== "merge").pop() || ps[0]) : ps[0];
      pref = row.get(lead);
    }
    col.set(n.id, c);
    row.set(n.id, take(c, pref));
  }
  const pos = new Map();
  let cols = 1, rows = 1;
  for (const n of nodes) {
    const c = col.get(n.id), r = row.get(n.id);
    pos.set(n.id, { x: PAD + c * COL_W, y: PAD + r * ROW_H, c, r });
    cols = Math.max(cols, c + 1);
    rows = Math.max(rows, r + 1);
  }
  return { pos, width: 2 * PAD + (cols - 1) * COL_W + NODE_W, height: 2 * PAD + (rows - 1) * ROW_H + NODE_H };
}

// liveNodes are the steps in progress (or waiting) that have no version in
// the graph yet, drawn as pending nodes after their input.
function liveNodes(ctx) {
  const g = ctx.graph;
  const have = new Set(g.nodes.map((n) => n.step).filter(Boolean));
  const steps = new Map(((ctx.run && ctx.run.steps) || []).map((st) => [st.id, st]));
  const out = [];
  for (const l of ctx.live.values()) {
    if (have.has(l.id)) continue;
    const st = steps.get(l.id);
    out.push({ id: "step:" + l.id, op: "step", live: l, step: l.id, input: st ? st.input : null, name: st ? stepName(st, ctx.run) : l.id.split("/").pop() });
  }
  return out;
}

function drawRunGraph(wrap, ctx) {
  const g = ctx.graph;
  const extra = liveNodes(ctx);
  const known = new Set(g.nodes.map((n) => n.id));
  const nodes = g.nodes.concat(extra);
  const edges = (g.edges || []).concat(extra.filter((n) => n.input && known.has(n.input)).map((n) => ({ from: n.input, to: n.id, kind: "live", ordinal: 0 })));
  const { pos, width, height } = layout(nodes, edges);
  const waitingSteps = new Set(((ctx.run && ctx.run.steps) || []).filter((st) => st.status === "waiting" || st.status === "needs_review").map((st) => st.id));

  // Keep the zoom and scroll across redraws.
  const prev = wrap.querySelector(".viewport");
  if (prev && state.graph.zoom) { state.graph.left = prev.scrollLeft; state.graph.top = prev.scrollTop; }
  const viewport = h("div", { class: "viewport" });
  const svg = s("svg", { id: "graph", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "session graph" });
  svg.append(s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
    s("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa3b2" })),
    // Node text is clipped to its box.
    s("clipPath", { id: "node-clip" }, s("rect", { x: 4, y: 0, width: NODE_W - 10, height: NODE_H }))));
  for (const e of edges) {
    const a = pos.get(e.from), b = pos.get(e.to);
    if (!a || !b) continue;
    let d;
    if (a.c === b.c) {
      // A merge chain stacks in one column: down, or around on the right.
      d = b.r === a.r + 1
        ? `M ${a.x + NODE_W / 2} ${a.y + NODE_H} L ${b.x + NODE_W / 2} ${b.y}`
        : `M ${a.x + NODE_W} ${a.y + NODE_H / 2} C ${a.x + NODE_W + 36} ${a.y + NODE_H / 2}, ${b.x + NODE_W + 36} ${b.y + NODE_H / 2}, ${b.x + NODE_W} ${b.y + NODE_H / 2}`;
    } else {
      const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2, mx = (x1 + x2) / 2;
      d = `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`;
    }
    svg.append(s("path", { class: "edge " + e.kind, d, "marker-end": "url(#arrow)" }));
  }
  const select = (node, show) => {
    svg.querySelectorAll(".node.selected").forEach((x) => x.classList.remove("selected"));
    node.classList.add("selected");
    show();
  };
  for (const n of nodes) {
    const p = pos.get(n.id);
    if (n.live) {
      const node = s("g", { class: "node live " + n.live.status, "data-id": n.id, "data-step": n.step, transform: `translate(${p.x},${p.y})`, tabindex: "0" });
      node.append(s("title", {}, `step ${n.step} (${n.live.status})`), s("rect", { width: NODE_W, height: NODE_H }),
        s("text", { class: "op", x: 10, y: 16 }, ""), s("text", { class: "label", x: 10, y: 34 }, n.name.slice(0, 20)), s("text", { class: "sub", x: 10, y: 50 }, ""));
      fillLive(node, n.live);
      node.addEventListener("click", () => select(node, () => { ctx.selected = n.step; showLive(ctx.panel, n.live); }));
      svg.append(node);
      continue;
    }
    const cls = ["node", n.status, g.output === n.id ? "output" : "", n.step && waitingSteps.has(n.step) ? "waiting" : ""].join(" ");
    const node = s("g", { class: cls, "data-id": n.id, "data-step": n.step || "", transform: `translate(${p.x},${p.y})`, tabindex: "0" },
      s("title", {}, `${n.op} ${n.id}\n${n.agent || ""} ${n.model || ""}\ntokens ${n.own_tokens}/${n.tokens}`),
      s("rect", { width: NODE_W, height: NODE_H }),
      s("text", { class: "op", x: 10, y: 16 }, (n.op + (n.labels && n.labels.length ? " · " + n.labels.slice(0, 2).join(", ") : "")).slice(0, 26)),
      s("text", { class: "label", x: 10, y: 34 }, (n.agent || (n.op === "create" || n.op === "root" ? "input" : n.op)).slice(0, 20)),
      s("text", { class: "sub", x: 10, y: 50 }, short(n.id) + (n.own_tokens ? "  +" + n.own_tokens + " tok" : "")));
    node.addEventListener("click", () => select(node, () => { ctx.selected = null; showVersion(ctx.panel, n.id, g).catch(showError); }));
    svg.append(node);
  }
  viewport.append(svg);

  // Zoom and pan: the buttons, ctrl/⌘ + wheel, and dragging the
  // background; the viewport scrolls.
  const label = h("span", { class: "muted zoom-label" });
  const setZoom = (z, cx, cy) => {
    const old = state.graph.zoom || 1;
    z = Math.min(2.5, Math.max(0.1, z));
    const ax = cx == null ? viewport.clientWidth / 2 : cx, ay = cy == null ? viewport.clientHeight / 2 : cy;
    const gx = (viewport.scrollLeft + ax) / old, gy = (viewport.scrollTop + ay) / old;
    state.graph.zoom = z;
    svg.setAttribute("width", Math.round(width * z));
    svg.setAttribute("height", Math.round(height * z));
    viewport.scrollLeft = gx * z - ax;
    viewport.scrollTop = gy * z - ay;
    label.textContent = `${nodes.length} nodes · ${Math.round(z * 100)}%`;
    svg.dataset.zoom = String(z);
  };
  const fit = () => Math.min(1, (viewport.clientWidth - 4) / width, (viewport.clientHeight - 4) / height);
  const tools = h("div", { class: "graph-tools" },
    h("button", { type: "button", title: "zoom out", "data-zoom": "out", onclick: () => setZoom(state.graph.zoom / 1.25) }, "−"),
    h("button", { type: "button", title: "zoom in", "data-zoom": "in", onclick: () => setZoom(state.graph.zoom * 1.25) }, "+"),
    h("button", { type: "button", title: "fit the whole graph", "data-zoom": "fit", onclick: () => setZoom(fit()) }, "Fit"),
    h("button", { type: "button", title: "actual size", "data-zoom": "100", onclick: () => setZoom(1) }, "100%"),
    label, h("span", { class: "muted hint" }, "drag to pan · ctrl + wheel to zoom"));
  viewport.addEventListener("wheel", (e) => {
    if (!e.ctrlKey && !e.metaKey) return;
    e.preventDefault();
    const r = viewport.getBoundingClientRect();
    setZoom(state.graph.zoom * (e.deltaY < 0 ? 1.1 : 1 / 1.1), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });
  let drag = null;
  viewport.addEventListener("pointerdown", (e) => {
    if (e.target.closest(".node")) return;
    drag = { x: e.clientX, y: e.clientY, l: viewport.scrollLeft, t: viewport.scrollTop };
    viewport.setPointerCapture(e.pointerId);
    viewport.classList.add("dragging");
  });
  viewport.addEventListener("pointermove", (e) => {
    if (!drag) return;
    viewport.scrollLeft = drag.l - (e.clientX - drag.x);
    viewport.scrollTop = drag.t - (e.clientY - drag.y);
  });
  const end = () => { drag = null; viewport.classList.remove("dragging"); };
  viewport.addEventListener("pointerup", end);
  viewport.addEventListener("pointercancel", end);
  wrap.replaceChildren(tools, viewport);
  // The first draw fits the graph, but never below MIN_ZOOM: a large
  // graph opens readable at its start, and pans.
  const z = state.graph.zoom || Math.max(MIN_ZOOM, fit());
  viewport.style.height = Math.round(Math.max(160, Math.min(window.innerHeight * 0.62, 640, height * z + 24))) + "px";
  state.graph.zoom = z;
  svg.setAttribute("width", Math.round(width * z));
  svg.setAttribute("height", Math.round(height * z));
  svg.dataset.zoom = String(z);
  label.textContent = `${nodes.length} nodes · ${Math.round(z * 100)}%`;
  viewport.scrollLeft = state.graph.left;
  viewport.scrollTop = state.graph.top;
  if (ctx.selected) {
    const l = ctx.live.get(ctx.selected);
    const node = svg.querySelector(`.node.live[data-step="${CSS.escape(ctx.selected)}"]`);
    if (node) node.classList.add("selected");
    if (l && ctx.panel.dataset.live === ctx.selected) showLive(ctx.panel, l);
  }
}

// fillLive writes a pending node's text: its state and tool calls, its
// name, and the tail of what it streamed.
function fillLive(node, l) {
  const [op, , sub] = node.querySelectorAll("text");
  const calls = l.calls.length ? ` · ${l.calls.length} tool call${l.calls.length > 1 ? "s" : ""}` : "";
  op.textContent = (l.status + calls).slice(0, 28);
  const last = l.calls[l.calls.length - 1];
  const text = l.text.replace(/\s+/g, " ").trim();
  sub.textContent = text ? "…" + text.slice(-19) : last ? "→ " + last.name : l.status === "running" ? "thinking…" : "";
  node.setAttribute("class", "node live " + l.status + (node.classList.contains("selected") ? " selected" : ""));
  node.dataset.tokens = String(l.text.length);
  node.dataset.calls = String(l.calls.length);
}

// updateLive redraws one pending node (and the panel, when it shows it)
// without redrawing the graph: tokens arrive many times a second.
function updateLive(ctx, l) {
  const svg = document.querySelector("svg#graph");
  const node = svg && svg.querySelector(`.node.live[data-step="${CSS.escape(l.id)}"]`);
  if (node) fillLive(node, l);
  if (ctx.panel.dataset.live === l.id) showLive(ctx.panel, l);
}

// showLive shows a step in progress: its state, worker, start (the
// event's time), the text streamed so far and its tool calls.
function showLive(panel, l) {
  panel.dataset.live = l.id;
  panel.replaceChildren(
    h("h2", {}, "Step ", h("span", { class: "mono" }, l.id)),
    h("div", { class: "meta" },
      h("span", {}, h("b", {}, "status"), statusEl(l.status)),
      l.worker ? h("span", {}, h("b", {}, "worker"), l.worker) : "",
      l.attempt ? h("span", {}, h("b", {}, "attempt"), l.attempt) : "",
      l.since ? h("span", {}, h("b", {}, "started"), eventTime(l.since)) : ""),
    h("h2", {}, "Tool calls (" + l.calls.length + ")"),
    h("div", { id: "live-calls" }, l.calls.map((c) => h("div", { class: "call" }, h("b", {}, "→ " + c.name), " ", h("code", {}, c.args || ""),
      h("span", { class: "muted" }, "  " + c.id + (c.done ? (c.ok === false ? "  failed" : "  done") : "  running"))))),
    h("h2", {}, "Streamed so far"),
    h("pre", { id: "live-text", class: "live-text" }, l.text || "(nothing yet)"));
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
  delete panel.dataset.live;
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
      ? h("p", {}, h("a", { id: "trace-link", href: traceURL(prod.trace_id, prod.step), target: "_blank", rel: "noopener" }, "Open trace " + short(prod.trace_id) + " in Jaeger"))
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
