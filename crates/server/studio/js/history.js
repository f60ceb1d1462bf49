// Time travel: a thread's checkpoints as a timeline (forks as branches), one checkpoint's state and next
// nodes, and a fork made by editing the state there (as a node) and running from it.

import { ago, h, pretty, short } from "./dom.js";
import { tree } from "./tree.js";

/**
 * Lanes of the timeline: the newest checkpoint's line is lane 0; each other line (a fork's, or the line a
 * fork left) gets the next lane, back to where it meets a line already drawn.
 */
export function lanes(history) {
  const byId = new Map(history.map((s) => [s.checkpoint_id, s]));
  const hasChild = new Set(history.map((s) => s.parent_checkpoint_id).filter(Boolean));
  const lane = new Map();
  const tips = history.filter((s) => !hasChild.has(s.checkpoint_id));
  tips.sort((a, b) => String(b.checkpoint_id).localeCompare(String(a.checkpoint_id)));
  tips.forEach((tip, i) => {
    for (let s = tip; s && !lane.has(s.checkpoint_id); s = byId.get(s.parent_checkpoint_id)) lane.set(s.checkpoint_id, i);
  });
  return lane;
}

/** The timeline of `history` (newest first, as the API lists it); `pick(state)` shows one. */
export function timeline(list, history, selected, pick) {
  const lane = lanes(history);
  list.replaceChildren(...history.map((s) => {
    const l = lane.get(s.checkpoint_id) ?? 0;
    const m = s.metadata || {};
    const writes = m.writes && typeof m.writes === "object" ? Object.keys(m.writes) : [];
    const what = m.source === "input" ? "input" : m.source === "update" ? `update as ${writes.join(", ") || "node"}`
      : m.source === "fork" ? "fork" : writes.length ? writes.join(", ") : m.source || "";
    return h("li", { class: `lane-${Math.min(l, 5)}`, style: null },
      h("button", {
        type: "button", class: `checkpoint${s.checkpoint_id === selected ? " current" : ""}`,
        "data-checkpoint": s.checkpoint_id, "data-step": m.step, "aria-current": s.checkpoint_id === selected ? "true" : null,
        onclick: () => pick(s),
      },
      l ? h("span", { class: "badge branch" }, `branch ${l}`) : null,
      h("span", { class: "step" }, `step ${m.step ?? "?"}`),
      h("span", {}, what),
      h("span", { class: "muted" }, s.next?.length ? `→ ${s.next.join(", ")}` : "→ end"),
      s.tasks?.some((t) => t.error) ? h("span", { class: "badge status-error" }, "error") : null,
      h("time", { class: "muted", datetime: s.created_at }, ago(s.created_at))));
  }));
}

/** One checkpoint: its state, next nodes, and the fork editor; `fork(values, asNode)` runs from it. */
export function checkpointView(container, s, nodes, fork, rerun) {
  const values = h("textarea", { id: "fork-values", rows: 10, spellcheck: "false" }, pretty(s.values ?? {}));
  const asNode = h("select", { id: "fork-as-node" }, h("option", { value: "" }, "(as the server picks)"),
    nodes.map((n) => h("option", { value: n }, n)));
  const error = h("p", { class: "error-text", role: "alert" });
  container.replaceChildren(
    h("h3", {}, `Checkpoint ${short(s.checkpoint_id)} · step ${s.metadata?.step ?? "?"}`),
    h("p", {}, "Next: ", s.next?.length ? s.next.join(", ") : "nothing (the run ended here)"),
    (s.tasks || []).filter((t) => t.error).map((t) => h("p", { class: "error-text" }, `${t.name}: ${t.error}`)),
    tree(s.values, 1, "values"),
    h("details", { class: "fork", open: true },
      h("summary", {}, "Edit the state here and run from it (a fork)"),
      h("label", { for: "fork-values" }, "Values to write (JSON; reducers apply, as for a node's update)"), values,
      h("label", { for: "fork-as-node" }, "Write as node"), asNode,
      error,
      h("div", { class: "row" },
        h("button", { type: "button", class: "primary", id: "fork-run", onclick: () => {
          let parsed;
          try { parsed = JSON.parse(values.value); } catch (e) { error.textContent = `Not JSON: ${e.message}`; return; }
          fork(parsed, asNode.value || null);
        } }, "Fork and run"),
        h("button", { type: "button", id: "rerun", onclick: () => rerun() }, "Run again from here"))));
}
