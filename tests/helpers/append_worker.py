"""A child for the append/rewrite race test (run with PYTHONPATH=src).

``python append_worker.py MODE ROOT SCOPE TAG N GO`` prints ``ready``, waits until the file GO
exists, then:

* ``save`` — saves N records ``"<TAG> #<i>"``, printing ``ack <content>`` after each one the store
  acknowledged;
* ``forget`` — N times: saves ``"<TAG> doomed #<i>"`` then forgets it (`delete_matching`),
  printing ``gone <content>`` once the forget removed it;
* ``touch`` — N times: touches every record of the scope and flushes at once (a rewrite each).

and finally ``done``.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str]) -> int:
    from dsh_memory_mcp.store.shared import SharedStore

    mode, root, scope, tag, count, go = argv[0], argv[1], argv[2], argv[3], int(argv[4]), argv[5]
    store = SharedStore(root, touch_delay=60.0, lock_timeout=30.0)
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            return 4
        time.sleep(0.001)
    for i in range(count):
        if mode == "save":
            content = f"{tag} #{i}"
            store.save(scope, content)
            print(f"ack {content}", flush=True)
        elif mode == "forget":
            content = f"{tag} doomed #{i}"
            store.save(scope, content)
            removed = store.delete_matching(scope, content)
            if [r.content for r in removed] == [content]:
                print(f"gone {content}", flush=True)
        elif mode == "touch":
            store.touch({scope: [r.id for r in store.snapshot(scope).records]})
            store.flush()
    store.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
