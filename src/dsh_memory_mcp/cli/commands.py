"""The human subcommands (docs/design.md: Command line): each a function ``(Call) -> exit code``
writing results to ``call.out`` and diagnostics (no program prefix) to ``call.err``.

list / search / get / forget / save go through `MemoryService.call`, so validation, scope rules and
rendering are the MCP tools' own (``--json``: their structuredContent). Nothing here imports the SDK:
`service.compose.open_service` is the server's composition minus the transport. Read-only commands
never create the store. Only ``reembed`` may spawn llama-server; search and save use a backend that
already answers, or the bundled model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from dsh_memory_mcp import config
from dsh_memory_mcp.cli.messages import shown, t
from dsh_memory_mcp.cli.output import colour_wanted, detach, is_terminal, page, pager_command, paint, paint_note
from dsh_memory_mcp.errors import DshMemoryError, EmbeddingUnavailable
from dsh_memory_mcp.service import health, transfer
from dsh_memory_mcp.store import scopes
from dsh_memory_mcp.texts import msg

if TYPE_CHECKING:
    from dsh_memory_mcp.service.context import CallContext
    from dsh_memory_mcp.service.render import ToolResult
    from dsh_memory_mcp.service.tools import MemoryService

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_USAGE = 2

#: The commands whose results a terminal gets through the pager.
PAGED = frozenset({"list", "search", "get", "duplicates", "stats", "recover"})
#: How long `search` lets the backend get ready (health, model, one probe) and then embed its query:
#: one person waiting for one answer; past these it answers lexically and says so.
SEARCH_BRING_UP_SECONDS = 3.0
SEARCH_QUERY_SECONDS = 2.0
#: How long `search` gives a configured backend to answer /health before going lexical.
SEARCH_HEALTH_SECONDS = 0.3
#: How long `save` waits for its record's vector (bring-up included: the bundled model loads in ~3 s).
SAVE_EMBED_SECONDS = 15.0


@dataclass(frozen=True)
class Call:
    """One subcommand invocation: its words, its options, the settings, where to write."""

    name: str
    args: tuple[str, ...]
    options: Mapping[str, str | bool]
    settings: config.Settings
    out: TextIO
    err: TextIO
    #: stdout is a terminal (controls in a memory's text made visible); and coloured there.
    terminal: bool = False
    colour: bool = False
    #: stderr is a terminal that takes colour.
    err_colour: bool = False

    def opt(self, dest: str) -> str | None:
        value = self.options.get(dest)
        return value if isinstance(value, str) else None

    def flag(self, dest: str) -> bool:
        return self.options.get(dest) is True

    def scoped(self) -> bool:
        """Whether ``--scope`` or ``--path`` was given."""
        return self.opt("scope") is not None or self.opt("path") is not None

    # -- output ------------------------------------------------------------------------------

    def print(self, text: str) -> None:
        self.out.write(text + "\n")

    def json(self, value: object) -> None:
        """``--json`` output: one line, non-ASCII kept."""
        self.print(json.dumps(value, ensure_ascii=False))

    def show(self, text: str) -> None:
        """A result a person reads (not ``--json``): on a terminal `output.paint`ed."""
        self.print(paint(text, self.colour) if self.terminal else text)

    def note(self, *lines: str) -> None:
        """Diagnostic lines on stderr (errors red, warnings yellow on a colour terminal)."""
        self.err.write("".join((paint_note(line) if self.err_colour else line) + "\n" for line in lines))
        self.err.flush()

    def ask(self, question: str) -> bool | None:
        """A person's yes (``y``) to `question` at a terminal; None when stdin or stdout is not one."""
        stdin = sys.stdin
        if stdin is None or not stdin.isatty() or not self.out.isatty():
            return None
        self.out.write(question)
        self.out.flush()
        return stdin.readline().strip().lower() in ("y", "yes")

    def usage(self, message: str) -> int:
        self.note(
            t("❌ 参数错误:{message}", message=message), t("⇒ 用 {prog} {command} --help 查看用法", command=self.name)
        )
        return EXIT_USAGE


class _Done(Exception):
    """Ends a command early with exit `code`, its reason already written."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


# ----------------------------------------------------------------------------------------------
# dispatch


def run(
    name: str,
    args: Sequence[str],
    options: Mapping[str, str | bool],
    settings: config.Settings,
    *,
    out: TextIO,
    err: TextIO,
) -> int:
    """Run subcommand `name`; returns the exit code. Store errors become one Chinese line, exit 1.
    A `PAGED` command's text at a terminal is gathered and shown through the pager at the end."""
    terminal = is_terminal(out)
    paged = terminal and name in PAGED and options.get("no_pager") is not True and options.get("json") is not True
    pager = pager_command(settings.pager) if paged else None
    sink = io.StringIO() if pager is not None else out
    call = Call(
        name,
        tuple(args),
        dict(options),
        settings,
        sink,
        err,
        terminal=terminal,
        colour=terminal and colour_wanted(out),
        err_colour=colour_wanted(err),
    )
    handler = _HANDLERS[name]
    try:
        try:
            code = handler(call)
        except _Done as done:
            code = done.code
        finally:
            if isinstance(sink, io.StringIO) and pager is not None:
                page(sink.getvalue(), out, pager)
        out.flush()
        return code
    except BrokenPipeError:
        # `export | head`: the reader left. Silence the final flush; an export is then incomplete.
        detach(out)
        if name == "export":
            call.note(t("⚠️ 输出管道已关闭,导出不完整"))
            return EXIT_FAIL
        return EXIT_OK
    except DshMemoryError as exc:
        call.note(t("❌ {command} 失败:{message}", command=name, message=exc.message))
        return EXIT_FAIL


