"""Threads and their state: create, get, update, search, count, delete, copy, prune; state now and at a
checkpoint, history, update_state as a node, forks."""
import asyncio
import uuid

from kit import check, default_assistant_id, eq, status_of


async def test_thread_crud_search_count(c, env):
    t = await c.threads.create(metadata={"suite": "crud", "n": 1})
    tid = t["thread_id"]
    eq((t["status"], t["values"], t["metadata"]), ("idle", None, {"suite": "crud", "n": 1}), "created")
    eq((await c.threads.get(tid))["thread_id"], tid, "get")
    updated = await c.threads.update(tid, metadata={"n": 2})
    eq(updated["metadata"], {"suite": "crud", "n": 2}, "metadata is merged")
    found = await c.threads.search(metadata={"suite": "crud"})
    eq([x["thread_id"] for x in found], [tid], "search by metadata")
    eq(await c.threads.count(metadata={"suite": "crud"}), 1, "count by metadata")
    idle = await c.threads.search(metadata={"suite": "crud"}, status="idle")
    eq(len(idle), 1, "search by status")
    await c.threads.delete(tid)
    code, detail = await status_of(c.threads.get(tid))
    eq((code, detail), (404, f"Thread with ID {tid} not found"), "a deleted thread")


async def test_a_thread_keeps_state_across_runs(c, env):
    t = await c.threads.create(metadata={"suite": "state"})
    tid = t["thread_id"]
    await c.runs.wait(tid, "simple", input={"items": ["start"], "count": 0})
    out = await c.runs.wait(tid, "simple", input={"items": ["again"]})
    eq(out, {"items": ["start", "a", "b", "again", "a", "b"], "count": 4}, "second run's state")
    thread = await c.threads.get(tid)
    eq(thread["status"], "idle", "thread status")
    eq(thread["values"], out, "thread values")
    eq(thread["metadata"]["graph_id"], "simple", "graph id added to the metadata")
    eq(thread["interrupts"], {}, "no interrupts")

    state = await c.threads.get_state(tid)
    eq((state["values"], state["next"], state["tasks"]), (out, [], []), "state")
    eq(state["metadata"]["source"], "loop", "source")
    eq(state["metadata"]["step"], 6, "step")
    eq(state["checkpoint"]["thread_id"], tid, "checkpoint address")
    eq(state["checkpoint"]["checkpoint_ns"], "", "namespace")
    eq(state["checkpoint_id"], state["checkpoint"]["checkpoint_id"], "deprecated checkpoint_id")
    eq(state["parent_checkpoint_id"], state["parent_checkpoint"]["checkpoint_id"], "parent")

    history = await c.threads.get_history(tid, limit=3)
    eq(len(history), 3, "history limit")
    eq([h["metadata"]["step"] for h in history], [6, 5, 4], "newest first")
    eq(history[1]["next"], ["node_b"], "the checkpoint before node_b")
    task = history[1]["tasks"][0]
    eq((task["name"], task["path"], task["result"]), ("node_b", ["__pregel_pull", "node_b"], {"items": ["b"], "count": 4}), "task")
    older = await c.threads.get_state(tid, checkpoint_id=history[1]["checkpoint"]["checkpoint_id"])
    eq(older["values"], {"items": ["start", "a", "b", "again", "a"], "count": 3}, "state at a checkpoint")
    # `before` as a config, the form LangGraph's server reads.
    before = await c.threads.get_history(tid, limit=2, before={"configurable": history[0]["checkpoint"]})
    eq([h["metadata"]["step"] for h in before], [5, 4], "history before a checkpoint")
    inputs = await c.threads.get_history(tid, limit=10, metadata={"source": "input"})
    eq([h["metadata"]["step"] for h in inputs], [3, -1], "history filtered by metadata")


