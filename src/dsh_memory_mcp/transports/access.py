"""Who may use `serve`: token strength (`weak_token_lines`), the session owner (`OwnerBackend`),
401 answers that say where the token comes from (`RequireToken`, `oauth_routes`: bearer, no OAuth),
and the web page's one-time login codes (`LoginCodes`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import secrets
import string
import threading
from collections.abc import Callable
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from starlette.authentication import AuthCredentials
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from dsh_memory_mcp.texts import msg

#: The least a user-set token must carry to open a non-loopback bind.
MIN_TOKEN_BITS = 128
_MAKE_ONE = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'

_DIGITS, _LOWER, _UPPER = string.digits, string.ascii_lowercase, string.ascii_uppercase
#: Usual token alphabets, smallest first: a token is scored by the first one that holds it.
_ALPHABETS: tuple[frozenset[str], ...] = tuple(
    frozenset(chars)
    for chars in (
        _DIGITS,
        _DIGITS + "abcdef",
        _DIGITS + "ABCDEF",
        _LOWER,
        _UPPER,
        _LOWER + _DIGITS,
        _UPPER + _DIGITS,
        _LOWER + _UPPER,
        _LOWER + _UPPER + _DIGITS,
        _LOWER + _UPPER + _DIGITS + "-_",  # base64url
        _LOWER + _UPPER + _DIGITS + "+/=",  # base64
        string.digits + string.ascii_letters + string.punctuation + " ",  # printable ASCII
    )
)


def token_bits(token: str) -> float:
    """A conservative estimate of the bits in `token`: its length times log2 of the smallest usual
    alphabet that holds all its characters (at most 95). A token of fewer than 8 distinct characters
    counts only those: `aaaa…` or `1234…1234` are no secret however long."""
    chars = set(token)
    size = next((len(a) for a in _ALPHABETS if chars <= a), 95)
    if len(chars) < 8:
        return len(chars) * math.log2(max(size, 2))
    return len(token) * math.log2(size)


def weak_token_lines(token: str, host: str) -> list[str] | None:
    """Chinese refusal lines when a user-set `token` is too weak to open the bind `host`, else None."""
    bits = token_bits(token)
    if bits >= MIN_TOKEN_BITS:
        return None
    return [
        msg(
            "❌ 拒绝启动:要监听非回环地址 {host},但 DSH_MEMORY_TOKEN 太弱(约 {bits} 位,至少要 {min_bits} 位)",
            host=host,
            bits=int(bits),
            min_bits=MIN_TOKEN_BITS,
        ),
        msg("⇒ 原因:对网络开放时,令牌是唯一的门;短令牌或重复字符几分钟就能被猜中"),
        msg(
            "⇒ 修复:生成一个随机令牌 {command},设为 DSH_MEMORY_TOKEN 后重启;或去掉 --host 只在本机监听",
            command=_MAKE_ONE,
        ),
    ]


# ----------------------------------------------------------------------------------------------
# The session owner


def authenticated(scope: Scope) -> bool:
    """Whether the SDK's bearer backend (`OwnerBackend`) accepted the request's token."""
    return isinstance(scope.get("user"), AuthenticatedUser)


def peer_label(client: tuple[str, int] | None) -> str:
    """The part of a request's peer that identifies a client machine: ``loopback`` for any loopback
    address (127/8, ::1, ::ffff:127.x — one client may reach a dual-stack bind both ways), else the
    IP address as written; ``unknown`` when the server did not say."""
    if not client:
        return "unknown"
    try:
        ip = ipaddress.ip_address(client[0].split("%", 1)[0])
    except ValueError:
        return client[0]
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return "loopback" if ip.is_loopback else str(ip)


class OwnerBackend(BearerAuthBackend):
    """Bearer authentication whose principal is the credential (a digest of the token that matched,
    never the token) plus the peer: the SDK binds each session to the principal that opened it, so a
    session id is no use to another machine. On loopback every token holder is this machine's user;
    the random session id keeps local sessions apart."""

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, AuthenticatedUser] | None:
        found = await super().authenticate(conn)
        if found is None:
            return None
        credentials, user = found
        raw = (conn.headers.get("authorization") or "")[7:]
        digest = hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        client = conn.scope.get("client")
        owner = f"token:{digest}@{peer_label(tuple(client) if client else None)}"
        return credentials, AuthenticatedUser(user.access_token.model_copy(update={"subject": owner}))


# ----------------------------------------------------------------------------------------------
# One-time login codes

#: How long a login code waits to be used (ten minutes).
LOGIN_CODE_SECS = 600
_CODES_WAITING = 64


class LoginCodes:
    """One-time login codes for the web page (``/#code=…``), traded for a page credential: each works
    once, within `LOGIN_CODE_SECS`, in the process that minted it. Only digests are held, at most
    `_CODES_WAITING` (the oldest give way). `clock` is epoch milliseconds."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.lifetime_secs = LOGIN_CODE_SECS
        self._waiting: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def mint(self) -> str:
        code = secrets.token_urlsafe(18)
        with self._lock:
            now = self.clock()
            for key in [key for key, expires in self._waiting.items() if expires <= now]:
                del self._waiting[key]
            while len(self._waiting) >= _CODES_WAITING:
                del self._waiting[next(iter(self._waiting))]
            self._waiting[_digest(code)] = now + self.lifetime_secs * 1000
        return code

    def redeem(self, code: str) -> bool:
        """Whether `code` is a waiting, unexpired code; either way it is spent."""
        with self._lock:
            expires = self._waiting.pop(_digest(code), None)
        return expires is not None and expires > self.clock()


def _digest(code: str) -> bytes:
    return hashlib.sha256(code.encode("utf-8", "surrogateescape")).digest()


# ----------------------------------------------------------------------------------------------
# 401 and the OAuth probes

#: The challenge on every 401: bearer, and nothing that points at an OAuth authorization server
#: (no ``resource_metadata``). ASCII only: a header is no place for Chinese.
CHALLENGE = (
    'Bearer realm="dsh-memory-mcp", error="invalid_token", error_description="a bearer token is required '
    "(no OAuth): the token field of serve.json in the memory store, DSH_MEMORY_TOKEN, or the token "
    'that setup --url wrote into the host config"'
)
_CHALLENGE_NO_TOKEN = CHALLENGE.replace(' error="invalid_token",', "")

_WHERE = (
    "令牌来自:记忆库目录下 serve.json 的 token 字段(dsh-memory-mcp doctor 显示记忆库位置);"
    "或启动 serve 时设置的 DSH_MEMORY_TOKEN;"
    "或 dsh-memory-mcp setup <宿主> --url … 写进宿主配置的令牌(serve 换了令牌要重新运行 setup)。"
)
_NO_OAUTH = "dsh-memory-mcp serve 不使用 OAuth,不需要登录授权:请在请求头里带上 Authorization: Bearer <令牌>。"

#: OAuth discovery, registration and authorization URLs a probing client tries after a 401.
OAUTH_PATHS: tuple[str, ...] = (
    "/.well-known/oauth-protected-resource",
    "/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
    "/.well-known/openid-configuration/mcp",
    "/mcp/.well-known/openid-configuration",
    "/register",
    "/authorize",
    "/token",
)


#: The JSON-RPC error code of a 401 (implementation-defined server error range).
UNAUTHORIZED_CODE = -32001
_JSON = "application/json; charset=utf-8"


def unauthorized_body(presented: bool) -> dict[str, Any]:
    """The JSON of a 401: a JSON-RPC error (id null; SDK clients surface its message), and the same
    text as ``error_description`` for readers of OAuth-style error bodies."""
    text = ("令牌不对(serve 重启后换了令牌?)。" if presented else "缺少令牌。") + _NO_OAUTH + _WHERE
    data = {"error": "invalid_token", "oauth": False, "tokenFrom": ["serve.json", "DSH_MEMORY_TOKEN", "setup --url"]}
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": UNAUTHORIZED_CODE, "message": text, "data": data},
        "error_description": text,
    }


class RequireToken:
    """Like the SDK's `RequireAuthMiddleware` (no scopes here): a request without the token gets our
    401, whose text says whether a token was sent at all."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if authenticated(scope):
            await self.app(scope, receive, send)
            return
        presented = any(k == b"authorization" for k, _ in scope.get("headers", ()))
        response = JSONResponse(
            unauthorized_body(presented),
            status_code=401,
            media_type=_JSON,
            headers={"WWW-Authenticate": CHALLENGE if presented else _CHALLENGE_NO_TOKEN, "Cache-Control": "no-store"},
        )
        await response(scope, receive, send)


async def _no_oauth(request: Request) -> Response:
    body = {
        "error": "invalid_request",
        "error_description": "这里没有 OAuth(没有授权服务器,也不能注册客户端)。" + _NO_OAUTH + _WHERE,
    }
    return JSONResponse(body, status_code=404, media_type=_JSON)


def oauth_routes() -> list[BaseRoute]:
    """`OAUTH_PATHS` answered 404 with the explanation (any method: registration is a POST)."""
    methods = ["GET", "POST", "HEAD", "OPTIONS"]
    return [Route(path, _no_oauth, methods=methods) for path in OAUTH_PATHS]
