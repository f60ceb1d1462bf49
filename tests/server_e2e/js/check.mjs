// The JS SDK check: LangGraph's JavaScript client (`@langchain/langgraph-sdk`, pinned in package.json)
// drives a server of the suite's graphs from node, no browser:
//
//     node check.mjs URL
//
// It streams the `chat` graph in `messages-tuple` mode (the tokens must arrive as message chunks), then
// runs `hitl` to its interrupt and resumes it with a `Command`, checking the thread's final state. Any
// mismatch throws: the exit status is non-zero and the failed check is printed.
import assert from "node:assert/strict";

import { Client } from "@langchain/langgraph-sdk";

const url = process.argv[2];
if (!url) {
  console.error("usage: node check.mjs URL");
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

const checks = [chatStreamsTokensAsMessageChunks, hitlPausesAndResumesWithACommand];
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
