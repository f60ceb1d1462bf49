// The JS SDK check: LangGraph's JavaScript client (`@langchain/langgraph-sdk`, pinned in package.json)
// drives a server of the suite's graphs from node, no browser:
//
//     node --experimental-websocket check.mjs URL [SERVER]
//
// It streams the `chat` graph in `messages-tuple` mode (the tokens must arrive as message chunks), then
// runs `hitl` to its interrupt and resumes it with a `Command`, checking the thread's final state. Then
// the same through the SDK's v2 client (`client.threads.stream`, the Agent Streaming Protocol) over SSE
// and over WebSocket: `simple` and `chat`'s events per channel (ids aside, as the Python v2 test
// compares them), `tool_calls`' tools events and mirrored tool message, `usage`'s message-finish, `seq`
// climbing by one, `hitl`'s interrupt answered with `input.respond`, and a reconnect with `since` through
// each transport adapter, replaying exactly what came after.
//
// SERVER is `weft` or `langgraph`: where the two are known to differ, the check prints a
// `differs: REASON` line and expects each server's own answer. Any mismatch throws: the exit status is
// non-zero and the failed check is printed. (Node 20 has `WebSocket` only behind
// `--experimental-websocket`.)
import assert from "node:assert/strict";

import {
  Client,
  ProtocolSseTransportAdapter,
  ProtocolWebSocketTransportAdapter,
} from "@langchain/langgraph-sdk";

const url = process.argv[2];
const server = process.argv[3] ?? "weft";
if (!url) {
  console.error("usage: node check.mjs URL [SERVER]");
  process.exit(2);
}
const client = new Client({ apiUrl: url });

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push(part);
  return parts;
}

const names = (parts) => parts.map((p) => p.event);
const dataOf = (parts, event) => parts.filter((p) => p.event === event).map((p) => p.data);

async function chatStreamsTokensAsMessageChunks() {
  const thread = await client.threads.create();
  const parts = await collect(
    client.runs.stream(thread.thread_id, "chat", {
      input: { messages: [{ role: "human", content: "hi" }] },
      streamMode: "messages-tuple",
    }),
  );
  assert.equal(parts[0]?.event, "metadata", `the first event, of ${names(parts)}`);
  assert.equal(typeof parts[0].data.run_id, "string", "the run id in the metadata event");
  const tokens = dataOf(parts, "messages");
  assert.ok(tokens.length >= 2, `several tokens, got ${JSON.stringify(tokens)}`);
  assert.deepEqual(
    names(parts),
    ["metadata", ...tokens.map(() => "messages")],
    "only message events after the metadata",
  );
  for (const [chunk, metadata] of tokens) {
    assert.equal(chunk.type, "AIMessageChunk", `a token's type: ${JSON.stringify(chunk)}`);
    assert.equal(typeof chunk.content, "string", "a token's content");
    assert.equal(metadata.langgraph_node, "model", "the token's node");
    assert.equal(metadata.langgraph_step, 1, "the token's step");
  }
  assert.equal(tokens.map(([chunk]) => chunk.content).join(""), "Hello there friend", "the tokens");
  assert.equal(new Set(tokens.map(([chunk]) => chunk.id)).size, 1, "one message id for every token");
  assert.equal(tokens.at(-1)[0].chunk_position, "last", "the last token says so");

  const state = await client.threads.getState(thread.thread_id);
  const messages = state.values.messages;
  assert.deepEqual(
    messages.map((m) => [m.type, m.content]),
    [
      ["human", "hi"],
      ["ai", "Hello there friend"],
    ],
    "the thread's messages",
  );
  assert.equal(messages[1].id, tokens[0][0].id, "the saved reply has the streamed id");
  const done = await client.threads.get(thread.thread_id);
  assert.equal(done.status, "idle", "the thread after the chat run");
}

