// The thread list: newest first, with status and last update, searched by metadata and status.

import { ago, h, short } from "./dom.js";

/** Reads the metadata filter: `key=value` pairs (comma separated) or a JSON object. */
export function metadataFilter(text) {
  const t = text.trim();
  if (!t) return {};
  if (t.startsWith("{")) {
    const value = JSON.parse(t);
    if (!value || typeof value !== "object" || Array.isArray(value)) throw new Error("the filter must be a JSON object");
    return value;
  }
  const filter = {};
  for (const pair of t.split(",")) {
    const [key, ...rest] = pair.split("=");
    if (!key.trim() || !rest.length) throw new Error(`"${pair.trim()}" is not key=value`);
    const raw = rest.join("=").trim();
    let value = raw;
    try { value = JSON.parse(raw); } catch { /* a plain string */ }
    filter[key.trim()] = value;
  }
  return filter;
}

/** Searches threads and lists them in `list`; `open(thread)` opens one. */
export async function loadThreads(api, list, { metadata, status, current }, open) {
  const body = { limit: 50, sort_by: "updated_at", sort_order: "desc" };
  if (metadata && Object.keys(metadata).length) body.metadata = metadata;
  if (status) body.status = status;
  const threads = await api.post("/threads/search", body);
  list.replaceChildren(...threads.map((t) => h("li", {},
    h("button", {
      type: "button", class: `thread${t.thread_id === current ? " current" : ""}`, "data-thread": t.thread_id,
      "aria-current": t.thread_id === current ? "true" : null, onclick: () => open(t),
    },
    h("span", { class: `badge status-${t.status}` }, t.status),
    h("span", { class: "thread-id" }, short(t.thread_id)),
    h("span", { class: "muted" }, t.metadata?.graph_id || ""),
    h("time", { datetime: t.updated_at, class: "muted" }, ago(t.updated_at))))));
  if (!threads.length) list.append(h("li", { class: "muted" }, "No threads"));
  return threads;
}
