// A JSON value as a collapsible tree (native <details>, so keyboard and screen readers work as they do
// everywhere else).

import { h } from "./dom.js";

/** The tree of `value`; objects and lists deeper than `open` levels start collapsed. */
export function tree(value, open = 1, label = null) {
  return h("div", { class: "tree" }, node(label, value, 0, open));
}

function leaf(value) {
  if (value === null) return h("span", { class: "j-null" }, "null");
  if (typeof value === "string") return h("span", { class: "j-str" }, JSON.stringify(value));
  if (typeof value === "number") return h("span", { class: "j-num" }, String(value));
  if (typeof value === "boolean") return h("span", { class: "j-bool" }, String(value));
  return h("span", {}, String(value));
}

function node(key, value, depth, open) {
  const name = key === null ? null : h("span", { class: "j-key" }, `${key}: `);
  if (value === null || typeof value !== "object") return h("div", { class: "j-row" }, name, leaf(value));
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  const summary = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
  if (!entries.length) return h("div", { class: "j-row" }, name, h("span", { class: "j-null" }, Array.isArray(value) ? "[]" : "{}"));
  return h(
    "details",
    { class: "j-branch", open: depth < open },
    h("summary", {}, name, h("span", { class: "j-count" }, summary)),
    entries.map(([k, v]) => node(k, v, depth + 1, open)),
  );
}
