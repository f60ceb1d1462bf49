// Messages as a chat: human, AI (with its tool calls), tool results; streamed tokens merge by message id.

import { h, pretty } from "./dom.js";

const ROLE = { human: "You", user: "You", ai: "AI", AIMessageChunk: "AI", assistant: "AI", tool: "Tool", system: "System" };

function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => (typeof part === "string" ? part : part?.text ?? "")).join("");
  return content == null ? "" : pretty(content);
}

/** Whether a state's values look like a chat (a `messages` list). */
export function hasMessages(values) {
  return Array.isArray(values?.messages);
}

/** One message's element. */
export function message(m) {
  const type = m.type || m.role || "ai";
  const role = ROLE[type] || type;
  const kind = role === "You" ? "human" : role === "Tool" ? "tool" : role === "System" ? "system" : "ai";
  const calls = (m.tool_calls || []).map((call) =>
    h("div", { class: "tool-call" },
      h("span", { class: "tool-name" }, `${call.name}(`),
      h("code", {}, JSON.stringify(call.args ?? {})),
      h("span", { class: "tool-name" }, ")"),
      call.id ? h("span", { class: "muted" }, ` ${call.id}`) : null));
  const body = text(m.content);
  return h("li", { class: `msg msg-${kind}`, dataset: { id: m.id || "" } },
    h("div", { class: "msg-role" }, kind === "tool" ? `Tool result${m.name ? ` · ${m.name}` : ""}` : role),
    body ? h("div", { class: "msg-text" }, body) : null,
    calls.length ? h("div", { class: "tool-calls", "aria-label": "tool calls" }, calls) : null);
}

/** A chat list that streamed chunks can grow. */
export class Chat {
  constructor(list) {
    this.list = list;
    this.streaming = new Map();
  }

  /** Shows these messages (the state's, which wins over streamed chunks). */
  show(messages) {
    this.streaming.clear();
    this.list.replaceChildren(...(messages || []).map(message));
  }

  /** Adds a streamed chunk (`messages-tuple` mode) to its message, made when it is the first. */
  chunk(m) {
    if (!m || typeof m !== "object") return;
    if (m.type !== "AIMessageChunk") {
      if (!this.list.querySelector(`[data-id="${CSS.escape(m.id || "")}"]`)) this.list.append(message(m));
      return;
    }
    let entry = this.streaming.get(m.id);
    if (!entry) {
      const existing = m.id ? this.list.querySelector(`[data-id="${CSS.escape(m.id)}"]`) : null;
      if (existing) existing.remove();
      entry = { content: "", tool_calls: [] };
      this.streaming.set(m.id, entry);
    }
    entry.content += text(m.content);
    if (m.tool_calls?.length) entry.tool_calls.push(...m.tool_calls);
    const el = message({ id: m.id, type: "ai", content: entry.content, tool_calls: entry.tool_calls });
    el.classList.add("streaming");
    const old = this.list.querySelector(`[data-id="${CSS.escape(m.id || "")}"]`);
    if (old) old.replaceWith(el); else this.list.append(el);
    el.scrollIntoView({ block: "nearest" });
  }
}
