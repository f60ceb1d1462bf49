"""The store: put, get, search, namespaces, delete."""
from kit import check, eq


async def test_store_items(c, env):
    await c.store.put_item(["e2e", "users", "u1"], key="prefs", value={"theme": "dark", "n": 1})
    await c.store.put_item(["e2e", "users", "u2"], key="prefs", value={"theme": "light", "n": 2})
    item = await c.store.get_item(["e2e", "users", "u1"], key="prefs")
    eq((item["namespace"], item["key"], item["value"]), (["e2e", "users", "u1"], "prefs", {"theme": "dark", "n": 1}), "item")
    check(item["created_at"].endswith("+00:00") and item["updated_at"] >= item["created_at"], item)
    found = await c.store.search_items(["e2e", "users"], limit=10)
    eq(sorted(i["namespace"][-1] for i in found["items"]), ["u1", "u2"], "search by prefix")
    check(all(i["score"] is None for i in found["items"]), "no score without a query")
    dark = await c.store.search_items(["e2e"], filter={"theme": "dark"})
    eq([i["namespace"][-1] for i in dark["items"]], ["u1"], "search by filter")
    spaces = await c.store.list_namespaces(prefix=["e2e"])
    eq(sorted(spaces["namespaces"]), [["e2e", "users", "u1"], ["e2e", "users", "u2"]], "namespaces")
    short = await c.store.list_namespaces(prefix=["e2e"], max_depth=2)
    eq(short["namespaces"], [["e2e", "users"]], "namespaces cut to a depth")
    await c.store.put_item(["e2e", "users", "u1"], key="prefs", value={"theme": "blue"})
    eq((await c.store.get_item(["e2e", "users", "u1"], key="prefs"))["value"], {"theme": "blue"}, "replaced")
    await c.store.delete_item(["e2e", "users", "u1"], key="prefs")
    await c.store.delete_item(["e2e", "users", "u2"], key="prefs")
    eq(await c.store.get_item(["e2e", "users", "u1"], key="prefs"), None, "deleted")
    await c.store.delete_item(["e2e", "users", "u1"], key="prefs")
