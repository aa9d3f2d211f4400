"""Every private name of the MCP SDK this project relies on, in one module, so a new SDK release
breaks here and nowhere else (`tests/test_sdk_private.py` has one test per name).

* `StreamableHTTPSessionManager._admit_session(requestor)` (sync; the new session's transport, or
  None at the session limit) and `StreamableHTTPSessionManager._discard_session(session_id,
  transport)` (async; forgets the session, terminates its transport): the manager's only session
  lifecycle points, which `serve` needs to count sessions and end them (never-initialized ones,
  and all at shutdown).
* Behaviour, not a name: `ServerSession.client_params` is the one `initialize` params object of a
  handshake-era connection; `mcp_server._Clients` keys per-session state on its identity.
"""

from __future__ import annotations

from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

#: (owner, attribute) of every private SDK name used (the tests walk this list).
PRIVATE_NAMES: tuple[tuple[type[Any], str], ...] = (
    (StreamableHTTPSessionManager, "_admit_session"),
    (StreamableHTTPSessionManager, "_discard_session"),
)


class SessionLifecycle(StreamableHTTPSessionManager):
    """The SDK's Streamable HTTP session manager, with a call when a session starts and ends.

    Override `session_started` / `session_ended`; end one with `end_session`.
    """

    def session_started(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        """A new session was admitted (before its opening request is served)."""

    def session_ended(self, session_id: str) -> None:
        """A session is being discarded (client DELETE, idle reaping, crash, `end_session`)."""

    async def end_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        """Forget the session (404 from now on) and terminate its transport."""
        await self._discard_session(session_id, transport)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self.session_started(transport.mcp_session_id, transport)
        return transport

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self.session_ended(session_id)
        await super()._discard_session(session_id, transport)
