// weft Studio: the page's controller. Everything goes through the server's public HTTP API.

import { Api, ApiError } from "./api.js";
import { Chat, hasMessages } from "./chat.js";
import { $, announce, fill, h, short } from "./dom.js";
import { GraphView } from "./graph.js";
import { checkpointView, timeline } from "./history.js";
import { answerForm, pending } from "./interrupts.js";
import { inputForm, STREAM_MODES, streamRun } from "./run.js";
import { loadThreads, metadataFilter } from "./threads.js";
import { tree } from "./tree.js";

const api = new Api(new URL("..", location.href).href);
const graph = new GraphView($("graph"));
const chat = new Chat($("chat"));

const state = {
  assistants: [],
  assistant: null,
  form: null,
  threadId: null,
  thread: null,
  history: [],
  selected: null,
  run: null, // {runId, controller}
};

function describe(err) {
  if (err instanceof ApiError && err.status === 401) return `${err.detail} (set the API key at the top)`;
  if (err instanceof ApiError) return err.detail;
  return err?.message || String(err);
}

function fail(err, where) {
  const text = `${where}: ${describe(err)}`;
  announce(text);
  fill($("error-box"), h("div", { class: "card error" }, h("p", {}, text)));
}

// ---- tabs (arrow keys move between them, as WAI-ARIA's tabs pattern says) ----

const tabs = [...document.querySelectorAll('[role="tab"]')];
function selectTab(tab, focus = false) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", String(on));
    t.tabIndex = on ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !on;
  }
  if (focus) tab.focus();
  if (tab.id === "tab-history" && state.threadId) loadHistory().catch((e) => fail(e, "history"));
}
for (const tab of tabs) {
  tab.addEventListener("click", () => selectTab(tab));
  tab.addEventListener("keydown", (ev) => {
    const i = tabs.indexOf(tab);
    const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[ev.key];
    if (to === undefined) return;
    ev.preventDefault();
    selectTab(tabs[(to + tabs.length) % tabs.length], true);
  });
}

// ---- assistants and their graphs ----

async function loadAssistants() {
  state.assistants = await api.post("/assistants/search", { limit: 100, sort_by: "name", sort_order: "asc" });
  fill($("assistant"), state.assistants.map((a) =>
    h("option", { value: a.assistant_id }, a.name === a.graph_id ? a.name : `${a.name} (${a.graph_id})`)));
}

async function selectAssistant(id) {
  const a = state.assistants.find((x) => x.assistant_id === id || x.graph_id === id) || state.assistants[0];
  if (!a) { announce("The server has no assistants"); return; }
  state.assistant = a;
  $("assistant").value = a.assistant_id;
  $("assistant-about").textContent = a.description || "";
  $("graph-title").textContent = `Graph: ${a.graph_id}`;
  const [drawing, schemas] = await Promise.all([
    api.get(`/assistants/${a.assistant_id}/graph?xray=true`),
    api.get(`/assistants/${a.assistant_id}/schemas`),
  ]);
  graph.set(drawing);
  state.form = inputForm($("input-form"), schemas);
  breakpointRows();
}

function breakpointRows() {
  const rows = graph.nodeNames().map((name) => {
    const box = (when) => h("input", {
      type: "checkbox", id: `bp-${when}-${name}`, "aria-label": `interrupt ${when} ${name}`,
      checked: graph.breakpoints[when].has(name),
      onchange: (ev) => { ev.target.checked ? graph.breakpoints[when].add(name) : graph.breakpoints[when].delete(name); graph.draw(); },
    });
    return h("tr", {}, h("th", { scope: "row" }, name), h("td", {}, box("before")), h("td", {}, box("after")));
  });
  fill($("bp-rows"), rows);
}

// ---- threads ----

async function refreshThreads() {
  let metadata;
  try {
    metadata = metadataFilter($("thread-filter").value);
    $("thread-search-error").textContent = "";
  } catch (e) {
    $("thread-search-error").textContent = e.message;
    return;
  }
  await loadThreads(api, $("thread-list"), { metadata, status: $("thread-status").value, current: state.threadId },
    (t) => openThread(t.thread_id).catch((e) => fail(e, "open thread")));
}

function setHash() {
  const parts = [`#/a/${encodeURIComponent(state.assistant?.graph_id || "")}`];
  if (state.threadId) parts.push(`t/${state.threadId}`);
  history.replaceState(null, "", parts.join("/"));
}

