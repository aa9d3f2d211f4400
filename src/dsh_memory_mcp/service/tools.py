"""The five memory tools as plain functions over plain data (docs/design.md: Scopes, Tools and error codes).

`MemoryService.call(name, arguments, ctx)` takes a `tools/call`'s raw JSON arguments and the call's
context and returns a `ToolResult`; an invalid argument is a spec error code with a Chinese message
that says how to fix it, and no exception escapes `call`. Nothing here knows about MCP.
"""

from __future__ import annotations

import contextlib
import functools
import heapq
import logging
import operator
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.errors import DshMemoryError, InvalidArgument, ScopeError
from dsh_memory_mcp.search import scoring
from dsh_memory_mcp.service import digest
from dsh_memory_mcp.service.context import CallContext, default_context
from dsh_memory_mcp.service.render import (
    FOR_MODEL,
    GET_CONTENT_CHARS,
    RESULT_CONTENT_CHARS,
    TextStyle,
    ToolResult,
    client_of,
    error_result,
    meta_line,
    part_note,
    record_dict,
    snippet,
    source_line,
    source_note,
    truncation_note,
)
from dsh_memory_mcp.service.schemas import TOOL_NAMES, TOOL_SPECS
from dsh_memory_mcp.service.scoping import ScopeResolver
from dsh_memory_mcp.service.secrets import find_secret
from dsh_memory_mcp.service.validate import (
    ALL_SCOPES,
    IDS_MAX,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    PREFIX_MIN,
    QUERY_MAX_CHARS,
    TOPK_DEFAULT,
    TOPK_MAX,
    content_arg,
    importance_arg,
    integer_arg,
    is_blank,
    kind_arg,
    query_arg,
    refuse_secrets,
    show,
    string_list,
    tags_arg,
)
from dsh_memory_mcp.store import snapshots
from dsh_memory_mcp.store.foreground import FOREGROUND, Foreground
from dsh_memory_mcp.store.locks import call_deadline
from dsh_memory_mcp.store.records import Record, now_ms
from dsh_memory_mcp.store.shared import fold
from dsh_memory_mcp.texts import joined, msg

if TYPE_CHECKING:
    from dsh_memory_mcp.search.vectors import VectorAnswer, VectorChannel
    from dsh_memory_mcp.store.shared import Keep, SharedStore

log = logging.getLogger("dsh_memory_mcp.service.tools")

#: A save names live memories this close in meaning (`MemoryService._similar`): with the bundled
#: model, same-meaning pairs and corrections of one fact score ≥ 0.86, unrelated records mostly ≤ 0.65.
SIMILAR_SCORE = 0.9
SIMILAR_TOP_K = 3
#: Seconds a save's similarity check may wait for its embedding (past it, the save names none).
SIMILAR_BUDGET = 1.0