async def test_update_state_as_a_node_and_fork(c, env):
    tid = (await c.threads.create())["thread_id"]
    code, _ = await status_of(c.threads.update_state(tid, {"items": ["x"]}))
    eq(code, 400, "a thread without runs has no graph to update")
    await c.runs.wait(tid, "simple", input={"items": ["s"], "count": 0})
    saved = await c.threads.update_state(tid, {"items": ["manual"]}, as_node="node_b")
    eq(saved["checkpoint"]["thread_id"], tid, "update answer")
    eq(saved["checkpoint_id"], saved["checkpoint"]["checkpoint_id"], "update answer id")
    state = await c.threads.get_state(tid)
    eq(state["values"]["items"], ["s", "a", "b", "manual"], "updated values")
    eq((state["metadata"]["source"], state["next"]), ("update", []), "an update as the last node")

    # Fork: update an older checkpoint (before node_b ran), then run from the fork.
    history = await c.threads.get_history(tid, limit=10)
    before_b = next(h for h in history if h["next"] == ["node_b"])
    fork = await c.threads.update_state(
        tid, {"items": ["forked"]}, as_node="node_a", checkpoint_id=before_b["checkpoint"]["checkpoint_id"]
    )
    forked = await c.threads.get_state(tid)
    eq(forked["checkpoint_id"], fork["checkpoint_id"], "the fork is the latest")
    eq(forked["values"]["items"], ["s", "a", "forked"], "the fork's values")
    eq(forked["next"], ["node_b"], "the fork goes on to node_b")
    out = await c.runs.wait(tid, "simple", input=None)
    eq(out["items"], ["s", "a", "forked", "b"], "a run continues the fork")
    # Time travel: a run from an older checkpoint replays from there, on a new branch.
    replayed = await c.runs.wait(tid, "simple", input=None, checkpoint_id=before_b["checkpoint"]["checkpoint_id"])
    eq(replayed["items"], ["s", "a", "b"], "replayed from before node_b")
    eq((await c.threads.get_state(tid))["values"]["items"], ["s", "a", "b"], "the replay is the thread's latest")


async def test_copy_and_prune(c, env):
    tid = (await c.threads.create(metadata={"suite": "copy"}))["thread_id"]
    out = await c.runs.wait(tid, "simple", input={"items": ["c"]})
    copy = await c.threads.copy(tid)
    cid = copy["thread_id"]
    check(cid != tid, "a new thread")
    eq(copy["metadata"]["suite"], "copy", "metadata copied")
    eq((await c.threads.get_state(cid))["values"], out, "state copied")
    eq(len(await c.threads.get_history(cid, limit=20)), len(await c.threads.get_history(tid, limit=20)), "history copied")
    again = await c.runs.wait(cid, "simple", input={"items": ["more"]})
    eq(again["items"], ["c", "a", "b", "more", "a", "b"], "the copy goes on alone")
    eq((await c.threads.get_state(tid))["values"], out, "the original is untouched")
    async with env.http() as http:
        r = await http.post("/threads/prune", json={"thread_ids": [tid, cid]})
        eq((r.status_code, r.json()), (200, {"pruned_count": 2}), "prune")
    code, _ = await status_of(c.threads.get(cid))
    eq(code, 404, "a pruned thread")


async def test_thread_errors(c, env):
    code, detail = await status_of(c.threads.get("not-a-uuid"))
    eq((code, detail), (422, "Invalid thread ID: must be a UUID"), "a bad thread id")
    t = await c.threads.create()
    code, detail = await status_of(c.threads.create(thread_id=t["thread_id"]))
    eq(code, 409, "a thread id taken")
    same = await c.threads.create(thread_id=t["thread_id"], if_exists="do_nothing")
    eq(same["thread_id"], t["thread_id"], "if_exists do_nothing")
    state = await c.threads.get_state(t["thread_id"])
    eq((state["values"], state["next"], state["checkpoint"]), ({}, [], None), "a thread with no run")


