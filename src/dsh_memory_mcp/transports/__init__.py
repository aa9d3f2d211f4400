"""Front doors that speak MCP: the SDK server over stdio (and later HTTP, relay)."""
