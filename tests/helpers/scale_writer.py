"""A writer process for the many-writers test (run with PYTHONPATH=src).

``python scale_writer.py ROOT SCOPE TAG N GO`` reads the scope once (as a server's first search
would), prints ``ready``, waits until the file GO exists, then saves N records ``"<TAG> #<i>"``
with the store's default lock timeout, printing ``ack <id>`` for each acknowledged save or
``refused <code>`` for a coded refusal (e.g. ``LOCK_TIMEOUT``), and finally ``done``.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    from dsh_memory_mcp.errors import DshMemoryError
    from dsh_memory_mcp.store.shared import SharedStore

    root, scope, tag, count, go = argv[0], argv[1], argv[2], int(argv[3]), argv[4]
    store = SharedStore(root, touch_delay=60.0)
    store.snapshot(scope)
    print("ready", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            return 4
        time.sleep(0.001)
    for i in range(count):
        try:
            record = store.save(scope, f"{tag} #{i}").record
        except DshMemoryError as exc:
            print(f"refused {exc.code}", flush=True)
        else:
            print(f"ack {record.id}", flush=True)
    store.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
