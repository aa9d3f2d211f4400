"""Both protocol eras against real processes: 2026-07-28 (no handshake, `_meta` envelope on every
request) and the handshake era (`initialize`, sessions), on every path a host can take.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import pytest

from tests.helpers.serve_proc import initialize, running_serve, sse_result

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX serve lifecycle"),
]

MODERN = "2026-07-28"


def _envelope(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-bridge", "version": "1"},
        **extra,
    }


def test_serve_answers_a_2026_request_with_no_session_and_no_routing_headers(tmp_path, store_dir):
    # What a stdio bridge (the relay) sends: the host's line as it is, no session, no MCP-* headers.
    with running_serve(store_dir, tmp_path / "err.log") as serve, httpx.Client(timeout=20) as http:
        auth = serve.auth()
        discover = {"jsonrpc": "2.0", "id": "d1", "method": "server/discover", "params": {"_meta": _envelope()}}
        r = http.post(serve.url, json=discover, headers=auth)
        assert r.status_code == 200, r.text
        assert "mcp-session-id" not in r.headers
        found = sse_result(r)
        assert found["id"] == "d1" and MODERN in found["result"]["supportedVersions"]
        assert found["result"]["resultType"] == "complete"

        save = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "memory_save", "arguments": {"content": "无会话也能保存"}, "_meta": _envelope()},
        }
        saved = sse_result(http.post(serve.url, json=save, headers=auth))
        assert saved["id"] == 7 and saved["result"]["structuredContent"]["ok"] is True, saved
        line = json.loads((store_dir / "global.jsonl").read_text(encoding="utf-8"))
        assert line["content"] == "无会话也能保存" and line["source"]["client"] == "raw-bridge/1"

        # A tool name that is not header-safe still routes (the derived Mcp-Name is base64-wrapped).
        odd = dict(save, id=8, params=dict(save["params"], name="记忆_save"))
        unknown = sse_result(http.post(serve.url, json=odd, headers=auth))
        assert unknown["result"]["structuredContent"]["code"] == "UNKNOWN_TOOL", unknown

        # A 2026-07-28 notification with no session is acknowledged, not refused.
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
        assert http.post(serve.url, json=note, headers=auth).status_code == 202

        # Headers the client did send are checked, never overwritten: a mismatch is the SDK's 400.
        lying = http.post(serve.url, json=discover, headers=auth | {"Mcp-Method": "tools/list"})
        assert lying.status_code == 400 and sse_result(lying)["error"]["code"] == -32020, lying.text

        # The handshake era is untouched: initialize opens a session; an un-enveloped request
        # without one is still the SDK's "missing session" 400.
        assert initialize(serve, http)
        bare = {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}
        refused = http.post(serve.url, json=bare, headers=auth)
        assert refused.status_code == 400 and "session" in refused.text.lower()
