"""The web page at ``/`` of `serve`: the page, its static files and a small JSON API (its login and
checks: docs/design.md, Web page). Writes go through the tools' own service functions, reads through
`service.browse`; a tool error comes back as its ``{ok, code, message}``. Every answer carries
`SECURITY_HEADERS`; no answer carries a stack trace.
"""

from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import hmac
import inspect
import json
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from itertools import islice
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from dsh_memory_mcp import __version__
from dsh_memory_mcp.errors import DshMemoryError
from dsh_memory_mcp.service import browse, duplicates, health, history, transfer, trash
from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.render import ToolResult
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.service.validate import ALL_SCOPES
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.scopes import GLOBAL
from dsh_memory_mcp.texts import Language, english, language_of, localized, msg, pair
from dsh_memory_mcp.transports import access, import_stream, listener
from dsh_memory_mcp.transports.import_stream import RequestRefused

if TYPE_CHECKING:
    from dsh_memory_mcp.transports.http import PageChecks


log = logging.getLogger("dsh_memory_mcp.transports.web")

#: The client name the page's calls carry (`CallContext.client`).
WEB_CLIENT = "web"
#: The header the page's script sends its credential in (never a cookie: docs/design.md, Web page).
CREDENTIAL_HEADER = "X-DSH-Page-Credential"
#: The former login cookie's name (plus the port): cleared when seen, never accepted.
LEGACY_COOKIE_PREFIX = "dsh_memory_session_"
#: Largest JSON body of an ordinary API call, and of an import (the file travels inside the JSON,
#: base64: a 16 MB file is ~21 MB of body).
JSON_MAX_BYTES = 1 << 20
IMPORT_MAX_BYTES = 32 << 20

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}

_STATIC_TYPES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "i18n.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
_PAGE_LIMIT_MAX = 500
_FORGET_MAX = 500
_RECOVER_SHOWN = 200
_GROUPS_SHOWN = 200
_IMPORT_LISTED = 50  # memories an import preview lists (then "and N more")
_LINE_CHARS = 120
_BUSY_CODES = {"LOCK_TIMEOUT", "BUSY", "DEADLINE"}
_SERVER_CODES = {"STORE_ERROR", "TOOL_ERROR", "INTERNAL_ERROR", "LOCK_RECURSION"}
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_CREDENTIAL_CONTEXT = b"dsh-memory-mcp page credential v1"
_UNAVAILABLE = re.compile(r"^\s*不可用\((.*)\)(?:,已退化为纯词法检索)?(.*)$", re.S)

_LOGIN_NEEDED = msg("需要登录:运行 `dsh-memory-mcp web` 取一个登录链接打开页面,或带上 Bearer 令牌。")
_CODE_SPENT = msg(
    "这个登录链接已失效:每个链接只能用一次,10 分钟内有效,serve 重启后也作废。"
    "运行 `dsh-memory-mcp web` 取一个新链接,或在下面粘贴令牌登录。"
)


#: The language of the request being answered (its ``Accept-Language``), for every `texts.Text` in it.
_LANGUAGE: contextvars.ContextVar[Language] = contextvars.ContextVar("dsh_memory_web_language", default="zh")


