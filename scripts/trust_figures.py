#!/usr/bin/env python3
"""Before → after figures for the journal, `memory_get` and the credential refusal, interleaved.

    python scripts/trust_figures.py --before /path/to/old/checkout [--only torn,scrub,forget64,fifo,get20,secrets]

Every measurement runs the code of each tree in its own subprocesses (``PYTHONPATH=<tree>/src``),
before then after for each item, so the machine's load hits both alike. Items:

* ``torn``: a save whose journal line a file-size limit cuts (RLIMIT_FSIZE, a real short write),
  then ``forget`` of another record and ``recover --json`` through the real CLI: how many
  forgotten records come back.
* ``scrub``: N save+forget pairs (default 3,000) through the store; how many forgotten texts are
  still in some file under the store.
* ``forget64``: 2,000 live records plus a ~60 MB journal (old-format churn: save+forget pairs with
  text; the new code scrubs it once at start-up, waited for); both trees' stdio servers on copies
  of the store, ``memory_forget`` by id interleaved (median of 20 once warm), then a cold CLI
  ``forget`` each — next to the same store without the churn (the floor).
* ``fifo``: a FIFO at today's journal segment; does ``memory_save`` answer within 10 s, does the
  server exit at stdin EOF.
* ``get20``: a 20 MB record written by another program; ``memory_get`` over raw stdio JSON-RPC
  (server time, answer bytes) and through the official MCP client (end to end).
* ``secrets``: precision/recall of `find_secret` on `tests/helpers/secret_corpus.py` (the corpus, per
  vendor, the held-out set and the disguised set), the time for a 20,000-character text and the worst of four
  20,000-character adversarial inputs.

The load average is printed next to the figures. Standard library (plus the MCP client for get20).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def env_for(tree: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
    env.update(PYTHONPATH=str(tree / "src"), DSH_MEMORY_VECTOR="off", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def run_py(tree: Path, code: str, *args: str, timeout: float = 600, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-c", code, *args], capture_output=True, text=True, encoding="utf-8", env=env_for(tree), timeout=timeout, **kw
    )


def cli(tree: Path, store: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "dsh_memory_mcp", *args, "--store-dir", str(store)],
        capture_output=True,
        text=True, encoding="utf-8",
        env=env_for(tree),
        timeout=timeout,
        input="",
    )


# -- torn ------------------------------------------------------------------------------------

_TORN_SETUP = """
import os, resource, sys
from dsh_memory_mcp.store.shared import SharedStore
root = sys.argv[1]
store = SharedStore(root); store.prepare()
a = store.save("global", "torn-tail memory a").record.id
store.save("global", "torn-tail memory b")
for i in range(20):
    store.save(f"project:/elsewhere/{i}", f"padding {i} " + "x" * 200)
print(a)
"""
_TORN_CUT = """
import os, resource, sys
from dsh_memory_mcp.store.shared import SharedStore
root = sys.argv[1]
journal = os.path.join(root, ".journal")
segment = max(os.path.join(journal, n) for n in os.listdir(journal))
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(segment) + 40, resource.RLIM_INFINITY))
try:
    SharedStore(root).save("global", "torn-tail memory c")
except Exception as exc:
    print(type(exc).__name__)
"""


def torn(tree: Path, work: Path) -> str:
    store = work / "store"
    a = run_py(tree, _TORN_SETUP, str(store)).stdout.strip()
    run_py(tree, _TORN_CUT, str(store))
    forgot = cli(tree, store, "forget", a, "--json")
    rec = cli(tree, store, "recover", "--json")
    answer = json.loads(rec.stdout or "{}")
    back = sum(len(v) for v in answer.get("restored", {}).values())
    refused = sum(len(v) for v in answer.get("refused", {}).values())
    present = a in (store / "global.jsonl").read_text(encoding="utf-8")
    return (
        f"forget exit {forgot.returncode}; recover restored {back} record(s) "
        f"(the forgotten one {'IS back' if present else 'stays gone'}), refused {refused}"
    )


# -- scrub -----------------------------------------------------------------------------------

_PAIRS = """
import sys
from dsh_memory_mcp.store.shared import SharedStore
root, n = sys.argv[1], int(sys.argv[2])
store = SharedStore(root); store.prepare()
for i in range(n):
    rid = store.save("global", f"forgotten-text-{i:05d} 用完即删的记忆").record.id
    store.delete_ids([rid])