async def test_search_sorted_and_paged(c, env):
    marker = f"mark-{id(c)}"
    first = (await c.threads.create(metadata={"sort": marker}))["thread_id"]
    second = (await c.threads.create(metadata={"sort": marker}))["thread_id"]
    newest = await c.threads.search(metadata={"sort": marker})
    eq([t["thread_id"] for t in newest], [second, first], "newest first by default")
    oldest = await c.threads.search(metadata={"sort": marker}, sort_by="created_at", sort_order="asc")
    eq([t["thread_id"] for t in oldest], [first, second], "sorted ascending")
    eq(len(await c.threads.search(metadata={"sort": marker}, limit=1, offset=1)), 1, "paged")


async def test_subgraph_state_nests_in_its_parent(c, env):
    tid = (await c.threads.create())["thread_id"]
    await c.runs.wait(tid, "nested", input={"items": ["x"]}, interrupt_after=["inner"])
    plain = await c.threads.get_state(tid)
    eq(plain["next"], ["after"], "paused after the subgraph node")
    history = await c.threads.get_history(tid, limit=10)
    inner_task = next(t for h in history for t in h["tasks"] if t["name"] == "inner")
    eq(inner_task["path"], ["__pregel_pull", "inner"], "the subgraph task")
    check(inner_task["checkpoint"] is not None and inner_task["checkpoint"]["checkpoint_ns"].startswith("inner:"), inner_task)


async def test_object_shapes(c, env):
    """The keys of the objects the SDK's types describe."""
    tid = (await c.threads.create(metadata={"shape": 1}))["thread_id"]
    parts = [p async for p in c.runs.stream(tid, "simple", input={"items": []})]
    run = await c.runs.get(tid, parts[0].data["run_id"])
    eq(set(run), {"run_id", "thread_id", "assistant_id", "metadata", "status", "kwargs", "multitask_strategy", "created_at", "updated_at", "langsmith_session_name"}, "run keys")
    eq(set(run["kwargs"]), {"input", "command", "config", "context", "stream_mode", "interrupt_before", "interrupt_after", "webhook", "feedback_keys", "temporary", "subgraphs", "resumable", "checkpoint_during", "durability"}, "run kwargs")
    eq({k: run["metadata"].get(k) for k in ["shape", "graph_id"]}, {"shape": 1, "graph_id": "simple"}, "run metadata")
    thread = await c.threads.get(tid)
    eq(set(thread), {"thread_id", "created_at", "updated_at", "state_updated_at", "metadata", "status", "config", "values", "error", "interrupts"}, "thread keys")
    state = await c.threads.get_state(tid)
    eq(set(state), {"values", "next", "tasks", "metadata", "created_at", "checkpoint", "parent_checkpoint", "interrupts", "checkpoint_id", "parent_checkpoint_id"}, "state keys")
    eq(set(state["checkpoint"]), {"thread_id", "checkpoint_ns", "checkpoint_id"}, "checkpoint address")
    history = await c.threads.get_history(tid, limit=2)
    eq(set(history[1]["tasks"][0]), {"id", "name", "path", "error", "interrupts", "checkpoint", "state", "result"}, "task keys")
    assistant = (await c.assistants.search(graph_id="simple"))[0]
    eq(set(assistant), {"assistant_id", "graph_id", "config", "context", "metadata", "name", "created_at", "updated_at", "version", "description"}, "assistant keys")
    await c.store.put_item(["shape"], key="k", value={"a": 1})
    eq(set(await c.store.get_item(["shape"], key="k")), {"namespace", "key", "value", "created_at", "updated_at"}, "item keys")
    eq(set((await c.store.search_items(["shape"]))["items"][0]), {"namespace", "key", "value", "created_at", "updated_at", "score"}, "search item keys")