function newThread() {
  state.threadId = null;
  state.thread = null;
  state.history = [];
  state.selected = null;
  $("thread-title").textContent = "New thread";
  $("thread-meta").textContent = "";
  for (const id of ["error-box", "interrupt", "values-view", "activity", "trace", "timeline", "checkpoint", "panel-state"]) fill($(id));
  chat.show([]);
  graph.reset();
  setHash();
}

async function openThread(threadId) {
  const thread = await api.get(`/threads/${threadId}`);
  const graphId = thread.metadata?.graph_id;
  if (graphId && graphId !== state.assistant?.graph_id) await selectAssistant(graphId);
  newThread();
  state.threadId = threadId;
  setHash();
  await showThread(thread);
  await refreshThreads();
  announce(`Thread ${short(threadId)}: ${thread.status}`);
}

/** Shows a thread as it is now: values, chat, interrupts, error, and its last run's trace. */
async function showThread(thread) {
  state.thread = thread;
  const [current, runs] = await Promise.all([
    api.get(`/threads/${thread.thread_id}/state`),
    api.get(`/threads/${thread.thread_id}/runs?limit=10`),
  ]);
  $("thread-title").textContent = `Thread ${short(thread.thread_id)}`;
  $("thread-meta").replaceChildren(h("span", { class: `badge status-${thread.status}` }, thread.status),
    ` updated ${new Date(thread.updated_at).toLocaleString()} · ${thread.thread_id}`);
  showValues(current.values);
  fill($("panel-state"),
    h("p", {}, "Next: ", current.next?.length ? current.next.join(", ") : "nothing"),
    tree(current.values, 1, "values"),
    pending(thread).length ? h("div", {}, h("h3", {}, "Pending interrupts"), tree(pending(thread), 2, "interrupts")) : null,
    h("h3", {}, "Metadata"), tree(thread.metadata, 1, "metadata"));
  graph.next(current.next || []);
  fill($("interrupt"), thread.status === "interrupted" ? answerForm(pending(thread), current.next, resume) : null);
  fill($("error-box"));
  const last = runs?.[0];
  if (thread.status === "error" || last?.status === "error") await showFailure(thread, last);
  else if (last) await traceFromHistory(last);
}

function showValues(values) {
  if (hasMessages(values)) { chat.show(values.messages); fill($("values-view")); }
  else { chat.show([]); fill($("values-view"), values && Object.keys(values).length ? tree(values, 2, "values") : null); }
}

/** A failed run: where it stopped (node, step) and its error, with its trace. */
async function showFailure(thread, run) {
  const history = run ? await traceFromHistory(run) : [];
  const lastCheckpoint = history[0];
  const taskError = lastCheckpoint?.tasks?.find((t) => t.error);
  const node = taskError?.name || lastCheckpoint?.next?.[0] || "?";
  const step = lastCheckpoint ? (lastCheckpoint.metadata?.step ?? -1) + 1 : "?";
  const error = thread.error || { error: "Error", message: taskError?.error || "the run failed" };
  $("trace").append(traceItem(step, "error", `${node}: ${error.error}: ${error.message}`));
  showError(error, node, step);
}

function showError(error, node, step) {
  graph.failed(node);
  fill($("error-box"), h("div", { class: "card error", id: "run-error" },
    h("h3", {}, `Failed in ${node} at step ${step}`),
    h("p", {}, h("strong", {}, error?.error || "Error"), `: ${error?.message ?? ""}`),
    h("button", { type: "button", onclick: () => selectTab($("tab-trace"), true) }, "See the trace")));
}

/** The trace of a stored run, from its checkpoints; returns them, newest first. */
async function traceFromHistory(run) {
  const history = await api.post(`/threads/${run.thread_id}/history`, { limit: 100, metadata: { run_id: run.run_id } });
  const oldest = [...history].reverse();
  fill($("trace"), h("li", { class: "muted" }, `run ${short(run.run_id)} · ${run.status} · ${new Date(run.created_at).toLocaleString()}`),
    oldest.map((s) => traceItem(s.metadata?.step, s.metadata?.source === "input" ? "input" : "checkpoint",
      s.next?.length ? `next: ${s.next.join(", ")}` : "end", s.values,
      s.tasks?.find((t) => t.error)?.error)));
  // The nodes a checkpoint planned ran when a later checkpoint of the run followed it.
  graph.reset();
  for (const s of oldest.slice(0, -1)) for (const name of s.next || []) if (name !== "__start__") graph.marks.path.push(name);
  graph.draw();
  return history;
}