store.close()
"""


def scrub(tree: Path, work: Path, pairs: int) -> str:
    store = work / "store"
    started = time.perf_counter()
    proc = run_py(tree, _PAIRS, str(store), str(pairs), timeout=3600)
    took = time.perf_counter() - started
    if proc.returncode:
        return f"failed: {proc.stderr[-300:]}"
    left: set[bytes] = set()
    where: set[str] = set()
    for path in store.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            pos = data.find(b"forgotten-text-")
            while pos >= 0:
                left.add(data[pos : pos + 20])
                where.add(str(path.relative_to(store)).split("/")[0])
                pos = data.find(b"forgotten-text-", pos + 1)
    return f"{len(left)} of {pairs} forgotten texts still on disk ({', '.join(sorted(where)) or 'nowhere'}); {took:.1f} s"


# -- forget with a 64 MB journal ---------------------------------------------------------------


def make_store(store: Path, live: int, journal_mb: int) -> list[str]:
    """`live` records in global (journalled like our saves), plus `journal_mb` MB of old churn."""
    (store / ".journal").mkdir(parents=True, mode=0o700)
    (store / "projects").mkdir(mode=0o700)
    day = time.strftime("%Y%m%d", time.gmtime())
    segments: list[Any] = []
    sizes = [0]

    def out() -> Any:
        if not segments or sizes[0] >= 8 << 20:
            if segments:
                segments[-1].close()
            n = len(segments)
            segments.append((store / ".journal" / (f"{day}.{n}.ndjson" if n else f"{day}.ndjson")).open("w", encoding="utf-8"))
            sizes[0] = 0
        return segments[-1]

    def emit(item: dict[str, Any]) -> None:
        text = json.dumps(item, ensure_ascii=False) + "\n"
        out().write(text)
        sizes[0] += len(text.encode("utf-8"))

    t, written, n = 1_700_000_000_000, 0, 0
    while written < journal_mb << 20:
        rid = str(uuid.UUID(int=n + (1 << 100), version=4))
        content = f"churn memory {n} " + "部署 deploy 数据库 cache 索引 查询 " * 12
        line = json.dumps(
            {"id": rid, "scope": "global", "kind": "note", "content": content, "tags": [], "createdAt": t,
             "updatedAt": t, "lastAccessedAt": 0, "accessCount": 0}, ensure_ascii=False, separators=(",", ":"))
        before = sizes[0]
        emit({"t": t, "op": "save", "scope": "global", "id": rid, "line": line})
        emit({"t": t + 1, "op": "forget", "scope": "global", "ids": [rid]})
        written += sizes[0] - before if sizes[0] > before else 0
        t, n = t + 2, n + 1
    ids: list[str] = []
    with (store / "global.jsonl").open("w", encoding="utf-8") as scope_file:
        for i in range(live):
            rid = str(uuid.uuid4())
            line = json.dumps(
                {"id": rid, "scope": "global", "kind": "note", "content": f"live memory {i} 关于部署的说明",
                 "tags": [], "createdAt": t, "updatedAt": t, "lastAccessedAt": 0, "accessCount": 0},
                ensure_ascii=False, separators=(",", ":"))
            scope_file.write(line + "\n")
            emit({"t": t, "op": "save", "scope": "global", "id": rid, "line": line})
            ids.append(rid)
    for f in segments:
        f.close()
    return ids


class Stdio:
    """A raw JSON-RPC conversation with `python -m dsh_memory_mcp` (no client library)."""

    def __init__(self, tree: Path, store: Path) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(store)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env_for(tree),
        )
        self.next_id = 0
        self.call_raw("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                     "clientInfo": {"name": "trust-figures", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def call_raw(self, method: str, params: dict[str, Any]) -> tuple[bytes, float]:
        self.next_id += 1
        started = time.perf_counter()
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        return line, time.perf_counter() - started

    def tool(self, name: str, arguments: dict[str, Any]) -> tuple[bytes, float]:
        return self.call_raw("tools/call", {"name": name, "arguments": arguments})

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout:
            self.proc.stdout.close()


def wait_scrubbed(store: Path, needle: bytes, timeout: float = 300) -> None:
    """Until no journal segment holds `needle` (the after tree scrubs old text at start-up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(needle in p.read_bytes() for p in (store / ".journal").glob("*.ndjson")):
            return
        time.sleep(0.5)


def forget64_pair(before: Path, after: Path, work: Path, journal_mb: int) -> list[str]:
    """Both trees' servers on copies of one store, their forgets interleaved (b, a, b, a, …)."""
    lines = []
    for label, mb in (("2,000 live, no churn", 0), (f"2,000 live + {journal_mb} MB journal", journal_mb)):
        base = work / f"base-{mb}"
        ids = make_store(base, 2000, mb)
        stores = {name: work / f"{name}-{mb}" for name in ("before", "after")}
        for store in stores.values():
            shutil.copytree(base, store)
        servers = {name: Stdio(tree, stores[name]) for name, tree in (("before", before), ("after", after))}
        times: dict[str, list[float]] = {"before": [], "after": []}
        try:
            for server in servers.values():
                server.tool("memory_list", {"scope": "global", "limit": 1})  # the journal is read once
            if mb:
                wait_scrubbed(stores["after"], b"churn memory")
            for i, rid in enumerate(ids[:24]):
                for name, server in servers.items():
                    took = server.tool("memory_forget", {"id": rid})[1]
                    if i >= 4:
                        times[name].append(took)
        finally:
            for server in servers.values():
                server.close()
        cold: dict[str, float] = {}
        for name, tree in (("before", before), ("after", after)):
            started = time.perf_counter()
            proc = cli(tree, stores[name], "forget", ids[30], "--json")
            cold[name] = time.perf_counter() - started if proc.returncode == 0 else float("nan")
        for name in ("before", "after"):
            lines.append(
                f"forget64  {name:<6} {label}: server forget median {statistics.median(times[name]) * 1000:.1f} ms"
                f" (max {max(times[name]) * 1000:.1f}, 20 calls), cold CLI forget {cold[name]:.2f} s"
            )
        for path in (base, *stores.values()):
            shutil.rmtree(path)
    return lines


# -- fifo ------------------------------------------------------------------------------------


def fifo(tree: Path, work: Path) -> str:
    store = work / "store"
    (store / ".journal").mkdir(parents=True, mode=0o700)
    os.mkfifo(store / ".journal" / f"{time.strftime('%Y%m%d', time.gmtime())}.ndjson", 0o600)
    proc = subprocess.Popen(
        [PYTHON, "-m", "dsh_memory_mcp", "--store-dir", str(store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env_for(tree),
    )
    import select

    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}}})
        proc.stdout.readline()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        started = time.perf_counter()
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "memory_save", "arguments": {"content": "next to a FIFO"}}})
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        saved = f"save answered in {time.perf_counter() - started:.2f} s" if ready else "save: no answer in 10 s"
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
            exited = "exits at EOF"
        except subprocess.TimeoutExpired:
            exited = "still running 10 s after EOF (killed)"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return f"{saved}; {exited}"


