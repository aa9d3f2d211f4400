"""`python -m dsh_memory_mcp` runs the same `main()` as the console script."""

from __future__ import annotations

import sys

from dsh_memory_mcp.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