async function hitlPausesAndResumesWithACommand() {
  const thread = await client.threads.create();
  const paused = await collect(
    client.runs.stream(thread.thread_id, "hitl", {
      input: { items: ["js"] },
      streamMode: ["values", "updates"],
    }),
  );
  assert.equal(paused[0]?.event, "metadata", `the first event, of ${names(paused)}`);
  const updates = dataOf(paused, "updates");
  const pause = updates.find((u) => "__interrupt__" in u);
  assert.ok(pause, `an __interrupt__ update, got ${JSON.stringify(updates)}`);
  assert.equal(pause.__interrupt__.length, 1, "one interrupt");
  const [interrupt] = pause.__interrupt__;
  assert.deepEqual(interrupt.value, { question: "approve?" }, "the interrupt's value");
  assert.equal(typeof interrupt.id, "string", "the interrupt's id");
  assert.deepEqual(dataOf(paused, "values")[0], { items: ["js"] }, "the values before the pause");

  const thread1 = await client.threads.get(thread.thread_id);
  assert.equal(thread1.status, "interrupted", "the thread at the interrupt");
  const state1 = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state1.next, ["ask"], "the node to run next");
  assert.deepEqual(state1.tasks[0].interrupts[0].value, { question: "approve?" }, "the pending interrupt");

  const resumed = await collect(
    client.runs.stream(thread.thread_id, "hitl", {
      command: { resume: "yes" },
      streamMode: "values",
    }),
  );
  assert.equal(resumed[0]?.event, "metadata", `the first event, of ${names(resumed)}`);
  assert.ok(!names(resumed).includes("error"), `no error: ${JSON.stringify(resumed)}`);
  const values = dataOf(resumed, "values");
  assert.deepEqual(values.at(-1), { items: ["js", "answer:yes", "b"], count: 1 }, "the final values");

  const state2 = await client.threads.getState(thread.thread_id);
  assert.deepEqual(state2.values, { items: ["js", "answer:yes", "b"], count: 1 }, "the thread's state");
  assert.deepEqual(state2.next, [], "nothing left to run");
  const thread2 = await client.threads.get(thread.thread_id);
  assert.equal(thread2.status, "idle", "the thread after the resume");
}

// The Agent Streaming Protocol (v2).

const CHANNELS = ["values", "updates", "messages", "tools", "custom", "lifecycle", "input", "tasks", "checkpoints"];
const TERMINAL = ["completed", "failed", "interrupted"];

/** Records a known difference between the servers; whether this is weft. */
function differs(reason) {
  console.log(`differs: ${reason}`);
  return server === "weft";
}

/** A namespace without its task ids (they differ from run to run). */
const bare = (namespace) => namespace.map((segment) => segment.split(":")[0]);

/**
 * A message's text, whether its content is a string or content blocks (the SDK turns `values` messages
 * into message objects; langgraph dev's AI message, content blocks, comes out as `contentBlocks`).
 */
function textOf(message) {
  const content = message.content ?? message.contentBlocks;
  if (typeof content === "string") return content;
  assert.ok(Array.isArray(content), `a message's content: ${JSON.stringify(message)}`);
  return content.map((block) => block?.text ?? "").join("");
}

/** An event's data without what differs between runs and servers: ids, and message content's form. */
function plain(method, data) {
  if (method === "lifecycle") {
    const { trigger_call_id: _, ...rest } = data;
    return "namespace" in rest ? { ...rest, namespace: bare(rest.namespace) } : rest;
  }
  if (method === "messages") {
    const { id: _, ...rest } = data;
    return rest;
  }
  if (method === "values" && Array.isArray(data.messages)) {
    return { ...data, messages: data.messages.map((m) => [m.type, textOf(m)]) };
  }
  return data;
}

function byChannel(events, channels) {
  const out = Object.fromEntries(channels.map((channel) => [channel, []]));
  for (const e of events) {
    if (e.method in out) out[e.method].push([bare(e.params.namespace), plain(e.method, e.params.data)]);
  }
  return out;
}

/** `events` read on through several loops: leaving a loop does not close the stream beneath. */
function keepOpen(events) {
  const iterator = events[Symbol.asyncIterator]();
  return { [Symbol.asyncIterator]: () => ({ next: () => iterator.next() }) };
}

const isEnd = (e) =>
  e.method === "lifecycle" && e.params.namespace.length === 0 && TERMINAL.includes(e.params.data.event);