function traceItem(step, kind, text, data, error) {
  return h("li", { class: `trace-${kind}${error ? " trace-error" : ""}` },
    h("span", { class: "step" }, step === undefined || step === null ? "" : `step ${step}`),
    h("span", { class: "badge" }, kind), " ", text,
    error ? h("p", { class: "error-text" }, error) : null,
    data !== undefined && data !== null ? tree(data, 0, "data") : null);
}

async function loadHistory() {
  state.history = await api.post(`/threads/${state.threadId}/history`, { limit: 200 });
  const pick = (s) => {
    state.selected = s.checkpoint_id;
    timeline($("timeline"), state.history, state.selected, pick);
    checkpointView($("checkpoint"), s, graph.nodeNames(), (values, asNode) => fork(s, values, asNode), () => rerun(s));
    graph.next(s.next || []);
  };
  timeline($("timeline"), state.history, state.selected, pick);
  const chosen = state.history.find((s) => s.checkpoint_id === state.selected);
  if (chosen) pick(chosen); else fill($("checkpoint"), h("p", { class: "muted" }, "Pick a checkpoint to see its state, or to fork from it."));
}

// ---- runs ----

function runOptions() {
  const body = { assistant_id: state.assistant.assistant_id, stream_mode: STREAM_MODES, stream_subgraphs: true };
  const limit = Number($("recursion-limit").value);
  if (limit > 0) body.config = { recursion_limit: limit };
  if (graph.breakpoints.before.size) body.interrupt_before = [...graph.breakpoints.before];
  if (graph.breakpoints.after.size) body.interrupt_after = [...graph.breakpoints.after];
  return body;
}

async function ensureThread() {
  if (state.threadId) return state.threadId;
  const t = await api.post("/threads", { metadata: { graph_id: state.assistant.graph_id } });
  state.threadId = t.thread_id;
  $("thread-title").textContent = `Thread ${short(t.thread_id)}`;
  setHash();
  return t.thread_id;
}

/** Streams a run on the thread with `extra` (input, command or checkpoint) and shows it as it goes. */
async function startRun(extra, what) {
  if (state.run) return;
  const threadId = await ensureThread();
  const body = { ...runOptions(), ...extra };
  const controller = new AbortController();
  state.run = { runId: null, controller };
  $("run").disabled = true;
  $("stop").disabled = false;
  fill($("interrupt"));
  fill($("error-box"));
  fill($("activity"));
  fill($("trace"));
  graph.reset();
  selectTab($("tab-chat"));
  announce(`${what}…`);
  let failed = null;
  const running = new Set();
  let step = null;
  let planned = null; // the last checkpoint's {next, step}: where a run that fails between tasks stopped
  const log = (item) => $("trace").append(item);
  try {
    await streamRun(api, `/threads/${threadId}/runs/stream`, body, {
      metadata: (m) => { state.run.runId = m.run_id; log(traceItem(null, "run", `run ${short(m.run_id)} started`)); },
      values: (v) => showValues(v),
      token: (chunk) => chat.chunk(chunk),
      update: (node, value, ns) => {
        if (node === "__interrupt__") return;
        $("activity").append(h("li", { class: "update" }, h("span", { class: "badge" }, ns ? `${ns} · ${node}` : node), " updated ", value == null ? "nothing" : tree(value, 0, "update")));
      },
      custom: (value, ns) => $("activity").append(h("li", { class: "custom" }, h("span", { class: "badge" }, ns ? `custom · ${ns}` : "custom"), " ", tree(value, 1, "event"))),
      task: (name, s) => { step = s; running.add(name); graph.started(name); log(traceItem(s, "task", `${name} started`)); },
      taskResult: (name, s, error) => {
        running.delete(name);
        graph.finished(name);
        log(traceItem(s, "result", error ? `${name} failed` : `${name} finished`, undefined, error));
        if (error) failed = { node: name, step: s };
      },
      checkpoint: (payload, s) => {
        planned = { next: payload?.next || [], step: s };
        log(traceItem(s, "checkpoint", planned.next.length ? `next: ${planned.next.join(", ")}` : "end", payload?.values));
      },
      error: (err) => {
        const node = failed?.node || [...running][0] || planned?.next?.[0] || "?";
        const at = failed?.step ?? (running.size ? step : planned ? planned.step + 1 : step) ?? "?";
        log(traceItem(at, "error", `${err?.error}: ${err?.message}`));
        showError(err, node, at);
        failed = failed || { node, step: at };
      },
    }, controller.signal);
  } catch (err) {
    if (!controller.signal.aborted) fail(err, what);
  } finally {
    state.run = null;
    $("run").disabled = false;
    $("stop").disabled = true;
    graph.done();
  }
  const thread = await api.get(`/threads/${threadId}`);
  await showThreadAfterRun(thread);
  await refreshThreads();
  if (!$("panel-history").hidden) await loadHistory();
  announce(`${what}: ${thread.status}`);
}