# -- get20 -----------------------------------------------------------------------------------

_CLIENT_GET = """
import json, sys, time, anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
store, rid = sys.argv[1], sys.argv[2]
async def main():
    import os
    params = StdioServerParameters(command=sys.executable, args=["-m", "dsh_memory_mcp", "--store-dir", store], env=dict(os.environ))
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        started = time.perf_counter()
        result = await s.call_tool("memory_get", {"ids": [rid]})
        print(f"{time.perf_counter() - started:.2f}")
anyio.run(main)
"""


def get20(tree: Path, work: Path) -> str:
    store = work / "store"
    store.mkdir(mode=0o700)
    rid = str(uuid.uuid4())
    content = ("中文内容 and english words 1234 " * 800_000)[:20_000_000]
    line = json.dumps({"id": rid, "scope": "global", "kind": "note", "content": content, "tags": [],
                       "createdAt": 1, "updatedAt": 2, "lastAccessedAt": 0, "accessCount": 0}, ensure_ascii=False)
    (store / "global.jsonl").write_text(line + "\n", encoding="utf-8")
    server = Stdio(tree, store)
    answer, took = server.tool("memory_get", {"ids": [rid]})
    server.close()
    client = subprocess.run(
        [PYTHON, "-c", _CLIENT_GET, str(store), rid], capture_output=True, text=True, encoding="utf-8", env=env_for(tree), timeout=900
    )
    end_to_end = client.stdout.strip() or f"failed: {client.stderr[-200:]}"
    return f"raw stdio {took:.2f} s, answer {len(answer) / 1e6:.2f} MB; official client end to end {end_to_end} s"


