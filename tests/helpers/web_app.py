"""A tiny real server for the web page's tests: `web_routes(...)` in a Starlette app under uvicorn.

For what `dsh-memory-mcp serve` does not pass in (the optional Host allow-list): the same routes
and service composition (`open_service`) as `serve`, a real socket on loopback. Prints the login URL on stderr the way `serve` does
and its port on stdout as ``PORT=<n>``; SIGTERM/SIGINT end it.

    python tests/helpers/web_app.py --store-dir DIR [--allowed-host H]...   (token from DSH_MEMORY_TOKEN)
"""

from __future__ import annotations

import argparse
import os
import socket
import sys

import uvicorn
from starlette.applications import Starlette

from dsh_memory_mcp.config import resolve_settings
from dsh_memory_mcp.service.compose import close_service, open_service
from dsh_memory_mcp.transports.web import web_routes


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store-dir", required=True)
    parser.add_argument("--allowed-host", action="append", dest="allowed_hosts")
    args = parser.parse_args()
    token = os.environ["DSH_MEMORY_TOKEN"]
    service = open_service(resolve_settings(store_dir=args.store_dir))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = Starlette(routes=web_routes(service, token, allowed_hosts=args.allowed_hosts))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    sys.stderr.write(f"[dsh-memory-mcp] 网页 = http://127.0.0.1:{port}/?token={token}\n")
    sys.stdout.write(f"PORT={port}\n")
    sys.stdout.flush()
    try:
        server.run(sockets=[sock])
    finally:
        close_service(service)
    return 0


if __name__ == "__main__":
    sys.exit(main())
