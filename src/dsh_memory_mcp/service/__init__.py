"""The tools as plain functions over the store, called by every front door."""
