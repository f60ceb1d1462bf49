"""Bad input, table-driven: every case gets the reference server's status class (2xx, 4xx) from both
servers, and weft never answers 5xx or drops the connection. The expected classes are what `langgraph dev`
answers; the suite runs the same table against it, so a case whose class LangGraph changes shows here.

Each case is `(method, path, body, expected class)`: the path may name `{thread}` (a thread made for the
table), `{thread_upper}`, `{thread_urn}`, `{thread_braces}` (the same id written differently), `{run}` (a
finished run on it) and `{assistant}` (the `simple` graph's assistant). A body of `bytes` is sent as it is.
"""
from kit import check

SIMPLE = {"assistant_id": "simple", "input": {"items": []}}
HUGE = 1e300
# LangGraph answers 5xx or drops the connection (its own failure); weft answers 4xx.
BROKEN = "broken"


def run(**fields):
    return {**SIMPLE, **fields}


def run_cases(path, stream=False, stateful=False):
    """What every kind of run creation must refuse (or take) alike."""
    cases = [
        (run(durability="x"), 4),
        (run(durability=1), 4),
        (run(stream_mode="x"), 4),
        (run(stream_mode=["values", "x"]), 4),
        (run(stream_mode=3), 4),
        (run(after_seconds="x"), 4),
        (run(after_seconds=True), 4),
        (run(config="x"), 4),
        (run(config={"tags": "x"}), 4),
        (run(config={"recursion_limit": "x"}), 4),
        (run(config={"configurable": "x"}), 4),
        (run(context="x"), 4),
        (run(metadata=[]), 4),
        (run(webhook=3), 4),
        (run(feedback_keys="x"), 4),
        (run(feedback_keys=[1]), 4),
        (run(stream_subgraphs="x"), 4),
        (run(stream_resumable=1), 4),
        (run(checkpoint_during="x"), 4),
        (run(assistant_id=3), 4),
        (run(assistant_id=None), 4),
        (run(command="x"), 4),
        ({"input": {}}, 4),
        ([], 4),
        ("x", 4),
        (b"{not json", 4),
        (run(after_seconds=1e19), BROKEN),
        (run(after_seconds=HUGE), BROKEN),
        (run(after_seconds=2.6e11), BROKEN),
        (run(after_seconds=-1), 2),
    ]
    # Stateless runs have no multitask strategy nor breakpoints in LangGraph's schema: anything goes.
    breakpoints = 4 if stateful else 2
    cases += [
        (run(multitask_strategy="x"), breakpoints),
        (run(multitask_strategy=3), breakpoints),
        (run(interrupt_before="x"), breakpoints),
        (run(interrupt_after=[1]), breakpoints),
        (run(interrupt_after={"a": 1}), breakpoints),
    ]
    if stateful:
        cases += [
            (run(interrupt_before=3), 4),
            (run(if_not_exists="x"), 4),
            (run(if_not_exists=1), 4),
            (run(checkpoint="x"), 4),
        ]
    else:
        cases += [(run(on_completion="x"), 4), (run(on_completion=1), 4)]
    if stream:
        cases += [(run(on_disconnect="x"), 4), (run(on_disconnect=1), 4)]
    return [("POST", path, body, want) for body, want in cases]


NOT_UUID = "not-a-uuid"
ZERO = "00000000-0000-0000-0000-000000000000"

