// The server's HTTP API, as LangGraph's SDKs speak it: JSON requests and runs streamed as server-sent
// events over fetch (EventSource cannot POST or send the API key).

const KEY = "weft-studio.api-key";

/** An error answer of the API: its status and `detail`. */
export class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

export class Api {
  /** `base`: the server's root URL (the studio is served at `<base>/studio/`). */
  constructor(base) {
    this.base = base.replace(/\/$/, "");
  }

  /** The API key sent as `x-api-key`, kept in localStorage; empty: none. */
  get key() {
    try { return localStorage.getItem(KEY) || ""; } catch { return ""; }
  }

  set key(value) {
    try {
      if (value) localStorage.setItem(KEY, value); else localStorage.removeItem(KEY);
    } catch { /* storage refused (private mode): the key lasts this page only */ }
    this.memoryKey = value;
  }

  headers(json) {
    const headers = {};
    if (json) headers["content-type"] = "application/json";
    const key = this.key || this.memoryKey;
    if (key) headers["x-api-key"] = key;
    return headers;
  }

  /** One request; the parsed JSON answer, or an ApiError. */
  async request(method, path, body) {
    const response = await fetch(this.base + path, {
      method,
      headers: this.headers(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let value = null;
    try { value = text ? JSON.parse(text) : null; } catch { value = text; }
    if (!response.ok) {
      const detail = value && typeof value === "object" && "detail" in value ? value.detail : text;
      throw new ApiError(response.status, typeof detail === "string" ? detail : JSON.stringify(detail));
    }
    return value;
  }

  get(path) { return this.request("GET", path); }
  post(path, body = {}) { return this.request("POST", path, body); }

  /** Streams a run: yields `{event, data}` for each server-sent event until the stream closes. */
  async *stream(path, body, signal) {
    const response = await fetch(this.base + path, {
      method: "POST",
      headers: { ...this.headers(true), accept: "text/event-stream" },
      body: JSON.stringify(body),
      signal,
    });
    if (!response.ok || !response.body) {
      const text = await response.text();
      let detail = text;
      try { detail = JSON.parse(text).detail ?? text; } catch { /* not JSON */ }
      throw new ApiError(response.status, typeof detail === "string" ? detail : JSON.stringify(detail));
    }
    yield* parseEvents(response.body, signal);
  }
}

/** Parses an SSE byte stream into `{event, data, id}` (data parsed as JSON when it is). */
export async function* parseEvents(body, signal) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const frame = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        const event = parseFrame(frame);
        if (event) yield event;
      }
    }
  } finally {
    if (signal?.aborted) reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

function parseFrame(frame) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of frame.split(/\r?\n/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (!data.length) return null;
  const raw = data.join("\n");
  let parsed = raw;
  try { parsed = JSON.parse(raw); } catch { /* plain text */ }
  return { event, data: parsed, id };
}