# ----------------------------------------------------------------------------------------------
# opening the store


def _require_store(call: Call) -> None:
    """For read-only commands: when the store directory is not there, say so and end with exit 1."""
    root = call.settings.store_dir
    if os.path.isdir(root):
        return
    if os.path.lexists(root):
        call.note(t("❌ 记忆库路径不是目录:{path}", path=root))
    else:
        call.note(t("❌ 记忆库目录不存在:{path}", path=root))
    how = t("(当前用的是默认目录)") if call.settings.store_dir_is_default else ""
    call.note(
        t("⇒ 用 --store-dir <目录> 或环境变量 DSH_MEMORY_STORE_DIR 指向已有的记忆库{how};本命令不会创建它", how=how)
    )
    raise _Done(EXIT_FAIL)


@contextlib.contextmanager
def _service(call: Call, *, create: bool, vectors: config.VectorSettings | None = None) -> Iterator[MemoryService]:
    """The store (prepared when `create`) and the tools over it, closed (touches flushed) after.

    A vector channel is included when `vectors` is usable; it is not started: no worker, no
    spawn. Callers start it if they want a backend. Without `create` (the read commands) the
    store must exist (`_require_store`) and the channel is read-only: no backfill, no sidecar or
    calibration writes under the store.
    """
    from dsh_memory_mcp.service.compose import close_service, open_service

    if not create:
        _require_store(call)

    usable = vectors if vectors is not None and vectors.usable else config.VectorSettings(enabled=False)
    service = open_service(dataclasses.replace(call.settings, vector=usable), prepare=create, read_only=not create)
    try:
        yield service
    finally:
        close_service(service)


def _resolve_scopes(call: Call, service: MemoryService, scope: str | None = None) -> list[str]:
    """The scope keys `scope` (default `--scope`) / `--path` name, by the tools' own rules (aliases,
    `all`, paths); with neither given, every scope on disk. A bad one: the tools' coded error, exit 1."""
    from dsh_memory_mcp.service.render import error_result

    path = call.opt("path") if scope is None else None
    scope = call.opt("scope") if scope is None else scope
    if scope is None and path is None:
        return service.store.discover_scopes()
    try:
        return service.read_scopes(scope, path)
    except DshMemoryError as exc:
        raise _Done(_tool_error(call, error_result(exc.code, exc.message))) from exc


def _tool(
    call: Call, service: MemoryService, name: str, args: Mapping[str, Any], client: str | None = None
) -> ToolResult:
    """`name` called as a person at a terminal calls it: the tools' checks and codes, the text
    rendered for a terminal (`render.FOR_TERMINAL`), the structured content unchanged."""
    ctx = _terminal(call, service)
    return service.call(name, args, ctx.with_client(client) if client is not None else ctx)


def _tool_error(call: Call, result: ToolResult) -> int:
    if call.flag("json"):
        call.json(result.structured)
    else:
        call.note(*shown(result.text).splitlines())
    return EXIT_FAIL


# ----------------------------------------------------------------------------------------------
# list / search / get / forget: the tools


def _show(call: Call, result: ToolResult) -> int:
    """A tool's result: ``--json`` its structuredContent; at a terminal its text, in the user's language."""
    if result.is_error:
        return _tool_error(call, result)
    if call.flag("json"):
        call.json(result.structured)
    else:
        call.show(shown(result.text))
    return EXIT_OK


def _tool_args(call: Call, *dests: str) -> dict[str, Any]:
    """The options given, under the tools' argument names (``--top-k`` is ``topK``)."""
    return {("topK" if d == "top_k" else d): value for d in dests if (value := call.opt(d)) is not None}


def cmd_list(call: Call) -> int:
    """`memory_list`'s answer over the page's browse (`browse.browse`: the same filters as the page's
    kind / client / date menus), from ``--offset``; the header says how to get the next page."""
    from dsh_memory_mcp.service import browse
    from dsh_memory_mcp.service.render import error_result
    from dsh_memory_mcp.service.tools import list_result
    from dsh_memory_mcp.service.validate import LIMIT_DEFAULT, LIMIT_MAX, integer_arg, kind_arg

    with _service(call, create=False) as service:
        args = _tool_args(call, "scope", "path")
        _name_scope(call, service, args)
        ctx = _terminal(call, service)
        now = service.clock()
        since = _since(call, now)
        try:
            kind = kind_arg(call.opt("kind"), default=None)
            limit = integer_arg(
                call.opt("limit"), name="limit", low=1, high=LIMIT_MAX, default=LIMIT_DEFAULT, code="LIMIT_RANGE"
            )
            offset = integer_arg(call.opt("offset"), name="offset", low=0, high=10**9, default=0, code="OFFSET_RANGE")
            scopes = service.read_scopes(args.get("scope"), args.get("path"), ctx)
        except DshMemoryError as exc:
            return _tool_error(call, error_result(exc.code, exc.message))
        client = (call.opt("client") or "").strip().casefold() or None
        filters = browse.Filters(kind=kind, client=client, since=since)
        page = browse.browse(service.store, scopes, filters, offset=offset, limit=limit, now=now)
        end = offset + len(page.records)
        more = t(",从第 {first} 条起", first=offset + 1) if offset and page.records else ""
        if page.total > end:
            more += t(";还有 {rest} 条:--offset {end}", rest=page.total - end, end=end)
        result = list_result(page.records, page.total, scopes, kind, ctx, more=more)
        return _show(call, result)


