#!/usr/bin/env python3
"""Measure what happens when our locked writers share a scope with a DSH-style unlocked writer.

    python scripts/acceptance_coexist.py [--writers 3] [--per-writer 8] [--unlocked 12] [--rounds 3] [--keep]

The DSH memory plugin keeps an in-memory snapshot of a scope (read once) and flushes by rewriting
the whole file (fixed ``<file>.tmp`` + rename), with no lock. Our writers (N processes through
``SharedStore``: per-scope O_EXCL lock, re-read inside the lock, unique tmp + fsync + replace)
cannot stop such a writer from overwriting them, and its stale snapshot is overwritten in turn.
This script measures that loss, in a temp store, all in ``global.jsonl``:

1. Control round: our N writers alone. Every record must survive; if one is lost, that is our
   bug → ``✗`` and exit 1.
2. ``--rounds`` contest rounds: our N writers and the unlocked writer at the same time (started
   together behind a barrier file), then the records of each side still on disk are counted.
3. After each contest round, ``SharedStore.recover()`` (what ``dsh-memory-mcp recover`` runs)
   puts back, from the write journal, what our writers acknowledged and the unlocked writer
   erased; ours are counted again. A record of ours still missing after recover is our bug → ``✗``.

It measures, it does not judge: apart from a failed control round (or a record of ours still
missing after recover) the exit code is 0, whatever the unlocked writer destroyed. Practical rule from the README: read from both at will, but do not
let DSH and this server write the same scope at the same moment.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
from _acceptance import child_env  # noqa: E402  (sibling module in scripts/)

SCOPE = "global"


# --------------------------------------------------------------------------------------------
# Workers (this script, re-run as a child with --worker)
# --------------------------------------------------------------------------------------------


def _wait_for(path: Path, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit("no-go: the barrier file never appeared")
        time.sleep(0.001)


def dsh_line(content: str, tag: str) -> str:
    now = int(time.time() * 1000)
    rec = {
        "id": str(uuid.uuid4()),
        "scope": SCOPE,
        "kind": "note",
        "content": content,
        "tags": [tag],
        "source": {"origin": "explicit"},
        "createdAt": now,
        "updatedAt": now,
        "lastAccessedAt": now,
        "accessCount": 0,
    }
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def locked_worker(root: Path, tag: str, count: int, go: Path, delay: float) -> int:
    """Our side: the real store API, one transaction (lock, re-read, atomic replace) per save."""
    from dsh_memory_mcp.store.shared import SharedStore

    store = SharedStore(str(root))
    print("ready", flush=True)
    _wait_for(go)
    for i in range(count):
        store.save(SCOPE, f"{tag} #{i}", tags=[tag])
        time.sleep(delay)
    store.close()
    print(f"done {count}", flush=True)
    return 0


def unlocked_worker(root: Path, tag: str, count: int, go: Path, delay: float) -> int:
    """The DSH plugin's pattern: snapshot the scope once, then rewrite the whole file per flush."""
    path = root / "global.jsonl"
    print("ready", flush=True)
    _wait_for(go)
    try:
        snapshot = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    except FileNotFoundError:
        snapshot = []
    tmp = Path(str(path) + ".tmp")  # DSH's fixed tmp name
    for i in range(count):
        snapshot.append(dsh_line(f"{tag} #{i}", tag))
        tmp.write_text("\n".join(snapshot) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        time.sleep(delay)
    print(f"done {count}", flush=True)
    return 0


# --------------------------------------------------------------------------------------------
# The measurement
# --------------------------------------------------------------------------------------------


def spawn(mode: str, root: Path, tag: str, count: int, go: Path, delay: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--worker",
            mode,
            str(root),
            tag,
            str(count),
            str(go),
            str(delay),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True, encoding="utf-8",
        env=child_env(),
    )


def count_on_disk(root: Path) -> tuple[dict[str, int], int]:
    """(records per tag, lines that are not a JSON record) in global.jsonl."""
    per_tag: dict[str, int] = {}
    bad = 0
    path = root / "global.jsonl"
    if not path.exists():
        return per_tag, 0
    seen: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if rec.get("id") in seen:  # a duplicate would be a bug as well; count each id once
            continue
        seen.add(rec.get("id"))
        tag = str(rec.get("content", "")).split(" #", 1)[0]
        per_tag[tag] = per_tag.get(tag, 0) + 1
    return per_tag, bad


def recover(root: Path) -> int:
    """Run the store's recover on `root` (in this process); how many records it put back."""
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))
    from dsh_memory_mcp.store.shared import SharedStore

    return sum(len(entries) for entries in SharedStore(str(root)).recover().values())


def ours_on_disk(root: Path) -> int:
    per_tag, _ = count_on_disk(root)
    return sum(v for k, v in per_tag.items() if k.startswith("locked-w"))