CASES = (
    run_cases("/runs/wait")
    + run_cases("/runs/stream", stream=True)
    + run_cases("/threads/{thread}/runs/wait", stateful=True)
    + run_cases("/threads/{thread}/runs/stream", stream=True, stateful=True)
    + [
        # the same id, written as Python's uuid.UUID reads it
        ("GET", "/threads/{thread_upper}", None, 2),
        ("GET", "/threads/{thread_urn}", None, 2),
        ("GET", "/threads/{thread_braces}", None, 2),
        ("GET", "/threads/{thread_upper}/state", None, 2),
        ("GET", "/threads/{thread_upper}/runs/{run}", None, 2),
        ("POST", "/threads/{thread_upper}/history", {}, 2),
        ("GET", f"/threads/{NOT_UUID}", None, 4),
        ("GET", f"/threads/{ZERO}", None, 4),
        ("PATCH", f"/threads/{NOT_UUID}", {}, 4),
        ("DELETE", f"/threads/{NOT_UUID}", None, 4),
        ("GET", f"/threads/{NOT_UUID}/state", None, 4),
        ("POST", f"/threads/{NOT_UUID}/history", {}, 4),
        ("POST", f"/threads/{NOT_UUID}/copy", None, 4),
        ("POST", f"/threads/{NOT_UUID}/runs/wait", SIMPLE, 4),
        ("GET", f"/threads/{NOT_UUID}/runs", None, 4),
        ("GET", f"/threads/{{thread}}/runs/{NOT_UUID}", None, 4),
        ("GET", f"/threads/{{thread}}/runs/{NOT_UUID}/join", None, 4),
        ("POST", f"/threads/{{thread}}/runs/{NOT_UUID}/cancel", None, 4),
        ("POST", f"/threads/{{thread}}/runs/{ZERO}/cancel", None, 4),
        ("DELETE", f"/threads/{{thread}}/runs/{NOT_UUID}", None, 4),
        ("POST", "/threads/{thread}/runs/{run}/cancel?action=x", None, 4),
        ("POST", "/threads/{thread}/runs/{run}/cancel?wait=x", None, 4),
        ("GET", "/threads/{thread}/runs?limit=-1", None, 2),
        ("GET", "/threads/{thread}/runs?limit=x", None, 4),
        ("GET", "/threads/{thread}/runs?offset=-1", None, 2),
        ("GET", "/threads/{thread}/runs?status=x", None, 2),
        # threads
        ("POST", "/threads", {"thread_id": 3}, 4),
        ("POST", "/threads", {"thread_id": NOT_UUID}, 4),
        ("POST", "/threads", {"metadata": "x"}, 4),
        ("POST", "/threads", {"if_exists": "x"}, 4),
        ("POST", "/threads", {"ttl": "x"}, 4),
        ("POST", "/threads", {"ttl": {"strategy": "x"}}, 4),
        ("POST", "/threads", {"supersteps": "x"}, 4),
        ("POST", "/threads", {"supersteps": [{}]}, 4),
        ("POST", "/threads", [], 4),
        ("POST", "/threads", b"nope", 4),
        ("POST", "/threads/search", {"limit": -1}, 4),
        ("POST", "/threads/search", {"limit": 0}, 4),
        ("POST", "/threads/search", {"limit": 1001}, 4),
        ("POST", "/threads/search", {"limit": "x"}, 4),
        ("POST", "/threads/search", {"limit": 1.5}, 4),
        ("POST", "/threads/search", {"offset": -1}, 4),
        ("POST", "/threads/search", {"status": "x"}, 4),
        ("POST", "/threads/search", {"sort_by": "x"}, 4),
        ("POST", "/threads/search", {"sort_order": "x"}, 4),
        ("POST", "/threads/search", {"select": ["x"]}, 4),
        ("POST", "/threads/search", {"select": "thread_id"}, 4),
        ("POST", "/threads/search", {"ids": "x"}, 4),
        ("POST", "/threads/search", {"ids": [1]}, 4),
        ("POST", "/threads/search", {"metadata": "x"}, 4),
        ("POST", "/threads/search", {"values": 3}, 4),
        ("POST", "/threads/search", {"limit": 1000, "offset": 0}, 2),
        ("POST", "/threads/count", {"status": "x"}, 4),
        ("POST", "/threads/count", {"metadata": 3}, 4),
        ("PATCH", "/threads/{thread}", {"metadata": "x"}, 4),
        ("POST", "/threads/{thread}/state", {"as_node": 3}, 4),
        ("POST", "/threads/{thread}/state", {"checkpoint": "x"}, 4),
        ("POST", "/threads/{thread}/state", {"checkpoint_id": 3}, 2),
        ("POST", "/threads/{thread}/history", {"limit": 0}, 4),
        ("POST", "/threads/{thread}/history", {"limit": -1}, 4),
        ("POST", "/threads/{thread}/history", {"limit": "x"}, 4),
        ("POST", "/threads/{thread}/history", {"limit": 1001}, 4),
        ("POST", "/threads/{thread}/history", {"metadata": "x"}, 4),
        ("POST", "/threads/{thread}/history", {"checkpoint": "x"}, 4),
        ("POST", "/threads/{thread}/state/checkpoint", {}, 4),
        ("POST", "/threads/{thread}/state/checkpoint", {"checkpoint": "x"}, 4),
        ("POST", "/threads/prune", {}, 4),
        ("POST", "/threads/prune", {"thread_ids": "x"}, 4),
        ("POST", "/threads/prune", {"thread_ids": [], "strategy": "x"}, 4),
        # stateless runs and the run listing
        ("POST", "/runs", run(on_completion="x"), 4),
        ("POST", "/runs", run(durability="x"), 4),
        ("POST", "/runs", run(after_seconds=1e19), BROKEN),
        ("POST", "/runs", run(after_seconds=1e10), 2),
        ("POST", "/runs/batch", "x", 4),
        ("POST", "/runs/batch", [run(durability="x")], 4),
        ("POST", "/runs/batch", [3], 4),
        ("POST", "/threads/{thread}/runs", run(multitask_strategy="x"), 4),
        ("POST", "/threads/{thread}/runs", run(if_not_exists="x"), 4),
        ("POST", "/threads/{thread}/runs", run(after_seconds=1e19), BROKEN),
        ("POST", "/threads/{thread}/runs", run(interrupt_before=3), 4),
        ("POST", "/runs/cancel", {}, 4),
        ("POST", "/runs/cancel", {"status": "x"}, 4),
        ("POST", "/runs/cancel", {"thread_id": NOT_UUID, "run_ids": [ZERO]}, 4),
        ("POST", "/runs/cancel", {"thread_id": "{thread}", "run_ids": "x"}, 4),
        ("POST", "/runs/cancel", {"thread_id": "{thread}", "run_ids": [NOT_UUID]}, 4),
        # assistants
        ("POST", "/assistants", {}, 4),
        ("POST", "/assistants", {"graph_id": 3}, 4),
        ("POST", "/assistants", {"graph_id": "nope"}, 4),
        ("POST", "/assistants", {"graph_id": "simple", "assistant_id": NOT_UUID}, 4),
        ("POST", "/assistants", {"graph_id": "simple", "if_exists": "x"}, 4),
        ("POST", "/assistants", {"graph_id": "simple", "config": "x"}, 4),
        ("POST", "/assistants", {"graph_id": "simple", "name": 3}, 4),
        ("POST", "/assistants", {"graph_id": "simple", "metadata": []}, 4),
        ("POST", "/assistants/search", {"limit": -1}, 4),
        ("POST", "/assistants/search", {"limit": 0}, 4),
        ("POST", "/assistants/search", {"limit": 1001}, 4),
        ("POST", "/assistants/search", {"limit": "x"}, 4),
        ("POST", "/assistants/search", {"offset": -1}, 4),
        ("POST", "/assistants/search", {"sort_by": "x"}, 4),
        ("POST", "/assistants/search", {"sort_order": "x"}, 4),
        ("POST", "/assistants/search", {"select": ["x"]}, 4),
        ("POST", "/assistants/search", {"metadata": "x"}, 4),
        ("POST", "/assistants/search", {"graph_id": 3}, 4),
        ("POST", "/assistants/count", {"metadata": "x"}, 4),
        ("POST", "/assistants/count", {"graph_id": 3}, 4),
        ("GET", f"/assistants/{NOT_UUID}", None, 4),
        ("GET", f"/assistants/{ZERO}", None, 4),
        ("GET", "/assistants/{assistant_upper}", None, 2),
        ("PATCH", "/assistants/{assistant}", {"graph_id": 3}, 4),
        ("PATCH", "/assistants/{assistant}", {"config": "x"}, 4),
        ("PATCH", f"/assistants/{NOT_UUID}", {}, 4),
        ("DELETE", f"/assistants/{NOT_UUID}", None, 4),
        ("POST", "/assistants/{assistant}/versions", {"limit": -1}, 4),
        ("POST", "/assistants/{assistant}/versions", {"limit": "x"}, 4),
        ("POST", "/assistants/{assistant}/versions", {"offset": -1}, 4),
        ("POST", "/assistants/{assistant}/latest", {}, 4),
        ("POST", "/assistants/{assistant}/latest", {"version": "x"}, 4),
        ("GET", "/assistants/{assistant}/graph?xray=x", None, 4),
        ("GET", f"/assistants/{NOT_UUID}/schemas", None, 4),
        # crons
        ("POST", "/runs/crons", {"assistant_id": "simple"}, BROKEN),
        ("POST", "/runs/crons", {"schedule": "* * * * *"}, BROKEN),
        ("POST", "/runs/crons", {"assistant_id": "simple", "schedule": 3}, 4),
        ("POST", "/runs/crons", {"assistant_id": "simple", "schedule": "* * * * *", "on_run_completed": "x"}, 4),
        ("POST", "/runs/crons", {"assistant_id": "simple", "schedule": "* * * * *", "stream_mode": "x"}, 4),
        ("POST", "/runs/crons", {"assistant_id": "simple", "schedule": "* * * * *", "durability": "x"}, 4),
        ("POST", "/runs/crons", {"assistant_id": "simple", "schedule": "* * * * *", "interrupt_before": 3}, 4),
        ("POST", "/runs/crons", {"assistant_id": "simple", "schedule": "* * * * *", "enabled": "x"}, 4),
        ("POST", "/threads/{thread}/runs/crons", {"assistant_id": "simple", "schedule": "* * * * *", "multitask_strategy": "x"}, 4),
        ("POST", "/runs/crons/search", {"limit": -1}, 4),
        ("POST", "/runs/crons/search", {"limit": 0}, 4),
        ("POST", "/runs/crons/search", {"offset": -1}, 4),
        ("POST", "/runs/crons/search", {"sort_by": "x"}, 4),
        ("POST", "/runs/crons/search", {"sort_order": "x"}, 4),
        ("POST", "/runs/crons/search", {"select": ["x"]}, 4),
        ("POST", "/runs/crons/search", {"enabled": "x"}, 4),
        ("POST", "/runs/crons/count", {"metadata": "x"}, 4),
        ("GET", f"/runs/crons/{NOT_UUID}", None, 4),
        ("DELETE", f"/runs/crons/{NOT_UUID}", None, 4),
        # store
        ("PUT", "/store/items", {"key": "k", "value": {}}, 4),
        ("PUT", "/store/items", {"namespace": ["a"], "value": {}}, 4),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k"}, 4),
        ("PUT", "/store/items", {"namespace": "a", "key": "k", "value": {}}, 4),
        ("PUT", "/store/items", {"namespace": ["a"], "key": 3, "value": {}}, 4),
        ("PUT", "/store/items", {"namespace": ["a"], "key": "k", "value": "x"}, 4),
        ("PUT", "/store/items", {"namespace": ["a.b"], "key": "k", "value": {}}, 4),
        ("PUT", "/store/items", {"namespace": [""], "key": "k", "value": {}}, 4),
        ("DELETE", "/store/items", {"namespace": ["a"]}, 4),
        ("DELETE", "/store/items", {"namespace": ["a"], "key": 3}, 4),
        ("GET", "/store/items", None, 4),
        ("POST", "/store/items/search", {"limit": "x"}, 4),
        ("POST", "/store/items/search", {"namespace_prefix": "x"}, 4),
        ("POST", "/store/items/search", {"filter": "x"}, 4),
        ("POST", "/store/items/search", {"query": 3}, 4),
        ("POST", "/store/items/search", {"offset": "x"}, 4),
        ("POST", "/store/namespaces", {"max_depth": "x"}, 4),
        ("POST", "/store/namespaces", {"prefix": "x"}, 4),
        ("POST", "/store/namespaces", {"limit": "x"}, 4),
        # routes and methods
        ("GET", "/nope", None, 4),
        ("DELETE", "/threads/search", None, 4),
        ("PUT", "/threads", {}, 4),
    ]
)