def _json(data: Mapping[str, Any], status: int = 200) -> Response:
    body = json.dumps(localized(data, _LANGUAGE.get()), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(body, status_code=status, media_type="application/json", headers={"Cache-Control": "no-store"})


def _error(status: int, code: str, message: str) -> Response:
    return _json({"ok": False, "code": code, "message": message}, status)


def _status_of(code: str) -> int:
    """409: the record changed meanwhile (an edit or keep); 503: busy; 500: ours; 400: the caller's."""
    if code == "GONE":
        return 409
    return 503 if code in _BUSY_CODES else 500 if code in _SERVER_CODES else 400


def _tool_error(result: ToolResult) -> Response:
    code = str(result.structured.get("code", "TOOL_ERROR"))
    return _json(result.structured, _status_of(code))


def _login_needed() -> Response:
    response = _error(401, "UNAUTHORIZED", _LOGIN_NEEDED)
    response.headers["WWW-Authenticate"] = "Bearer"
    return response


def _load_static() -> dict[str, bytes]:
    folder = resources.files("dsh_memory_mcp.transports").joinpath("web_static")
    return {name: folder.joinpath(name).read_bytes() for name in _STATIC_TYPES}


def _int_param(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = params.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise RequestRefused(
            400, "PARAM_INVALID", msg("{name} 必须是整数(收到 {raw!r})。", name=name, raw=raw[:40])
        ) from None
    if not low <= value <= high:
        raise RequestRefused(
            400,
            "PARAM_INVALID",
            msg("{name} 必须在 {low}~{high} 之间(收到 {value})。", name=name, low=low, high=high, value=value),
        )
    return value


class _Credentials:
    """Page credentials ``<expiry ms>.<nonce>.<mac>``, keyed by the token and a per-process secret (a
    credential dies with its `serve`). With each comes its ``check`` secret: before sending the
    credential the page asks `/api/instance` to prove (`proof`) it is that process, so a program that
    took the port after serve stopped never receives it."""

    def __init__(self, token: bytes, lifetime_ms: int, clock: Callable[[], int]) -> None:
        self._key = hmac.new(token, _CREDENTIAL_CONTEXT + secrets.token_bytes(32), hashlib.sha256).digest()
        self.lifetime_ms = lifetime_ms
        self.clock = clock

    def _mac(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).hexdigest()

    def check_secret(self, payload: str) -> str:
        """The secret the page verifies this process with, for the credential ``payload.<mac>``."""
        return self._mac(f"check.{payload}")

    def proof(self, payload: str, nonce: str) -> str | None:
        """This process's answer to the page's nonce, or None for a malformed question."""
        expires, dot, rest = payload.partition(".")
        if not (dot and expires.isdigit() and len(expires) < 20 and 0 < len(rest) <= 64 and payload.isascii()):
            return None
        if not (8 <= len(nonce) <= 128 and nonce.isascii()):
            return None
        key = self.check_secret(payload).encode("ascii")
        return hmac.new(key, nonce.encode("ascii"), hashlib.sha256).hexdigest()

    def issue(self) -> tuple[str, int]:
        expires = self.clock() + self.lifetime_ms
        payload = f"{expires}.{secrets.token_urlsafe(12)}"
        return f"{payload}.{self._mac(payload)}", expires

    def valid(self, value: str) -> bool:
        expires, dot, rest = value.partition(".")
        nonce, dot2, mac = rest.partition(".")
        if not (dot and dot2 and expires.isdigit() and nonce and len(expires) < 20 and value.isascii()):
            return False
        if not hmac.compare_digest(mac.encode("ascii"), self._mac(f"{expires}.{nonce}").encode("ascii")):
            return False
        return int(expires) > self.clock()


class _Web:
    """The endpoints, sharing one service, one token and `serve`'s checks."""

    def __init__(self, service: MemoryService, token: str, checks: PageChecks) -> None:
        if not token:
            raise ValueError("web_routes needs a non-empty token")
        self.service = service
        self.checks = checks
        self.token = token.encode("utf-8", "surrogateescape")
        self.credentials = _Credentials(self.token, int(checks.settings.web_login_secs * 1000), service.clock)
        self.static = _load_static()

    # -- plumbing ----------------------------------------------------------------------------

    def authorised(self, request: Request) -> bool:
        """The SDK's bearer check passed, or the request carries a valid page credential."""
        if access.authenticated(request.scope):
            return True
        credential = request.headers.get(CREDENTIAL_HEADER)
        if credential is not None and self.credentials.valid(credential.strip()):
            listener.vouch(request.scope)  # a page's connection is a token holder's under a flood too
            return True
        return False

    @staticmethod
    def refuse_cross_site(request: Request) -> None:
        """A 403 refusal unless a state-changing request is JSON and comes from this page's own origin."""
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        fetch_site = request.headers.get("sec-fetch-site")
        if (origin is not None and origin != own) or fetch_site not in (None, "same-origin", "none"):
            raise RequestRefused(403, "CROSS_SITE", msg("拒绝跨站请求:只接受来自本页面的修改。"))
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            raise RequestRefused(403, "CONTENT_TYPE", msg("修改类请求必须是 Content-Type: application/json。"))

    @staticmethod
    async def json_body(request: Request) -> dict[str, Any]:
        chunks = [chunk async for chunk in import_stream.body_chunks(request, JSON_MAX_BYTES)]
        try:
            value = json.loads(b"".join(chunks))
        except (ValueError, RecursionError):
            raise RequestRefused(400, "BAD_JSON", msg("请求体不是合法的 JSON。")) from None
        if not isinstance(value, dict):
            raise RequestRefused(400, "BAD_JSON", msg("请求体必须是 JSON 对象。"))
        return value

    def guarded(self, endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """The SDK's Host/Origin refusal (421/403, as on `/mcp`) in the page's coded form, then `endpoint`;
        every answer with `SECURITY_HEADERS`."""

        async def checked(request: Request) -> Response:
            language = _LANGUAGE.set(language_of(request.headers.get("accept-language")))
            try:
                refusal = await self.checks.security.validate_request(request)  # Host 421 / Origin 403
                if refusal is None:
                    response = await endpoint(request)
                elif refusal.status_code == 421:
                    response = _error(421, "HOST_REFUSED", msg("拒绝:Host 不在允许列表里(防 DNS 重绑定)。"))
                else:
                    response = _error(
                        refusal.status_code, "ORIGIN_REFUSED", msg("拒绝:请求来自不被允许的网页(Origin)。")
                    )
                for name, value in SECURITY_HEADERS.items():
                    response.headers.setdefault(name, value)
                return response
            finally:
                _LANGUAGE.reset(language)

        return checked

    def api(
        self,
        handler: Callable[..., Any],
        *,
        writes: bool = False,
        bearer_only: bool = False,
        public: bool = False,
    ) -> Callable[[Request], Awaitable[Response]]:
        """Auth (and for writes the cross-site checks) and coded errors. A sync `handler`
        runs in a worker thread, given the request (and a write's JSON body)."""

        async def endpoint(request: Request) -> Response:
            allowed = public or (access.authenticated(request.scope) if bearer_only else self.authorised(request))
            if not allowed:
                return _login_needed()
            try:
                if writes:
                    self.refuse_cross_site(request)
                if inspect.iscoroutinefunction(handler):
                    response: Response = await handler(request)
                else:
                    args = (request, await self.json_body(request)) if writes else (request,)
                    response = await run_in_threadpool(handler, *args)
                return response
            except RequestRefused as exc:
                return _error(exc.status, exc.code, exc.message)
            except DshMemoryError as exc:
                return _error(_status_of(exc.code), exc.code, exc.message)
            except Exception:
                log.exception("web API %s %s failed", request.method, request.url.path)
                return _error(500, "INTERNAL_ERROR", msg("服务内部错误,记忆库未被改动。详情见 serve 的 stderr。"))

        return endpoint

    def context(self) -> CallContext:
        """A person at the page: the server's project, client ``web``, and searches that are no recall."""
        return dataclasses.replace(self.service.default_context.with_client(WEB_CLIENT), record_access=False)

    def scopes_of(self, scope: str | None) -> list[str]:
        """Scope keys for a page's scope choice, by the tools' own rules; ``all`` → every scope on disk.

        :raises DshMemoryError: the tools' codes for a scope they would refuse.
        """
        if scope is None or scope.strip().lower() in ("", *ALL_SCOPES):
            return self.service.store.discover_scopes()
        return self.service.read_scopes(scope, None, self.context())

    # -- the page ----------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        response = Response(self.static["index.html"], media_type=_STATIC_TYPES["index.html"])
        response.headers["Cache-Control"] = "no-store"
        for name in request.cookies:
            if name.startswith(LEGACY_COOKIE_PREFIX):
                response.delete_cookie(name, path="/")
        return response

    async def static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.static or name == "index.html":
            return Response("not found", status_code=404, media_type="text/plain; charset=utf-8")
        response = Response(self.static[name], media_type=_STATIC_TYPES[name])
        response.headers["Cache-Control"] = "no-cache"
        return response

    async def favicon(self, request: Request) -> Response:
        return Response(status_code=204)

    # -- login -------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        """A page credential (kept in the page's own origin's storage) for the bearer token, pasted on
        the login page, or for a one-time login code from a login link (spent at once)."""
        if not access.authenticated(request.scope):
            code = (await self.json_body(request)).get("code")
            if not isinstance(code, str) or not code:
                return _login_needed()
            if not self.checks.login_codes.redeem(code):
                return _error(401, "LOGIN_CODE_INVALID", _CODE_SPENT)
        credential, expires = self.credentials.issue()
        return _json(
            {
                "ok": True,
                "credential": credential,
                "check": self.credentials.check_secret(credential.rpartition(".")[0]),
                "header": CREDENTIAL_HEADER,
                "expiresAt": expires,
                "lifetimeSecs": self.credentials.lifetime_ms // 1000,
            }
        )

    async def login_code(self, request: Request) -> Response:
        """A new one-time login code, for the token holder (``dsh-memory-mcp web`` prints its link)."""
        codes = self.checks.login_codes
        return _json({"ok": True, "code": codes.mint(), "lifetimeSecs": codes.lifetime_secs})

    async def instance(self, request: Request) -> Response:
        """No login needed: proves to a page holding a credential (its ``c``, without the MAC) that this
        is the process that issued it, by answering its nonce ``n`` (`_Credentials.proof`)."""
        proof = self.credentials.proof(request.query_params.get("c", ""), request.query_params.get("n", ""))
        if proof is None:
            return _error(400, "BAD_QUESTION", msg("c 与 n 不合规。"))
        return _json({"ok": True, "proof": proof})

    # -- reads -------------------------------------------------------------------------------

    def session(self, request: Request) -> Response:
        return _json(
            {
                "ok": True,
                "version": health.store_version(self.service.store),
                "storeDir": self.service.store.root,
                "project": self.service.current_project,
                "serverVersion": __version__,
            }
        )

    def version(self, request: Request) -> Response:
        """What the page polls: the store's version and the vector state (which changes without the store)."""
        version = health.store_version(self.service.store)
        return _json({"ok": True, "version": version, "vectors": self.vector_state()})

    def overview(self, request: Request) -> Response:
        store = self.service.store
        rows, totals = health.store_stats(store, store.discover_scopes(), self.service.clock())
        return _json(
            {
                "ok": True,
                "storeDir": store.root,
                "project": self.service.current_project,
                "scopes": rows,
                "totals": totals,
                "aliases": store.read_aliases(),
                "unattributedFiles": transfer.unattributed_files(store),
                "vectors": self.vector_state(),
                "vanished": self.vanished(),
                "importMaxBytes": IMPORT_MAX_BYTES // 2,
                "contentMax": self.service.settings.max_content,
                "trashDays": self.service.settings.trash_days,
            }
        )

    def vanished(self) -> int | None:
        """Records this store acknowledged that another writer's overwrite lost (`recover` puts them back)."""
        try:
            return sum(len(entries) for entries in self.service.store.missing().values())
        except Exception:  # a health number must not break the page
            log.warning("web: counting vanished records failed", exc_info=True)
            return None

    def vector_state(self) -> dict[str, Any]:
        """One consistent answer: off (no backend configured: no model named), ready (model,
        coverage), or down (a configured backend that does not answer, and why)."""
        settings = self.service.settings.vector
        channel = self.service.vectors
        configured = settings.usable or (settings.enabled and (settings.model or settings.endpoint) is not None)
        if channel is None or not configured:
            return {"state": "off", "reason": settings.unavailable_reason}
        stats = channel.stats()
        status = str(stats.get("status") or "")
        common = {"model": stats.get("model"), "dims": stats.get("dims")}
        if stats.get("ready"):
            return {"state": "ready", **common, "backfillPending": stats.get("pending")}
        reason = status.split(":", 1)[1] if status.startswith("向量检索:") else status
        # "不可用(<why>),已退化为纯词法检索" → "<why>": the page says the rest in its own words.
        unavailable = _UNAVAILABLE.match(reason)
        if unavailable:
            reason = unavailable.group(1) + unavailable.group(2)
        # In English: the backend's own reason when it has one, else the whole status line.
        problem = stats.get("problem")
        return {"state": "down", **common, "reason": pair(reason, english(problem or stats.get("status") or ""))}

    def filters(self, params: Mapping[str, str], tz: int) -> browse.Filters:
        def text(name: str) -> str | None:
            value = (params.get(name) or "").strip()
            return value or None

        kind = text("kind")
        since = until = None
        if text("from"):
            since = browse.day_bounds(str(text("from")), tz)[0]
        if text("to"):
            until = browse.day_bounds(str(text("to")), tz)[1]
        client = text("client")
        return browse.Filters(
            kind=kind.lower() if kind else None,
            tag=text("tag"),
            client=client.casefold() if client else None,
            since=since,
            until=until,
        )

    def memories(self, request: Request) -> Response:
        """The list (or, with ``q``, a search) with filters, a sort and paging."""
        return self.listing(request.query_params)

    def search(self, request: Request) -> Response:
        """``/api/search?q=…&topK=…``: the listing with a query (``topK`` = the page size)."""
        params = dict(request.query_params)
        if not (params.get("q") or "").strip():
            return _error(400, "QUERY_EMPTY", msg("检索词不能为空。"))
        if params.get("topK") and not params.get("limit"):
            params["limit"] = params["topK"]
        return self.listing(params)

    def listing(self, params: Mapping[str, str]) -> Response:
        tz = _int_param(params, "tz", 0, -browse.TZ_MINUTES_MAX, browse.TZ_MINUTES_MAX)
        offset = _int_param(params, "offset", 0, 0, 10_000_000)
        limit = _int_param(params, "limit", 100, 1, _PAGE_LIMIT_MAX)
        query = (params.get("q") or "").strip()
        filters = self.filters(params, tz)
        scopes = self.scopes_of(params.get("scope"))
        if query:
            sort = (params.get("sort") or "relevance").strip()
            page = browse.search(self.service, query, scopes, filters, sort=sort, offset=offset, limit=limit)
            terms = browse.highlight_terms(query)
        else:
            sort = (params.get("sort") or "updated").strip()
            now = self.service.clock()
            page = browse.browse(self.service.store, scopes, filters, sort=sort, offset=offset, limit=limit, now=now)
            terms = []
        records = [browse.card(r, score=page.scores.get(r.id)) for r in page.records]
        return _json(
            {
                "ok": True,
                "query": query,
                "sort": sort,
                "scopes": scopes,
                "offset": offset,
                "count": len(records),
                "total": page.total,
                "terms": terms,
                "records": records,
            }
        )

    def activity(self, request: Request) -> Response:
        """Per scope of the page's choice: memories saved per day by client (last 30 days), kinds;
        and the facets (tags, clients, kinds) of its live records for the filter menus."""
        params = request.query_params
        tz = _int_param(params, "tz", 0, -browse.TZ_MINUTES_MAX, browse.TZ_MINUTES_MAX)
        scopes = self.scopes_of(params.get("scope"))
        now = self.service.clock()
        return _json(
            {
                "ok": True,
                "tz": tz,
                "activity": browse.activity(self.service.store, scopes, now=now, tz_minutes=tz),
                "facets": browse.facets(browse.live_records(self.service.store, scopes, now)),
            }
        )

    def found(self, request: Request) -> Record:
        """The memory the path's ``ident`` names (`history.find_one`); else a 404 refusal."""
        ident = request.path_params["ident"]
        record = history.find_one(self.service, ident)
        if record is None:
            raise RequestRefused(
                404, "NOT_FOUND", msg("没有找到 id 为 {ident} 的记忆(可能已被删除)。", ident=ident[:40])
            )
        return record

    def memory(self, request: Request) -> Response:
        return _json({"ok": True, "record": _whole_card(self.found(request))})

    async def export(self, request: Request) -> Response:
        scope = request.query_params.get("scope")
        resolved = await run_in_threadpool(self.scopes_of, scope)
        label = "all" if scope is None or scope.strip().lower() in ("", *ALL_SCOPES) else scope
        slug = _SAFE_NAME.sub("-", label).strip("-")[:40] or "scope"
        filename = f"dsh-memory-{slug}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
        parts = transfer.export_scopes(self.service.store, resolved)
        # One body with its Content-Length: the page shows the download's percent.
        body = await run_in_threadpool(lambda: b"".join(p.text.encode("utf-8", "surrogateescape") for p in parts))
        return Response(
            body,
            media_type="application/x-ndjson; charset=utf-8",
            headers={
                "Content-Disposition": f"attachment; filename=\"{filename}\"; filename*=UTF-8''{quote(filename)}",
                "Cache-Control": "no-store",
            },
        )

    # -- writes ------------------------------------------------------------------------------

    def create(self, request: Request, body: dict[str, Any]) -> Response:
        """A new memory from the page's form: ``memory_save`` (same checks and codes), client ``web``."""
        args = {key: body.get(key) for key in ("content", "kind", "tags", "scope", "importance")}
        result = self.service.call("memory_save", args, self.context())
        if result.is_error:
            return _tool_error(result)
        out = dict(result.structured)
        record = history.find_one(self.service, str(out["id"]))
        if record is not None:
            out["record"] = browse.card(record)
        short = str(out["id"])[:8]
        if out.get("deduped"):
            out["message"] = msg("内容与已有记忆 {short} 相同,没有重复保存", short=short)
        else:
            out["message"] = msg("已保存新记忆 {short}(作用域 {scope})", short=short, scope=out["scope"])
        return _json(out)

    def edit(self, request: Request, body: dict[str, Any]) -> Response:
        """A new version of a memory (`history.revise`): the fields given, in ``scope`` when given (a move)."""
        ident = request.path_params["ident"]
        changes = {key: body[key] for key in history.EDITABLE if key in body}
        scope = body.get("scope")
        target = scope if isinstance(scope, str) and scope.strip() else None
        found, result = history.revise(self.service, ident, changes, self.context(), scope=target)
        if result.is_error:
            return _tool_error(result)
        assert found is not None
        out = result.structured
        ids = {"new_id": str(out["id"])[:8], "short_id": found.short_id}
        if out.get("superseded") is None:
            message = msg("已保存 {new_id},但旧记录 {short_id} 已不在(可能刚被别处修改)", **ids)
        elif out.get("deduped"):
            message = msg("内容与已有记忆 {new_id} 相同:旧记录 {short_id} 已并入它,不再出现在检索中", **ids)
        elif out.get("scope") != found.scope:
            message = msg(
                "已移到 {scope}:新记录 {new_id} 取代了 {short_id}(创建时间、使用次数和来源随之保留)",
                scope=str(out.get("scope")),
                **ids,
            )
        else:
            message = msg("已保存:新记录 {new_id} 取代了旧记录 {short_id}(旧记录仍留在磁盘上)", **ids)
        return _json({**out, "old": found.id, "message": message})

    def versions(self, request: Request) -> Response:
        """A memory's versions, newest first (`history.versions`): each as a card with its whole content."""
        record = self.found(request)
        return _json({"ok": True, "versions": [_whole_card(v) for v in history.versions(self.service, record)]})

    def duplicates(self, request: Request) -> Response:
        """The near-duplicate groups (`duplicates.groups`) of each scope of the page's choice, each
        with why it was grouped; ``byMeaning`` says whether vectors took part."""
        scope = request.query_params.get("scope")
        rows = [
            {"scope": key, "why": group.why, "records": [browse.card(r) for r in group.records]}
            for key in self.scopes_of(scope)
            for group in duplicates.groups(self.service, key)
        ]
        vectors = self.service.vectors
        by_meaning = vectors is not None and vectors.ready
        return _json({"ok": True, "total": len(rows), "groups": rows[:_GROUPS_SHOWN], "byMeaning": by_meaning})

    def keep(self, request: Request, body: dict[str, Any]) -> Response:
        """ "Keep this one, replace the others" (`duplicates.keep`): ``keep`` an id, ``replace`` ids."""
        kept, replace = body.get("keep"), body.get("replace")
        if not isinstance(kept, str) or not isinstance(replace, list) or not all(isinstance(i, str) for i in replace):
            return _error(400, "IDS_EMPTY", msg("keep 必须是一个 id,replace 必须是 id 数组。"))
        _found, result = duplicates.keep(self.service, kept, replace, self.context())
        if result.is_error:
            return _tool_error(result)
        return _json({**result.structured, "message": result.text})

    @staticmethod
    def ids_of(body: dict[str, Any]) -> list[str]:
        """A write's ``ids`` (non-empty, at most `_FORGET_MAX`), stripped and unique; else a 400 refusal."""
        ids = body.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
            raise RequestRefused(400, "IDS_EMPTY", msg("ids 必须是非空的 id 数组。"))
        if len(ids) > _FORGET_MAX:
            raise RequestRefused(400, "IDS_TOO_MANY", msg("一次最多删除 {limit} 条。", limit=_FORGET_MAX))
        return list(dict.fromkeys(i.strip() for i in ids))

    def forget(self, request: Request, body: dict[str, Any]) -> Response:
        """A person's delete: to the trash (`trash`), or for good with ``purge: true``."""
        ids = self.ids_of(body)
        ctx = self.context() if body.get("purge") is True else self.context().for_person(WEB_CLIENT)
        deleted: list[str] = []
        missing: list[str] = []
        trash_days = 0
        for ident in ids:
            result = self.service.call("memory_forget", {"id": ident}, ctx)
            if result.is_error:
                if deleted:  # report what already happened along with the failure
                    return _json({**result.structured, "deleted": len(deleted), "ids": deleted}, 500)
                return _tool_error(result)
            gone = [str(i) for i in result.structured["ids"]]
            trash_days = result.structured.get("trashDays", trash_days)
            if gone:
                deleted.extend(gone)
            else:
                missing.append(ident)
        message = msg("已删除 {count} 条记忆", count=len(deleted))
        if missing:
            message = msg("已删除 {count} 条记忆;{gone} 条已不存在", count=len(deleted), gone=len(missing))
        out = {"ok": True, "deleted": len(deleted), "ids": deleted, "missing": missing, "message": message}
        return _json({**out, "trashDays": trash_days} if trash_days else out)

    def trash_list(self, request: Request) -> Response:
        """The trash, newest first: each deleted memory by its first line, scope and when it was deleted."""
        rows = [
            {
                "id": e.record.id,
                "shortId": e.record.short_id,
                "scope": e.scope,
                "kind": e.record.kind,
                "line": _first_line(e.record.content),
                "createdAt": e.record.created_at,
                "trashedAt": e.trashed_at,
            }
            for e in trash.entries(self.service)
        ]
        return _json({"ok": True, "days": self.service.settings.trash_days, "total": len(rows), "entries": rows})

    def trash_restore(self, request: Request, body: dict[str, Any]) -> Response:
        """Bring trashed memories back (`trash.restore`: history kept; a text live again dedupes)."""
        done, missing = trash.restore(self.service, self.ids_of(body), self.context().for_person(WEB_CLIENT))
        return _json({"ok": True, "restored": [r.row() for r in done], "missing": missing})

    def trash_purge(self, request: Request, body: dict[str, Any]) -> Response:
        """Delete trashed memories for good: ``ids``, or ``all: true`` (empty the trash)."""
        gone, missing = trash.purge(self.service, None if body.get("all") is True else self.ids_of(body))
        return _json({"ok": True, "purged": len(gone), "ids": [e.record.id for e in gone], "missing": missing})

    def recover(self, request: Request, body: dict[str, Any]) -> Response:
        """The store's own `recover` (the `recover` command's): ``dryRun`` (default) previews;
        ``scope`` limits it to one scope (the page recovers scope by scope, to show its progress)."""
        dry_run = body.get("dryRun", True) is not False
        scope = body.get("scope")
        if scope is not None and (not isinstance(scope, str) or not scope):
            return _error(400, "SCOPE_INVALID", msg("scope 必须是一个作用域名。"))
        store = self.service.store
        found = store.recover(scope, dry_run=dry_run)
        rows = browse.recover_entries(found)
        total = len(rows)
        # What recover leaves alone because it cannot rule out a removal (the command lists them too).
        refused = [
            {"scope": name, "id": d.entry.id, "shortId": d.entry.id[:8], "reason": d.reason}
            for name, doubts in store.doubtful(scope).items()
            for d in doubts
        ]
        return _json(
            {
                "ok": True,
                "dryRun": dry_run,
                "total": total,
                "byScope": {name: len(entries) for name, entries in found.items()},
                "records": rows[:_RECOVER_SHOWN],
                "refused": refused[:_RECOVER_SHOWN],
                "refusedTotal": len(refused),
                "message": (
                    msg("没有需要恢复的记忆")
                    if not total
                    else msg("将恢复 {total} 条被覆盖的记忆", total=total)
                    if dry_run
                    else msg("已恢复 {total} 条被覆盖的记忆", total=total)
                ),
            }
        )

    async def import_(self, request: Request) -> Response:
        # The file is planned line by line as the body arrives, one import at a time (a memory bound).
        async with import_stream.one_import_at_a_time():
            upload = await import_stream.read_import(request, IMPORT_MAX_BYTES, self.service.settings)
            return await run_in_threadpool(self._import_planned, upload)

    def _import_planned(self, upload: import_stream.ImportUpload) -> Response:
        if upload.plan is None:
            return _error(400, "IMPORT_EMPTY", msg("需要导入文件的内容:data(base64 编码的文件字节)或 text(文本)。"))
        plan = upload.plan
        dry_run = upload.dry_run
        scope = upload.scope if isinstance(upload.scope, str) and upload.scope.strip() else GLOBAL
        target = GLOBAL
        if plan.graph:
            if scope.strip().lower() in ALL_SCOPES:
                return _error(400, "SCOPE_NOT_WRITABLE", msg("all 是只读范围:请选一个作用域。"))
            resolved = self.scopes_of(scope)
            if len(resolved) != 1:
                return _error(400, "SCOPE_NOT_WRITABLE", msg("导入只能写入一个作用域。"))
            target = resolved[0]
        outcome = transfer.apply_import(self.service.store, plan, target, now=self.service.clock(), dry_run=dry_run)
        refused = msg(",拒绝 {refused} 条", refused=outcome.refused) if outcome.refused else ""
        counts = {"added": outcome.added, "existing": outcome.existing, "bad": outcome.bad, "refused": refused}
        if dry_run:
            message = msg("预览(尚未写入):将新增 {added} 条,已存在 {existing} 条,跳过 {bad} 行{refused}", **counts)
        else:
            message = msg("导入完成:已新增 {added} 条,已存在 {existing} 条,跳过 {bad} 行{refused}", **counts)
        return _json(
            {
                "ok": True,
                "dryRun": dry_run,
                "added": outcome.added,
                "existing": outcome.existing,
                "bad": outcome.bad,
                "byScope": [{"scope": s, "added": a, "existing": e} for s, (a, e) in outcome.by_scope.items()],
                "problems": [p.text() for p in plan.problems[:50]],
                "refused": outcome.refused,
                "refusals": [
                    {"line": r.lineno, "code": r.code, "message": r.message, "text": r.text()}
                    for r in plan.refused[:50]
                ],
                "message": message,
                **(self.import_listing(plan, target) if dry_run else {}),
            }
        )

    @staticmethod
    def import_listing(plan: transfer.ImportPlan, target: str) -> dict[str, Any]:
        """What a preview lists: the file's memories (the first `_IMPORT_LISTED`, scope by scope in file
        order), each by its first line, scope and kind; knowledge-graph memories go to `target` as facts."""
        total = sum(len(batch) for batch in plan.ours.values()) + len(plan.graph)
        rows: list[dict[str, str]] = []
        for scope, batch in plan.ours.items():
            if len(rows) >= _IMPORT_LISTED:
                break
            rows += [{"scope": scope, "kind": r.kind, "line": _first_line(r.content)} for r in batch[:_IMPORT_LISTED]]
        rows += [{"scope": target, "kind": "fact", "line": _first_line(c)} for c in islice(plan.graph, _IMPORT_LISTED)]
        return {"memories": rows[:_IMPORT_LISTED], "memoriesTotal": total}


def _whole_card(record: Record) -> dict[str, Any]:
    """`browse.card` with the whole content."""
    card = browse.card(record)
    card["content"] = record.content
    card.pop("truncated", None)
    return card


def _first_line(content: str) -> str:
    """A memory's first non-blank line, cut to `_LINE_CHARS`."""
    line = next((part.strip() for part in content.splitlines() if part.strip()), "")
    return line if len(line) <= _LINE_CHARS else line[: _LINE_CHARS - 1] + "…"


def web_routes(service: MemoryService, token: str, *, checks: PageChecks) -> list[BaseRoute]:
    """The page, its files and its API, for `serve` to mount next to ``/mcp`` (an `http.RouteFactory`):
    `token` is the one ``/mcp`` requires, which the page (or a login code) trades for a page credential."""
    web = _Web(service, token, checks)
    table: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
        ("/", web.index, "GET"),
        ("/favicon.ico", web.favicon, "GET"),
        ("/static/{name}", web.static_file, "GET"),
        ("/api/login", web.api(web.login, writes=True, public=True), "POST"),
        ("/api/login-code", web.api(web.login_code, writes=True, bearer_only=True), "POST"),
        ("/api/instance", web.api(web.instance, public=True), "GET"),
        ("/api/session", web.api(web.session), "GET"),
        ("/api/version", web.api(web.version), "GET"),
        ("/api/overview", web.api(web.overview), "GET"),
        ("/api/activity", web.api(web.activity), "GET"),
        ("/api/memories", web.api(web.memories), "GET"),
        ("/api/memories", web.api(web.create, writes=True), "POST"),
        ("/api/search", web.api(web.search), "GET"),
        ("/api/export", web.api(web.export), "GET"),
        ("/api/memories/{ident}", web.api(web.memory), "GET"),
        ("/api/memories/{ident}/edit", web.api(web.edit, writes=True), "POST"),
        ("/api/memories/{ident}/versions", web.api(web.versions), "GET"),
        ("/api/forget", web.api(web.forget, writes=True), "POST"),
        ("/api/duplicates", web.api(web.duplicates), "GET"),
        ("/api/duplicates/keep", web.api(web.keep, writes=True), "POST"),
        ("/api/recover", web.api(web.recover, writes=True), "POST"),
        ("/api/trash", web.api(web.trash_list), "GET"),
        ("/api/trash/restore", web.api(web.trash_restore, writes=True), "POST"),
        ("/api/trash/purge", web.api(web.trash_purge, writes=True), "POST"),
        ("/api/import", web.api(web.import_, writes=True), "POST"),
    ]
    return [Route(path, web.guarded(endpoint), methods=[method]) for path, endpoint, method in table]