/** The events of an iterable up to the root's terminal lifecycle event, within `ms`. */
async function untilEnd(events, ms = 30000) {
  const seen = [];
  let timer;
  const read = (async () => {
    for await (const e of events) {
      seen.push(e);
      if (isEnd(e)) return;
    }
    throw new Error(`the stream ended before the run did: ${JSON.stringify(seen.map((e) => e.method))}`);
  })();
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no end within ${ms} ms: ${JSON.stringify(seen)}`)), ms);
  });
  try {
    await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
  }
  return seen;
}

function checkSeq(events) {
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
    "seq climbs by one from 1",
  );
  assert.ok(
    events.every((e) => e.type === "event" && typeof e.event_id === "string" && e.event_id),
    "every event has an event_id",
  );
}

/**
 * The events of a `ThreadStream` subscription, in `seq` order, once the root's terminal event and every
 * `seq` before it came. The stream merges the events of its content pump and of its lifecycle watcher
 * (deduplicated by `event_id`), so they need not arrive in order.
 */
async function untilAllCame(events, { after = 0, done = isEnd, ms = 30000 } = {}) {
  const seen = [];
  let end = null;
  let timer;
  const read = (async () => {
    for await (const e of events) {
      seen.push(e);
      if (done(e)) end = e.seq;
      const came = new Set(seen.map((s) => s.seq).filter((seq) => seq > after && (end === null || seq <= end)));
      if (end !== null && came.size >= end - after) return;
    }
    throw new Error(`the stream ended before the run did: ${JSON.stringify(seen.map((e) => e.seq))}`);
  })();
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not every event within ${ms} ms: ${JSON.stringify(seen)}`)), ms);
  });
  try {
    await Promise.race([read, late]);
  } finally {
    clearTimeout(timer);
  }
  return seen.sort((a, b) => a.seq - b.seq);
}

/**
 * Runs `graph` on a new thread through `client.threads.stream`, subscribed to every channel before the
 * run starts; the thread's id and every event.
 */
async function v2Run(graph, input, transport) {
  const { thread_id: threadId } = await client.threads.create();
  const thread = client.threads.stream(threadId, { assistantId: graph, transport });
  try {
    const subscription = await thread.subscribe(CHANNELS);
    const started = await thread.run.start({ input });
    assert.equal(typeof started.run_id, "string", "run.start answers the run id");
    const events = await untilAllCame(subscription);
    checkSeq(events);
    return { threadId, events };
  } finally {
    await thread.close();
  }
}

const SIMPLE_LIFECYCLE = [
  [[], { event: "running", graph_name: "simple" }],
  [[], { event: "completed", graph_name: "simple" }],
];
const SIMPLE_VALUES = [
  [[], { items: [] }],
  [[], { items: ["a"], count: 1 }],
  [[], { items: ["a", "b"], count: 2 }],
];

function checkSimple(events) {
  const got = byChannel(events, ["values", "lifecycle", "messages", "input", "updates", "custom"]);
  assert.deepEqual(got.lifecycle, SIMPLE_LIFECYCLE, "lifecycle");
  assert.deepEqual(got.values, SIMPLE_VALUES, "values");
  assert.deepEqual([got.messages, got.input], [[], []], "messages and input");
  const reason = "v2 streams carry the updates and custom channels; langgraph dev 0.16.7 on LangGraph 1.2.22 sends neither";
  if (differs(reason)) {
    assert.deepEqual(
      got.updates,
      [
        [[], { items: ["a"], count: 1 }],
        [[], { items: ["b"], count: 2 }],
      ],
      "updates",
    );
    assert.deepEqual(got.custom, [[[], { payload: { progress: "in node_a" } }]], "custom");
  } else {
    assert.deepEqual([got.updates, got.custom], [[], []], "updates and custom");
  }
}

async function v2SimpleOverSse() {
  checkSimple((await v2Run("simple", { items: [] }, "sse")).events);
}

async function v2SimpleOverWebSocket() {
  checkSimple((await v2Run("simple", { items: [] }, "websocket")).events);
}

async function v2ChatMessagesAsContentBlocks() {
  for (const transport of ["sse", "websocket"]) {
    const { events } = await v2Run("chat", { messages: [{ role: "user", content: "hi" }] }, transport);
    const messages = byChannel(events, ["messages"]).messages.map(([, data]) => data);
    const kinds = messages.map((m) => m.event);
    assert.deepEqual(kinds.slice(0, 2), ["message-start", "content-block-start"], `a message's start (${transport})`);
    assert.deepEqual(kinds.slice(-2), ["content-block-finish", "message-finish"], `a message's end (${transport})`);
    assert.deepEqual([...new Set(kinds.slice(2, -2))], ["content-block-delta"], `deltas between (${transport})`);
    assert.deepEqual(messages[0], { event: "message-start", role: "ai" }, "message-start");
    assert.deepEqual(
      messages[1],
      { event: "content-block-start", index: 0, content: { type: "text", text: "" } },
      "content-block-start",
    );
    const text = messages.slice(2, -2).map((m) => m.delta.text).join("");
    assert.equal(text, "Hello there friend", `the deltas' text (${transport})`);
    assert.deepEqual(
      messages.at(-2),
      { event: "content-block-finish", index: 0, content: { type: "text", text: "Hello there friend" } },
      "content-block-finish",
    );
    const values = byChannel(events, ["values"]).values;
    assert.deepEqual(
      values.at(-1),
      [[], { messages: [["human", "hi"], ["ai", "Hello there friend"]] }],
      `the last values (${transport})`,
    );
  }
}

