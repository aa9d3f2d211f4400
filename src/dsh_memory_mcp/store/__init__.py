"""The store on disk: JSONL scope files, locks, scopes, the shared store."""
