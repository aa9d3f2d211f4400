"""``recover --trash [ID …] [--empty [--yes]] [--json]``: the trash a person's forgets fill
(`service.trash`), listed, restored or emptied at the command line."""

from __future__ import annotations

from typing import Any

from dsh_memory_mcp.cli.commands import CLI_CLIENT, EXIT_FAIL, EXIT_OK, Call, _service, _terminal
from dsh_memory_mcp.cli.messages import t
from dsh_memory_mcp.service import trash
from dsh_memory_mcp.service.render import fmt_time, snippet
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.store.trash import TrashEntry


def _entry_json(entry: TrashEntry) -> dict[str, Any]:
    record = entry.record
    return {
        "id": record.id,
        "scope": entry.scope,
        "kind": record.kind,
        "content": record.content,
        "createdAt": record.created_at,
        "trashedAt": entry.trashed_at,
        "client": entry.client,
    }


def cmd_trash(call: Call) -> int:
    if call.flag("dry_run") or call.scoped():
        return call.usage(t("--trash 不与 --dry-run、--scope、--path 同用"))
    if call.flag("empty") and call.args:
        return call.usage(t("--empty 清空整个回收站,不接 id;只删一条请在网页的回收站里「永久删除」"))
    with _service(call, create=bool(call.args) or call.flag("empty")) as service:
        if call.flag("empty"):
            return _empty(call, service)
        if call.args:
            return _restore(call, service)
        return _list(call, service)


def _list(call: Call, service: MemoryService) -> int:
    days = service.settings.trash_days
    found = trash.entries(service)
    if call.flag("json"):
        call.json({"ok": True, "days": days, "entries": [_entry_json(e) for e in found]})
        return EXIT_OK
    ctx = _terminal(call, service)
    if days <= 0:
        call.note(t("回收站未启用(DSH_MEMORY_TRASH_DAYS=0):删除的记忆立即彻底删除。"))
    if not found:
        call.print(t("回收站是空的。"))
        return EXIT_OK
    lines = [t("回收站里有 {count} 条记忆(删除后保留 {days} 天,到期彻底删除):", count=len(found), days=days)]
    for entry in found:
        scope = ctx.style.label(entry.scope)
        lines.append(
            f"  {entry.record.short_id}  {scope}  {fmt_time(entry.trashed_at)}  {snippet(entry.record.content)}"
        )
    call.show("\n".join(lines))
    call.note(t("⇒ 恢复:{prog} recover --trash ID …;清空:{prog} recover --trash --empty"))
    return EXIT_OK


def _restore(call: Call, service: MemoryService) -> int:
    ctx = service.default_context.for_terminal().for_person(CLI_CLIENT)
    done, missing = trash.restore(service, call.args, ctx)
    if call.flag("json"):
        restored = [r.row() for r in done]
        call.json({"ok": not missing, "restored": restored, "missing": missing})
    else:
        for r in done:
            if r.deduped:
                call.print(
                    t(
                        "{id} 没有重复恢复:{scope} 里已有相同内容的记忆 {existing}",
                        id=r.entry.record.short_id,
                        scope=r.record.scope,
                        existing=r.record.short_id,
                    )
                )
            else:
                call.print(
                    t(
                        "已恢复 {id} → {new} @ {scope}",
                        id=r.entry.record.short_id,
                        new=r.record.short_id,
                        scope=r.record.scope,
                    )
                )
        if missing:
            call.note(t("回收站里没有这些记忆(或前缀不唯一):{ids}", ids=" ".join(missing)))
    return EXIT_FAIL if missing else EXIT_OK


def _empty(call: Call, service: MemoryService) -> int:
    count = len(trash.entries(service))
    if count and not call.flag("confirm"):
        answer = call.ask(t("彻底删除回收站里的 {count} 条记忆(不能恢复)?[y/N] ", count=count))
        if not answer:
            call.note(
                t("没有删除任何记忆")
                if answer is False
                else t("回收站里有 {count} 条记忆,没有删除:确认清空请加 --yes", count=count)
            )
            return EXIT_FAIL
    gone, _missing = trash.purge(service, None)
    if call.flag("json"):
        call.json({"ok": True, "purged": [e.record.id for e in gone]})
    else:
        call.print(t("已清空回收站:彻底删除 {count} 条记忆", count=len(gone)))
    return EXIT_OK
