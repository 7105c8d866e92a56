"""An MCP client that signs in by OAuth, given only skilld's `/mcp` URL and
its own client id and secret: the official Python SDK (`mcp`) with its
client-credentials provider. The SDK finds skilld's protected-resource
metadata from the 401's `WWW-Authenticate`, the authorization server from
that, gets a token from it (client-credentials grant, with the resource
indicator), then lists the tools and calls `hello`.

    python oauth_client.py MCP_URL CLIENT_ID CLIENT_SECRET ISSUER

Run by tests/it/oauth.rs against a real oidc-provider (tests/oidc). Exits
non-zero, with the reason, on the first thing that is wrong.
"""

import asyncio
import sys

from mcp import Client
from mcp.client.auth import TokenStorage
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


class MemoryStorage(TokenStorage):
    """Tokens and client information, kept for this run only."""

    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def check(cond, what, *context):
    if not cond:
        raise SystemExit("FAILED: " + what + "".join("\n  " + repr(c)[:2000] for c in context))


async def main(url, client_id, client_secret, issuer):
    storage = MemoryStorage()
    auth = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=storage,
        client_id=client_id,
        client_secret=client_secret,
        issuer=issuer,
    )
    transport = streamable_http_client(url, http_client=create_mcp_http_client(auth=auth))
    async with Client(transport) as client:
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        check("hello" in names, "the tools list has hello", names)
        result = await client.call_tool("hello", {"who": "sdk"})
        text = "".join(block.text for block in result.content if block.type == "text")
        check(not result.is_error and "hello sdk" in text, "hello ran", result)
    check(storage.tokens is not None, "the SDK got a token")
    scopes = (storage.tokens.scope or "").split()
    check("skilld:invoke" in scopes, "the token has skilld:invoke", storage.tokens.scope)
    print(f"signed in by OAuth as {client_id}; tools {names}; scopes {scopes}")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