# -- secrets ---------------------------------------------------------------------------------

_SECRETS = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tests.helpers.secret_corpus import corpus, disguised, holdout
from dsh_memory_mcp.service.secrets import find_secret
out = {}
for name, samples in (("corpus", corpus()), ("holdout", holdout()), ("disguised", disguised())):
    per = {}
    tp = fp = fn = tn = 0
    for item in samples:
        hit = find_secret(item.text) is not None
        row = per.setdefault(item.vendor, [0, 0, item.secret])
        row[0] += 1
        row[1] += hit
        if item.secret:
            tp += hit; fn += not hit
        else:
            fp += hit; tn += not hit
    out[name] = {"tp": tp, "fp": fp, "fn": fn, "tn": tn, "per": per}
import random
rng = random.Random(1)
words = "部署 数据库 缓存 the service deploy 索引 config api key token 密码 用户 function return value".split()
typical = " ".join(rng.choice(words) for _ in range(5000))[:20000]
started = time.perf_counter()
for _ in range(5):
    find_secret(typical)
out["typical_ms"] = (time.perf_counter() - started) / 5 * 1000
worst = 0.0
for text in sys.argv[2:]:
    started = time.perf_counter()
    find_secret(text)
    worst = max(worst, time.perf_counter() - started)
out["adversarial_s"] = worst
print(json.dumps(out))
"""

#: 20,000-character inputs built to make a backtracking pattern explode (11f31c0 needed about a minute).
ADVERSARIAL = ["a_" * 10_000, "a-" * 10_000, "password for x " * 1_333, "x://a:" + "@" * 19_994]


def secrets(tree: Path, work: Path) -> str:
    proc = run_py(tree, _SECRETS, str(HERE), *ADVERSARIAL, timeout=3600)
    if proc.returncode:
        return f"failed: {proc.stderr[-300:]}"
    r = json.loads(proc.stdout)
    lines = []
    for name in ("corpus", "holdout", "disguised"):
        m = r[name]
        precision = m["tp"] / (m["tp"] + m["fp"]) if m["tp"] + m["fp"] else 0.0
        recall = m["tp"] / (m["tp"] + m["fn"]) if m["tp"] + m["fn"] else 0.0
        lines.append(f"{name}: precision {precision:.3f} recall {recall:.3f} (tp={m['tp']} fp={m['fp']} fn={m['fn']} tn={m['tn']})")
        if name == "corpus":
            lines += [
                f"      {vendor:<46} {'secret ' if secret else 'benign '} n={n:<4} {'caught' if secret else 'flagged'}={hits}"
                for vendor, (n, hits, secret) in r[name]["per"].items()
            ]
    lines.append(f"20,000-char text {r['typical_ms']:.1f} ms; worst 20,000-char adversarial input {r['adversarial_s']:.2f} s")
    return "\n".join(lines)


ITEMS = ("torn", "scrub", "forget64", "fifo", "get20", "secrets")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the old code")
    parser.add_argument("--after", type=Path, default=HERE, help="a checkout of the new code (default: this one)")
    parser.add_argument("--only", default=",".join(ITEMS))
    parser.add_argument("--pairs", type=int, default=3000, help="save+forget pairs for scrub")
    parser.add_argument("--journal-mb", type=int, default=60, help="journal size for forget64")
    args = parser.parse_args()
    wanted = [item for item in args.only.split(",") if item]
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at start")
    for item in wanted:
        if item == "forget64":
            work = Path(tempfile.mkdtemp(prefix="trust-forget64-"))
            try:
                for line in forget64_pair(args.before, args.after, work, args.journal_mb):
                    print(line, flush=True)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            continue
        for label, tree in (("before", args.before), ("after", args.after)):
            work = Path(tempfile.mkdtemp(prefix=f"trust-{item}-"))
            try:
                if item == "torn":
                    text = torn(tree, work)
                elif item == "scrub":
                    text = scrub(tree, work, args.pairs)
                elif item == "fifo":
                    text = fifo(tree, work)
                elif item == "get20":
                    text = get20(tree, work)
                elif item == "secrets":
                    text = secrets(tree, work)
                else:
                    raise SystemExit(f"unknown item {item!r}; known: {', '.join(ITEMS)}")
            finally:
                shutil.rmtree(work, ignore_errors=True)
            print(f"{item:<9} {label:<6} {text}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
