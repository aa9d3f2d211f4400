#!/usr/bin/env python3
"""Acceptance: dsh-memory-mcp runs on its own, without DSH, in a temp store.

    python scripts/acceptance_standalone.py [--keep]

Spawns a real ``python -m dsh_memory_mcp`` over stdio with the official MCP client and checks:
cold start (spawn → initialize) and its timing, the five tools, a record the DSH plugin wrote
earlier is found, ``memory_save`` + ``memory_search`` work, and — only when a backend is
configured through ``DSH_MEMORY_EMBED_EXE``/``DSH_MEMORY_EMBED_MODEL`` (spawn one) or
``DSH_MEMORY_EMBED_ENDPOINT`` (reuse one) — the vector backend comes up and a paraphrase with no
shared word is recalled. After the server exits: a llama-server it reported spawning is gone and
nothing listens on its port any more (no orphan), and DSH's port 8078, free before, is still free.

Without a backend configured the vector checks are skipped (``-``), never failed; the server is
then started with ``DSH_MEMORY_VECTOR=off``. The store is a temp dir (removed unless ``--keep``):
this script never touches a real store. Exit 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
import anyio  # noqa: E402
from _acceptance import Checks, child_env, structured  # noqa: E402  (sibling module in scripts/)
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

TOOLS = {"memory_save", "memory_search", "memory_list", "memory_get", "memory_forget"}
DSH_PORT = 8078
#: (content saved, query with no word in common): a real embedding model and the in-suite
#: stand-in both put these close together; lexically they share nothing.
PARAPHRASES = (("The deploy pipeline pushes images to the registry.", "container release workflow"),)
OFF_WORDS = {"off", "0", "false", "no", "disabled"}


def listening(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until(predicate: Any, timeout: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def dsh_line(content: str, scope: str = "global", kind: str = "fact") -> str:
    now = int(time.time() * 1000) - 3_600_000
    rec = {
        "id": str(uuid.uuid4()),
        "scope": scope,
        "kind": kind,
        "content": content,
        "tags": ["dsh"],
        "source": {"origin": "explicit"},
        "createdAt": now,
        "updatedAt": now,
        "lastAccessedAt": now,
        "accessCount": 0,
    }
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def vector_plan() -> tuple[str, str]:
    """("off"|"endpoint"|"spawn", why) from this environment."""
    if os.environ.get("DSH_MEMORY_VECTOR", "").strip().lower() in OFF_WORDS:
        return "off", "DSH_MEMORY_VECTOR=off"
    if os.environ.get("DSH_MEMORY_EMBED_ENDPOINT"):
        return "endpoint", os.environ["DSH_MEMORY_EMBED_ENDPOINT"]
    if os.environ.get("DSH_MEMORY_EMBED_MODEL"):
        return "spawn", os.environ.get("DSH_MEMORY_EMBED_EXE", "llama-server")
    return "off", "没有设置 DSH_MEMORY_EMBED_EXE + DSH_MEMORY_EMBED_MODEL,也没有 DSH_MEMORY_EMBED_ENDPOINT"


async def run(store: Path, project: Path, checks: Checks) -> None:
    plan, why = vector_plan()
    port = int(os.environ.get("DSH_MEMORY_EMBED_PORT", "8199") or 8199)
    dsh_port_busy_before = listening(DSH_PORT)
    port_busy_before = plan == "spawn" and listening(port)
    extra = {"DSH_MEMORY_VECTOR": "off"} if plan == "off" else {}
    if plan == "off":
        print(f"向量通道:关({why})")
    elif plan == "endpoint":
        print(f"向量通道:复用已有服务 {why}")
    else:
        state = "已被占用 ⇒ 服务会复用它" if port_busy_before else "空闲 ⇒ 服务应自行拉起"
        print(f"向量通道:llama-server {why},端口 {port} {state}")

    # A record the DSH plugin wrote before this server ever ran.
    store.mkdir(parents=True, exist_ok=True)
    dsh_content = "DSH 插件之前写入的记忆:发布前必须先跑数据库迁移脚本"
    (store / "global.jsonl").write_text(dsh_line(dsh_content) + "\n", encoding="utf-8")

    errlog_path = store.parent / "server-stderr.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "dsh_memory_mcp", "--store-dir", str(store), "--project", str(project)],
        env=child_env(extra),
        cwd=str(project),
    )
    spawned_pid: int | None = None
    spawned_url = ""
    with errlog_path.open("w", encoding="utf-8") as errlog:
        t0 = time.monotonic()
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(60):
                init = await session.initialize()
            cold = time.monotonic() - t0
            info = getattr(init, "server_info", None) or getattr(init, "serverInfo", None)
            checks.check(
                getattr(info, "name", "") == "dsh-memory-mcp",
                "MCP 服务在没有 DSH 的情况下冷启动成功",
                f"spawn → initialize {cold * 1000:.0f} ms",
            )
            with anyio.fail_after(30):
                listed = await session.list_tools()
            names = {t.name for t in listed.tools}
            checks.check(names >= TOOLS, "五个工具都在", ", ".join(sorted(names)))

            with anyio.fail_after(30):
                found = structured(await session.call_tool("memory_search", {"query": "数据库迁移"}))
            checks.check(
                any(r.get("content") == dsh_content for r in found.get("records", [])),
                "读到了 DSH 之前写入的记忆",
                f"命中 {found.get('count', 0)} 条",
            )

            marker = uuid.uuid4().hex[:10]
            content = f"独立运行验收:不开 DSH 也能保存记忆 {marker}"
            t1 = time.monotonic()
            with anyio.fail_after(30):
                saved = structured(await session.call_tool("memory_save", {"content": content, "kind": "fact"}))
            checks.check(
                saved.get("ok") is True and saved.get("scope") == "global",
                "memory_save 在没有 DSH 时成功",
                f"{(time.monotonic() - t1) * 1000:.0f} ms,id={str(saved.get('id', ''))[:8]}",
            )
            t2 = time.monotonic()
            with anyio.fail_after(30):
                found = structured(await session.call_tool("memory_search", {"query": marker}))
            checks.check(
                any(r.get("id") == saved.get("id") for r in found.get("records", [])),
                "memory_search 找到了刚保存的记忆",
                f"{(time.monotonic() - t2) * 1000:.0f} ms",
            )
            checks.check(
                content in (store / "global.jsonl").read_text(encoding="utf-8"),
                "记录已落盘到 global.jsonl",
            )

            if plan == "off":
                checks.skip("向量后端 / 语义召回", why)
            else:
                ready = await anyio.to_thread.run_sync(
                    lambda: wait_until(
                        lambda: re.search(r"向量后端(就绪|不可用)", errlog_path.read_text(encoding="utf-8")), 90
                    )
                )
                text = errlog_path.read_text(encoding="utf-8")
                m = re.search(r"已启动 llama-server pid=(\d+) (\S+)", text)
                if m:
                    spawned_pid, spawned_url = int(m.group(1)), m.group(2)
                ok = bool(ready) and "向量后端就绪" in text
                checks.check(ok, "向量后端就绪", _last_vector_line(text))
                if plan == "spawn" and not port_busy_before:
                    checks.check(spawned_pid is not None, f"MCP 自己拉起了 llama-server({port})", f"pid={spawned_pid}")
                elif plan == "spawn":
                    checks.skip("自行拉起 llama-server", f"端口 {port} 在启动前已被占用,服务复用了它")
                if ok:
                    await _semantic_recall(session, checks)
            t_exit = time.monotonic()
    exit_s = time.monotonic() - t_exit
    checks.check(exit_s < 5, "关闭 stdin 后服务自行退出", f"{exit_s * 1000:.0f} ms")

    if spawned_pid is not None:
        gone = wait_until(lambda: not pid_alive(spawned_pid), 10)
        checks.check(gone, "MCP 退出后它拉起的 llama-server 也退出了(无孤儿进程)", f"pid={spawned_pid}")
        free = wait_until(lambda: not listening(port), 10)
        checks.check(free, f"端口 {port} 上不再有服务监听", spawned_url)
    elif plan != "off":
        checks.skip("无孤儿进程", "服务没有自己拉起 llama-server(复用的后端不归它管,本来就不该停)")
    if plan == "endpoint":
        url = urlsplit(why)
        if url.hostname and url.port:
            checks.check(listening(url.port, url.hostname), "复用的后端在服务退出后仍在运行(永不 kill)", why)
    if not dsh_port_busy_before:
        checks.check(not listening(DSH_PORT), f"DSH 的 {DSH_PORT} 端口始终未被占用(两者互不干扰)")
    else:
        checks.skip(f"DSH 端口 {DSH_PORT} 未被占用", "启动前就有服务在监听(多半是 DSH 自己的 llama-server)")


def _last_vector_line(text: str) -> str:
    lines = [ln.split("] ", 1)[-1] for ln in text.splitlines() if "vector:" in ln]
    return lines[-1] if lines else "stderr 里没有向量日志"


async def _semantic_recall(session: ClientSession, checks: Checks) -> None:
    for content, query in PARAPHRASES:
        with anyio.fail_after(30):
            saved = structured(await session.call_tool("memory_save", {"content": content, "kind": "procedure"}))
        best = 0.0
        for _ in range(10):  # the first query embedding may miss its 300 ms budget while the model warms up
            with anyio.fail_after(30):
                found = structured(await session.call_tool("memory_search", {"query": query}))
            hit = [r for r in found.get("records", []) if r.get("id") == saved.get("id")]
            if hit:
                best = float(hit[0].get("score", 0))
                break
            await anyio.sleep(0.5)
        if checks.check(best > 0, "语义相近但措辞不同也能召回", f"{query!r} → {content!r} score={best:.4f}"):
            return


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="dsh-memory-mcp 独立运行验收(临时目录,不碰真实记忆库)")
    p.add_argument("--keep", action="store_true", help="保留临时目录以便排查")
    args = p.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="dsh-acceptance-standalone-"))
    store, project = tmp / "store", tmp / "workspace"
    project.mkdir()
    print(f"临时存储目录:{store}")
    checks = Checks()
    try:
        anyio.run(run, store, project, checks)
    except Exception as exc:  # a crash is a failed check with its reason, not a traceback
        checks.check(False, "验收过程没有异常", f"{type(exc).__name__}: {exc}")
        log = tmp / "server-stderr.log"
        if log.exists():
            print("服务 stderr 的最后几行:")
            for line in log.read_text(encoding="utf-8").splitlines()[-20:]:
                print(f"  | {line}")
    finally:
        if args.keep:
            print(f"保留临时目录:{tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return checks.summary()


if __name__ == "__main__":
    sys.exit(main())
