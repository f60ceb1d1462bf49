// An assistant's graph drawn as SVG from `GET /assistants/{id}/graph?xray=true`: nodes in layers from
// `__start__` down, plain edges solid, conditional ones dashed, edges back up drawn on the side. Nodes of
// subgraphs (ids `parent:child`, as an x-ray drawing names them) fold into their parent until expanded.
// Runs light the node running, number the nodes a run went through and mark breakpoints and failures.

import { h } from "./dom.js";

const W = 132, H = 36, GAP_X = 28, GAP_Y = 58, PAD = 24;

/** The drawing's nodes and edges with folded subgraphs merged into their parents. */
export function fold(graph, expanded) {
  const owner = (id) => {
    const parts = String(id).split(":");
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join(":");
      if (!expanded.has(parent)) return parent;
    }
    return id;
  };
  const nodes = new Map();
  const parents = new Set();
  for (const n of graph.nodes || []) {
    const id = owner(n.id);
    if (id !== n.id) parents.add(id);
    if (String(n.id).includes(":")) parents.add(String(n.id).split(":").slice(0, -1).join(":"));
    if (!nodes.has(id)) nodes.set(id, { id, name: id === n.id ? (n.data?.name ?? n.id) : id });
  }
  const edges = [];
  const seen = new Set();
  for (const e of graph.edges || []) {
    const source = owner(e.source), target = owner(e.target);
    const key = `${source}>${target}`;
    if (source === target || seen.has(key)) continue;
    seen.add(key);
    for (const id of [source, target]) if (!nodes.has(id)) nodes.set(id, { id, name: id });
    edges.push({ source, target, conditional: !!e.conditional, label: e.data ?? null });
  }
  for (const n of nodes.values()) n.subgraph = parents.has(n.id);
  return { nodes: [...nodes.values()], edges };
}

/** Layers by longest path from the start over the edges that are not back edges. */
export function layout({ nodes, edges }) {
  const out = new Map(nodes.map((n) => [n.id, []]));
  for (const e of edges) out.get(e.source)?.push(e);
  const back = new Set();
  const state = new Map();
  const visit = (id) => {
    state.set(id, 1);
    for (const e of out.get(id) || []) {
      const s = state.get(e.target);
      if (s === 1) back.add(e);
      else if (!s) visit(e.target);
    }
    state.set(id, 2);
  };
  const start = nodes.find((n) => n.id === "__start__");
  if (start) visit(start.id);
  for (const n of nodes) if (!state.get(n.id)) visit(n.id);
  const rank = new Map(nodes.map((n) => [n.id, 0]));
  for (let pass = 0; pass < nodes.length; pass++) {
    let changed = false;
    for (const e of edges) {
      if (back.has(e)) continue;
      const r = rank.get(e.source) + 1;
      if (r > rank.get(e.target)) { rank.set(e.target, r); changed = true; }
    }
    if (!changed) break;
  }
  const end = nodes.find((n) => n.id === "__end__");
  if (end && nodes.some((n) => n.id !== end.id && rank.get(n.id) >= rank.get(end.id))) {
    rank.set(end.id, Math.max(...nodes.filter((n) => n.id !== end.id).map((n) => rank.get(n.id))) + 1);
  }
  const layers = [];
  for (const n of nodes) (layers[rank.get(n.id)] ||= []).push(n);
  const width = Math.max(...layers.map((l) => (l ? l.length : 0)), 1) * (W + GAP_X) - GAP_X + 2 * PAD + 120;
  const pos = new Map();
  layers.forEach((layer, r) => {
    if (!layer) return;
    const total = layer.length * (W + GAP_X) - GAP_X;
    layer.forEach((n, i) => {
      pos.set(n.id, { x: (width - total) / 2 + i * (W + GAP_X), y: PAD + r * (H + GAP_Y) });
    });
  });
  return { pos, back, width, height: PAD * 2 + layers.length * (H + GAP_Y) - GAP_Y };
}

/** The drawing of one assistant's graph; `onToggle(id)` expands or folds a subgraph. */
export class GraphView {
  constructor(container) {
    this.container = container;
    this.expanded = new Set();
    this.graph = { nodes: [], edges: [] };
    this.marks = { running: new Set(), path: [], failed: null, next: [] };
    this.breakpoints = { before: new Set(), after: new Set() };
  }

  /** Shows a new drawing (a new assistant). */
  set(graph) {
    this.graph = graph || { nodes: [], edges: [] };
    this.expanded.clear();
    this.reset();
  }

  /** Forgets the marks of the last run. */
  reset() {
    this.marks = { running: new Set(), path: [], failed: null, next: [] };
    this.draw();
  }

  /** The graph's own node names (not `__start__`/`__end__`). */
  nodeNames() {
    return (this.graph.nodes || []).map((n) => n.id).filter((id) => !id.startsWith("__"));
  }

  started(name) { this.marks.running.add(name); this.marks.path.push(name); this.draw(); }
  finished(name) { this.marks.running.delete(name); this.draw(); }
  failed(name) { this.marks.failed = name; this.marks.running.clear(); this.draw(); }
  next(names) { this.marks.next = names || []; this.draw(); }
  done() { this.marks.running.clear(); this.draw(); }

