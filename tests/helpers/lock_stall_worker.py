"""A child process for the stalled-holder tests (run with PYTHONPATH=src).

Usage: ``python lock_stall_worker.py MODE ARGS...``; one line per event on stdout. Modes:

* ``stall ROOT SCOPE`` — save one record into SCOPE superseding its first record (so the file is
  rewritten, not appended to), but stop this very process (SIGSTOP) immediately before the
  commit renames the new file into place, i.e. while it holds the scope lock (`fileio.guard`
  runs right there). Prints ``stopping``; after SIGCONT prints ``ack <id>``
  if the save was acknowledged, else ``error <CODE>``.
* ``saves ROOT SCOPE N STALE_AFTER [AHEAD]`` — save N records (content ``"B #<i>"``) with locks
  judged stale after STALE_AFTER seconds; prints ``ack <id>`` or ``error <CODE>`` per save, then
  ``done``. With AHEAD, the lock manager's wall clock runs AHEAD seconds in the future (so every
  marker's mtime looks that much older) and ``waiting`` is printed once it has polled a held
  lock 20 times.
* ``soak ROOT TAG SCOPE…`` — save ``"<TAG> #<i>"`` round-robin into the scopes until killed;
  prints ``ack <scope-index> <id>`` after each acknowledged save (the crash-consistency soak).
"""

from __future__ import annotations

import os
import signal
import sys
import time

from dsh_memory_mcp.store.clock import SYSTEM, Clock


class _Ahead(Clock):
    """Real time with the wall clock `ahead` seconds in the future; says when it polled enough."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead
        self.polls = 0

    def time(self) -> float:
        return time.time() + self.ahead

    def sleep(self, seconds: float) -> None:
        self.polls += 1
        if self.polls == 20:
            print("waiting", flush=True)
        super().sleep(seconds)


def main(argv: list[str]) -> int:
    from dsh_memory_mcp.errors import DshMemoryError
    from dsh_memory_mcp.store import fileio
    from dsh_memory_mcp.store.shared import SharedStore

    mode, root, scope = argv[0], argv[1], argv[2]
    ahead = float(argv[5]) if mode == "saves" and len(argv) > 5 else 0.0
    store = SharedStore(root, timing=_Ahead(ahead) if ahead else SYSTEM, touch_delay=3600.0)
    if mode == "stall":
        stopped = []

        def stop_once() -> None:
            if not stopped:
                stopped.append(True)
                print("stopping", flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)

        target = store.snapshot(scope).records[0].id  # a supersede: the scope file is rewritten
        try:
            with fileio.guard(stop_once):
                result = store.save(scope, "A: the stalled holder's record", supersedes=target)
        except DshMemoryError as exc:
            print(f"error {exc.code}", flush=True)
            return 0
        print(f"ack {result.record.id}", flush=True)
        return 0
    if mode == "saves":
        count, stale_after = int(argv[3]), float(argv[4])
        store._locks.stale_after = stale_after
        for i in range(count):
            try:
                result = store.save(scope, f"B #{i}")
            except DshMemoryError as exc:
                print(f"error {exc.code}", flush=True)
            else:
                print(f"ack {result.record.id}", flush=True)
        print("done", flush=True)
        return 0
    if mode == "soak":
        tag, names = argv[2], argv[3:]
        i = 0
        while True:
            k = i % len(names)
            try:
                result = store.save(names[k], f"{tag} #{i}")
            except DshMemoryError as exc:
                print(f"error {exc.code}", flush=True)
            else:
                print(f"ack {k} {result.record.id}", flush=True)
            i += 1
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
