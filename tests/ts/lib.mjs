// Shared harness for the host-compatibility scripts: the official TypeScript SDK client, as
// Claude Code, Cursor, VS Code and the Inspector use it. A script reads one JSON config (path in
// argv[2]), talks to the real server, and prints ONE JSON document on stdout for pytest to check.
// Diagnostics go to stderr; the server's stderr goes to the file the config names.
import { openSync, closeSync, readFileSync } from "node:fs";

/**
 * The client classes of one SDK line: "v1" = `@modelcontextprotocol/sdk` 1.x (handshake era only,
 * what most IDE hosts ship today); "v2" = `@modelcontextprotocol/client` 2.x (2026-07-28 with
 * `versionNegotiation: {mode: "auto"}`, the handshake with mode "legacy", its default).
 */
async function sdkLine(sdk) {
  if (sdk === "v2") {
    const client = await import("@modelcontextprotocol/client");
    const stdio = await import("@modelcontextprotocol/client/stdio");
    return {
      Client: client.Client,
      StdioClientTransport: stdio.StdioClientTransport,
      StreamableHTTPClientTransport: client.StreamableHTTPClientTransport,
      onRoots: (c, handler) => c.setRequestHandler("roots/list", handler),
    };
  }
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
  const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
  const { ListRootsRequestSchema } = await import("@modelcontextprotocol/sdk/types.js");
  return {
    Client,
    StdioClientTransport,
    StreamableHTTPClientTransport,
    onRoots: (c, handler) => c.setRequestHandler(ListRootsRequestSchema, handler),
  };
}

/** The config pytest wrote for this run (`tests/helpers/ts_client.py::run_node`). */
export function readConfig() {
  const path = process.argv[2];
  if (!path) throw new Error("usage: node <script>.mjs <config.json>");
  return JSON.parse(readFileSync(path, "utf8"));
}

/** Print the result document; pytest parses the last stdout line. */
export function emit(value) {
  process.stdout.write(JSON.stringify(value) + "\n");
}

/** A thrown error as plain data (an McpError carries the JSON-RPC code, e.g. -32602). */
export function errorData(err) {
  return { code: err?.code ?? null, message: String(err?.message ?? err) };
}

/**
 * Connect a `Client` to the target and run the handshake.
 * target: {transport: "stdio", command, args, env, cwd, stderrPath} | {transport: "http", url, headers?}
 *   (headers: sent on every HTTP request, e.g. {Authorization: "Bearer …"} for `serve`)
 * options.roots: list of {uri, name} → the client declares `roots` (listChanged) and answers
 *   `roots/list` from `state.roots`; absent → no roots capability, like most hosts today.
 * options.clientInfo: {name, version} sent in `initialize` (or each 2026-07-28 request's `_meta`).
 * options.sdk: "v1" (default) or "v2"; options.mode (v2 only): "auto" or "legacy" (default).
 */
export async function connect(target, options = {}) {
  const { Client, StdioClientTransport, StreamableHTTPClientTransport, onRoots } = await sdkLine(options.sdk);
  const state = { roots: options.roots ?? null, rootsRequests: 0 };
  const capabilities = state.roots ? { roots: { listChanged: true } } : {};
  const clientOptions = { capabilities };
  if (options.sdk === "v2") clientOptions.versionNegotiation = { mode: options.mode ?? "legacy" };
  const client = new Client(options.clientInfo ?? { name: "ts-host-test", version: "1.0.0" }, clientOptions);
  if (state.roots) {
    onRoots(client, async () => {
      state.rootsRequests += 1;
      return { roots: state.roots };
    });
  }
  let transport;
  let stderrFd = null;
  if (target.transport === "http") {
    const requestInit = target.headers ? { headers: target.headers } : undefined;
    transport = new StreamableHTTPClientTransport(new URL(target.url), { requestInit });
  } else {
    stderrFd = target.stderrPath ? openSync(target.stderrPath, "a") : "inherit";
    transport = new StdioClientTransport({
      command: target.command,
      args: target.args ?? [],
      env: target.env,
      cwd: target.cwd,
      stderr: stderrFd,
    });
  }
  sniffProtocolVersion(transport, state);
  const t0 = performance.now();
  await client.connect(transport);
  state.connectMs = performance.now() - t0;
  const close = async () => {
    await client.close();
    if (typeof stderrFd === "number") closeSync(stderrFd);
  };
  /** Replace the roots and tell the server (`notifications/roots/list_changed`). */
  const setRoots = async (roots) => {
    state.roots = roots;
    await client.sendRootsListChanged();
  };
  return { client, transport, state, close, setRoots };
}

/**
 * Record in `state.protocolVersion` the revision the server answered `initialize` with (the 1.x
 * client does not expose it); the 2.x client's own `getNegotiatedProtocolVersion()` covers both eras.
 */
function sniffProtocolVersion(transport, state) {
  let handler;
  Object.defineProperty(transport, "onmessage", {
    configurable: true,
    get: () => handler,
    set: (fn) => {
      handler = fn
        ? (message, extra) => {
            const version = message?.result?.protocolVersion;
            if (typeof version === "string" && state.protocolVersion === undefined) state.protocolVersion = version;
            return fn(message, extra);
          }
        : fn;
    },
  });
}

/** Run `body(session)` on a connected session and always close it (the child is reaped). */
export async function withSession(target, options, body) {
  const session = await connect(target, options);
  try {
    return await body(session);
  } finally {
    await session.close();
  }
}
