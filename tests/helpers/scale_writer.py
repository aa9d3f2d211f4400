"""A writer process for the many-writers test (run with PYTHONPATH=src).

``python scale_writer.py ROOT PROJECT TAG N GO`` opens the store the way a freshly started
stdio server does (`compose.open_service(..., warm="default")`: the warm-up starts reading and
indexing the default scopes in the background at once, nothing is read before), prints
``ready``, waits until the file GO exists, then calls ``memory_save`` N times with the content
``"<TAG> #<i>"`` (global scope, the store's default lock timeout), printing ``ack <id>`` for each
acknowledged save or ``refused <code>`` for a refusal (e.g. ``LOCK_TIMEOUT``), then
``counters <json>`` (the store's `counters()` and the warm-up's pauses) and ``done``.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    from dsh_memory_mcp.config import resolve_settings
    from dsh_memory_mcp.service.compose import close_service, open_service

    root, project, tag, count, go = argv[0], argv[1], argv[2], int(argv[3]), argv[4]
    settings = resolve_settings(store_dir=root, project_dir=project, env={"DSH_MEMORY_VECTOR": "off"})
    service = open_service(settings, warm="default")
    print("ready", flush=True)
    deadline = time.monotonic() + 120
    while not os.path.exists(go):
        if time.monotonic() > deadline:
            return 4
        time.sleep(0.001)
    for i in range(count):
        result = service.call("memory_save", {"content": f"{tag} #{i}"}).structured
        if result.get("ok"):
            print(f"ack {result['id']}", flush=True)
        else:
            print(f"refused {result.get('code')}", flush=True)
    counters = dict(service.store.counters(), warm_up_pauses=service.foreground.stats["pauses"])
    close_service(service)
    print(f"counters {json.dumps(counters)}", flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