/**
 * `tool_calls` over each transport: each call's `tools` events (a finished call, a failed one), the finished
 * one's tool message on `messages`; then `usage`'s `message-finish` with its token usage and metadata.
 */
async function v2ToolsAndUsage() {
  for (const transport of ["sse", "websocket"]) {
    const { events } = await v2Run("tool_calls", { messages: [{ role: "user", content: "go" }] }, transport);
    const calls = {};
    for (const e of events.filter((e) => e.method === "tools")) {
      assert.deepEqual(e.params.namespace, [], `tools of the root graph (${transport})`);
      (calls[e.params.data.tool_call_id] ??= []).push(e.params.data.event);
    }
    assert.deepEqual(
      calls,
      { call_add: ["tool-started", "tool-finished"], call_boom: ["tool-started", "tool-error"] },
      `each call's tools events (${transport})`,
    );
    const mirror = events.filter((e) => e.method === "messages");
    assert.deepEqual(
      mirror.map((e) => [e.params.namespace, e.params.data.event]),
      ["message-start", "content-block-start", "content-block-delta", "content-block-finish", "message-finish"].map(
        (event) => [["tools:call_add"], event],
      ),
      `the finished call's tool message (${transport})`,
    );
    const usage = await v2Run("usage", { messages: [{ role: "user", content: "hi" }] }, transport);
    const finish = usage.events.filter((e) => e.method === "messages").at(-1).params.data;
    assert.deepEqual(
      finish,
      {
        event: "message-finish",
        usage: { input_tokens: 3, output_tokens: 2, total_tokens: 5 },
        metadata: { finish_reason: "stop", model_name: "fake-1" },
      },
      `message-finish (${transport})`,
    );
  }
}

/**
 * `hitl` to its interrupt and on, answered with `input.respond`, over each transport adapter, the events read
 * from the adapter as they come. (The SDK's `ThreadStream` drops an event whose `event_id` it has seen, and
 * `langgraph dev` gives every event of one millisecond the same id, so through `ThreadStream` the reference
 * loses events at random.)
 */
async function v2HitlAnsweredWithInputRespond() {
  for (const kind of ["sse", "websocket"]) {
    const { thread_id: threadId } = await client.threads.create();
    const stream = await openRaw(kind, threadId, CHANNELS);
    try {
      const start = { assistant_id: "hitl", input: { items: [] } };
      answered(await stream.send({ id: 1, method: "run.start", params: start }), `run.start (${kind})`);
      const first = await untilAllCame(stream.events);
      assert.equal(first.at(-1).params.data.event, "interrupted", `the first run's end (${kind})`);
      const asked = first.filter((e) => e.method === "input.requested").map((e) => e.params.data);
      assert.deepEqual(asked.map((data) => data.payload), [{ question: "approve?" }], `the input requested (${kind})`);
      const respond = { interrupt_id: asked[0].interrupt_id, namespace: [], response: "yes" };
      answered(await stream.send({ id: 2, method: "input.respond", params: respond }), `input.respond (${kind})`);
      const completed = (e) => isEnd(e) && e.params.data.event === "completed";
      const second = await untilAllCame(stream.events, { after: first.at(-1).seq, done: completed });
      checkSeq([...first, ...second]);
      const values = byChannel(second, ["values"]).values;
      const last = [[], { items: ["answer:yes", "b"], count: 1 }];
      assert.deepEqual(values.at(-1), last, `the resumed run's values (${kind})`);
    } finally {
      await stream.close();
    }
  }
}

/** A command's answer: none (an SSE command answered 202 or 204) or a success. */
function answered(response, what) {
  if (response !== undefined) assert.equal(response?.type, "success", `${what}: ${JSON.stringify(response)}`);
}

/**
 * A thread's event stream through a transport adapter, subscribed to `channels` before anything runs:
 * `{events, send, close}`.
 */
