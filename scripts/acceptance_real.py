#!/usr/bin/env python3
"""Acceptance against a real store: the full protocol on the directory you name, and nothing else.

    DSH_MEMORY_REAL_STORE=~/.dsh-memory-store python scripts/acceptance_real.py

Without ``DSH_MEMORY_REAL_STORE`` it prints one line and exits 0 (0 means "not tested" then, not
"passed"). The script never guesses a path and never creates the store: the directory must exist.

It spawns a real ``python -m dsh_memory_mcp --store-dir $DSH_MEMORY_REAL_STORE`` over stdio with
the official MCP client and only writes records whose content carries a unique marker
``[dsh-acceptance-<random>]``; every one of them is deleted again (through the server, and in a
``finally`` through the store API should the server have died). Checks: ``path`` puts a save
into ``project:<path>`` (not global), the line is on disk, search finds it (current project +
global and ``all``), saving the same content again is deduped, ``memory_get`` by 8-character
prefix, ``memory_list`` of the path, ``memory_forget`` by id, nothing of ours left on disk, and the
records that were there before are still readable (``memory_get``) and still on disk unchanged.

The store is live: DSH may write to it while this runs, so "unchanged" is judged by content (the
pre-existing lines), never by mtime. A Ctrl-C at the wrong moment can leave a marked record;
search the store for ``dsh-acceptance-`` to find it.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import ClientSession

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
from _acceptance import Checks, child_env, structured  # noqa: E402  (sibling module in scripts/)

if (SRC / "dsh_memory_mcp").is_dir() and str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

ENV = "DSH_MEMORY_REAL_STORE"


def scope_file(store: Path, scope: str) -> Path:
    if scope == "global":
        return store / "global.jsonl"
    return store / "projects" / (hashlib.sha1(scope.encode("utf-8")).hexdigest() + ".jsonl")


def store_files(store: Path) -> list[Path]:
    files = [store / "global.jsonl"] if (store / "global.jsonl").is_file() else []
    if (store / "projects").is_dir():
        files += sorted(p for p in (store / "projects").glob("*.jsonl") if p.is_file())
    return files


def existing_lines(store: Path) -> dict[str, bytes]:
    """id → the raw line, for every record line on disk that parses and has an id."""
    out: dict[str, bytes] = {}
    for path in store_files(store):
        for raw in path.read_bytes().splitlines():
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("id"), str):
                out[rec["id"]] = raw
    return out


def marked(store: Path, marker: str) -> dict[str, str]:
    """id → scope of every record line on disk whose content carries `marker`."""
    found: dict[str, str] = {}
    needle = marker.encode("utf-8")
    for path in store_files(store):
        for raw in path.read_bytes().splitlines():
            if needle not in raw:
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict) and marker in str(rec.get("content", "")):
                found[str(rec.get("id"))] = str(rec.get("scope"))
    return found


async def run(store: Path, workspace: Path, marker: str, token: str, checks: Checks, before: dict[str, bytes]) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    errlog_path = workspace.parent / "server-stderr.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "dsh_memory_mcp", "--store-dir", str(store), "--project", str(workspace)],
        env=child_env(),
        cwd=str(workspace),
    )

    async def call(session: ClientSession, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        with anyio.fail_after(30):
            return structured(await session.call_tool(name, arguments))

    with errlog_path.open("w", encoding="utf-8") as errlog:
        t0 = time.monotonic()
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                await session.initialize()
            errlog.flush()
            err = errlog_path.read_text(encoding="utf-8")
            checks.check(
                f"store-dir = {store}" in err,
                "服务连上了指定的真实 store",
                f"spawn → initialize {(time.monotonic() - t0) * 1000:.0f} ms",
            )

            content_p = f"{marker} 验收记录:带 path 保存应写入 project 作用域"
            saved_p = await call(session, "memory_save", {"content": content_p, "path": str(workspace), "kind": "fact"})
            scope_p = str(saved_p.get("scope", ""))
            checks.check(
                saved_p.get("ok") is True and scope_p.startswith("project:") and scope_p != "global",
                "带 path 保存 ⇒ project 作用域(不是 global)",
                scope_p,
            )
            id_p = str(saved_p.get("id", ""))
            file_p = scope_file(store, scope_p) if scope_p else store / "?"
            checks.check(
                file_p.is_file() and id_p.encode() in file_p.read_bytes(),
                "记录在磁盘上可见",
                str(file_p.relative_to(store)) if file_p.is_file() else str(file_p),
            )

            content_g = f"{marker} 验收记录:global 作用域"
            saved_g = await call(session, "memory_save", {"content": content_g, "scope": "global", "kind": "note"})
            id_g = str(saved_g.get("id", ""))
            checks.check(
                saved_g.get("scope") == "global" and id_g.encode() in (store / "global.jsonl").read_bytes(),
                "scope=global 保存落到 global.jsonl",
            )

            found = await call(session, "memory_search", {"query": token})
            ids = {r.get("id") for r in found.get("records", [])}
            checks.check({id_p, id_g} <= ids, "检索(当前项目 + global)找到两条", f"命中 {found.get('count')} 条")
            found = await call(session, "memory_search", {"query": token, "scope": "all"})
            ids = {r.get("id") for r in found.get("records", [])}
            checks.check({id_p, id_g} <= ids, "检索 scope=all 跨作用域读回")

            again = await call(session, "memory_save", {"content": content_p, "path": str(workspace), "kind": "fact"})
            lines = [ln for ln in file_p.read_bytes().splitlines() if marker.encode() in ln]
            checks.check(
                again.get("deduped") is True and again.get("id") == id_p and len(lines) == 1,
                "同一内容再次保存被去重(返回原 id,不新增行)",
            )

            got = await call(session, "memory_get", {"ids": [id_p[:8]]})
            recs = got.get("records", [])
            checks.check(
                len(recs) == 1 and recs[0].get("id") == id_p and recs[0].get("content") == content_p,
                "memory_get 按 8 位前缀取回",
                id_p[:8],
            )
            listed = await call(session, "memory_list", {"path": str(workspace)})
            checks.check(any(r.get("id") == id_p for r in listed.get("records", [])), "memory_list 按 path 列出了它")

            old_ids = list(before)[:5]
            if old_ids:
                got = await call(session, "memory_get", {"ids": old_ids})
                checks.check(
                    got.get("count") == len(old_ids) and not got.get("missing"),
                    "既有记忆仍能读取(memory_get)",
                    f"{got.get('count')}/{len(old_ids)} 条",
                )
                listed = await call(session, "memory_list", {"scope": "all", "limit": 200})
                checks.check(int(listed.get("count", 0)) > 0, "memory_list scope=all 列得出既有记忆")
            else:
                checks.skip("既有记忆仍能读取", "这个 store 里还没有任何记录")

            for rid in (id_p, id_g):
                gone = await call(session, "memory_forget", {"id": rid})
                checks.check(gone.get("deleted") == 1 and gone.get("ids") == [rid], "memory_forget 按 id 删除", rid[:8])
            found = await call(session, "memory_search", {"query": token, "scope": "all"})
            checks.check(int(found.get("count", -1)) == 0, "删除后检索不到")
            checks.check(not marked(store, marker), "磁盘上不再有带标记的记录")


def cleanup(store: Path, marker: str, created: list[Path]) -> None:
    """Delete whatever marked record is left (through the store API, under the scope locks) and
    remove the scope files this run created if they are empty again."""
    left = marked(store, marker)
    if left:
        try:
            from dsh_memory_mcp.store.shared import SharedStore

            s = SharedStore(str(store))
            s.delete_ids(list(left))
            s.close()
            print(f"清理:删除了残留的 {len(left)} 条带标记记录")
        except Exception as exc:
            print(f"✗ 清理失败,请手动删除带 {marker} 的记录:{exc}")
    for path in created:
        for p in (path, path.with_suffix(".vec")):
            try:
                data = p.read_bytes()
            except OSError:
                continue
            body = [ln for ln in data.splitlines() if ln.strip() and not ln.startswith(b"#")]
            if not body:
                p.unlink(missing_ok=True)


def main() -> int:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        print(f"未设置 {ENV},跳过真实 store 验收(退出码 0 表示没测,不是测过了)")
        return 0
    store = Path(os.path.expanduser(raw)).resolve()
    checks = Checks()
    if not store.is_dir():
        checks.check(False, f"{ENV} 指向一个已存在的目录", f"{store} 不存在或不是目录;本脚本不会替你创建 store")
        return checks.summary()
    token = "t" + secrets.token_hex(5)
    marker = f"[dsh-acceptance-{token}]"
    print(f"真实 store:{store}")
    print(f"本次标记:{marker}(只写、只删带这个标记的记录)")
    before = existing_lines(store)
    print(f"运行前磁盘上有 {len(before)} 条记录")
    tmp = Path(tempfile.mkdtemp(prefix="dsh-acceptance-real-"))
    workspace = tmp / "workspace"
    workspace.mkdir()
    project_file = scope_file(store, f"project:{workspace}")
    created = [] if project_file.exists() else [project_file]
    try:
        import anyio  # only now: without the variable the script runs on any Python

        anyio.run(run, store, workspace, marker, token, checks, before)
    except Exception as exc:
        checks.check(False, "验收过程没有异常", f"{type(exc).__name__}: {exc}")
        log = tmp / "server-stderr.log"
        if log.exists():
            print("服务 stderr 的最后几行:")
            for line in log.read_text(encoding="utf-8").splitlines()[-20:]:
                print(f"  | {line}")
    finally:
        cleanup(store, marker, created)
        shutil.rmtree(tmp, ignore_errors=True)
    after = existing_lines(store)
    missing = [i for i in before if i not in after]
    changed = [i for i in before if i in after and after[i] != before[i]]
    checks.check(not missing, "运行前就有的记录一条不少", f"{len(before) - len(missing)}/{len(before)}")
    checks.check(
        not changed,
        "运行前就有的记录逐字节未变",
        f"{len(changed)} 条有变化(DSH 同时在写时可能是它改的)" if changed else "",
    )
    checks.check(not marked(store, marker), "清理后磁盘上没有本次的标记")
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