async def test_searches_select_fields(c, env):
    tag = str(uuid.uuid4())
    thread = await c.threads.create(metadata={"tag": tag})
    tid = thread["thread_id"]
    await c.runs.wait(tid, "simple", input={"items": []})
    found = await c.threads.search(metadata={"tag": tag}, select=["thread_id", "status", "values"])
    eq(found, [{"thread_id": tid, "status": "idle", "values": {"items": ["a", "b"], "count": 2}}], "threads selected")
    assistants = await c.assistants.search(graph_id="simple", select=["assistant_id", "graph_id"])
    eq(assistants, [{"assistant_id": default_assistant_id("simple"), "graph_id": "simple"}], "assistants selected")
    runs = await c.runs.list(tid, select=["run_id", "status"])
    eq([sorted(r) for r in runs], [["run_id", "status"]], "runs selected")
    eq(runs[0]["status"], "success", "the run's status")
    for what, call, first in [
        ("threads", c.threads.search(select=["nope"]), '"thread_id", "created_at" or 7'),
        ("assistants", c.assistants.search(select=["nope"]), '"assistant_id", "graph_id" or 8'),
    ]:
        code, detail = await status_of(call)
        eq((code, detail), (422, f'"nope" is not one of {first} other candidates\n\nFailed validating "enum" in '
                                 'schema["properties"]["select"]["items"]\n\nOn instance["select"][0]:\n    "nope"'),
           f"{what}: a field that is not there")
    code, detail = await status_of(c.runs.list(tid, select=["nope"]))
    # The allowed fields follow, in Python's set order (which varies from run to run).
    eq(code, 422, "runs: a field that is not there")
    check(detail.startswith("Invalid select columns: ['nope']. Expected: {'") and "'langsmith_session_name'" in detail, detail)


async def test_thread_made_with_supersteps(c, env):
    steps = [
        {"updates": [{"values": {"items": ["a"], "count": 1}, "as_node": "node_a"}]},
        {"updates": [{"values": {"items": ["x"]}, "as_node": "node_a"}, {"values": {"items": ["y"]}, "as_node": "node_a"}]},
    ]
    thread = await c.threads.create(graph_id="simple", metadata={"suite": "supersteps"}, supersteps=steps)
    tid = thread["thread_id"]
    eq((thread["status"], thread["values"], thread["metadata"]),
       ("interrupted", {"items": ["a", "x", "y"], "count": 1}, {"suite": "supersteps", "graph_id": "simple"}),
       "the thread made: node_b is next")
    state = await c.threads.get_state(tid)
    eq((state["values"], state["next"]), ({"items": ["a", "x", "y"], "count": 1}, ["node_b"]), "its state")
    history = await c.threads.get_history(tid)
    eq([(h["metadata"]["source"], h["metadata"]["step"], h["next"]) for h in history],
       [("update", 1, ["node_b"]), ("update", 0, ["node_b"])], "one checkpoint per superstep")
    out = await c.runs.wait(tid, "simple", input=None)
    eq(out["items"], ["a", "x", "y", "b"], "a run goes on from there")
    last = await c.threads.create(graph_id="simple", supersteps=[
        {"updates": [{"values": {"items": ["a"]}, "as_node": "node_a"}]},
        {"updates": [{"values": {"items": ["b"]}, "as_node": "node_b"}]},
    ])
    eq((last["status"], last["values"]["items"]), ("idle", ["a", "b"]), "a thread whose supersteps reach the end")

    # Without a graph the thread is made, and the answer (a 201) says why its state is not.
    made = await c.threads.create(supersteps=[{"updates": [{"values": {"items": ["z"]}, "as_node": "node_a"}]}])
    check(made["detail"].endswith("there were problems updating the state: Thread '" + made["detail"].split()[1]
                                  + "' has no assigned graph ID. This usually occurs when no runs have been made on "
                                  "this particular thread. This operation requires a graph ID. Please ensure a run has "
                                  "been made for the thread or manually update the thread metadata (by setting the "
                                  "'graph_id' field) before running this operation."), made)
    eq((await c.threads.get(made["detail"].split()[1]))["values"], None, "the thread without a graph, made")
    code, _ = await status_of(c.threads.create(graph_id="simple", supersteps=[
        {"updates": [{"values": {"items": ["z"]}, "as_node": "nowhere"}]}]))
    eq(code, 400, "a node that does not exist")
