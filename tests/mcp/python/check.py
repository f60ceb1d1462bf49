"""weft's MCP server (the `mcp_agent` example's `--serve-stdio` and `--serve-http`) checked with the
official Python MCP client: the tools listed with their schemas, a call answered, bad arguments and a
failing tool reported with isError, an unknown tool refused, a weft graph called as a tool.

Usage: python check.py EXAMPLE_BINARY   (run by `cargo xtask ci mcp`; prints one line per check)
"""

import asyncio
import socket
import subprocess
import sys
import time

from mcp import Client, MCPError, StdioServerParameters


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise AssertionError(what)
    print(f"  ok: {what}")


def text_of(result) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


async def check(client: Client, transport: str) -> None:
    print(f"{transport}:")
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    expect(sorted(tools) == ["add", "get_forecast", "shout"], f"tools listed: {sorted(tools)}")
    schema = tools["add"].input_schema
    expect(schema["type"] == "object" and sorted(schema["required"]) == ["a", "b"], "add's schema")
    expect(tools["get_forecast"].description.startswith("The weather forecast of a city"), "descriptions")

    result = await client.call_tool("add", {"a": 2, "b": 3})
    expect(not result.is_error and text_of(result) == "5.0", f"add answered: {text_of(result)!r}")

    result = await client.call_tool("get_forecast", {"city": "Lisbon"})
    expect(text_of(result) == "sunny, 24°C", f"the forecast: {text_of(result)!r}")

    result = await client.call_tool("add", {"a": "two"})
    expect(result.is_error and "invalid arguments for tool 'add'" in text_of(result), "bad arguments: isError")

    result = await client.call_tool("get_forecast", {"city": "Atlantis"})
    expect(result.is_error and "no forecast for Atlantis" in text_of(result), "a failing tool: isError")

    try:
        await client.call_tool("nope", {})
        expect(False, "an unknown tool is refused")
    except MCPError as err:
        expect("unknown tool 'nope'" in str(err), f"an unknown tool is refused: {err}")

    result = await client.call_tool("shout", {"messages": [{"role": "user", "content": "hello"}]})
    expect(text_of(result) == "HELLO", f"the graph answered: {text_of(result)!r}")
    messages = result.structured_content["messages"]
    expect([m["type"] for m in messages] == ["human", "ai"], "the graph's final state as structured content")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def main(binary: str) -> None:
    async with Client(StdioServerParameters(command=binary, args=["--serve-stdio"])) as client:
        await check(client, "stdio")

    port = free_port()
    server = subprocess.Popen([binary, "--serve-http", f"127.0.0.1:{port}"])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the weft MCP server did not start listening")
                time.sleep(0.05)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            await check(client, "streamable http")
    finally:
        server.kill()
        server.wait()
    print("python mcp client: all checks passed")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
