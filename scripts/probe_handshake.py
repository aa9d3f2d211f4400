#!/usr/bin/env python3
"""Spawn dsh-memory-mcp exactly as an IDE host would, from that host's own config, and shake hands.

    python scripts/probe_handshake.py [WORKSPACE] [--config PATH] [--name dsh-memory] [--query test]

The config is ZCode's ``~/.zcode/cli/config.json`` (nested ``mcp.servers``) by default, or any JSON
file given with ``--config``: ``mcpServers`` (Trae, WorkBuddy, Cursor, Claude Desktop) or ``servers``
(VS Code ``.vscode/mcp.json``). The entry named ``dsh-memory`` (or ``--name``) is spawned the way
the host does it: its ``command`` and ``args`` as they are, cwd = WORKSPACE (else the entry's
``cwd``, else the current directory), env = this environment overlaid with the entry's ``env``,
stdin/stdout pipes for JSON-RPC and stderr piped (kept, and shown when something fails).

Then: initialize → tools/list → one ``memory_search`` (``--query``), with timings. Read-only: it
never calls ``memory_save`` or ``memory_forget``, so it is safe against a real store (a search hit
does bump that record's ``accessCount``, as any search does). Standard library only, so it runs
with any Python ≥ 3.10, even where the server's own dependencies are broken.

Exit 0 on success; 1 with a Chinese diagnostic on failure (config missing or invalid, entry
missing, command not found, server exited early, handshake timeout — with the server's stderr tail).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

DEFAULT_CONFIG = Path("~/.zcode/cli/config.json")
DEFAULT_NAME = "dsh-memory"
DEFAULT_PROTOCOL = "2025-06-18"
EXPECTED_TOOLS = ("memory_save", "memory_search", "memory_list", "memory_get", "memory_forget")
STDERR_TAIL = 30


class ProbeError(Exception):
    """A failure with a Chinese explanation; `tail` is the server's stderr tail, if any."""

    def __init__(self, message: str, *, tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.tail = tail or []


# --------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------


def load_entry(config_path: Path, name: str) -> tuple[str, dict[str, Any]]:
    """(where in the file the entry was found, the entry) or `ProbeError`."""
    if not config_path.exists():
        raise ProbeError(
            f"找不到配置文件:{config_path}\n"
            "⇒ ZCode 的配置在 ~/.zcode/cli/config.json;其它宿主请用 --config 指向它的 mcp.json"
            "(Trae/WorkBuddy/Cursor/Claude Desktop 用 mcpServers,VS Code 的 .vscode/mcp.json 用 servers)"
        )
    try:
        data = json.loads(config_path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise ProbeError(
            f"配置文件不是合法 JSON:{config_path}(第 {exc.lineno} 行第 {exc.colno} 列:{exc.msg})\n"
            "⇒ 宿主读到这样的文件通常会静默忽略全部 MCP 服务;先把 JSON 改对"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProbeError(f"读不了配置文件:{config_path}({exc})") from None
    if not isinstance(data, dict):
        raise ProbeError(f"配置文件的顶层不是 JSON 对象:{config_path}")

    sections: list[tuple[str, Any]] = []
    mcp = data.get("mcp")
    if isinstance(mcp, dict) and "servers" in mcp:
        sections.append(("mcp.servers", mcp["servers"]))
    for key in ("mcpServers", "servers"):
        if key in data:
            sections.append((key, data[key]))
    if not sections:
        hint = ""
        if "dsh-memory" in data or name in data:
            hint = "\n⇒ 服务条目直接写在了顶层;它必须放在 mcpServers(或 ZCode 的 mcp.servers)里面"
        raise ProbeError(
            f"配置文件里没有 MCP 服务表:{config_path}\n"
            '⇒ 认得的写法:ZCode 是嵌套的 {"mcp": {"servers": {…}}}(少一层 mcp 会被 ZCode 静默忽略);'
            'Trae/WorkBuddy/Cursor/Claude Desktop 是 {"mcpServers": {…}};VS Code 是 {"servers": {…}}' + hint
        )
    seen: list[str] = []
    for where, servers in sections:
        if not isinstance(servers, dict):
            raise ProbeError(f"{where} 不是 JSON 对象:{config_path}")
        if name in servers:
            entry = servers[name]
            if not isinstance(entry, dict):
                raise ProbeError(f"{where}.{name} 不是 JSON 对象:{config_path}")
            return f"{where}.{name}", entry
        seen += [str(k) for k in servers]
    listed = "、".join(seen) if seen else "(空)"
    raise ProbeError(
        f"配置文件里没有名为 {name!r} 的 MCP 服务:{config_path}\n"
        f"⇒ 已有的条目:{listed};用 --name 指定别的名字,或按 README 的「宿主配置」一节加上 {name}"
    )


def spawn_spec(entry: dict[str, Any], workspace: str | None) -> tuple[list[str], str, dict[str, str]]:
    """argv, cwd and env the host would use for this entry."""
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        kind = "数组" if isinstance(command, list) else type(command).__name__
        raise ProbeError(
            f"条目的 command 必须是非空字符串(现在是 {kind}:{command!r})\n"
            "⇒ 把可执行文件写进 command,参数放进 args;ZCode 遇到数组形式的 command 会在设置页崩溃"
        )
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ProbeError(f"条目的 args 必须是字符串数组(现在是 {args!r})")
    env_extra = entry.get("env") or {}
    if not isinstance(env_extra, dict):
        raise ProbeError(f"条目的 env 必须是 JSON 对象(现在是 {env_extra!r})")
    if workspace:
        cwd = workspace
    elif isinstance(entry.get("cwd"), str) and entry["cwd"]:
        cwd = entry["cwd"]
    else:
        cwd = os.getcwd()
    cwd = os.path.abspath(os.path.expanduser(cwd))
    if not os.path.isdir(cwd):
        raise ProbeError(f"工作目录不存在或不是目录:{cwd}\n⇒ 传一个存在的工作区路径,或改条目里的 cwd")
    env = {**os.environ, **{str(k): str(v) for k, v in env_extra.items()}}
    return [command, *args], cwd, env


# --------------------------------------------------------------------------------------------
# JSON-RPC over the child's stdio
# --------------------------------------------------------------------------------------------


class Child:
    """The spawned server: a reader thread per pipe; stderr lines are kept for diagnostics."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]) -> None:
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except FileNotFoundError:
            raise ProbeError(
                f"找不到命令:{argv[0]}\n"
                "⇒ IDE 拉起 MCP 时的 PATH 常常不含你的虚拟环境;command 请写绝对路径(用 `which dsh-memory-mcp` 查),"
                "或确认已经 pip/pipx 安装了 dsh-memory-mcp"
            ) from None
        except PermissionError:
            raise ProbeError(
                f"命令不可执行(没有执行权限):{argv[0]}\n⇒ chmod +x,或把 command 指向真正的可执行文件"
            ) from None
        except OSError as exc:
            raise ProbeError(f"拉起进程失败:{argv[0]}({exc})") from None
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stderr: collections.deque[str] = collections.deque(maxlen=400)
        self.noise: list[str] = []  # stdout lines that are not JSON-RPC (they break real hosts)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self._next_id = 0

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                self.noise.append(line)
                continue
            if isinstance(msg, dict):
                self.messages.put(msg)
            else:
                self.noise.append(line)
        self.messages.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace").rstrip("\r\n"))

    def tail(self, n: int = STDERR_TAIL) -> list[str]:
        return list(self.stderr)[-n:]

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(msg, ensure_ascii=False) + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the server is gone; the read below reports it with its stderr

    def request(self, method: str, params: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        self._next_id += 1
        rid = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                what = "握手超时" if method == "initialize" else "超时"
                raise ProbeError(
                    f"{what}:{timeout:g} 秒内没有收到 {method} 的应答\n"
                    "⇒ 看下面服务 stderr 的最后几行;stdout 上若有非 JSON-RPC 的输出或服务卡在启动阶段,宿主也会在这里失败",
                    tail=self.tail(),
                )
            try:
                got = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if got is None:
                code = self._exit_code()
                raise ProbeError(
                    f"服务在应答 {method} 之前就退出了(退出码 {code})",
                    tail=self.tail(),
                )
            if got.get("id") == rid and ("result" in got or "error" in got):
                if "error" in got:
                    err = got["error"]
                    raise ProbeError(f"{method} 返回错误:{json.dumps(err, ensure_ascii=False)}", tail=self.tail())
                result = got["result"]
                return result if isinstance(result, dict) else {"value": result}
            if "method" in got and "id" in got:  # a request from the server: we support none
                self.send({"jsonrpc": "2.0", "id": got["id"], "error": {"code": -32601, "message": "not supported"}})
            # notifications (logging, progress …) are ignored

    def _exit_code(self) -> int | None:
        try:
            return self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return None

    def close(self, timeout: float = 10.0) -> int | None:
        """Close stdin (what a host does on shutdown) and reap the child; kill it if it hangs."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
            return None


# --------------------------------------------------------------------------------------------
# The probe
# --------------------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _text_of(result: dict[str, Any]) -> str:
    parts = [c.get("text", "") for c in result.get("content", []) if isinstance(c, dict) and c.get("type") == "text"]
    return "\n".join(parts)


def probe(args: argparse.Namespace) -> int:
    config_path = Path(os.path.expanduser(str(args.config)))
    where, entry = load_entry(config_path, args.name)
    argv, cwd, env = spawn_spec(entry, args.workspace)
    timeout = args.timeout
    if timeout is None:
        timeout_ms = entry.get("timeoutMs")
        timeout = timeout_ms / 1000 if isinstance(timeout_ms, (int, float)) and timeout_ms > 0 else 30.0
    protocol = entry.get("protocolVersion") if isinstance(entry.get("protocolVersion"), str) else DEFAULT_PROTOCOL

    print(f"配置:{config_path} → {where}")
    if entry.get("enabled") is False:
        print("⚠ 这个条目写了 enabled: false,宿主不会拉起它;下面照样按它的配置试一次")
    print(f"命令:{shlex.join(argv)}")
    print(f"cwd:{cwd}")
    if entry.get("env"):
        print(f"env(叠加在当前环境之上):{json.dumps(entry['env'], ensure_ascii=False)}")

    t0 = time.monotonic()
    child = Child(argv, cwd, env)
    ok = False
    try:
        init = child.request(
            "initialize",
            {
                "protocolVersion": protocol,
                "capabilities": {},
                "clientInfo": {"name": "dsh-probe-handshake", "version": "0.1.0"},
            },
            timeout,
        )
        t_init = time.monotonic() - t0
        child.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        info = init.get("serverInfo", {})
        print(
            f"spawn → initialize:{_ms(t_init)}"
            f"(服务 {info.get('name', '?')} {info.get('version', '?')},协议 {init.get('protocolVersion', '?')})"
        )

        t1 = time.monotonic()
        listed = child.request("tools/list", {}, timeout)
        t_list = time.monotonic() - t1
        names = [t.get("name", "?") for t in listed.get("tools", []) if isinstance(t, dict)]
        print(f"tools/list:{_ms(t_list)} — {len(names)} 个工具:{', '.join(names)}")
        missing = [n for n in EXPECTED_TOOLS if n not in names]
        if "memory_search" not in names:
            raise ProbeError(f"工具清单里没有 memory_search(缺:{', '.join(missing)})", tail=child.tail())
        if missing:
            print(f"⚠ 缺少工具:{', '.join(missing)}")

        t2 = time.monotonic()
        found = child.request("tools/call", {"name": "memory_search", "arguments": {"query": args.query}}, timeout)
        t_search = time.monotonic() - t2
        print(f"memory_search({args.query!r}):{_ms(t_search)}")
        text = _text_of(found)
        print("―" * 40)
        print(text if text else json.dumps(found, ensure_ascii=False))
        print("―" * 40)
        if found.get("isError"):
            raise ProbeError("memory_search 返回了错误(见上面的文本)", tail=child.tail())
        if child.noise:
            print(f"⚠ stdout 上有 {len(child.noise)} 行不是 JSON-RPC(会让严格的宿主断开):{child.noise[0][:120]}")
        if args.verbose:
            print("服务 stderr:")
            for line in child.tail():
                print(f"  {line}")
        ok = True
    finally:
        # after a failure the server may be stuck: give it a moment, not a host's full grace period
        code = child.close(timeout=10.0 if ok else 2.0)
    if code not in (0, None):
        print(f"⚠ 关闭 stdin 后服务以退出码 {code} 结束(应为 0)")
    elif code is None:
        print("⚠ 关闭 stdin 后服务 10 秒内没有退出,已强制结束")
    print(f"✓ 握手成功(总计 {_ms(time.monotonic() - t0)})")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="probe_handshake.py",
        description="按宿主(ZCode/Trae/WorkBuddy/Cursor/VS Code/Claude Desktop)的方式拉起 dsh-memory-mcp 并握手,只读。",
    )
    p.add_argument("workspace", nargs="?", help="工作区目录(作为服务的 cwd);缺省用条目里的 cwd,再缺省用当前目录")
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="宿主的 MCP 配置文件(缺省 ~/.zcode/cli/config.json)")
    p.add_argument("--name", default=DEFAULT_NAME, help=f"服务条目名(缺省 {DEFAULT_NAME})")
    p.add_argument("--query", default="test", help="memory_search 用的查询(缺省 test)")
    p.add_argument("--timeout", type=float, default=None, help="每一步的超时秒数(缺省取条目的 timeoutMs,否则 30)")
    p.add_argument("--verbose", action="store_true", help="成功时也打印服务的 stderr")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return probe(args)
    except ProbeError as exc:
        print(f"✗ 探测失败:{exc}", file=sys.stderr)
        if exc.tail:
            print("服务 stderr 的最后几行:", file=sys.stderr)
            for line in exc.tail:
                print(f"  | {line}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 1


if __name__ == "__main__":
    sys.exit(main())