async function openRaw(kind, threadId, channels) {
  if (kind === "sse") {
    const transport = new ProtocolSseTransportAdapter({ apiUrl: url, threadId, maxReconnectAttempts: 0 });
    const opened = transport.openEventStream({ channels });
    await opened.ready;
    const close = async () => {
      opened.close();
      await transport.close();
    };
    return { events: keepOpen(opened.events), send: (command) => transport.send(command), close };
  }
  const transport = new ProtocolWebSocketTransportAdapter({ apiUrl: url, threadId, maxReconnectAttempts: 0 });
  await transport.open();
  const subscribe = { id: 0, method: "subscription.subscribe", params: { channels } };
  answered(await transport.send(subscribe), "subscription.subscribe");
  return { events: keepOpen(transport.events()), send: (command) => transport.send(command), close: () => transport.close() };
}

const key = (e) => JSON.stringify([e.seq, e.event_id, e.method, e.params.namespace, e.params.data]);

async function v2SseReconnectReplaysAfterSince() {
  const { threadId, events } = await v2Run("simple", { items: [] }, "sse");
  const transport = new ProtocolSseTransportAdapter({ apiUrl: url, threadId, maxReconnectAttempts: 0 });
  try {
    const since = 2;
    const replay = transport.openEventStream({ channels: CHANNELS, since });
    await replay.ready;
    const replayed = await untilEnd(replay.events);
    replay.close();
    assert.deepEqual(replayed.map(key), events.filter((e) => e.seq > since).map(key), "the replay after since");
    const filtered = transport.openEventStream({ channels: ["values", "lifecycle"], since: 0 });
    const kept = await untilEnd(filtered.events);
    filtered.close();
    assert.deepEqual(
      kept.map(key),
      events.filter((e) => ["values", "lifecycle"].includes(e.method)).map(key),
      "a filtered replay keeps seq",
    );
  } finally {
    await transport.close();
  }
}

async function v2WebSocketReconnectReplaysAfterSince() {
  const { threadId, events } = await v2Run("simple", { items: [] }, "websocket");
  const transport = new ProtocolWebSocketTransportAdapter({ apiUrl: url, threadId, maxReconnectAttempts: 0 });
  try {
    await transport.open();
    // langgraph dev binds a socket to the thread's run once it has subscribed and seen the run's events;
    // until then it answers a reconnect with no_such_run.
    const subscribed = await transport.send({
      id: 1,
      method: "subscription.subscribe",
      params: { channels: ["lifecycle"] },
    });
    assert.equal(subscribed?.type, "success", `subscription.subscribe: ${JSON.stringify(subscribed)}`);
    const feed = keepOpen(transport.events());
    const lifecycle = await untilEnd(feed);
    assert.deepEqual(
      lifecycle.map((e) => e.params.data.event),
      ["running", "completed"],
      "the lifecycle events subscribed to",
    );
    const since = 2;
    const answer = await transport.send({
      id: 2,
      method: "subscription.reconnect",
      params: { channels: CHANNELS, since },
    });
    assert.equal(answer?.type, "success", `subscription.reconnect: ${JSON.stringify(answer)}`);
    const replayed = await untilEnd(feed);
    const expected = events.filter((e) => e.seq > since);
    assert.deepEqual(replayed.map(key), expected.map(key), "the replay after since");
    assert.equal(answer.result.replayed_events, expected.length, "replayed_events");
    const bad = await transport.send({ id: 3, method: "subscription.reconnect", params: { channels: ["values"] } });
    assert.deepEqual(
      [bad?.type, bad?.error, bad?.message],
      ["error", "invalid_argument", "subscription.reconnect requires a non-negative integer since."],
      "a reconnect without since",
    );
  } finally {
    await transport.close();
  }
}

const checks = [
  chatStreamsTokensAsMessageChunks,
  hitlPausesAndResumesWithACommand,
  v2SimpleOverSse,
  v2SimpleOverWebSocket,
  v2ChatMessagesAsContentBlocks,
  v2ToolsAndUsage,
  v2HitlAnsweredWithInputRespond,
  v2SseReconnectReplaysAfterSince,
  v2WebSocketReconnectReplaysAfterSince,
];
let failed = 0;
for (const check of checks) {
  try {
    await check();
    console.log(`ok      ${check.name}`);
  } catch (error) {
    failed += 1;
    console.log(`FAILED  ${check.name}: ${error?.stack ?? error}`);
  }
}
process.exit(failed ? 1 : 0);
