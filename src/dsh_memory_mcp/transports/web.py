"""The web page for people: browse, search, edit and forget memories (served by `serve` at ``/``).

`web_routes(service, token)` gives Starlette routes that `serve` mounts next to ``/mcp``:

* ``/`` the page, ``/static/…`` its script and style (files in ``web_static/``, nothing from a
  CDN); ``/?token=…`` logs in: an HttpOnly, SameSite=Strict cookie, then 303 to the clean URL.
* ``/api/…`` a small JSON API over the *same* service functions as the MCP tools
  (`MemoryService.call`): search is ``memory_search``, an edit is a ``memory_save`` with
  ``supersedes``, forget is ``memory_forget``; export/import/health are `service.transfer` and
  `service.health`, which the CLI uses too. A tool error comes back as its ``{ok, code, message}``.

Security: every API call needs the cookie or ``Authorization: Bearer <token>`` (else 401, reads
included). A state-changing request must be ``Content-Type: application/json`` (not a "simple"
request a foreign form can send) and, when the browser says where it comes from (``Origin``,
``Sec-Fetch-Site``), come from this page's own origin (else 403). Every answer carries a CSP
without inline script, ``nosniff`` and ``no-referrer``; the page renders memory text with
``textContent`` only. Bodies are bounded; no answer carries a stack trace.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from importlib import resources
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from dsh_memory_mcp import __version__
from dsh_memory_mcp.service import health, transfer
from dsh_memory_mcp.service.context import CallContext
from dsh_memory_mcp.service.render import ToolResult
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.store.scopes import GLOBAL

__all__ = [
    "COOKIE_PREFIX",
    "IMPORT_MAX_BYTES",
    "JSON_MAX_BYTES",
    "SECURITY_HEADERS",
    "WEB_CLIENT",
    "host_allowed",
    "web_routes",
]

log = logging.getLogger("dsh_memory_mcp.transports.web")

#: The client name the page's calls carry (`CallContext.client`).
WEB_CLIENT = "web"
#: The session cookie's name is this plus the port: two `serve`s on one host keep their own.
COOKIE_PREFIX = "dsh_memory_session_"
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
    "app.css": "text/css; charset=utf-8",
}
_LIST_LIMIT_MAX = 200
_FORGET_MAX = 500
# Tool codes that are the caller's mistake (400); the store being busy is 503; the rest 500.
_BUSY_CODES = {"LOCK_TIMEOUT", "BUSY", "DEADLINE"}
_SERVER_CODES = {"STORE_ERROR", "TOOL_ERROR", "INTERNAL_ERROR", "LOCK_RECURSION"}
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")

_LOGIN_FAILED_PAGE = """<!doctype html>
<html lang="zh-CN"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>登录链接无效 · dsh-memory-mcp</title><link rel="stylesheet" href="/static/app.css"></head>
<body><section class="login-needed"><h2>登录链接无效</h2>
<p>链接里的令牌不对。serve 每次启动(没有设置 <code>DSH_MEMORY_TOKEN</code> 时)都会换一个新令牌:
请用这次启动时终端里打印的登录地址,或记忆库目录下 <code>serve.json</code> 中的令牌。</p>
<p><a href="/">返回</a></p></section></body></html>
"""


_LOGIN_NEEDED = "需要登录:请用 serve 打印的登录地址打开页面,或带上 Bearer 令牌。"


class _HttpError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def _json(data: Mapping[str, Any], status: int = 200) -> Response:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(body, status_code=status, media_type="application/json", headers={"Cache-Control": "no-store"})


def _error(status: int, code: str, message: str) -> Response:
    return _json({"ok": False, "code": code, "message": message}, status)


def _tool_error(result: ToolResult) -> Response:
    code = str(result.structured.get("code", "TOOL_ERROR"))
    status = 503 if code in _BUSY_CODES else 500 if code in _SERVER_CODES else 400
    return _json(result.structured, status)


def _secured(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def _load_static() -> dict[str, bytes]:
    folder = resources.files("dsh_memory_mcp.transports").joinpath("web_static")
    return {name: folder.joinpath(name).read_bytes() for name in _STATIC_TYPES}


def _enrich(record: Record | None, entry: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's record dict plus what a person wants to see (who wrote it, when, how often used)."""
    out = dict(entry)
    if record is None:
        return out
    data = record.data
    out["createdAt"] = record.created_at
    out["lastAccessedAt"] = record.last_accessed_at
    out["accessCount"] = record.access_count
    source = data.get("source")
    out["source"] = source if isinstance(source, dict) else None
    supersedes = data.get("supersedes")
    out["supersedes"] = supersedes if isinstance(supersedes, str) else None
    if record.expired_at is not None:
        out["expiredAt"] = record.expired_at
    return out


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """`host` (a Host header) is in `allowed`: exact, or ``name:*`` for any port (the SDK's rule)."""
    if not host:
        return False
    if host in allowed:
        return True
    return any(entry.endswith(":*") and host.startswith(entry[:-1]) for entry in allowed)


