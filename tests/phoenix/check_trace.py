"""Checks the quickstart's traces in Arize Phoenix: graph runs, their nodes, model and tool calls.

Usage: check_trace.py PORT PROJECT. Reads the project's spans from Phoenix's REST API
(GET /v1/projects/{project}/spans) and checks the tree the quickstart agent leaves: two graph runs (the
first pauses for approval, the resumed one ends), node spans under them, model calls (kind LLM, with
model name and token counts) under `model` nodes, tool calls (kind TOOL) under `tools` nodes, and the
review interrupt on the `HumanInTheLoopMiddleware.after_model` node. Exits non-zero with what is missing.
"""

import json
import sys
import time
import urllib.error
import urllib.request


def spans(port, project):
    out, cursor = [], None
    while True:
        url = f"http://127.0.0.1:{port}/v1/projects/{project}/spans?limit=1000"
        if cursor:
            url += f"&cursor={cursor}"
        try:
            with urllib.request.urlopen(url, timeout=10) as reply:
                page = json.load(reply)
        except urllib.error.HTTPError as e:
            if e.code == 404:  # the project is made when its first spans arrive
                return []
            raise
        out.extend(page["data"])
        cursor = page.get("next_cursor")
        if not cursor:
            return out


def check(all_spans):
    by_id = {s["context"]["span_id"]: s for s in all_spans}
    problems = []

    def expect(cond, what):
        if not cond:
            problems.append(what)

    def parent(s):
        return by_id.get(s.get("parent_id") or "")

    def attr(s, key):
        return s.get("attributes", {}).get(key)

    graphs = [s for s in all_spans if s["name"] == "LangGraph" and s.get("parent_id") is None]
    expect(len(graphs) == 2, f"two graph runs (the paused one and the resumed one), found {len(graphs)}")
    for g in graphs:
        expect(g["span_kind"] == "AGENT", f"graph run span kind AGENT, found {g['span_kind']}")
        expect(attr(g, "thread_id") == "evening-1", f"graph run thread_id evening-1: {g['attributes']}")
        expect(bool(attr(g, "run_id")), "graph run has a run_id")
        expect(bool(attr(g, "checkpoint_id")), "graph run has the checkpoint it ended on")
    paused = [g for g in graphs if attr(g, "interrupted") is True]
    expect(len(paused) == 1, f"one graph run paused for approval, found {len(paused)}")

    nodes = [s for s in all_spans if parent(s) in graphs]
    names = sorted(s["name"] for s in nodes)
    expect(names.count("model") == 3, f"three model node runs, found {names}")
    expect(names.count("tools") == 2, f"two tools node runs, found {names}")
    for n in nodes:
        expect(n["span_kind"] == "CHAIN", f"node {n['name']} span kind CHAIN, found {n['span_kind']}")
        for key in ("step", "task_id", "checkpoint_id", "thread_id"):
            expect(attr(n, key) not in (None, ""), f"node {n['name']} has {key}: {n['attributes']}")
    review = "HumanInTheLoopMiddleware.after_model"
    approvals = [n for n in nodes if n["name"] == review and attr(n, "interrupted") is True]
    expect(len(approvals) == 1, f"the {review} node records the review interrupt")
    if approvals:
        expect(parent(approvals[0]) in paused, "the interrupt is in the paused run")

    models = [s for s in all_spans if s["span_kind"] == "LLM"]
    expect(len(models) == 3, f"three model calls, found {len(models)}")
    tokens = []
    for m in models:
        expect(parent(m) is not None and parent(m)["name"] == "model", "a model call is under a model node")
        expect(bool(attr(m, "llm.model_name")), f"model call has llm.model_name: {m['attributes']}")
        expect(attr(m, "gen_ai.operation.name") == "chat", "gen_ai.operation.name chat")
        tokens.append((attr(m, "llm.token_count.prompt"), attr(m, "llm.token_count.completion")))
    expect(sorted(tokens) == [(112, 9), (151, 14), (187, 26)], f"the script's token counts, found {tokens}")

    tools = [s for s in all_spans if s["span_kind"] == "TOOL"]
    expect(sorted(t["name"] for t in tools) == ["book_table", "get_weather"], f"two tool calls: {tools}")
    for t in tools:
        expect(parent(t) is not None and parent(t)["name"] == "tools", f"tool {t['name']} under a tools node")
        expect(attr(t, "tool.name") == t["name"], f"tool.name of {t['name']}")
    return problems


def main():
    port, project = sys.argv[1], sys.argv[2]
    # Spans arrive in batches: wait until both runs' root spans are there.
    deadline, found = time.time() + 30, []
    while time.time() < deadline:
        found = spans(port, project)
        if sum(1 for s in found if s["name"] == "LangGraph" and s.get("parent_id") is None) >= 2:
            break
        time.sleep(0.5)
    problems = check(found)
    if problems:
        print(f"phoenix: {len(found)} spans; the trace is not as expected:")
        for p in problems:
            print(f"  - {p}")
        sys.exit(1)
    print(f"phoenix: {len(found)} spans; graph runs, nodes, model and tool calls, tokens and the interrupt as expected")


if __name__ == "__main__":
    main()
