"""An MCP session authorized by OAuth with the official Python SDK (PyPI `mcp`),
as the Rust tests drive it: the SDK's `OAuthClientProvider` meets the 401,
discovers the server's metadata, registers (or uses a client ID metadata
document), and sends a person to the authorization page, played by
../browser/consent.mjs in Chromium. With the tokens it got, the session lists
the tools and calls the ones named, and prints what it saw as JSON:

    python3 oauth_client.py URL EMAIL PASSWORD [options] [TOOL ARGS_JSON]...

    --era legacy|2026          initialize (default) or server/discover, as client.py
    --scope "mcp:read"         scope of the first authorization request (default
                               "mcp:read mcp:write"; the SDK picks its own from the
                               WWW-Authenticate/PRM metadata, this replaces it)
    --workspace ID, --mode live|test, --unlocked, --deny    passed to consent.mjs
    --auth-method none|client_secret_post|client_secret_basic
                               token_endpoint_auth_method to register (default: omitted)
    --client-metadata-url URL  client_id is this URL (CIMD) instead of registering
    --redirect-port N          the loopback callback port (default: a free one)

Printed: tools, calls (as client.py), client_info (the registration the SDK
stored, without its secret), tokens, authorizations (the query of each
authorization URL the SDK built), consent_text, and oauth_requests (every
request outside the MCP endpoint: method, url, status, Authorization scheme
and body). A denied authorization prints authorization_error (the redirect's
parameters) instead of tools; the exit status is 0 when that was asked for
with --deny.
"""

import argparse
import asyncio
import json
import socket
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from mcp import ClientSession
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

CONSENT = Path(__file__).resolve().parent.parent / "browser" / "consent.mjs"


class MemoryStorage:
    """The SDK's TokenStorage, in memory."""

    tokens: OAuthToken | None = None
    client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


class Denied(Exception):
    pass


async def main(args: argparse.Namespace, seen: dict) -> None:
    # Hold the callback port. The browser's request to it is never answered:
    # consent.mjs reads the URL off the request and closes the browser.
    listener = socket.create_server(("127.0.0.1", args.redirect_port))
    redirect_uri = f"http://127.0.0.1:{listener.getsockname()[1]}/callback"
    storage = MemoryStorage()
    redirects: list[str] = []

    async def redirect_handler(url: str) -> None:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        if not seen["authorizations"]:
            query["scope"] = args.scope
            url = urlunsplit(parts._replace(query=urlencode(query)))
        seen["authorizations"].append(query)
        flags = ["--unlocked"] * args.unlocked + ["--deny"] * args.deny
        if args.workspace:
            flags += ["--workspace", args.workspace]
        if args.mode:
            flags += ["--mode", args.mode]
        node = await asyncio.create_subprocess_exec(
            "node", str(CONSENT), url, args.email, args.password, *flags,
            cwd=CONSENT.parent, stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await node.communicate()
        if node.returncode != 0:
            raise RuntimeError(f"consent.mjs failed with status {node.returncode} (see its stderr)")
        shown = json.loads(out.decode().strip().splitlines()[-1])
        seen["consent_text"] = shown["consent_text"]
        redirects.append(shown["redirect"])

    async def callback_handler() -> AuthorizationCodeResult:
        params = dict(parse_qsl(urlsplit(redirects.pop()).query))
        if "code" not in params:
            seen["authorization_error"] = params
            raise Denied(params.get("error"))
        return AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss"))

    metadata = OAuthClientMetadata(
        client_name="Parley tests (Python SDK)",
        redirect_uris=[redirect_uri],
        scope=args.scope,
        token_endpoint_auth_method=args.auth_method,
    )
    https_cimd = args.client_metadata_url and args.client_metadata_url.startswith("https:")
    oauth = OAuthClientProvider(
        args.url, metadata, storage, redirect_handler, callback_handler,
        client_metadata_url=args.client_metadata_url if https_cimd else None,
    )
    if args.client_metadata_url and not https_cimd:
        # The SDK only accepts an https client ID URL; a test serving the document
        # over plain loopback http sets it past that check.
        oauth.context.client_metadata_url = args.client_metadata_url

    async def trace(response) -> None:
        request = response.request
        if str(request.url).split("?")[0] == args.url:
            return
        body = request.content.decode()
        if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            body = {k: v for k, v in parse_qsl(body) if k != "client_secret"}
        elif body:
            body = json.loads(body)
        scheme = request.headers.get("authorization", "").split(" ")[0] or None
        seen["oauth_requests"].append(
            {"method": request.method, "url": str(request.url), "status": response.status_code,
             "auth": scheme, "body": body or None}
        )

    try:
        async with create_mcp_http_client(auth=oauth) as http:
            http.event_hooks["response"].append(trace)
            async with streamable_http_client(args.url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    if args.era == "legacy":
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
                    for name, arguments in args.calls:
                        result = await session.call_tool(name, arguments)
                        seen["calls"].append(
                            {"tool": name, "is_error": result.is_error, "structured": result.structured_content}
                        )
    finally:
        listener.close()
        if storage.client_info:
            seen["client_info"] = storage.client_info.model_dump(mode="json", exclude={"client_secret"}, exclude_none=True)
        if storage.tokens:
            seen["tokens"] = storage.tokens.model_dump(
                include={"access_token", "refresh_token", "scope", "expires_in"}
            )


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url")
    p.add_argument("email")
    p.add_argument("password")
    p.add_argument("calls", nargs="*", metavar="TOOL ARGS_JSON")
    p.add_argument("--era", choices=["legacy", "2026"], default="legacy")
    p.add_argument("--scope", default="mcp:read mcp:write")
    p.add_argument("--workspace")
    p.add_argument("--mode", choices=["live", "test"])
    p.add_argument("--unlocked", action="store_true")
    p.add_argument("--deny", action="store_true")
    p.add_argument("--auth-method", choices=["none", "client_secret_post", "client_secret_basic"])
    p.add_argument("--client-metadata-url")
    p.add_argument("--redirect-port", type=int, default=0)
    args = p.parse_intermixed_args()
    if len(args.calls) % 2:
        p.error("tools come in pairs: TOOL ARGS_JSON")
    args.calls = [(args.calls[i], json.loads(args.calls[i + 1])) for i in range(0, len(args.calls), 2)]
    return args


if __name__ == "__main__":
    args = parse_args()
    seen: dict = {"authorizations": [], "calls": [], "oauth_requests": []}
    try:
        asyncio.run(main(args, seen))
    except BaseException as e:  # the SDK's task groups wrap what the handlers raise
        if "authorization_error" not in seen:
            raise
        print(json.dumps(seen))
        sys.exit(0 if args.deny else f"the authorization was refused: {seen['authorization_error']}")
    print(json.dumps(seen))
    if args.deny:
        sys.exit("--deny was given, yet the session was authorized")
