"""A child process for the multi-process store and lock tests (run with PYTHONPATH=src).

Usage: ``python store_worker.py MODE ARGS...``; one line per event on stdout, so the parent can
wait for "ready"/"locked" before acting. Modes:

* ``save ROOT SCOPE N TAG GO`` — print ``ready``, wait until the file GO exists, save N records
  (content ``"<TAG> #<i>"``) into SCOPE, print ``done N``.
* ``hold ROOT SCOPE`` — take the scope lock, print ``locked``, sleep until killed.
* ``fsize ROOT SCOPE LIMIT SIZE`` — limit file size to LIMIT bytes (SIGXFSZ ignored, so writes
  fail with EFBIG instead of killing us), save a record of SIZE characters, print the error
  code (``STORE_ERROR``) and exit 3, or print ``saved`` and exit 0.
* ``span LOCKS_DIR NAME GO HOLD_S`` — print ``ready``, wait for GO, hold the lock NAME for HOLD_S
  seconds while owning the file ``<LOCKS_DIR>/inside`` (O_EXCL: a second holder at the same time
  prints ``OVERLAP``), print ``done``.
"""

from __future__ import annotations

import os
import sys
import time


def _wait_for(path: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            print("no-go", flush=True)
            sys.exit(4)
        time.sleep(0.001)


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "save":
        from dsh_memory_mcp.store.shared import SharedStore

        root, scope, count, tag, go = argv[1], argv[2], int(argv[3]), argv[4], argv[5]
        store = SharedStore(root)
        print("ready", flush=True)
        _wait_for(go)
        for i in range(count):
            store.save(scope, f"{tag} #{i}", tags=[tag])
        print(f"done {count}", flush=True)
        return 0
    if mode == "hold":
        from dsh_memory_mcp.store.shared import SharedStore

        store = SharedStore(argv[1])
        with store.lock(argv[2]):
            print("locked", flush=True)
            time.sleep(60)
        return 0
    if mode == "fsize":
        import resource
        import signal

        from dsh_memory_mcp.errors import StoreError
        from dsh_memory_mcp.store.shared import SharedStore

        root, scope, limit, size = argv[1], argv[2], int(argv[3]), int(argv[4])
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        try:
            SharedStore(root).save(scope, "大" * size)
        except StoreError as exc:
            print(exc.code, flush=True)
            print(exc.message, file=sys.stderr, flush=True)
            return 3
        print("saved", flush=True)
        return 0
    if mode == "span":
        from dsh_memory_mcp.store.locks import LockManager

        locks_dir, name, go, hold_s = argv[1], argv[2], argv[3], float(argv[4])
        manager = LockManager(locks_dir, timeout=15.0)
        inside = os.path.join(locks_dir, "inside")
        print("ready", flush=True)
        _wait_for(go)
        with manager.hold(name):
            try:
                fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                print("OVERLAP", flush=True)
                return 5
            os.close(fd)
            time.sleep(hold_s)
            os.unlink(inside)
        print("done", flush=True)
        return 0
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
