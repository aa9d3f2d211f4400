"""Export and import of memories, for every front door (the CLI's export/import, the web page).

* Export gives every record line exactly as stored (`Record.raw`); corrupt lines are reported.
* Import reads our own records (kept whole: id and scope) or the reference memory server's
  knowledge graph (``entity``/``relation`` lines, or one ``read_graph`` object), which become
  ``fact`` memories in one target scope. `apply_import(..., dry_run=True)` counts exactly what the
  real import would add. A memory that fails `memory_save`'s own checks is refused with its code,
  reported per line, never written; the others still import.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.errors import InvalidArgument
from dsh_memory_mcp.service.validate import content_arg, refuse_secrets, tags_arg
from dsh_memory_mcp.store import records, scopes
from dsh_memory_mcp.store.records import Record
from dsh_memory_mcp.texts import msg

if TYPE_CHECKING:
    from dsh_memory_mcp.store.shared import SharedStore

#: Tag on every memory made from the reference memory server's knowledge graph.
IMPORT_TAG = "mcp-memory-import"
RELATION_TAG = "relation"

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# -- export ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportPart:
    """One scope's share of an export: its record lines, and where its corrupt lines are."""

    scope: str
    text: str
    records: int
    corrupt: tuple[str, ...]


def export_scopes(store: SharedStore, wanted: Sequence[str]) -> Iterator[ExportPart]:
    """The record lines of each scope in `wanted` (every line newline-terminated), one part per scope."""
    for scope in wanted:
        snap = store.snapshot(scope)
        chunk: list[str] = []
        corrupt: list[str] = []
        for line in snap.lines:
            if isinstance(line, Record):
                chunk.append(line.raw + "\n")
            else:
                corrupt.append(
                    msg("{relpath} 第 {lineno} 行", relpath=store.layout.relpath(snap.path), lineno=line.lineno)
                )
        yield ExportPart(scope, "".join(chunk), len(chunk), tuple(corrupt))


def unattributed_files(store: SharedStore) -> list[str]:
    """``projects/<sha1>.jsonl`` files `discover_scopes` skips (empty, or no record names their scope)."""
    known = {scopes.scope_file_relpath(s) for s in store.discover_scopes()}
    out = []
    for rel in store.layout.scope_files(sha1_only=True):
        try:
            size = os.path.getsize(store.layout.abspath(rel))
        except OSError:  # removed between the listing and now
            continue
        if rel not in known and size > 0:
            out.append(rel)
    return out


# -- import ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """A line of an import file that was skipped, and why (Chinese)."""

    lineno: int
    why: str
    preview: str

    def text(self) -> str:
        return msg("第 {lineno} 行{why},已跳过:{preview}", lineno=self.lineno, why=self.why, preview=self.preview)


@dataclass(frozen=True)
class Refusal:
    """A memory of an import file that `memory_save` would refuse: the code and its message."""

    lineno: int
    code: str
    message: str
    preview: str

    def text(self) -> str:
        return msg(
            "第 {lineno} 行被拒绝({code}):{message} 内容:{preview}",
            lineno=self.lineno,
            code=self.code,
            message=self.message,
            preview=self.preview,
        )


@dataclass
class ImportPlan:
    """What an import file holds, parsed; nothing written."""

    #: scope → our records, in file order
    ours: dict[str, list[Record]] = field(default_factory=dict)
    #: contents made from the knowledge graph, in file order (deduplicated) → (content, tags)
    graph: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    #: memories `memory_save` would refuse (never written)
    refused: list[Refusal] = field(default_factory=list)
    #: knowledge-graph memories that repeat an earlier line of the same file
    duplicates: int = 0


@dataclass(frozen=True)
class ImportOutcome:
    """What an import added (or, with `dry_run`, would add)."""

    added: int
    existing: int
    bad: int
    #: scope → (added, already there), in the order scopes were met
    by_scope: dict[str, tuple[int, int]]
    dry_run: bool
    #: memories refused by `memory_save`'s checks (`ImportPlan.refused`), not written
    refused: int = 0