def fill(text, ids):
    for key, value in ids.items():
        text = text.replace("{" + key + "}", value)
    return text


def filled(body, ids):
    if isinstance(body, str):
        return fill(body, ids)
    if isinstance(body, dict):
        return {k: filled(v, ids) for k, v in body.items()}
    if isinstance(body, list):
        return [filled(v, ids) for v in body]
    return body


async def ask(http, method, path, body):
    # A connection per case: one case's failure cannot show as the next one's dropped connection.
    close = {"connection": "close"}
    if body is None:
        return await http.request(method, path, headers=close)
    if isinstance(body, bytes):
        return await http.request(method, path, content=body, headers={**close, "content-type": "application/json"})
    return await http.request(method, path, json=body, headers=close)


async def test_bad_input_gets_langgraphs_status_class(c, env):
    check(len(CASES) >= 150, f"{len(CASES)} cases")
    thread = (await c.threads.create())["thread_id"]
    finished = await c.runs.create(thread, "simple", input={"items": []})
    await c.runs.join(thread, finished["run_id"])
    assistant = (await c.assistants.search(graph_id="simple"))[0]["assistant_id"]
    ids = {
        "thread_upper": thread.upper(),
        "thread_urn": f"urn:uuid:{thread}",
        "thread_braces": "{" + thread + "}",
        "thread": thread,
        "run": finished["run_id"],
        "assistant_upper": assistant.upper(),
        "assistant": assistant,
    }
    wrong = []
    async with env.http() as http:
        for method, path, body, want in CASES:
            target = fill(path, ids)
            case = f"{method} {target} {str(body)[:120]}"
            try:
                r = await ask(http, method, target, filled(body, ids))
                got, text = r.status_code // 100, f"{r.status_code} {r.text[:200]}"
            except Exception as e:  # noqa: BLE001 - a dropped connection is an answer of its own
                got, text = None, f"no answer ({type(e).__name__})"
            if want == BROKEN and env.differs("LangGraph answers 5xx or drops the connection where weft answers 4xx (after_seconds past the year 9999, a cron without a schedule or an assistant)"):
                want = 4
            elif want == BROKEN:
                if got not in (5, None):
                    wrong.append(f"{case}: LangGraph no longer fails here: {text}")
                continue
            if got != want:
                wrong.append(f"{case}: {text} (want {want}xx)")
    check(not wrong, f"{len(wrong)} of {len(CASES)} cases:\n" + "\n".join(wrong))