  draw() {
    const folded = fold(this.graph, this.expanded);
    const { pos, back, width, height } = layout(folded);
    const svg = h("svg", {
      class: "graph-svg", viewBox: `0 0 ${width} ${Math.max(height, 60)}`, role: "group",
      "aria-label": "graph drawing",
    });
    svg.append(h("defs", {}, h("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
      h("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrow" }))));
    const steps = new Map();
    this.marks.path.forEach((name, i) => (steps.get(name) || steps.set(name, []).get(name)).push(i + 1));
    const taken = new Set();
    for (let i = 1; i < this.marks.path.length; i++) taken.add(`${this.marks.path[i - 1]}>${this.marks.path[i]}`);
    let left = 0, right = 0;
    for (const e of folded.edges) {
      const a = pos.get(e.source), b = pos.get(e.target);
      if (!a || !b) continue;
      let d;
      if (back.has(e) || b.y <= a.y) {
        // Back up: around the right side.
        const x = Math.max(a.x, b.x) + W + 22 + 12 * right++;
        d = `M ${a.x + W} ${a.y + H / 2} C ${x} ${a.y + H / 2}, ${x} ${b.y + H / 2}, ${b.x + W} ${b.y + H / 2}`;
      } else if (b.y - a.y > H + GAP_Y + 1 && Math.abs(a.x - b.x) < W) {
        // Down past a layer: around the left side, clear of the nodes between.
        const x = Math.min(a.x, b.x) - 22 - 12 * left++;
        d = `M ${a.x} ${a.y + H / 2} C ${x} ${a.y + H / 2}, ${x} ${b.y + H / 2}, ${b.x} ${b.y + H / 2}`;
      } else {
        const [x1, y1, x2, y2] = [a.x + W / 2, a.y + H, b.x + W / 2, b.y];
        d = `M ${x1} ${y1} C ${x1} ${(y1 + y2) / 2}, ${x2} ${(y1 + y2) / 2}, ${x2} ${y2}`;
      }
      const cls = ["edge", e.conditional ? "conditional" : "", taken.has(`${e.source}>${e.target}`) ? "taken" : ""].join(" ");
      svg.append(h("path", { d, class: cls, "marker-end": "url(#arrow)" }, h("title", {}, `${e.source} → ${e.target}${e.conditional ? " (conditional)" : ""}`)));
    }
    for (const n of folded.nodes) {
      const p = pos.get(n.id);
      if (!p) continue;
      const special = n.id === "__start__" || n.id === "__end__";
      const cls = ["node", special ? "special" : "", this.marks.running.has(n.id) ? "running" : "",
        steps.has(n.id) ? "visited" : "", this.marks.failed === n.id ? "failed" : "",
        this.marks.next.includes(n.id) ? "next" : "", n.subgraph ? "subgraph" : ""].join(" ");
      const label = [n.name, n.subgraph ? (this.expanded.has(n.id) ? "subgraph, expanded" : "subgraph, folded") : "",
        this.marks.running.has(n.id) ? "running" : "", steps.has(n.id) ? `steps ${steps.get(n.id).join(", ")}` : "",
        this.breakpoints.before.has(n.id) ? "breakpoint before" : "", this.breakpoints.after.has(n.id) ? "breakpoint after" : ""]
        .filter(Boolean).join(", ");
      const g = h("g", { class: cls, transform: `translate(${p.x} ${p.y})`, "data-node": n.id, "aria-label": label },
        h("title", {}, label),
        h("rect", { width: W, height: H, rx: special ? 18 : 6 }),
        h("text", { x: W / 2, y: H / 2 + 4, "text-anchor": "middle" }, special ? n.id.replaceAll("_", "") : n.name));
      // A folded subgraph expands; a node of an expanded one folds it back.
      const parent = String(n.id).includes(":") ? String(n.id).split(":").slice(0, -1).join(":") : null;
      const target = n.subgraph ? n.id : parent && this.expanded.has(parent) ? parent : null;
      if (target) {
        g.setAttribute("tabindex", "0");
        g.setAttribute("role", "button");
        g.setAttribute("aria-expanded", String(this.expanded.has(target)));
        g.setAttribute("aria-label", `${label}, ${this.expanded.has(target) ? `folds ${target}` : "expands"}`);
        const toggle = () => { this.expanded.has(target) ? this.expanded.delete(target) : this.expanded.add(target); this.draw(); };
        g.addEventListener("click", toggle);
        g.addEventListener("keydown", (ev) => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(); } });
        g.append(h("text", { x: W - 12, y: 13, class: "fold" }, this.expanded.has(target) ? "−" : "+"));
      }
      if (this.breakpoints.before.has(n.id)) g.append(h("circle", { cx: 0, cy: 0, r: 5, class: "bp" }, h("title", {}, "breakpoint before")));
      if (this.breakpoints.after.has(n.id)) g.append(h("circle", { cx: W, cy: H, r: 5, class: "bp" }, h("title", {}, "breakpoint after")));
      if (steps.has(n.id) && !special) g.append(h("text", { x: 4, y: H + 12, class: "step-no" }, steps.get(n.id).join(",")));
      svg.append(g);
    }
    this.container.replaceChildren(svg);
  }
}