def one_round(root: Path, writers: int, per_writer: int, unlocked: int, delay: float) -> tuple[int, int, int, int]:
    """Run one round in the fresh store `root`: (ours written, ours on disk, theirs written, theirs on disk)."""
    root.mkdir(parents=True)
    go = root.parent / (root.name + ".go")
    procs = [spawn("locked", root, f"locked-w{k}", per_writer, go, delay) for k in range(writers)]
    if unlocked:
        # paced so that both sides span about the same time: the last flushes race each other
        procs.append(spawn("unlocked", root, "unlocked", unlocked, go, delay * per_writer / unlocked))
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline().strip()
            if line != "ready":
                raise RuntimeError(f"worker did not start: {line!r} {p.stderr.read() if p.stderr else ''}")
        go.touch()
        for p in procs:
            _out, err = p.communicate(timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"worker exited {p.returncode}: {err.strip()[-500:]}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    per_tag, bad = count_on_disk(root)
    if bad:
        print(f"  ⚠ global.jsonl 里有 {bad} 行不是完整的 JSON 记录")
    ours = sum(v for k, v in per_tag.items() if k.startswith("locked-w"))
    theirs = per_tag.get("unlocked", 0)
    return writers * per_writer, ours, unlocked, theirs


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        mode, root, tag, count, go, delay = argv[1:7]
        fn = locked_worker if mode == "locked" else unlocked_worker
        return fn(Path(root), tag, int(count), Path(go), float(delay))

    p = argparse.ArgumentParser(description="量化「加锁写者」与 DSH 式无锁全量重写写者并存时的损失(临时目录)")
    p.add_argument("--writers", type=int, default=3, help="加锁写者进程数(缺省 3)")
    p.add_argument("--per-writer", type=int, default=8, help="每个加锁写者写几条(缺省 8)")
    p.add_argument("--unlocked", type=int, default=12, help="无锁写者写几条(缺省 12)")
    p.add_argument("--rounds", type=int, default=3, help="并存测量轮数(缺省 3)")
    p.add_argument("--delay", type=float, default=0.02, help="每次写之间的间隔秒数(缺省 0.02)")
    p.add_argument("--keep", action="store_true", help="保留临时目录")
    args = p.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="dsh-acceptance-coexist-"))
    print(f"临时目录:{tmp}")
    failed = False
    try:
        written, ours, _, _ = one_round(tmp / "control", args.writers, args.per_writer, 0, args.delay)
        ok = ours == written
        failed = not ok
        print(
            f"{'✓' if ok else '✗'} 对照轮(只有加锁写者):{args.writers}×{args.per_writer} = {written} 条"
            f" → 磁盘 {ours} 条" + ("" if ok else f",丢了 {written - ours} 条 —— 这是本项目的 bug")
        )
        totals = [0, 0, 0, 0]
        recovered_total = 0
        for r in range(1, args.rounds + 1):
            t0 = time.monotonic()
            root = tmp / f"round{r}"
            res = one_round(root, args.writers, args.per_writer, args.unlocked, args.delay)
            totals = [a + b for a, b in zip(totals, res, strict=True)]
            w_ours, d_ours, w_theirs, d_theirs = res
            back = recover(root)
            after = ours_on_disk(root)
            recovered_total += after
            if after != w_ours:
                failed = True
            print(
                f"· 并存第 {r} 轮({time.monotonic() - t0:.1f} s):"
                f"加锁写者 写入 {w_ours} 条 → 磁盘剩 {d_ours} 条;"
                f"无锁写者 写入 {w_theirs} 条 → 磁盘剩 {d_theirs} 条;"
                f"合计磁盘 {d_ours + d_theirs} / {w_ours + w_theirs} 条;"
                f"recover 恢复 {back} 条 → 加锁写者 {after}/{w_ours} 条"
                + ("" if after == w_ours else " ✗ recover 后仍有确认过的保存丢失 —— 这是本项目的 bug")
            )
        w_ours, d_ours, w_theirs, d_theirs = totals
        if args.rounds:
            lost_ours, lost_theirs = w_ours - d_ours, w_theirs - d_theirs
            print(
                f"\n合计 {args.rounds} 轮:加锁写者 {d_ours}/{w_ours} 条幸存(被抹掉 {lost_ours});"
                f"无锁写者 {d_theirs}/{w_theirs} 条幸存(被抹掉 {lost_theirs});"
                f"recover 之后加锁写者 {recovered_total}/{w_ours} 条(仍缺 {w_ours - recovered_total})"
            )
            print(
                "结论:加锁写者之间不丢记录(对照轮);无锁的全量重写会抹掉别人刚写的行,"
                "它过期的快照又会被对方覆盖 —— 不要让 DSH 与本服务在同一时刻写同一个作用域;"
                "被抹掉的本服务记录可用 `dsh-memory-mcp recover` 从写入日志恢复。"
            )
    finally:
        if args.keep:
            print(f"保留临时目录:{tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
