"""An MCP session with the official Python SDK (PyPI `mcp`), as the Rust
tests drive it: connects to URL with an API key, in one protocol era,
lists the tools and calls the ones named, and prints what it saw as JSON.

    python3 client.py URL KEY legacy|2026 [TOOL ARGS_JSON]...

`legacy` does the 2025 `initialize` handshake; `2026` discovers the server
(`server/discover`) and calls without one. The tools list no output
schema, so the Rust tests check the structured content it prints.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def main(url: str, key: str, era: str, calls: list[tuple[str, dict]]) -> dict:
    seen: dict = {"calls": []}
    async with create_mcp_http_client(headers={"X-API-Key": key}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                if era == "legacy":
                    init = await session.initialize()
                    seen["protocol_version"] = init.protocol_version
                    seen["server"] = init.server_info.name
                else:
                    found = await session.discover()
                    session.adopt(found)
                    seen["supported_versions"] = list(found.supported_versions)
                tools = await session.list_tools()
                seen["tools"] = {
                    t.name: {"read_only": t.annotations.read_only_hint if t.annotations else None}
                    for t in tools.tools
                }
                for name, arguments in calls:
                    result = await session.call_tool(name, arguments)
                    seen["calls"].append(
                        {"tool": name, "is_error": result.is_error, "structured": result.structured_content}
                    )
    return seen


if __name__ == "__main__":
    url, key, era, rest = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    calls = [(rest[i], json.loads(rest[i + 1])) for i in range(0, len(rest), 2)]
    print(json.dumps(asyncio.run(main(url, key, era, calls))))
