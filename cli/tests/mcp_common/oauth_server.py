"""An OAuth-protected MCP server for the `pi mcp login` tests, on the official Python SDK.

FastMCP with the SDK's own authorization server (`mcp.server.auth`): protected resource
metadata (RFC 9728), authorization server metadata (RFC 8414), dynamic client registration
(RFC 7591), the authorize endpoint (redirect URI and PKCE checks) and the token endpoint
(code verifier, refresh) are all SDK code, as is the bearer check on /mcp. Only the storage
below is ours: an in-memory provider whose "user" approves every authorization at once.

Usage: oauth_server.py <port file> <log file> <access token lifetime seconds>
Every registration and token grant is appended to the log file as one JSON line (without the
tokens). POST /test/expire-access-tokens forgets every access token (the next request gets
a 401, so the client has to refresh).
"""

import json
import secrets
import socket
import sys
import time
import os

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.fastmcp import FastMCP
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

port_file, log_file, access_lifetime = sys.argv[1], sys.argv[2], int(sys.argv[3])

sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.bind(("127.0.0.1", 0))
sock.listen(64)
port = sock.getsockname()[1]
base = f"http://127.0.0.1:{port}"


def log(event: dict) -> None:
    with open(log_file, "a") as f:
        f.write(json.dumps(event) + "\n")


class MemoryProvider:
    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str):
        return self.clients.get(client_id)

    async def register_client(self, info: OAuthClientInformationFull) -> None:
        self.clients[info.client_id] = info
        log({
            "event": "register",
            "client_name": info.client_name,
            "redirect_uris": [str(u) for u in info.redirect_uris or []],
            "token_endpoint_auth_method": info.token_endpoint_auth_method,
            "scope": info.scope,
        })

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        # The user approves at once.
        code = secrets.token_urlsafe(32)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        log({"event": "authorize", "scopes": params.scopes, "resource": params.resource})
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, code: str):
        return self.codes.get(code)

    async def exchange_authorization_code(self, client, code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(code.code, None)
        return self.issue(client.client_id, code.scopes, code.resource, "authorization_code")

    async def load_refresh_token(self, client, token: str):
        return self.refresh.get(token)

    async def exchange_refresh_token(self, client, token: RefreshToken, scopes: list[str]) -> OAuthToken:
        # Refresh tokens rotate: the old one is spent.
        self.refresh.pop(token.token, None)
        return self.issue(client.client_id, scopes or token.scopes, token.resource, "refresh_token")

    async def load_access_token(self, token: str):
        found = self.access.get(token)
        if found and found.expires_at is not None and found.expires_at < time.time():
            return None
        return found

    async def revoke_token(self, token) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def issue(self, client_id: str, scopes: list[str], resource, grant: str) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + access_lifetime,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        log({"event": "token", "grant": grant, "resource": resource, "scopes": scopes})
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=access_lifetime,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )


provider = MemoryProvider()
mcp = FastMCP(
    "protected",
    instructions="An OAuth-protected test server.",
    auth_server_provider=provider,
    auth=AuthSettings(
        issuer_url=base,
        resource_server_url=f"{base}/mcp",
        validate_token_resource=False,
        required_scopes=["mcp"],
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=["mcp"], default_scopes=["mcp"]
        ),
    ),
    log_level="WARNING",
)


@mcp.tool()
def whoami() -> str:
    """Say who is signed in."""
    return "signed-in user of the protected server"


@mcp.custom_route("/test/expire-access-tokens", methods=["POST"])
async def expire(request: Request) -> JSONResponse:
    count = len(provider.access)
    provider.access.clear()
    return JSONResponse({"expired": count})


with open(port_file + ".tmp", "w") as f:
    f.write(str(port))
os.rename(port_file + ".tmp", port_file)
uvicorn.Server(uvicorn.Config(mcp.streamable_http_app(), log_level="warning", lifespan="on")).run(sockets=[sock])
