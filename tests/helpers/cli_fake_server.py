"""Run the real CLI (`cli.main()`, owning the process) with a stand-in `dsh_memory_mcp.transports.mcp_server`.

For tests of what the CLI itself does with the process — signals that must still end a server
that is not reading stdin, and the exit watchdog for a thread that never ends — which the real
server cannot be made to do on purpose. The stand-in imports nothing heavy.

    python tests/helpers/cli_fake_server.py MODE [cli args...]

MODE: `ignore-stdin` (never reads stdin, sleeps until interrupted), `stuck` (never reads stdin
and swallows KeyboardInterrupt: a shutdown that hangs), `slow-cleanup` (the first interrupt starts a
30 s cleanup, announced on stderr, that only another interrupt cuts short; the hard deadline is 60 s)
or `leave-thread` (starts a non-daemon thread that never ends, then returns as if stdin had closed).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import types

from dsh_memory_mcp import __version__
from dsh_memory_mcp.cli import main as cli
from dsh_memory_mcp.cli import runtime
from dsh_memory_mcp.config import Settings

log = logging.getLogger("dsh_memory_mcp.transports.mcp_server")


def _serve(settings: Settings) -> None:
    log.info("已启动 dsh-memory-mcp v%s(stdio)", __version__)
    if MODE == "ignore-stdin":
        while True:
            time.sleep(0.05)
    elif MODE == "stuck":
        while True:
            try:
                time.sleep(0.05)
            except KeyboardInterrupt:
                pass
    elif MODE == "slow-cleanup":
        try:
            while True:
                time.sleep(0.05)
        except KeyboardInterrupt:
            print("cleanup started", file=sys.stderr, flush=True)
            time.sleep(30)
    elif MODE == "leave-thread":
        threading.Thread(target=time.sleep, args=(3600,), name="never-ends").start()
    else:
        raise SystemExit(f"unknown mode {MODE}")


if __name__ == "__main__":
    MODE = sys.argv[1]
    module = types.ModuleType("dsh_memory_mcp.transports.mcp_server")
    module.serve = _serve  # type: ignore[attr-defined]
    sys.modules["dsh_memory_mcp.transports.mcp_server"] = module
    runtime.STOP_ESCALATION_SECONDS = 0.3
    runtime.HARD_EXIT_SECONDS = 60.0 if MODE == "slow-cleanup" else 1.0
    sys.exit(cli.main(sys.argv[2:]))