class _Web:
    """The endpoints, sharing one service and one token."""

    def __init__(self, service: MemoryService, token: str, allowed_hosts: Sequence[str] | None = None) -> None:
        if not token:
            raise ValueError("web_routes needs a non-empty token")
        self.allowed_hosts = None if allowed_hosts is None else tuple(allowed_hosts)
        self.service = service
        self.token = token.encode("utf-8")
        # The cookie holds a value derived from the token, not the token: a leaked cookie is no
        # bearer token for /mcp.
        self.session_value = hmac.new(self.token, b"dsh-memory-mcp web session", hashlib.sha256).hexdigest()
        self.static = _load_static()

    # -- plumbing ----------------------------------------------------------------------------

    def cookie_name(self, request: Request) -> str:
        return f"{COOKIE_PREFIX}{request.url.port or 80}"

    def authorised(self, request: Request) -> bool:
        auth = request.headers.get("authorization", "")
        scheme, _, value = auth.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return hmac.compare_digest(value.strip().encode("utf-8", "replace"), self.token)
        cookie = request.cookies.get(self.cookie_name(request))
        return cookie is not None and hmac.compare_digest(
            cookie.encode("utf-8", "replace"), self.session_value.encode()
        )

    @staticmethod
    def cross_site_refusal(request: Request) -> Response | None:
        """403 unless a state-changing request is JSON and comes from this page's own origin."""
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin is not None and origin != own:
            return _error(403, "CROSS_SITE", "拒绝跨站请求:只接受来自本页面的修改。")
        fetch_site = request.headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return _error(403, "CROSS_SITE", "拒绝跨站请求:只接受来自本页面的修改。")
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return _error(403, "CONTENT_TYPE", "修改类请求必须是 Content-Type: application/json。")
        return None

    @staticmethod
    async def json_body(request: Request, limit: int) -> dict[str, Any]:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _HttpError(413, "BODY_TOO_LARGE", f"请求体超过 {limit // (1 << 20)} MB 上限。")
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _HttpError(413, "BODY_TOO_LARGE", f"请求体超过 {limit // (1 << 20)} MB 上限。")
            chunks.append(chunk)
        try:
            value = json.loads(b"".join(chunks))
        except (ValueError, RecursionError):
            raise _HttpError(400, "BAD_JSON", "请求体不是合法的 JSON。") from None
        if not isinstance(value, dict):
            raise _HttpError(400, "BAD_JSON", "请求体必须是 JSON 对象。")
        return value

    def api(
        self, handler: Callable[[Request], Awaitable[Response]], *, writes: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """Auth (and for writes the cross-site checks), coded errors, security headers."""

        async def endpoint(request: Request) -> Response:
            if not self.authorised(request):
                response = _error(
                    401, "UNAUTHORIZED", "需要登录:请用 serve 打印的登录地址打开页面,或带上 Bearer 令牌。"
                )
                response.headers["WWW-Authenticate"] = "Bearer"
                return _secured(response)
            if writes:
                refusal = self.cross_site_refusal(request)
                if refusal is not None:
                    return _secured(refusal)
            try:
                response = await handler(request)
            except _HttpError as exc:
                response = _error(exc.status, exc.code, exc.message)
            except Exception:
                log.exception("web API %s %s failed", request.method, request.url.path)
                response = _error(500, "INTERNAL_ERROR", "服务内部错误,记忆库未被改动。详情见 serve 的 stderr。")
            return _secured(response)

        return endpoint

    def host_checked(
        self, endpoint: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """421 for a Host outside `allowed_hosts` (a rebinding name pointing at loopback)."""
        if self.allowed_hosts is None:
            return endpoint
        allowed = self.allowed_hosts

        async def checked(request: Request) -> Response:
            if not host_allowed(request.headers.get("host", ""), allowed):
                return _secured(_error(421, "HOST_REFUSED", "拒绝:Host 不在允许列表里(防 DNS 重绑定)。"))
            return await endpoint(request)

        return checked

    def context(self) -> CallContext:
        """A person at the page: the server's project, client ``web``, and searches that are no recall."""
        return dataclasses.replace(self.service.default_context.with_client(WEB_CLIENT), record_access=False)

    def call(self, name: str, args: Mapping[str, Any]) -> ToolResult:
        return self.service.call(name, args, self.context())

    def lookup(self, entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Tool record dicts enriched from the records on disk (same snapshots, no extra parse)."""
        by_scope: dict[str, dict[str, Record]] = {}
        out = []
        for entry in entries:
            scope = str(entry.get("scope", ""))
            if scope not in by_scope:
                by_scope[scope] = {r.id: r for r in self.service.store.snapshot(scope).records}
            out.append(_enrich(by_scope[scope].get(str(entry.get("id", ""))), entry))
        return out

    def resolve_scopes(self, scope: str | None) -> list[str] | ToolResult:
        """Scope keys for a page's scope choice, by the tools' own rules; ``all`` → every scope."""
        if scope is None or scope.strip().lower() in ("", "all", "*"):
            return self.service.store.discover_scopes()
        result = self.call("memory_list", {"scope": scope, "limit": 1})
        if result.is_error:
            return result
        return [s for s in result.structured["scopes"] if isinstance(s, str)]

    # -- the page ----------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        token = request.query_params.get("token")
        if token is not None:
            if not hmac.compare_digest(token.encode("utf-8", "replace"), self.token):
                return _secured(Response(_LOGIN_FAILED_PAGE, status_code=401, media_type="text/html; charset=utf-8"))
            response = Response(status_code=303, headers={"Location": "/", "Cache-Control": "no-store"})
            response.set_cookie(
                self.cookie_name(request), self.session_value, httponly=True, samesite="strict", path="/"
            )
            return _secured(response)
        page = Response(self.static["index.html"], media_type=_STATIC_TYPES["index.html"])
        page.headers["Cache-Control"] = "no-store"
        return _secured(page)

    async def static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in self.static or name == "index.html":
            return _secured(Response("not found", status_code=404, media_type="text/plain; charset=utf-8"))
        response = Response(self.static[name], media_type=_STATIC_TYPES[name])
        response.headers["Cache-Control"] = "no-cache"
        return _secured(response)

    async def favicon(self, request: Request) -> Response:
        return _secured(Response(status_code=204))

    # -- reads -------------------------------------------------------------------------------

    async def session(self, request: Request) -> Response:
        def work() -> dict[str, Any]:
            return {
                "ok": True,
                "version": health.store_version(self.service.store),
                "storeDir": self.service.store.root,
                "project": self.service.current_project,
                "serverVersion": __version__,
            }

        return _json(await run_in_threadpool(work))

    async def version(self, request: Request) -> Response:
        return _json({"ok": True, "version": await run_in_threadpool(health.store_version, self.service.store)})

    async def overview(self, request: Request) -> Response:
        def work() -> dict[str, Any]:
            store = self.service.store
            rows, totals = health.store_stats(store, store.discover_scopes(), self.service.clock())
            return {
                "ok": True,
                "storeDir": store.root,
                "scopes": rows,
                "totals": totals,
                "aliases": store.read_aliases(),
                "unattributedFiles": transfer.unattributed_files(store),
                "vectors": self.vector_state(),
                "vanished": self.vanished(),
                "importMaxBytes": IMPORT_MAX_BYTES // 2,
            }

        return _json(await run_in_threadpool(work))

    def vanished(self) -> int | None:
        """Records this store acknowledged that another writer's overwrite lost (`recover` puts them back)."""
        try:
            return sum(len(entries) for entries in self.service.store.missing().values())
        except Exception:  # a health number must not break the page
            log.warning("web: counting vanished records failed", exc_info=True)
            return None

    def vector_state(self) -> dict[str, Any]:
        channel = self.service.vectors
        if channel is None:
            reason = self.service.settings.vector.unavailable_reason
            return {"enabled": False, "reason": reason}
        stats = channel.stats()
        return {
            "enabled": True,
            "state": str(stats.get("status") or ""),
            "model": stats.get("model"),
            "dims": stats.get("dims"),
            "backfilled": stats.get("backfilled"),
            "backfillPending": stats.get("pending"),
        }

    async def records_of(self, tool: str, args: dict[str, Any]) -> Response:
        """A listing tool's answer, its records enriched from disk (`lookup`), or its coded error."""

        def work() -> Response:
            result = self.call(tool, args)
            if result.is_error:
                return _tool_error(result)
            out = dict(result.structured)
            out["records"] = self.lookup(result.structured["records"])
            return _json(out)

        return await run_in_threadpool(work)

    async def memories(self, request: Request) -> Response:
        params = request.query_params
        args: dict[str, Any] = {"scope": params.get("scope") or "all", "limit": params.get("limit") or _LIST_LIMIT_MAX}
        if params.get("kind"):
            args["kind"] = params["kind"]

        return await self.records_of("memory_list", args)

    async def search(self, request: Request) -> Response:
        params = request.query_params
        args: dict[str, Any] = {"query": params.get("q", ""), "scope": params.get("scope") or "all"}
        if params.get("topK"):
            args["topK"] = params["topK"]

        return await self.records_of("memory_search", args)

    async def memory(self, request: Request) -> Response:
        ident = request.path_params["ident"]

        def work() -> Response:
            result = self.call("memory_get", {"ids": [ident]})
            if result.is_error:
                return _tool_error(result)
            found = result.structured["records"]
            if not found:
                return _error(404, "NOT_FOUND", f"没有找到 id 为 {ident} 的记忆(可能已被删除)。")
            return _json({"ok": True, "record": self.lookup(found)[0]})

        return await run_in_threadpool(work)

    async def export(self, request: Request) -> Response:
        scope = request.query_params.get("scope")
        resolved = await run_in_threadpool(self.resolve_scopes, scope)
        if not isinstance(resolved, list):
            return _tool_error(resolved)
        label = "all" if scope is None or scope.strip().lower() in ("", "all", "*") else scope
        slug = _SAFE_NAME.sub("-", label).strip("-")[:40] or "scope"
        filename = f"dsh-memory-{slug}-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
        store = self.service.store

        async def body() -> AsyncIterator[bytes]:
            for part in await run_in_threadpool(lambda: list(transfer.export_scopes(store, resolved))):
                yield part.text.encode("utf-8", "surrogateescape")

        return StreamingResponse(
            body(),
            media_type="application/x-ndjson; charset=utf-8",
            headers={
                "Content-Disposition": f"attachment; filename=\"{filename}\"; filename*=UTF-8''{quote(filename)}",
                "Cache-Control": "no-store",
            },
        )

    # -- writes ------------------------------------------------------------------------------

    async def edit(self, request: Request) -> Response:
        ident = request.path_params["ident"]
        body = await self.json_body(request, JSON_MAX_BYTES)

        def work() -> Response:
            current = self.call("memory_get", {"ids": [ident]})
            if current.is_error:
                return _tool_error(current)
            now = self.service.clock()
            live = [r for r in current.structured["records"] if not _expired(r, now)]
            if not live:
                return _error(409, "GONE", "这条记忆已被删除或已被别处的修改取代:请刷新后再编辑。")
            old = live[0]
            args: dict[str, Any] = {
                "content": body.get("content"),
                "kind": body.get("kind"),
                "tags": body.get("tags"),
                "importance": body.get("importance"),
                "scope": old["scope"],
                "supersedes": old["id"],
            }
            result = self.call("memory_save", args)
            if result.is_error:
                return _tool_error(result)
            out = result.structured
            new_id, superseded = str(out["id"]), out.get("superseded")
            if superseded is None:
                message = f"已保存 {new_id[:8]},但旧记录 {old['shortId']} 已不在(可能刚被别处修改)"
            elif out.get("deduped"):
                message = f"内容与已有记忆 {new_id[:8]} 相同:旧记录 {old['shortId']} 已并入它,不再出现在检索中"
            else:
                message = f"已保存:新记录 {new_id[:8]} 取代了旧记录 {old['shortId']}(旧记录仍留在磁盘上)"
            return _json({**out, "old": old["id"], "message": message})

        return await run_in_threadpool(work)

    async def forget(self, request: Request) -> Response:
        body = await self.json_body(request, JSON_MAX_BYTES)
        ids = body.get("ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) and i.strip() for i in ids):
            return _error(400, "IDS_EMPTY", "ids 必须是非空的 id 数组。")
        if len(ids) > _FORGET_MAX:
            return _error(400, "IDS_TOO_MANY", f"一次最多删除 {_FORGET_MAX} 条。")

        def work() -> Response:
            deleted: list[str] = []
            missing: list[str] = []
            for ident in dict.fromkeys(i.strip() for i in ids):
                result = self.call("memory_forget", {"id": ident})
                if result.is_error:
                    if deleted:  # report what already happened along with the failure
                        return _json({**result.structured, "deleted": len(deleted), "ids": deleted}, 500)
                    return _tool_error(result)
                gone = [str(i) for i in result.structured["ids"]]
                if gone:
                    deleted.extend(gone)
                else:
                    missing.append(ident)
            message = f"已删除 {len(deleted)} 条记忆"
            if missing:
                message += f";{len(missing)} 条已不存在"
            return _json({"ok": True, "deleted": len(deleted), "ids": deleted, "missing": missing, "message": message})

        return await run_in_threadpool(work)

    async def import_(self, request: Request) -> Response:
        body = await self.json_body(request, IMPORT_MAX_BYTES)
        data = _import_bytes(body)
        if data is None:
            return _error(400, "IMPORT_EMPTY", "需要导入文件的内容:data(base64 编码的文件字节)或 text(文本)。")
        dry_run = body.get("dryRun", True) is not False
        scope = body.get("scope")
        scope = scope if isinstance(scope, str) and scope.strip() else GLOBAL

        def work() -> Response:
            plan = transfer.plan_import(data, transfer.Checks.of(self.service.settings))
            target = GLOBAL
            if plan.graph:
                if scope.strip().lower() in ("all", "*"):
                    return _error(400, "SCOPE_NOT_WRITABLE", "all 是只读范围:请选一个作用域。")
                resolved = self.resolve_scopes(scope)
                if not isinstance(resolved, list):
                    return _tool_error(resolved)
                if len(resolved) != 1:
                    return _error(400, "SCOPE_NOT_WRITABLE", "导入只能写入一个作用域。")
                target = resolved[0]
            outcome = transfer.apply_import(self.service.store, plan, target, now=self.service.clock(), dry_run=dry_run)
            verb = "将新增" if dry_run else "已新增"
            head = "预览(尚未写入):" if dry_run else "导入完成:"
            refused = f",拒绝 {outcome.refused} 条" if outcome.refused else ""
            message = f"{head}{verb} {outcome.added} 条,已存在 {outcome.existing} 条,跳过 {outcome.bad} 行{refused}"
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
                }
            )

        return await run_in_threadpool(work)


def _import_bytes(body: Mapping[str, Any]) -> bytes | None:
    """The import file's bytes: ``data`` (base64, exact bytes) or ``text`` (a string)."""
    data, text = body.get("data"), body.get("text")
    if isinstance(data, str):
        try:
            return base64.b64decode(data, validate=True)
        except ValueError:
            return None
    if isinstance(text, str):
        # A lone surrogate (JSON allows one) stays invalid UTF-8, so its line is reported, not imported.
        return text.encode("utf-8", "surrogatepass")
    return None


def _expired(entry: Mapping[str, Any], now: int) -> bool:
    expired = entry.get("expiredAt")
    return isinstance(expired, int) and expired < now


def web_routes(service: MemoryService, token: str, *, allowed_hosts: Sequence[str] | None = None) -> list[BaseRoute]:
    """The page, its files and its API, for `serve` to mount next to ``/mcp``.

    :param service: the one service `serve` shares with its MCP sessions.
    :param token: the same token ``/mcp`` requires; it logs a browser in (``/?token=…``).
    :param allowed_hosts: Host headers to answer (``name`` / ``name:port`` / ``name:*``, the SDK's
        `TransportSecuritySettings.allowed_hosts` form); any other Host gets 421 (DNS rebinding).
        None: no Host check here (the caller does it).
    """
    web = _Web(service, token, allowed_hosts)
    table: list[tuple[str, Callable[[Request], Awaitable[Response]], str]] = [
        ("/", web.index, "GET"),
        ("/favicon.ico", web.favicon, "GET"),
        ("/static/{name}", web.static_file, "GET"),
        ("/api/session", web.api(web.session), "GET"),
        ("/api/version", web.api(web.version), "GET"),
        ("/api/overview", web.api(web.overview), "GET"),
        ("/api/memories", web.api(web.memories), "GET"),
        ("/api/search", web.api(web.search), "GET"),
        ("/api/export", web.api(web.export), "GET"),
        ("/api/memories/{ident}", web.api(web.memory), "GET"),
        ("/api/memories/{ident}/edit", web.api(web.edit, writes=True), "POST"),
        ("/api/forget", web.api(web.forget, writes=True), "POST"),
        ("/api/import", web.api(web.import_, writes=True), "POST"),
    ]
    return [Route(path, web.host_checked(endpoint), methods=[method]) for path, endpoint, method in table]