def plan_import(data: bytes, settings: Settings) -> ImportPlan:
    """Parse an import file: records, knowledge-graph memories, the skipped lines and the refused."""
    planner = ImportPlanner(settings)
    planner.feed(data)
    return planner.finish()


class ImportPlanner:
    """`plan_import` for a file that arrives in pieces (an HTTP body): `feed` bytes in any chunking,
    each line is planned as soon as it is complete, so the file is never held whole; `finish` once."""

    def __init__(self, settings: Settings) -> None:
        self.plan = ImportPlan()
        self._settings = settings
        self._lineno = 0
        self._tail = bytearray()

    def feed(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._tail:
                self._tail += data[start:end]
                raw = bytes(self._tail)
                self._tail.clear()
            else:
                raw = data[start:end]
            self._lineno += 1
            _plan_line(self.plan, self._lineno, raw, self._settings)
            start = end + 1
        self._tail += data[start:]

    def finish(self) -> ImportPlan:
        """The plan, with the last line (the one after the last newline, usually empty) planned too."""
        self._lineno += 1
        _plan_line(self.plan, self._lineno, bytes(self._tail), self._settings)
        self._tail.clear()
        return self.plan


def apply_import(
    store: SharedStore, plan: ImportPlan, target: str, *, now: int, dry_run: bool = False
) -> ImportOutcome:
    """Insert the plan's records (knowledge-graph memories into `target`); one transaction per scope.

    Skipped as "already there": a record whose id is in any scope, and whatever the store's
    `insert` skips (an id or live content the scope holds). `dry_run` evaluates the same rules
    against the current files and writes nothing.
    """
    batches = {scope: list(batch) for scope, batch in plan.ours.items()}
    if plan.graph:
        made = [
            records.new_record(scope=target, content=content, kind="fact", tags=tags, now=now)
            for content, tags in plan.graph.values()
        ]
        batches.setdefault(target, []).extend(made)
    known = {r.id for scope in store.discover_scopes() for r in store.snapshot(scope).records}
    added = 0
    existing = plan.duplicates
    by_scope: dict[str, tuple[int, int]] = {}
    for scope, batch in batches.items():
        fresh = [r for r in batch if r.id not in known]
        done, skipped = store.insert(scope, fresh, dry_run=dry_run)
        here_existing = len(batch) - len(fresh) + skipped
        by_scope[scope] = (done, here_existing)
        added += done
        existing += here_existing
    return ImportOutcome(added, existing, len(plan.problems), by_scope, dry_run, refused=len(plan.refused))


def _preview(text: str) -> str:
    return text if len(text) <= 80 else text[:80] + "…"


def _save_problem(settings: Settings, content: Any, tags: Any) -> InvalidArgument | None:
    """The error `memory_save` (with the limits in `settings`) would give for this content and these tags, or None."""
    try:
        text = content_arg(content, max_chars=settings.max_content)
        tag_list = tags_arg(tags)
        if not settings.allow_secrets:
            refuse_secrets(text, tag_list)
    except InvalidArgument as exc:
        return exc
    return None


def _plan_line(plan: ImportPlan, lineno: int, raw: bytes, settings: Settings) -> None:
    text = raw.decode("utf-8", "replace")

    def bad(why: str) -> None:
        plan.problems.append(Problem(lineno, why, _preview(text)))

    def refused(content: Any, tags: Any) -> bool:
        error = _save_problem(settings, content, tags)
        if error is None:
            return False
        # The preview of a refused credential must not echo it: only the code and the message.
        shown = msg("(已隐去)") if error.code == "CONTENT_SECRET" else _preview(str(content))
        plan.refused.append(Refusal(lineno, error.code, error.message, shown))
        return True

    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        bad(msg("不是 UTF-8 文本"))
        return
    if lineno == 1:
        line = line.removeprefix("\ufeff")
    line = line.removesuffix("\r")
    if not line.strip():
        return
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        bad(msg("不是 JSON"))
        return
    if not isinstance(obj, dict):
        bad(msg("不是 JSON 对象"))
        return
    if "id" in obj and "content" in obj and "scope" in obj:
        why = _record_problem(obj)
        if why is not None:
            bad(why)
            return
        if refused(obj.get("content"), obj.get("tags")):
            return
        record = records.parse_line(line, lineno)
        assert isinstance(record, Record)
        plan.ours.setdefault(record.scope, []).append(record)
        return
    # (type named by a whole graph, entry): a line of its own, or a read_graph answer's entries.
    entries: list[tuple[str | None, Any]] = []
    if obj.get("type") in ("entity", "relation"):
        entries.append((None, obj))
    elif isinstance(obj.get("entities"), list) or isinstance(obj.get("relations"), list):
        for key, typ in (("entities", "entity"), ("relations", "relation")):
            items = obj.get(key)
            for entry in items if isinstance(items, list) else []:
                entries.append((typ, {"type": typ, **entry} if isinstance(entry, dict) else None))
    else:
        bad(msg("既不是记忆记录(id/scope/content),也不是知识图谱的 entity / relation"))
    for whole, entry in entries:
        made = _graph_memory(entry) if entry is not None else msg("不是对象")
        if isinstance(made, str):
            bad(made if whole is None else msg("中的一个 {typ}{made}", typ=whole, made=made))
            continue
        _refuse_empty(plan, lineno, entry)
        _add_graph(plan, [m for m in made if not refused(*m)])


def _refuse_empty(plan: ImportPlan, lineno: int, obj: Mapping[str, Any]) -> None:
    """An entity's blank observation makes no memory: counted as refused (CONTENT_EMPTY, as
    `memory_save` answers an empty content), never dropped without a word."""
    if obj.get("type") != "entity":
        return
    name = " ".join(str(obj.get("name") or "").split())
    for number, observation in enumerate(obj.get("observations") or [], start=1):
        if isinstance(observation, str) and not observation.strip():
            message = msg(
                "entity {name} 的第 {number} 条 observation 是空的,没有可保存的内容。", name=name, number=number
            )
            plan.refused.append(Refusal(lineno, "CONTENT_EMPTY", message, _preview(f"{name}: {observation}")))


def _add_graph(plan: ImportPlan, items: list[tuple[str, list[str]]]) -> None:
    for content, tags in items:
        if content in plan.graph:
            plan.duplicates += 1
        else:
            plan.graph[content] = (content, tags)


def _record_problem(obj: Mapping[str, Any]) -> str | None:
    ident, scope, content = obj.get("id"), obj.get("scope"), obj.get("content")
    if not isinstance(ident, str) or not ident.strip():
        return msg("的 id 不是非空字符串")
    if not isinstance(scope, str) or not scope.strip() or _CONTROL.search(scope):
        return msg("的 scope 不是有效的作用域键")
    try:
        scope.encode("utf-8")
    except UnicodeEncodeError:
        return msg("的 scope 含无法编码的字符")
    if not isinstance(content, str):
        return msg("的 content 不是字符串")
    return None


def _graph_memory(obj: Mapping[str, Any]) -> list[tuple[str, list[str]]] | str:
    """The memories one knowledge-graph line makes, or why it makes none."""

    def text(key: str) -> str | None:
        value = obj.get(key)
        return " ".join(value.split()) if isinstance(value, str) and value.strip() else None

    if obj.get("type") == "entity":
        name = text("name")
        observations = obj.get("observations", [])
        if name is None:
            return msg("的 entity 缺少 name")
        if not isinstance(observations, list) or not all(isinstance(o, str) for o in observations):
            return msg("的 observations 不是字符串数组")
        entity_type = text("entityType")
        tags = [entity_type, IMPORT_TAG] if entity_type and entity_type != IMPORT_TAG else [IMPORT_TAG]
        return [(f"{name}: {o.strip()}", tags) for o in observations if o.strip()]
    source, relation, target = text("from"), text("relationType"), text("to")
    if source is None or relation is None or target is None:
        return msg("的 relation 缺少 from / relationType / to")
    return [(f"{source} {relation} {target}", [RELATION_TAG, IMPORT_TAG])]
