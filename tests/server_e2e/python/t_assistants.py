"""Assistants: the ones made for each graph, create, get, patch, versions, latest, delete, search, count,
graph, schemas, subgraphs."""
from kit import check, default_assistant_id, eq, status_of


async def test_each_graph_has_an_assistant_with_langgraphs_id(c, env):
    found = await c.assistants.search(graph_id="simple")
    eq(len(found), 1, "assistants of graph simple")
    a = found[0]
    eq(a["assistant_id"], default_assistant_id("simple"), "id")
    eq(a["assistant_id"], "5e0f6b46-d00f-5af4-87dc-ea2105ff526d", "id")
    eq((a["name"], a["graph_id"], a["version"]), ("simple", "simple", 1), "name, graph, version")
    eq(a["metadata"], {"created_by": "system"}, "metadata")
    eq((a["config"], a["context"]), ({}, {}), "config and context")
    check(await c.assistants.count() >= 6, "every graph has its assistant")
    got = await c.assistants.get(default_assistant_id("hitl"))
    eq(got["graph_id"], "hitl", "graph of the hitl assistant")


async def test_create_patch_versions_latest_delete(c, env):
    a = await c.assistants.create(
        graph_id="simple", config={"configurable": {"k": 1}}, name="my-simple", metadata={"owner": "e2e"}
    )
    aid = a["assistant_id"]
    eq(a["context"], {"k": 1}, "configurable is copied into context")
    eq((a["name"], a["version"], a["metadata"]), ("my-simple", 1, {"owner": "e2e"}), "created")
    eq((await c.assistants.get(aid))["name"], "my-simple", "get")
    patched = await c.assistants.update(aid, metadata={"stage": "two"}, name="renamed")
    eq(patched["version"], 2, "a patch makes version 2")
    eq(patched["metadata"], {"owner": "e2e", "stage": "two"}, "metadata is merged")
    eq(patched["config"], {"configurable": {"k": 1}}, "config kept")
    versions = await c.assistants.get_versions(aid)
    eq([v["version"] for v in versions], [2, 1], "versions newest first")
    eq(versions[1]["name"], "my-simple", "the first version's name")
    back = await c.assistants.set_latest(aid, 1)
    eq((back["version"], back["name"]), (1, "my-simple"), "version 1 made the latest")
    found = await c.assistants.search(metadata={"owner": "e2e"})
    check(any(x["assistant_id"] == aid for x in found), "found by metadata")
    await c.assistants.delete(aid)
    code, _ = await status_of(c.assistants.get(aid))
    eq(code, 404, "a deleted assistant")


async def test_an_assistant_runs_with_its_configuration(c, env):
    a = await c.assistants.create(graph_id="simple", name="configured")
    out = await c.runs.wait(None, a["assistant_id"], input={"items": ["x"]})
    eq(out, {"items": ["x", "a", "b"], "count": 2}, "a run of a created assistant")
    await c.assistants.delete(a["assistant_id"])


async def test_graph_drawing_and_schemas(c, env):
    g = await c.assistants.get_graph(default_assistant_id("simple"))
    eq([n["id"] for n in g["nodes"]], ["__start__", "node_a", "node_b", "__end__"], "nodes")
    eq(g["nodes"][1], {"id": "node_a", "type": "runnable", "data": {"name": "node_a"}}, "a node")
    eq(g["nodes"][-1], {"id": "__end__"}, "the end node")
    edges = [(e["source"], e["target"]) for e in g["edges"]]
    eq(edges, [("__start__", "node_a"), ("node_a", "node_b"), ("node_b", "__end__")], "edges")
    s = await c.assistants.get_schemas(default_assistant_id("simple"))
    eq(s["graph_id"], "simple", "schemas' graph")
    eq(s["state_schema"]["type"], "object", "state schema")
    eq(sorted(s["state_schema"]["properties"]), ["count", "items"], "state schema properties")
    if env.differs("weft's JSON states carry no types: their schema has one untyped property per channel"):
        eq(s["state_schema"]["properties"]["items"], {"title": "Items", "default": None}, "untyped property")
    else:
        eq(s["state_schema"]["properties"]["items"]["type"], "array", "typed property")
    subgraphs = await c.assistants.get_subgraphs(default_assistant_id("nested"))
    eq(list(subgraphs), ["inner"], "the nested graph's subgraph")
    eq(sorted(subgraphs["inner"]["state_schema"]["properties"]), ["count", "items"], "subgraph state")
    eq(await c.assistants.get_subgraphs(default_assistant_id("simple")), {}, "no subgraphs")


async def test_assistant_errors(c, env):
    code, detail = await status_of(c.assistants.create(graph_id="nope"))
    eq(code, 404, "unknown graph")
    check(detail.startswith("Graph 'nope' not found. Expected one of: ["), detail)
    code, detail = await status_of(c.assistants.get("not-a-uuid"))
    eq((code, detail), (422, "Invalid assistant ID: must be a UUID"), "a bad id")
    code, _ = await status_of(c.assistants.get("00000000-0000-0000-0000-000000000000"))
    eq(code, 404, "an unknown assistant")
    a = await c.assistants.create(graph_id="simple", assistant_id="11111111-2222-4333-8444-555555555555")
    code, detail = await status_of(c.assistants.create(graph_id="simple", assistant_id=a["assistant_id"]))
    eq(code, 409, "an id taken")
    same = await c.assistants.create(graph_id="simple", assistant_id=a["assistant_id"], if_exists="do_nothing")
    eq(same["assistant_id"], a["assistant_id"], "if_exists do_nothing returns the existing one")
    await c.assistants.delete(a["assistant_id"])
