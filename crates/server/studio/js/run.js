// Starting a run: the input form made from the assistant's input schema (or raw JSON), run options, and
// the stream of a run split into what the views show.

import { h, pretty } from "./dom.js";

/** The properties of an input schema (LangGraph's input schema, else the state's). */
function properties(schemas) {
  const schema = schemas?.input_schema || schemas?.state_schema || {};
  return Object.entries(schema.properties || {});
}

function typeOf(prop) {
  const t = prop?.type;
  return Array.isArray(t) ? t.find((x) => x !== "null") : t;
}

/** The input form in `container`; `read()` returns the run's input or throws a readable Error. */
export function inputForm(container, schemas) {
  const props = properties(schemas);
  const fields = [];
  const form = h("div", { class: "fields" });
  for (const [name, prop] of props) {
    const id = `input-${name}`;
    let control;
    if (name === "messages") {
      control = h("textarea", { id, rows: 2, placeholder: "Your message", "data-kind": "message" });
    } else if (typeOf(prop) === "boolean") {
      control = h("input", { id, type: "checkbox", "data-kind": "boolean" });
    } else if (typeOf(prop) === "number" || typeOf(prop) === "integer") {
      control = h("input", { id, type: "number", "data-kind": "number" });
    } else {
      control = h("input", { id, type: "text", "data-kind": typeOf(prop) === "string" ? "string" : "json",
        placeholder: typeOf(prop) === "string" ? "" : "text or JSON" });
    }
    fields.push([name, control]);
    form.append(h("div", { class: "field" },
      h("label", { for: id }, name === "messages" ? "Message" : (prop.title || name)),
      control,
      prop.description ? h("small", {}, prop.description) : null));
  }
  const raw = h("textarea", { id: "input-raw", rows: 6, spellcheck: "false", hidden: true }, "{}");
  const rawLabel = h("label", { for: "input-raw", hidden: true }, "Input (JSON)");
  const toggle = h("input", { type: "checkbox", id: "input-raw-toggle" });

  const fromFields = () => {
    const input = {};
    for (const [name, control] of fields) {
      const kind = control.dataset.kind;
      if (kind === "boolean") { if (control.checked) input[name] = true; continue; }
      const value = control.value.trim();
      if (!value) continue;
      if (kind === "message") input[name] = [{ role: "user", content: value }];
      else if (kind === "number") input[name] = Number(value);
      else if (kind === "json") { try { input[name] = JSON.parse(value); } catch { input[name] = value; } }
      else input[name] = value;
    }
    return input;
  };
  toggle.addEventListener("change", () => {
    if (toggle.checked) raw.value = pretty(fromFields());
    raw.hidden = rawLabel.hidden = !toggle.checked;
    form.hidden = toggle.checked;
    (toggle.checked ? raw : fields[0]?.[1])?.focus();
  });
  if (!fields.length) { toggle.checked = true; raw.hidden = rawLabel.hidden = false; }
  container.replaceChildren(form, h("div", { class: "raw-toggle" }, toggle, h("label", { for: "input-raw-toggle" }, "Raw JSON")), rawLabel, raw);
  return {
    read() {
      if (!toggle.checked) return fromFields();
      try { return JSON.parse(raw.value || "null"); } catch (e) { throw new Error(`The input is not JSON: ${e.message}`); }
    },
    clear() { for (const [, control] of fields) if (control.dataset.kind === "message") control.value = ""; },
  };
}

/** The stream modes the studio asks for. */
export const STREAM_MODES = ["values", "updates", "messages-tuple", "custom", "debug"];

/**
 * Streams one run and calls `on.<kind>` for what it shows: `metadata({run_id})`, `values(v)`,
 * `update(node, value, ns)`, `token(chunk, meta)`, `custom(value, ns)`, `task(name, step)`,
 * `taskResult(name, step, error)`, `checkpoint(payload)`, `error({error, message})`, `other(event, data)`.
 */
export async function streamRun(api, path, body, on, signal) {
  for await (const { event, data } of api.stream(path, body, signal)) {
    const [mode, ns] = event.split("|");
    switch (mode) {
      case "metadata": on.metadata?.(data); break;
      case "values": if (!ns) on.values?.(data); break;
      case "updates":
        for (const [node, value] of Object.entries(data || {})) on.update?.(node, value, ns || "");
        break;
      case "messages": if (Array.isArray(data)) on.token?.(data[0], data[1] || {}, ns || ""); break;
      case "custom": on.custom?.(data, ns || ""); break;
      case "debug":
        if (ns) break;
        if (data?.type === "task") on.task?.(data.payload?.name, data.step);
        else if (data?.type === "task_result") on.taskResult?.(data.payload?.name, data.step, data.payload?.error);
        else if (data?.type === "checkpoint") on.checkpoint?.(data.payload, data.step);
        break;
      case "error": on.error?.(data); break;
      default: on.other?.(event, data);
    }
  }
}