@dataclass
class MemoryService:
    """The five tools over one store. Thread-safe: the SDK calls sync tools from worker threads.

    One service may serve many sessions at once (HTTP): everything per call — the current project,
    the client — comes in the `CallContext`, never from process-wide state.
    """

    settings: Settings
    store: SharedStore
    vectors: VectorChannel | None = None
    clock: Callable[[], int] = now_ms
    #: Where each call is counted while it runs; background work (the warm-up) gives way to it.
    foreground: Foreground = FOREGROUND

    @property
    def default_context(self) -> CallContext:
        """The context of a call that brings none: the process's `--project`/env/cwd."""
        return default_context(self.settings)

    @property
    def current_project(self) -> str:
        return self.default_context.project

    def call(self, name: str, arguments: Mapping[str, Any] | None, ctx: CallContext | None = None) -> ToolResult:
        """Run one tool; never raises. Unknown names → UNKNOWN_TOOL, bugs → INTERNAL_ERROR."""
        if name not in TOOL_NAMES:
            return error_result(
                "UNKNOWN_TOOL",
                msg("没有名为 {name!r} 的工具。可用工具:{value}。", name=name, value=", ".join(TOOL_NAMES)),
            )
        handler: Callable[[Mapping[str, Any], CallContext], ToolResult] = getattr(self, name)  # a tool is its method
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return error_result("TOOL_ERROR", msg("参数必须是一个 JSON 对象。"))
        ctx = ctx if ctx is not None else self.default_context
        try:
            # A lock wait inside never outlives the call's deadline (serve's tool gate): DEADLINE then.
            with (
                self.foreground.call(),
                call_deadline(ctx.deadline) if ctx.deadline is not None else contextlib.nullcontext(),
            ):
                return handler(arguments, ctx)
        except DshMemoryError as exc:
            return error_result(exc.code, exc.message)
        except Exception as exc:
            # A bug, not a bad argument: the traceback goes to the log (file and stderr), never into
            # the result; the code lets hosts and the fuzz test tell it from a classified fault.
            log.error("tool %s failed unexpectedly (INTERNAL_ERROR)\n%s", name, _stack(exc, arguments))
            return error_result("INTERNAL_ERROR", _internal_error_text(name, exc))

    def _scopes(self, ctx: CallContext) -> ScopeResolver:
        return ScopeResolver(self.store, ctx, scope_all=self.settings.scope_all)

    # -- for front doors that are not tools (the web page) ------------------------------------------

    def read_scopes(self, scope: Any, path: Any = None, ctx: CallContext | None = None) -> list[str]:
        """The scope keys a read with these `scope`/`path` arguments covers, by the tools' rules.

        :raises DshMemoryError: the tools' own codes (`SCOPE_INVALID`, `PATH_INVALID`, …).
        """
        return self._scopes(ctx if ctx is not None else self.default_context).read_scopes(scope, path)

    def ranked(self, query: str, scopes: Sequence[str], *, top_k: int) -> list[scoring.Hit]:
        """`memory_search`'s ranking of `scopes` (lexical + vectors), counting no access."""
        with self.foreground.call():
            return self._search(query, scopes, top_k)[0]

    def _search(
        self, query: str, scopes: Sequence[str], top_k: int, budget: float | None = None
    ) -> tuple[list[scoring.Hit], VectorAnswer | None]:
        # The query embedding runs while the lexical half reads and indexes the scopes.
        pending = self.vectors.start_query(query, budget=budget) if self.vectors is not None else None
        snapshots = [self.store.snapshot(s) for s in scopes]
        for snapshot in snapshots:
            scoring.index_for(snapshot)
        vector = pending.finish(snapshots) if pending is not None else None
        vector_scores = vector.scores if vector is not None else None
        hits = scoring.rank(snapshots, query, top_k=top_k, now=self.clock(), vector_scores=vector_scores)
        return hits, vector

    # -- tools -------------------------------------------------------------------------------------

    def memory_save(self, args: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        content = content_arg(args.get("content"), max_chars=self.settings.max_content)
        kind = kind_arg(args.get("kind"), default="note") or "note"
        tags = tags_arg(args.get("tags"))
        if not self.settings.allow_secrets:
            refuse_secrets(content, tags)
        importance = importance_arg(args.get("importance"))
        supersedes_raw = args.get("supersedes")
        supersedes: str | None = None
        if not is_blank(supersedes_raw):
            if not isinstance(supersedes_raw, str) or len(supersedes_raw.strip()) < PREFIX_MIN:
                raise InvalidArgument(
                    msg(
                        "supersedes 必须是被取代记忆的 id 或至少 {prefix_min} 位前缀(收到 {show})。",
                        prefix_min=PREFIX_MIN,
                        show=show(supersedes_raw),
                    ),
                    code="TOOL_ERROR",
                )
            supersedes = supersedes_raw.strip()
        scope = self._scopes(ctx).write_scope(args.get("scope"), args.get("path"))
        source: dict[str, Any] = {"origin": "explicit"}
        if ctx.client:
            source["client"] = ctx.client  # provenance: who wrote it (the client's clientInfo)
        result = self.store.save(
            scope, content, kind=kind, tags=tags, importance=importance, supersedes=supersedes, source=source
        )
        record = result.record
        # Named before its own vector is queued: once in the sidecar, it would outrank what it repeats.
        similar = [] if result.deduped else self._similar(scope, record)
        if not result.deduped and self.vectors is not None:
            self.vectors.record_saved(scope, record)
        where = _where(record.scope, ctx)
        if result.deduped:
            lines = [msg("记忆已存在(内容相同),未重复保存 {id} @ {where}", id=record.short_id, where=where)]
        else:
            lines = [msg("已保存记忆 {id} @ {where}", id=record.short_id, where=where)]
        if supersedes is not None:
            if result.superseded is not None:
                old = result.superseded.short_id
                lines.append(msg("已取代旧记忆 {id}(旧记录保留在磁盘,不再出现在检索中)", id=old))
            else:
                lines.append(msg("未找到要取代的记忆 {id},没有记录被隐藏", id=supersedes))
        structured: dict[str, Any] = {
            "ok": True,
            "id": record.id,
            "deduped": result.deduped,
            "scope": record.scope,
            "kind": record.kind,
        }
        if supersedes is not None:
            structured["superseded"] = result.superseded.id if result.superseded is not None else None
        if similar:
            structured["similar"] = similar
            shown_ids = joined((f"{s['shortId']}({s['score']:.2f})" for s in similar), "、", ", ")
            lines.append(msg("意思相近的已有记忆:{ids};若本条是对它的更正,请用 supersedes 取代它", ids=shown_ids))
        return ToolResult(text=joined(lines, "\n", "\n"), structured=structured)

    def _similar(self, scope: str, record: Record) -> list[dict[str, Any]]:
        """Live memories of `scope` that nearly duplicate `record` (not itself), closest first, at most
        `SIMILAR_TOP_K`: near-identical texts (`scoring.NEAR_JACCARD`, the duplicates view's rule) and,
        with vectors, a relevance score ≥ `SIMILAR_SCORE` for `record` as a query. Superseded and
        expired records are never named."""
        snapshot = self.store.snapshot(scope)
        now = self.clock()
        close: dict[str, tuple[Record, float]] = {}
        for other, similarity in scoring.near(snapshot, record.content, now):
            if other.id != record.id:
                close.setdefault(other.id, (other, similarity))
        if self.vectors is not None:
            answer = self.vectors.search(record.content[:QUERY_MAX_CHARS], [snapshot], budget=SIMILAR_BUDGET)
            named = {
                rid: score
                for rid, score in answer.scores.items()
                if score >= SIMILAR_SCORE and rid != record.id and rid not in close
            }
            ids = snapshots.id_index(snapshot) if named else None  # only when a vector names one
            for rid, score in named.items():
                for pos in ids.matching(rid.lower()) if ids is not None else ():
                    other = snapshot.records[pos]
                    if other.id == rid and not other.is_expired(now):
                        close[rid] = (other, score)
        ranked = sorted(close.values(), key=lambda pair: -pair[1])[:SIMILAR_TOP_K]
        return [{"id": r.id, "shortId": r.short_id, "score": round(score, 4)} for r, score in ranked]

    def memory_search(self, args: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        query, query_cut = query_arg(args.get("query"))
        top_k = integer_arg(
            next((args[key] for key in ("topK", "top_k", "topk") if args.get(key) is not None), None),
            name="topK",
            low=1,
            high=TOPK_MAX,
            default=TOPK_DEFAULT,
            code="TOPK_RANGE",
        )
        scopes = self._scopes(ctx).read_scopes(args.get("scope"), args.get("path"))
        hits, vector = self._search(query, scopes, top_k)
        touched: dict[str, list[str]] = {}
        for hit in hits:
            touched.setdefault(hit.scope, []).append(hit.record.id)
        if touched and ctx.record_access:
            self.store.touch(touched)
        labels = _labels(scopes, ctx)
        records = [record_dict(hit.record, score=hit.score, max_chars=RESULT_CONTENT_CHARS) for hit in hits]
        if not hits:
            parts: list[str | None] = [msg("没有找到相关记忆(检索范围:{labels})", labels=labels)]
        else:
            blocks = [
                _block(
                    ctx.style.score(hit.score),
                    ctx.style.head(hit.record),
                    ctx.style.excerpt(hit.record.content),
                    meta=rec,
                )
                for hit, rec in zip(hits, records, strict=True)
            ]
            head = msg("找到 {count} 条记忆(检索范围:{labels})", count=len(hits), labels=labels)
            parts = [head, *blocks, ctx.style.full_content_hint()]
        parts.append(truncation_note(sum(1 for r in records if r.get("truncated"))))
        if query_cut:
            parts.append(
                msg("注意:query 过长,只用了前 {chars} 个字符检索;用几个关键词或一句话即可。", chars=QUERY_MAX_CHARS)
            )
        structured: dict[str, Any] = {"ok": True, "count": len(records), "scopes": scopes, "records": records}
        if vector is not None:
            structured["vector"] = {"state": vector.state}
            if vector.reason is not None:
                structured["vector"]["reason"] = vector.reason
                parts.append(msg("注意:本次只用了词法检索,向量部分没有参与({reason})。", reason=vector.reason))
        return ToolResult(text=_paragraphs(parts), structured=structured)

    def memory_list(self, args: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        kind = kind_arg(args.get("kind"), default=None)
        limit = integer_arg(
            args.get("limit"), name="limit", low=1, high=LIMIT_MAX, default=LIMIT_DEFAULT, code="LIMIT_RANGE"
        )
        client_raw = args.get("client")
        if client_raw is not None and not isinstance(client_raw, str):
            raise InvalidArgument(msg("client 必须是字符串(收到 {show})。", show=show(client_raw)), code="TOOL_ERROR")
        client = client_raw.strip().lower() if client_raw else ""
        scopes = self._scopes(ctx).read_scopes(args.get("scope"), args.get("path"))
        now = self.clock()
        seen: set[str] = set()
        found: list[Record] = []
        for scope in scopes:
            for record in self.store.snapshot(scope).records:
                expired, rid = record.expired_at, record.id
                if (expired is not None and expired < now) or rid in seen or (kind is not None and record.kind != kind):
                    continue
                if client and client not in (client_of(record) or "").lower():
                    continue
                seen.add(rid)
                found.append(record)
        return list_result(newest(found, limit), len(found), scopes, kind, ctx)

    def memory_get(self, args: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        raw = args.get("ids", args.get("id"))
        items = string_list(raw) if raw is not None else None
        keys = [key for key in dict.fromkeys(item.strip() for item in items or []) if key]
        if not keys:
            raise InvalidArgument(
                msg(
                    "ids 必须是非空的 id 数组(完整 id 或至少 {prefix_min} 位前缀),收到 {show}。",
                    prefix_min=PREFIX_MIN,
                    show=show(raw),
                ),
                code="IDS_EMPTY",
            )
        keys = keys[:IDS_MAX]
        offset = integer_arg(args.get("offset"), name="offset", low=0, high=10**12, default=0, code="TOOL_ERROR")
        limit = max(GET_CONTENT_CHARS, self.settings.max_content)
        matches = self.store.find([k for k in keys if len(k) >= PREFIX_MIN])
        found: dict[str, Record] = {}
        missing: list[str] = []
        for key in keys:
            hits = matches.get(key, []) if len(key) >= PREFIX_MIN else []
            if not hits:
                missing.append(key)
            for record in hits:
                found.setdefault(record.id, record)
        records = list(found.values())
        now = self.clock()
        blocks = []
        out = []
        for r in records:
            source = r.data.get("source")  # parsed once: another program's line may be megabytes
            flag = msg("(已被取代/过期,检索中不再出现)") if r.is_expired(now) else ""
            part = r.content[offset : offset + limit]
            entry = record_dict(r, max_chars=limit, offset=offset, paged=True)
            lines = [f"{ctx.style.head(r)} id={r.id}", flag, "\n", part, "\n", meta_line(entry), source_line(source)]
            blocks.append(joined([*lines, part_note(r, offset, limit, ctx.style)], "", ""))
            if isinstance(source, dict):
                entry["source"] = source
            if r.expired_at is not None:
                entry["expiredAt"] = r.expired_at
            out.append(entry)
        parts: list[str | None] = [msg("找到 {count} 条记忆", count=len(records)), *blocks]
        if missing:
            short = [k for k in missing if len(k) < PREFIX_MIN]
            parts.append(msg("未找到:{ids}", ids=", ".join(missing)))
            if short:
                tip = msg("提示:id 前缀至少 {prefix_min} 位({ids} 太短)。", prefix_min=PREFIX_MIN, ids=", ".join(short))
                parts.append(tip)
        return ToolResult(
            text=_paragraphs(parts),
            structured={"ok": True, "count": len(out), "records": out, "missing": missing},
        )

    def memory_forget(self, args: Mapping[str, Any], ctx: CallContext) -> ToolResult:
        ident, query = args.get("id"), args.get("query")
        has_id, has_query = not is_blank(ident), not is_blank(query)
        if has_id and has_query:
            raise InvalidArgument(
                msg("id 与 query 只能给一个:按 id 精确删除一条,或按 query(内容子串)批量删除。"), code="TARGET_AMBIGUOUS"
            )
        if not has_id and not has_query:
            raise InvalidArgument(
                msg("需要 id(精确 id 或至少 8 位前缀)或 query(内容子串)之一,告诉我删哪条。"), code="TARGET_REQUIRED"
            )
        erased: list[Record] = []  # records an unlocked writer had erased from their file already
        days = self.settings.trash_days if ctx.trash else 0
        keep: Keep | None = None
        if days > 0:
            keep = functools.partial(self.store.trash.add, client=ctx.client, days=days)
        if has_id:
            if not isinstance(ident, str):
                raise InvalidArgument(msg("id 必须是字符串(收到 {show})。", show=show(ident)), code="TARGET_REQUIRED")
            removed = self._forget_id(ident.strip(), erased, keep)
        else:
            target = self._forget_scope(args, ctx)
            if not _confirm_arg(args.get("confirm")):
                preview = self._forget_preview(target, str(query).strip(), ctx)
                if preview is not None:
                    return preview
            # Confirmed (or few enough): delete what matches *now*, inside the lock — the preview is
            # not a reservation; a record saved since then that matches goes too (documented).
            removed = self.store.delete_matching(target, str(query).strip(), erased=erased, keep=keep)
        ids = [r.id for r in removed]
        structured: dict[str, Any] = {"ok": True, "deleted": len(ids), "ids": ids}
        if removed:
            listing = joined((joined([f"{r.short_id} @ ", _where(r.scope, ctx)], "", "") for r in removed), ", ", ", ")
            lines = [msg("已删除 {count} 条记忆 {listing}", count=len(removed), listing=listing)]
            if erased:
                lines.append(
                    msg(
                        "其中 {ids} 已不在记忆文件中(被其他程序覆盖时抹去):已从写入日志中删除,recover 不会再恢复它",
                        ids=", ".join(r.short_id for r in erased),
                    )
                )
            if keep is not None:
                structured["trashDays"] = days
                lines.append(
                    msg(
                        "已移到回收站,保留 {days} 天:可在网页的「回收站」恢复,"
                        "或运行 `dsh-memory-mcp recover --trash {ids}`",
                        days=days,
                        ids=" ".join(r.short_id for r in removed),
                    )
                )
            digest.scrub(removed)
            text = joined(lines, "\n", "\n")
        elif has_id:
            text = msg("没有删除任何记忆:未找到 id {id}", id=str(ident).strip())
        else:
            text = msg("没有删除任何记忆:作用域内没有内容包含 {query!r} 的记忆", query=str(query).strip())
        return ToolResult(text=text, structured=structured)

    def _forget_scope(self, args: Mapping[str, Any], ctx: CallContext) -> str:
        """The one scope a forget by query works in (`memory_forget`'s rules; never all)."""
        query = args.get("query")
        if not isinstance(query, str):
            raise InvalidArgument(msg("query 必须是字符串(收到 {show})。", show=show(query)), code="TARGET_REQUIRED")
        scopes = self._scopes(ctx)
        scope = scopes.scope_arg(args.get("scope"))
        path = scopes.path_arg(args.get("path"))
        if scope is not None and scope.lower() in ALL_SCOPES:
            raise ScopeError(
                msg("按 query 删除不能用 scope=all(防止跨作用域批量误删):请指定一个作用域,或改用 id。"),
                code="SCOPE_NOT_WRITABLE",
            )
        if path is not None:
            return scopes.path_scope(path, scope)
        return ctx.project if scope is None else scopes.named_scope(scope)

    def forget_matches(self, args: Mapping[str, Any], ctx: CallContext) -> tuple[str, list[Record]]:
        """What `memory_forget` by query (same arguments) would delete now: its scope and the live
        records whose content contains the query, newest first. Nothing is written (a dry run).

        :raises DshMemoryError: the tool's own codes for these arguments.
        """
        scope = self._forget_scope(args, ctx)
        return scope, self._forget_matches(scope, str(args["query"]).strip())

    def _forget_matches(self, scope: str, query: str) -> list[Record]:
        needle = fold(query)
        if not needle:
            return []
        now = self.clock()
        records = self.store.snapshot(scope).records
        matches = [r for r in records if not r.is_expired(now) and needle in fold(r.content)]
        matches.sort(key=lambda r: (-r.updated_at, r.id))
        return matches

    def _forget_preview(self, scope: str, query: str, ctx: CallContext) -> ToolResult | None:
        """`CONFIRM_REQUIRED` with the would-be-deleted list when more than the threshold match."""
        matches = self._forget_matches(scope, query)
        limit = self.settings.forget_confirm_over
        if len(matches) <= limit:
            return None

        def message(style: TextStyle) -> str:
            return msg(
                "按 query 在 {scope} 中匹配到 {count} 条记忆,超过 {limit} 条,为防误删没有删除任何记忆。确认要全部删除:"
                "{how}(删除的是那时仍匹配的记忆);只删其中几条:改用 id 逐条删除。",
                scope=scope,
                count=len(matches),
                limit=limit,
                how=style.confirm_hint(),
            )

        # The structured message is the tools' for every reader; the text says how this reader confirms.
        result = error_result("CONFIRM_REQUIRED", message(FOR_MODEL))
        records = [record_dict(r) for r in matches]
        blocks = [_block(ctx.style.head(r), snippet(r.content), meta=d) for r, d in zip(matches, records, strict=True)]
        result.structured.update(scope=scope, count=len(matches), records=records)
        head = error_result("CONFIRM_REQUIRED", message(ctx.style)).text
        text = _paragraphs([head, msg("将被删除的记忆:"), *blocks])
        return ToolResult(text=text, structured=result.structured, is_error=True)

    def _forget_id(self, key: str, erased: list[Record], keep: Keep | None) -> list[Record]:
        if len(key) < PREFIX_MIN:
            raise InvalidArgument(
                msg("id 至少需要 {prefix_min} 位(收到 {key!r})。", prefix_min=PREFIX_MIN, key=key),
                code="TARGET_REQUIRED",
            )
        matches = self.store.find([key]).get(key, []) or self.store.find_erased(key)
        unique = {r.id: r for r in matches}
        if len(unique) > 1:
            listing = ", ".join(f"{r.id} @ {r.scope}" for r in unique.values())
            raise InvalidArgument(
                msg(
                    "前缀 {key!r} 匹配到 {count} 条记忆:{listing}。请给出更长的前缀或完整 id。",
                    key=key,
                    count=len(unique),
                    listing=listing,
                ),
                code="TARGET_AMBIGUOUS",
            )
        if not unique:
            return []
        return self.store.delete_ids(list(unique), erased=erased, keep=keep)


def list_result(
    shown: Sequence[Record],
    total: int,
    scopes: Sequence[str],
    kind: str | None,
    ctx: CallContext,
    more: str | None = None,
) -> ToolResult:
    """`memory_list`'s answer for the records `shown` of `total`; `more` replaces its note on the rest."""
    labels = _labels(scopes, ctx)
    what = ""
    if kind:
        what = msg(" {kind} 类", kind=kind) if ctx.style.terminal else msg("{kind} 类", kind=kind)
    listed = [record_dict(r, max_chars=RESULT_CONTENT_CHARS) for r in shown]
    if not shown:
        parts: list[str | None] = [msg("没有{what}记忆(范围:{labels})", what=what, labels=labels)]
    else:
        blocks = [
            _block(ctx.style.head(r), ctx.style.excerpt(r.content), meta=d, client=client_of(r))
            for r, d in zip(shown, listed, strict=True)
        ]
        if more is None:
            more = msg(",仅显示最新 {count} 条(调大 limit 可看更多)", count=len(shown)) if total > len(shown) else ""
        head = msg(
            "共 {total} 条{what}记忆(范围:{labels};按最近更新排序{more})",
            total=total,
            what=what,
            labels=labels,
            more=more,
        )
        parts = [head, *blocks]
    parts.append(truncation_note(sum(1 for r in listed if r.get("truncated"))))
    structured = {"ok": True, "count": len(shown), "total": total, "scopes": list(scopes), "records": listed}
    return ToolResult(text=_paragraphs(parts), structured=structured)


def _labels(scopes: Sequence[str], ctx: CallContext) -> str:
    """The scopes a search or list covered, as its header names them."""
    return joined((ctx.style.label(s, ctx.project, ctx.project_source) for s in scopes), ", ", ", ")


def _where(scope: str, ctx: CallContext) -> str:
    """`scope` as a save or forget names it: the current project also says where it came from."""
    return joined([scope, source_note(ctx.project_source)], "", "") if scope == ctx.project else scope


def _block(*head: str, meta: Mapping[str, Any], client: str | None = None) -> str:
    """A record's block: its head line (`head`, space-separated) over its `meta_line`."""
    return joined([joined(head, " ", " "), meta_line(meta, client=client)], "\n", "\n")


def _paragraphs(parts: Sequence[str | None]) -> str:
    """An answer's header, blocks and notes (None: no such note), a blank line apart."""
    return joined([part for part in parts if part], "\n\n", "\n\n")


def _list_order(record: Record) -> tuple[int, str]:
    return (-record.updated_at, record.id)


def newest(found: list[Record], limit: int) -> list[Record]:
    """``sorted(found, key=_list_order)[:limit]`` — newest first, ties by id — without sorting all:
    only the records at least as new as the `limit`-th newest can be among the first `limit`."""
    if len(found) <= limit:
        return sorted(found, key=_list_order)
    cutoff = heapq.nlargest(limit, found, key=operator.attrgetter("updated_at"))[-1].updated_at
    candidates = [r for r in found if r.updated_at >= cutoff]
    candidates.sort(key=_list_order)
    return candidates[:limit]


def _confirm_arg(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InvalidArgument(msg("confirm 必须是布尔值 true / false(收到 {show})。", show=show(value)), code="TOOL_ERROR")


_READ_ONLY = frozenset(spec.name for spec in TOOL_SPECS if spec.read_only)


def _stack(exc: BaseException, arguments: Mapping[str, Any]) -> str:
    """The traceback for the log; the exception's message only if it quotes no argument text."""
    message = str(exc)
    values = [v for value in arguments.values() for v in (value if isinstance(value, list) else [value])]
    quoted = [v for v in values if isinstance(v, str) and len(v.strip()) >= 4]
    if any(v.strip()[:24] in message for v in quoted) or len(message) > 300 or find_secret(message):
        message = f"<{len(message)} 字符的消息已隐去:可能含记忆内容>"
    frames = "".join(traceback.format_tb(exc.__traceback__))
    return f"Traceback (most recent call last):\n{frames}{type(exc).__qualname__}: {message}"


def _internal_error_text(name: str, exc: Exception) -> str:
    """What an internal fault may have done: honest about writes, never claiming "nothing changed"."""
    if name in _READ_ONLY:
        effect = msg("这是只读操作,记忆内容不会被改动;可以换个说法重试。")
    else:
        effect = msg("写入可能已经完成,也可能没有:重试前先用 memory_search 或 memory_get 核实,避免重复或误删。")
    return msg(
        "{name} 执行时发生内部错误({error}),这是本服务的缺陷,不是参数问题。"
        "{effect}详情(调用栈)已写入服务端日志(stderr 与日志文件)。",
        name=name,
        error=type(exc).__name__,
        effect=effect,
    )