/** After a live run: the thread's state, interrupts and error, keeping the live trace and path. */
async function showThreadAfterRun(thread) {
  state.thread = thread;
  const current = await api.get(`/threads/${thread.thread_id}/state`);
  $("thread-meta").replaceChildren(h("span", { class: `badge status-${thread.status}` }, thread.status),
    ` updated ${new Date(thread.updated_at).toLocaleString()} · ${thread.thread_id}`);
  showValues(current.values);
  fill($("panel-state"),
    h("p", {}, "Next: ", current.next?.length ? current.next.join(", ") : "nothing"),
    tree(current.values, 1, "values"),
    h("h3", {}, "Metadata"), tree(thread.metadata, 1, "metadata"));
  graph.next(current.next || []);
  fill($("interrupt"), thread.status === "interrupted" ? answerForm(pending(thread), current.next, resume) : null);
}

function resume(command) {
  const extra = command === null ? { input: null } : { command };
  startRun(extra, "Resuming").catch((e) => fail(e, "resume"));
}

async function fork(s, values, asNode) {
  const body = { values, checkpoint_id: s.checkpoint_id };
  if (asNode) body.as_node = asNode;
  const made = await api.post(`/threads/${state.threadId}/state`, body);
  const checkpointId = made?.checkpoint?.checkpoint_id;
  state.selected = checkpointId || null;
  await startRun({ input: null, checkpoint_id: checkpointId }, "Forking");
}

function rerun(s) {
  startRun({ input: null, checkpoint_id: s.checkpoint_id }, "Running again").catch((e) => fail(e, "run"));
}

// ---- wiring ----

$("run-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  let input;
  try { input = state.form.read(); } catch (e) { fail(e, "input"); return; }
  startRun({ input }, "Running").then(() => state.form.clear()).catch((e) => fail(e, "run"));
});
$("stop").addEventListener("click", async () => {
  const run = state.run;
  if (!run) return;
  try {
    if (run.runId) await api.post(`/threads/${state.threadId}/runs/${run.runId}/cancel?wait=false&action=interrupt`, {});
    else run.controller.abort();
    announce("Stopping the run…");
  } catch (e) { fail(e, "stop"); }
});
$("assistant").addEventListener("change", (ev) => {
  selectAssistant(ev.target.value).then(() => { newThread(); }).catch((e) => fail(e, "assistant"));
});
$("new-thread").addEventListener("click", () => { newThread(); refreshThreads().catch((e) => fail(e, "threads")); });
$("thread-search").addEventListener("submit", (ev) => { ev.preventDefault(); refreshThreads().catch((e) => fail(e, "threads")); });
$("api-key").value = api.key;
$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  api.key = $("api-key").value.trim();
  start().catch((e) => fail(e, "connect"));
});

/** The assistant and thread a location names: `#/a/<graph or assistant id>/t/<thread id>`. */
function route() {
  const [, graphId, , threadId] = location.hash.replace(/^#\//, "").split("/").map(decodeURIComponent);
  return { graphId, threadId };
}

async function start() {
  const { graphId, threadId } = route();
  fill($("error-box"));
  await loadAssistants();
  await selectAssistant(graphId || state.assistants[0]?.assistant_id);
  newThread();
  if (threadId) await openThread(threadId);
  else await refreshThreads();
  announce("Ready");
}

// A link or a typed address to another thread or assistant (the studio's own changes replace the hash).
window.addEventListener("hashchange", () => {
  const { graphId, threadId } = route();
  const go = async () => {
    if (graphId && graphId !== state.assistant?.graph_id) { await selectAssistant(graphId); newThread(); }
    if (threadId && threadId !== state.threadId) await openThread(threadId);
  };
  go().catch((e) => fail(e, "open"));
});

start().catch((e) => {
  if (e instanceof ApiError && e.status === 401) $("settings").open = true;
  fail(e, "connect");
});
