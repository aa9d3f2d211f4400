"""A host that rewrites its config file all the time, as Claude Code does with ``~/.claude.json``.

    python -m tests.helpers.config_writer PATH inplace|rename INTERVAL_MS STOP_FILE

Every INTERVAL_MS it reads PATH (JSON), adds one entry ``projects["/p/<n>"]`` and writes the whole
file back: ``inplace`` truncates and writes (what Claude Code does), ``rename`` writes a tmp and
renames it over PATH. It works from the disk only (like a host that re-reads before it saves), so
an entry that anyone else's write loses is gone for good. When STOP_FILE appears it prints the
number of entries it wrote and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    path, mode, interval_ms, stop = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    n = 0
    while not os.path.exists(stop):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        try:
            doc = json.loads(text)
        except ValueError:
            print(f"unparseable config read: {text[:200]!r}", file=sys.stderr)
            return 1
        doc.setdefault("projects", {})[f"/p/{n}"] = {"n": n}
        data = json.dumps(doc, indent=2)
        if mode == "inplace":
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(data)
        else:
            tmp = f"{path}.writer-{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(data)
            os.replace(tmp, path)
        n += 1
        time.sleep(interval_ms / 1000)
    print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