def _since(call: Call, now: int) -> int | None:
    """``--since``: a local date (``2026-07-01``) or days back (``7d``) as ms; None when not given."""
    import re

    from dsh_memory_mcp.service import browse

    value = call.opt("since")
    if value is None:
        return None
    word = value.strip().lower()
    if re.fullmatch(r"[0-9]{1,5}d", word):
        return now - int(word[:-1]) * browse.DAY_MS
    try:
        return browse.day_bounds(word, time.localtime(now / 1000).tm_gmtoff // 60)[0]
    except DshMemoryError:
        raise _Done(call.usage(t("--since 要写成 YYYY-MM-DD 或天数如 7d(收到 {value!r})", value=value))) from None


def _terminal(call: Call, service: MemoryService) -> CallContext:
    """The context a person at a terminal calls the tools with (full project paths under ``--long``)."""
    return service.default_context.for_terminal(full_paths=call.flag("long"))


def cmd_search(call: Call) -> int:
    if not any(word.strip() for word in call.args):
        # A usage error (exit 2, like every argument error); `--json` still gets the tool's coded object.
        if call.flag("json"):
            from dsh_memory_mcp.service.validate import query_arg

            try:
                query_arg(" ".join(call.args))
            except DshMemoryError as exc:  # QUERY_EMPTY, memory_search's own check
                call.json({"ok": False, "code": exc.code, "message": exc.message})
        return call.usage(t("缺少查询词:search 关键词…(多个词用空格连成一句查询)"))
    _require_store(call)  # before a backend is probed
    with _service(call, create=False, vectors=_search_vectors(call.settings.vector)) as service:
        if service.vectors is not None:
            service.vectors.start()
            service.vectors.set_query_budget(SEARCH_QUERY_SECONDS)
            service.vectors.wait_ready(SEARCH_BRING_UP_SECONDS)
        args = _tool_args(call, "scope", "path", "top_k")
        _name_scope(call, service, args)
        args["query"] = " ".join(call.args)
        return _show(call, _tool(call, service, "memory_search", args))


def _search_vectors(vector: config.VectorSettings) -> config.VectorSettings | None:
    """The backend a search or save may use: one that already answers, or the bundled model.

    The bundled model is started when it is not running (it is shared, and outlives this command
    for the next ones, `search.bundled`). A configured endpoint is used if its /health answers
    within `SEARCH_HEALTH_SECONDS`. Otherwise a llama-server already running on the port is used
    as an endpoint (never spawned: it would die with this command; never stopped), with the model
    id it reports.
    """
    if not vector.usable:
        return None
    if vector.bundled:
        return vector
    from dsh_memory_mcp.search.embedding import EmbeddingClient

    if vector.endpoint is not None:
        base, candidate = vector.endpoint, vector
    else:
        base = f"http://127.0.0.1:{vector.port}"
        candidate = dataclasses.replace(vector, endpoint=base, model=None)
    client = EmbeddingClient(base)
    try:
        health = client.health(timeout=SEARCH_HEALTH_SECONDS)
    finally:
        client.close()
    if health == "down" or (health != "ready" and vector.endpoint is None):
        return None
    return candidate


def cmd_get(call: Call) -> int:
    with _service(call, create=False) as service:
        result = _tool(call, service, "memory_get", {"ids": list(call.args), **_tool_args(call, "offset")})
        code = _show(call, result)
        if code == EXIT_OK and call.flag("history") and not call.flag("json"):
            _print_history(call, service, [str(r["id"]) for r in result.structured.get("records") or []])
        # A script asking for ids must be able to tell that one is not there (the text says which).
        return EXIT_FAIL if code == EXIT_OK and result.structured.get("missing") else code


def _print_history(call: Call, service: MemoryService, ids: Sequence[str]) -> None:
    """``get --history``: each memory's versions, newest first (`history.versions`)."""
    from dsh_memory_mcp.service import history
    from dsh_memory_mcp.service.render import client_of, fmt_time, project_name, snippet

    scope_name = str if call.flag("long") else project_name
    for ident in ids:
        record = history.find_one(service, ident)
        if record is None:
            continue
        chain = history.versions(service, record)
        lines = [t("{short} 的版本(新 → 旧,共 {count} 个):", short=record.short_id, count=len(chain))]
        for n, version in enumerate(chain, 1):
            data = version.data
            edited = data.get("editedBy")
            who = edited.get("client") if isinstance(edited, dict) else client_of(version)
            state = t("已取代") if version.expired_at is not None else t("当前")
            lines.append(
                f"  {n}. {version.short_id} · {state} · {scope_name(version.scope)} · {version.kind}"
                f" · {fmt_time(version.updated_at)} · {who or '-'}\n     {snippet(version.content)}"
            )
        first = chain[-1]
        lines.append(
            t(
                "  创建 {created} · 使用 {count} 次 · 来源 {source}",
                created=fmt_time(record.created_at),
                count=record.access_count,
                source=client_of(first) or "-",
            )
        )
        call.show("\n" + "\n".join(lines))


def cmd_forget(call: Call) -> int:
    ident = call.opt("id")
    if call.args:
        if len(call.args) > 1:
            return call.usage(
                t("一次只能删除一个 id(收到 {count} 个:{ids})", count=len(call.args), ids=" ".join(call.args))
            )
        if ident is not None:
            return call.usage(
                t("id 给了两次:位置参数 {word} 与 --id {ident},只保留一个", word=call.args[0], ident=ident)
            )
        ident = call.args[0]
    dry_run = call.flag("dry_run")
    if dry_run and call.opt("query") is None:
        return call.usage(t("--dry-run 只用于 --query(按 id 删除的是确定的一条:先用 get 看它)"))
    # Vectors only to drop the deleted ids from the sidecars: a local rewrite, no backend.
    with _service(call, create=not dry_run, vectors=None if dry_run else call.settings.vector) as service:
        args = _tool_args(call, "query", "scope", "path")
        _name_scope(call, service, args)
        if ident is not None:
            args["id"] = ident
        elif "query" in args:
            settled = _forget_query_settled(call, service, args, dry_run=dry_run)
            if settled is not None:
                return settled
            args["confirm"] = True
        ctx = _terminal(call, service)
        result = service.call("memory_forget", args, ctx if call.flag("purge") else ctx.for_person(CLI_CLIENT))
        return _show(call, result)


def _forget_query_settled(call: Call, service: MemoryService, args: Mapping[str, Any], *, dry_run: bool) -> int | None:
    """A person's forget by query: the memories it would delete listed first. ``--dry-run`` stops
    there (exit 0); more than one match needs ``--yes`` or a "y" at a terminal, else exit 1 with
    nothing deleted. None: go ahead (the tool then deletes what matches at that moment)."""
    from dsh_memory_mcp.service.render import fmt_time, snippet

    try:
        scope, matches = service.forget_matches(args, service.default_context.for_terminal())
    except DshMemoryError:
        return None  # the tool answers with its own code
    if not dry_run and (len(matches) <= 1 or call.flag("confirm")):
        return None
    lines = [t("{scope} 中内容包含 {query!r} 的记忆 {count} 条:", scope=scope, query=args["query"], count=len(matches))]
    lines += [f"  {r.short_id}  ({r.kind}) {snippet(r.content)}  {fmt_time(r.updated_at)}" for r in matches]
    call.show("\n".join(lines))
    if dry_run:
        call.note(t("--dry-run:什么都没有删除"))
        return EXIT_OK
    answer = call.ask(t("全部删除这 {count} 条?[y/N] ", count=len(matches)))
    if answer:
        return None
    call.note(
        t("没有删除任何记忆")
        if answer is False
        else t("匹配到 {count} 条,没有删除任何记忆:确认全部删除请加 --yes;只删一条请用 forget ID", count=len(matches))
    )
    return EXIT_FAIL


# ----------------------------------------------------------------------------------------------
# save: memory_save from the command line

#: `save`'s exit code when `memory_save` refuses the content itself (empty, too long, a credential):
#: the same content will be refused again; 1 stays "could not save now" (store, lock), 2 a usage error.
EXIT_REFUSED = 3
#: Codes of a refused content (exit `EXIT_REFUSED`).
REFUSED_CODES = frozenset({"CONTENT_EMPTY", "CONTENT_TOO_LONG", "CONTENT_SECRET"})
#: Codes that name a bad option value (`--kind`, `--tags`, `--importance`, `--scope`): a usage error, exit 2.
ARGUMENT_CODES = frozenset(
    {
        "KIND_INVALID",
        "TAGS_INVALID",
        "IMPORTANCE_RANGE",
        "SCOPE_INVALID",
        "SCOPE_NOT_WRITABLE",
        "SCOPE_NAME_INVALID",
        "SCOPE_NAME_TAKEN",
        "PATH_INVALID",
        "PATH_SCOPE_CONFLICT",
    }
)
#: Who a memory saved from the command line says wrote it (`source.client`).
CLI_CLIENT = "cli"


def cmd_save(call: Call) -> int:
    """`memory_save` itself (same checks, codes and scope rules): stdout gets the id (``--json``: the
    structured result), stderr the tool's sentence; the exit code is `_save_outcome`'s."""
    if len(call.args) != 1:
        if not call.args:
            return call.usage(t('缺少要保存的内容:save "内容",或 save - 从标准输入读'))
        return call.usage(
            t('内容只能是一个参数(收到 {count} 个);含空格的内容请加引号:save "用户喜欢深色主题"', count=len(call.args))
        )
    content = call.args[0]
    if content == "-":
        content = _read_stdin_content(call)
    args: dict[str, Any] = {"content": content}
    args.update(_tool_args(call, "kind", "tags", "scope", "path", "importance", "supersedes"))
    with _service(call, create=True, vectors=_search_vectors(call.settings.vector)) as service:
        if service.vectors is not None:  # like a server: the saved record gets its vector
            service.vectors.start()
        outcome = _save_outcome(call, _tool(call, service, "memory_save", args, client=CLI_CLIENT))
        if service.vectors is not None:
            service.vectors.wait_saved(SAVE_EMBED_SECONDS)
        return outcome


def cmd_edit(call: Call) -> int:
    """A new version of the memory (`history.revise`: a supersede that keeps its created time, use
    count and source)."""
    if not call.args or len(call.args) > 2:
        return call.usage(t('用法:edit ID ["新内容" | -] [--kind KIND] [--tags a,b] [--importance X]'))
    changes: dict[str, Any] = _tool_args(call, "kind", "tags", "importance")
    if len(call.args) == 2:
        content = call.args[1]
        changes["content"] = _read_stdin_content(call) if content == "-" else content
    if not changes:
        return call.usage(t("没有要改的:给出新内容,或 --kind / --tags / --importance 之一"))
    return _revise(call, call.args[0], changes, None)


def cmd_move(call: Call) -> int:
    """``move ID --to SCOPE``: the memory into another scope, its history kept (`history.revise`)."""
    target = call.opt("to")
    if len(call.args) != 1 or target is None:
        return call.usage(t("用法:move ID --to SCOPE(global、project、项目文件夹名、project:<路径> 或自定义名)"))
    return _revise(call, call.args[0], {}, target)


def _revise(call: Call, ident: str, changes: Mapping[str, Any], scope: str | None) -> int:
    from dsh_memory_mcp.service import history

    with _service(call, create=True, vectors=_search_vectors(call.settings.vector)) as service:
        if scope is not None:
            scope = _scope_by_name(call, service, scope, creating=True)
        if service.vectors is not None:  # like `save`: the new version gets its vector
            service.vectors.start()
        ctx = service.default_context.for_terminal().with_client(CLI_CLIENT)
        found, result = history.revise(service, ident, changes, ctx, scope=scope)
        if found is not None and not result.is_error:
            call.note(t("取代了 {old}(创建时间、使用次数与来源保留)", old=found.short_id))
        outcome = _save_outcome(call, result)
        if service.vectors is not None:
            service.vectors.wait_saved(SAVE_EMBED_SECONDS)
        return outcome


def _scope_by_name(call: Call, service: MemoryService, value: str, *, creating: bool) -> str:
    """`--scope` / `--to` as people name scopes: a project by its folder's name too (``atlas-web``
    → ``project:/home/me/atlas-web``). Any other form goes to the tools as it is. An unknown name
    (when not `creating` one) or a folder name of several projects → a usage error naming the
    candidates, exit 2."""
    from dsh_memory_mcp.store.scopes import normalise_custom_name

    word = value.strip()
    if ":" in word or word.lower() in ("global", "project", "session", "all", "*"):
        return value
    try:
        name = normalise_custom_name(word)
    except DshMemoryError:
        return value  # the tools say what is wrong with it
    on_disk = service.store.discover_scopes()
    if name in on_disk or name in service.store.read_aliases():
        return value
    from dsh_memory_mcp.service.render import project_name

    folder = name.casefold()
    matches = [s for s in on_disk if s.startswith("project:") and project_name(s).casefold() == folder]
    if len(matches) == 1:
        return matches[0]
    if matches:
        candidates = ", ".join(matches)
        raise _Done(
            call.usage(
                t("{name} 是多个项目的文件夹名:{candidates};请写 project:<路径>", name=word, candidates=candidates)
            )
        )
    if creating:
        return value
    known = ", ".join(project_name(s) for s in on_disk) or "-"
    raise _Done(call.usage(t("没有叫 {name} 的作用域;现有:{known}", name=word, known=known)))


def _name_scope(call: Call, service: MemoryService, args: dict[str, Any]) -> None:
    """``args["scope"]`` through `_scope_by_name` (reading: the name must exist). With ``path`` the
    name is that path's alias (the tools' rule), never a folder name to look up."""
    if "scope" in args and args.get("path") is None:
        args["scope"] = _scope_by_name(call, service, str(args["scope"]), creating=False)


def _read_stdin_content(call: Call) -> str:
    """Standard input as the content, else the command ends with the refusal `memory_save` would give:
    read bounded (never more than a too-long content needs: `yes | save -` ends), UTF-8 (else
    CONTENT_EMPTY, as the tool answers a content that is not a string)."""
    from dsh_memory_mcp.service.render import error_result

    max_chars = call.settings.max_content
    # A UTF-8 character is at most 4 bytes: past this many bytes the content is surely too long.
    bound = 4 * max_chars + 4
    data = sys.stdin.buffer.read(bound + 1) if sys.stdin is not None else b""
    if len(data) > bound:
        message = t(
            "标准输入超过 {limit} 个字符的上限(DSH_MEMORY_MAX_CONTENT):一条记忆应是一句自包含的陈述;"
            "长文档请存成文件,记忆里只记它在哪、讲什么",
            limit=max_chars,
        )
        raise _Done(_save_outcome(call, error_result("CONTENT_TOO_LONG", message)))
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        message = t("标准输入不是 UTF-8 文本(第 {offset} 个字节起),没有保存", offset=exc.start)
        raise _Done(_save_outcome(call, error_result("CONTENT_EMPTY", message))) from exc


def _save_outcome(call: Call, result: ToolResult) -> int:
    """Exit 0 saved (or already there), 2 a bad option value, 3 (`EXIT_REFUSED`) the content refused,
    1 anything else (store, lock)."""
    code = result.structured.get("code")
    if result.is_error:
        _tool_error(call, result)
        if code in REFUSED_CODES:
            return EXIT_REFUSED
        return EXIT_USAGE if code in ARGUMENT_CODES else EXIT_FAIL
    if call.flag("json"):
        call.json(result.structured)
    else:
        call.print(str(result.structured["id"]))
        call.note(*shown(result.text).splitlines())
    return EXIT_OK


# ----------------------------------------------------------------------------------------------
# export / import


def cmd_export(call: Call) -> int:
    with _service(call, create=False) as service:
        resolved = _resolve_scopes(call, service)
        sink = getattr(call.out, "buffer", None)
        if sink is not None:
            call.out.flush()
        exported = 0
        corrupt: list[str] = []
        bar = Progress(call.err, t("导出"))
        for n, part in enumerate(transfer.export_scopes(service.store, resolved)):
            bar(n, len(resolved))
            if sink is not None:  # raw UTF-8 whatever the console's encoding: a backup must be exact
                sink.write(part.text.encode("utf-8", "surrogateescape"))
            else:
                call.out.write(part.text)
            exported += part.records
            corrupt.extend(part.corrupt)
        bar(len(resolved), len(resolved))
        bar.finish()
        if sink is not None:
            sink.flush()
        stray = [] if call.scoped() else transfer.unattributed_files(service.store)
        call.note(t("导出完成:{records} 条记录,{scopes} 个作用域", records=exported, scopes=len(resolved)))
        if corrupt:
            call.note(
                t(
                    "⚠️ {count} 行损坏的行没有导出(仍原样留在记忆库文件里):{lines}",
                    count=len(corrupt),
                    lines=",".join(shown(c) for c in corrupt[:10]) + (" …" if len(corrupt) > 10 else ""),
                )
            )
        for path in stray:
            call.note(t("⚠️ 无法确定作用域的文件没有导出:{path}", path=path))
        return EXIT_OK


def cmd_import(call: Call) -> int:
    if len(call.args) != 1:
        if not call.args:
            return call.usage(t("缺少要导入的文件;用 - 表示标准输入"))
        return call.usage(t("只能导入一个文件(收到 {count} 个);用 - 表示标准输入", count=len(call.args)))
    source = call.args[0]
    try:
        if source == "-":
            data = sys.stdin.buffer.read() if sys.stdin is not None else b""
        else:
            with open(source, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        call.note(t("❌ 无法读取导入文件 {path}:{why}", path=source, why=exc.strerror or exc))
        return EXIT_FAIL
    plan = _plan(call, data)
    for problem in plan.problems:
        call.note("⚠️ " + shown(problem.text()))
    for refusal in plan.refused:
        call.note("⚠️ " + shown(refusal.text()))
    dry_run = call.flag("dry_run")
    with _service(call, create=not dry_run) as service:
        target = _import_target(call, service) if plan.graph else scopes.GLOBAL
        outcome = transfer.apply_import(service.store, plan, target, now=service.clock(), dry_run=dry_run)
        refused = t(",拒绝 {count} 条", count=outcome.refused) if outcome.refused else ""
        counts = {"added": outcome.added, "existing": outcome.existing, "bad": outcome.bad, "refused": refused}
        if dry_run:
            call.note(t("预览(没有写入):将新增 {added} 条,已存在 {existing} 条,跳过 {bad} 行{refused}", **counts))
        else:
            call.note(t("导入完成:新增 {added} 条,已存在 {existing} 条,跳过 {bad} 行{refused}", **counts))
        if not outcome.added and not outcome.existing and outcome.refused:
            call.note(t("❌ {path} 里的记录都被拒绝了(原因见上,与 memory_save 的检查相同)", path=source))
            return EXIT_FAIL
        if not outcome.added and not outcome.existing:
            call.note(
                t("❌ {path} 里没有一行可导入的记录(本服务 export 的记录行,或 MCP memory 知识图谱 JSONL)", path=source)
            )
            return EXIT_FAIL
        if outcome.added and call.settings.vector.usable and not dry_run:
            call.note(t("ℹ️ 新记录的向量由运行中的服务在后台补齐,也可以运行 {prog} reembed"))
        return EXIT_OK


#: Bytes of an import file planned between two progress updates.
IMPORT_CHUNK = 256 * 1024


def _plan(call: Call, data: bytes) -> transfer.ImportPlan:
    """`transfer.plan_import` of `data` fed in pieces, with `Progress` (reading is most of an import's time)."""
    planner = transfer.ImportPlanner(call.settings)
    bar = Progress(call.err, t("导入"), counts=False)
    view = memoryview(data)
    for start in range(0, len(data), IMPORT_CHUNK):
        bar(start, len(data))
        planner.feed(bytes(view[start : start + IMPORT_CHUNK]))
    bar(len(data), len(data))
    bar.finish()
    return planner.finish()


def _import_target(call: Call, service: MemoryService) -> str:
    """Where knowledge-graph memories go: `--scope` / `--path` by the tools' rules, default global."""
    if not call.scoped():
        return scopes.GLOBAL
    resolved = _resolve_scopes(call, service)
    if len(resolved) != 1 or (call.opt("scope") or "").strip().lower() in ("all", "*"):
        from dsh_memory_mcp.service.render import error_result

        message = msg("导入只能写入一个作用域,all 是只读范围:请指定 global、project 或具体作用域。")
        raise _Done(_tool_error(call, error_result("SCOPE_NOT_WRITABLE", message)))
    return resolved[0]


# ----------------------------------------------------------------------------------------------
# stats


def cmd_stats(call: Call) -> int:
    with _service(call, create=False) as service:
        resolved = _resolve_scopes(call, service)
        store = service.store
        rows, totals = health.store_stats(store, resolved, service.clock())
        del totals["covered"]
        stray = [] if call.scoped() else transfer.unattributed_files(store)
        aliases = store.read_aliases()
        aliases_problem = store.aliases_problem()
        missing = {scope: len(lost) for scope, lost in store.missing().items() if scope in resolved}
        leftovers = [store.layout.relpath(path) for path in store.leftover_tmps()]
        if call.flag("json"):
            report = {
                "ok": True,
                "storeDir": store.root,
                "scopes": rows,
                "totals": totals,
                "aliases": aliases,
                "aliasesProblem": aliases_problem,
                "unattributedFiles": stray,
                "missingAcknowledged": missing,
                "leftoverTmpFiles": leftovers,
            }
            call.json(report)
            return EXIT_OK
        lines = [t("记忆库:{path}", path=store.root), ""]
        for row in rows:
            lines.append(t("{scope}  ({file},{size})", **row, size=_size(int(row["bytes"]))))
            lines.append(t("  记录 {records} 条:有效 {live},过期/被取代 {expired},损坏行 {corrupt}", **row))
            car = row["sidecar"]
            if car:
                head = t("{model} {dims} 维", **car) if car["model"] is not None else t("表头无效")
                size = _size(int(car["bytes"]))
                lines.append(
                    t(
                        "  向量 {file}({size}):{head},{vectors} 条,覆盖有效记录 {covered}/{live}",
                        **car,
                        size=size,
                        head=head,
                        live=row["live"],
                    )
                )
            else:
                lines.append(t("  向量:无 .vec 文件"))
        if not rows:
            lines.append(t("(没有任何作用域文件)"))
        lines += [
            "",
            t(
                "合计:{scopes} 个作用域,{records} 条记录(有效 {live},过期 {expired}),"
                "损坏行 {corrupt},{size},向量 {vectors} 条",
                **totals,
                size=_size(totals["bytes"]),
            ),
        ]
        if aliases:
            lines.append(
                t(
                    "作用域别名 {count} 个:{aliases}",
                    count=len(aliases),
                    aliases=",".join(f"{k} → {v}" for k, v in sorted(aliases.items())),
                )
            )
        lines.extend(t("⚠️ 无法确定作用域的文件:{path}", path=path) for path in stray)
        if aliases_problem:
            lines.append("⚠️ " + shown(aliases_problem))
        from dsh_memory_mcp.store.shared import RECOVER_HINT

        for scope, count in missing.items():
            lines.append(
                t(
                    "⚠️ 作用域 {scope} 少了 {count} 条本服务确认保存过、从未删除或取代的记忆"
                    "(被不加锁的写入者覆盖了?)⇒ {hint}",
                    scope=scope,
                    count=count,
                    hint=RECOVER_HINT,
                )
            )
        if leftovers:
            lines.append(
                t(
                    "⚠️ 已退出的写入者遗留的临时文件 {count} 个:{files}(下次写入时自动清除)",
                    count=len(leftovers),
                    files=",".join(leftovers),
                )
            )
        call.print("\n".join(lines))
        return EXIT_OK


# ----------------------------------------------------------------------------------------------
# recover


def cmd_recover(call: Call) -> int:
    if call.flag("trash") or call.flag("empty"):
        from dsh_memory_mcp.cli.trash import cmd_trash

        return cmd_trash(call)
    if call.args:
        return call.usage(t("recover 只在 --trash 时接 id(从回收站恢复):recover --trash ID …"))
    dry_run = call.flag("dry_run")
    with _service(call, create=False) as service:
        with contextlib.suppress(OSError):  # unreadable: `recover` says nothing is missing, as before
            service.store.journal.refresh()
        scopes = service.store.journal.scopes()  # those `recover(None)` would go through, one by one
        if call.scoped():
            scopes = _resolve_scopes(call, service)
        restored: dict[str, list[str]] = {}
        refused: dict[str, list[tuple[str, str]]] = {}
        bar = Progress(call.err, t("恢复"))
        for n, scope in enumerate(scopes):
            bar(n, len(scopes))
            for name, entries in service.store.recover(scope, dry_run=dry_run).items():
                restored.setdefault(name, []).extend(e.id for e in entries)
            for name, doubts in service.store.doubtful(scope).items():
                refused.setdefault(name, []).extend((d.entry.id, d.reason) for d in doubts)
        bar(len(scopes), len(scopes))
        bar.finish()
    if call.flag("json"):
        refusals = {name: [{"id": rid, "reason": why} for rid, why in items] for name, items in refused.items()}
        call.json({"ok": True, "dryRun": dry_run, "restored": restored, "refused": refusals})
        return EXIT_OK
    lines: list[str] = []
    if not restored:
        lines.append(t("没有需要恢复的记忆:本服务确认保存过、从未删除或取代的记录都还在文件里。"))
    else:
        total = sum(len(ids) for ids in restored.values())
        if dry_run:
            lines.append(t("将恢复 {count} 条被覆盖的记忆(按写入时的原样追加回作用域文件):", count=total))
        else:
            lines.append(t("已恢复 {count} 条被覆盖的记忆(按写入时的原样追加回作用域文件):", count=total))
        for name, ids in restored.items():
            listed = ",".join(i[:8] for i in ids[:20]) + ("…" if len(ids) > 20 else "")
            lines.append(t("  {scope}:{count} 条 {ids}", scope=name, count=len(ids), ids=listed))
        if dry_run:
            lines.append(t("(--dry-run:没有写入任何文件;去掉 --dry-run 执行恢复)"))
    if refused:
        total = sum(len(items) for items in refused.values())
        lines.append(t("另有 {count} 条不在文件里的记忆没有恢复(无法排除它们已被删除,不做猜测):", count=total))
        for name, items in refused.items():
            lines.extend(f"  {name}:{rid[:8]} — {shown(why)}" for rid, why in items[:20])
            if len(items) > 20:
                lines.append(t("  {scope}:…另 {count} 条", scope=name, count=len(items) - 20))
    call.print("\n".join(lines))
    return EXIT_OK


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KB"
    return f"{n / 1024 / 1024:.1f} MB"


# ----------------------------------------------------------------------------------------------
# duplicates


def cmd_duplicates(call: Call) -> int:
    """The page's near-duplicate groups (`duplicates.groups`; ``--json`` its rows), every scope by
    default. Read-only: replacing stays the page's action (or `edit` / ``save --supersedes``)."""
    from dsh_memory_mcp.service import browse, duplicates
    from dsh_memory_mcp.service.render import fmt_time, project_name, snippet

    with _service(call, create=False) as service:
        args = _tool_args(call, "scope", "path")
        _name_scope(call, service, args)
        resolved = _resolve_scopes(call, service, args.get("scope"))
        found = [(key, group) for key in resolved for group in duplicates.groups(service, key)]
        if call.flag("json"):
            rows = [{"scope": key, "records": [browse.card(r) for r in group.records]} for key, group in found]
            call.json({"ok": True, "total": len(rows), "groups": rows})
            return EXIT_OK
        name = (lambda key: key) if call.flag("long") else project_name
        if not found:
            shown_scopes = ", ".join(name(key) for key in resolved) or "-"
            call.show(t("没有内容几乎相同的记忆(范围:{scopes})", scopes=shown_scopes))
            return EXIT_OK
        lines = [t("{count} 组内容几乎相同的记忆(按用词比较;同一意思的不同说法不算):", count=len(found))]
        for n, (key, group) in enumerate(found, 1):
            lines += ["", t("第 {n} 组({count} 条)", n=n, count=len(group.records))]
            for r in group.records:
                lines.append(f"  ({name(key)} · {r.kind}) {snippet(r.content)}")
                used = t("更新 {updated} · 使用 {count} 次", updated=fmt_time(r.updated_at), count=r.access_count)
                lines.append(f"    id={r.short_id} {used}")
        lines += [
            "",
            t(
                "提示:这里只列出,不改动。保留一条、替换其余:网页「重复的记忆」里的「保留这条,替换其余」"
                "(被替换的可在版本里恢复);命令行用 {prog} edit ID 改写要保留的那条,"
                '{prog} save "内容" --supersedes ID 取代一条,{prog} forget ID 删除一条。'
            ),
        ]
        call.show("\n".join(lines))
        return EXIT_OK


# ----------------------------------------------------------------------------------------------
# reembed


def cmd_reembed(call: Call) -> int:
    vector = call.settings.vector
    if not vector.usable:
        if vector.enabled:
            hint = t(
                "⇒ 启用方法:把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件(并让 llama-server 在 PATH 上,"
                "或用 DSH_MEMORY_EMBED_EXE 指定它的路径),或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务地址"
            )
        else:
            hint = t(
                "⇒ 去掉 DSH_MEMORY_VECTOR=off,并把 DSH_MEMORY_EMBED_MODEL 设为一个 .gguf 嵌入模型文件"
                "(并让 llama-server 在 PATH 上,或用 DSH_MEMORY_EMBED_EXE 指定它的路径),"
                "或把 DSH_MEMORY_EMBED_ENDPOINT 设为已在运行的嵌入服务地址"
            )
        call.note(t("❌ 向量检索不可用({why}),无法重建向量", why=vector.unavailable_reason), hint)
        return EXIT_FAIL
    with _service(call, create=True, vectors=vector) as service:
        channel = service.vectors
        assert channel is not None
        wanted: list[str] = []
        for word in call.args:
            wanted.extend(_resolve_scopes(call, service, word))
        if call.scoped() or not call.args:
            wanted.extend(_resolve_scopes(call, service))
        targets = list(dict.fromkeys(wanted))
        bar = Progress(call.err, t("重建向量"))
        try:
            written = channel.reembed(targets, bar)
        except EmbeddingUnavailable as exc:
            bar.finish()
            call.note(
                t("❌ 重建向量失败:{why}", why=exc.message),
                t("⇒ 检查嵌入服务后重试;已写好的作用域保持新向量,其余不变"),
            )
            return EXIT_FAIL
        bar.finish()
        model = channel.stats()
        call.note(
            t(
                "重建完成:{scopes} 个作用域,写入 {vectors} 条向量(model={model},dims={dims})",
                scopes=len(targets),
                vectors=written,
                model=model["model"],
                dims=model["dims"],
            )
        )
        return EXIT_OK


class Progress:
    """``progress(done, total)`` of a long command, on a terminal's stderr only: one line redrawn in
    place (``导入  42% [############..................] 剩余 0:12``), at most `FPS` times a second;
    a log, CI or a pipe gets nothing. `counts`: show ``done/total`` too (items, not bytes).
    `clock` is a parameter so a test need not sleep. `finish` ends the line."""

    WIDTH = 30
    FPS = 10

    def __init__(
        self, stream: TextIO, label: str, *, counts: bool = True, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.stream = stream
        self.label = label
        self.counts = counts
        self.clock = clock
        self.tty = is_terminal(stream)
        self.started = clock()
        self.drawn_at: float | None = None

    def __call__(self, done: int, total: int) -> None:
        if not self.tty:
            return
        now = self.clock()
        if self.drawn_at is not None and now - self.drawn_at < 1 / self.FPS and done < total:
            return
        self.drawn_at = now
        share = 1.0 if total <= 0 else min(1.0, max(0, done) / total)
        filled = int(self.WIDTH * share)
        line = f"\r{self.label} {share:4.0%} [{'#' * filled}{'.' * (self.WIDTH - filled)}]"
        if self.counts:
            line += f" {done}/{total}"
        elapsed = now - self.started
        if 0 < share < 1 and elapsed >= 1:
            left = int(elapsed * (1 - share) / share)
            line += " " + t("剩余 {eta}", eta=f"{left // 60}:{left % 60:02d}")
        self.stream.write(line + "\x1b[K")  # clear what a longer line before left
        self.stream.flush()

    def finish(self) -> None:
        if self.drawn_at is not None:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn_at = None


# ----------------------------------------------------------------------------------------------
# doctor (its body is dsh_memory_mcp.cli.doctor, written separately)


def cmd_doctor(call: Call) -> int:
    from dsh_memory_mcp.cli import doctor

    return doctor.main(call.args, call.settings, out=call.out, err=call.err)


_HANDLERS: dict[str, Callable[[Call], int]] = {
    "save": cmd_save,
    "list": cmd_list,
    "search": cmd_search,
    "get": cmd_get,
    "forget": cmd_forget,
    "edit": cmd_edit,
    "move": cmd_move,
    "export": cmd_export,
    "import": cmd_import,
    "stats": cmd_stats,
    "reembed": cmd_reembed,
    "doctor": cmd_doctor,
    "recover": cmd_recover,
    "duplicates": cmd_duplicates,
}
