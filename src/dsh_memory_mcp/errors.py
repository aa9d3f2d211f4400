"""The package's exceptions: a small tree, each carrying a spec error code.

::

    DshMemoryError                       code + a Chinese message that says how to fix it
    ├── InvalidArgument (ValueError)     CONTENT_EMPTY, CONTENT_TOO_LONG, CONTENT_SECRET, TAGS_INVALID,
    │                                    QUERY_EMPTY, KIND_INVALID, IMPORTANCE_RANGE,
    │                                    TOPK_RANGE, LIMIT_RANGE, IDS_EMPTY, TARGET_REQUIRED,
    │                                    TARGET_AMBIGUOUS, PATH_INVALID, PATH_SCOPE_CONFLICT
    ├── ScopeError (ValueError)          SCOPE_INVALID, SCOPE_NOT_WRITABLE, SCOPE_NAME_INVALID,
    │                                    SCOPE_NAME_TAKEN
    ├── LockError
    │   ├── LockTimeout (TimeoutError)   LOCK_TIMEOUT
    │   └── LockRecursion (RuntimeError) LOCK_RECURSION
    ├── CallRefused (TimeoutError)       BUSY (queued past its deadline, never started),
    │                                    DEADLINE (ran, or waited for a lock, past its deadline)
    ├── StoreError (OSError)             STORE_ERROR: a read or write of the store failed
    └── EmbeddingUnavailable             never reaches a tool caller: the vector channel fails soft

The tools layer turns any `DshMemoryError` into ``{ok: false, code, message}``; any other exception
is a bug: ``INTERNAL_ERROR``, its traceback in the log, never in the result (``TOOL_ERROR`` is for
faults we classify). Only the standard library is imported here.
"""

from __future__ import annotations

#: Every code a tool may return, in the order docs/design.md lists them.
ERROR_CODES: tuple[str, ...] = (
    "CONTENT_EMPTY",
    "CONTENT_TOO_LONG",
    "CONTENT_SECRET",
    "TAGS_INVALID",
    "QUERY_EMPTY",
    "KIND_INVALID",
    "IMPORTANCE_RANGE",
    "TOPK_RANGE",
    "LIMIT_RANGE",
    "IDS_EMPTY",
    "TARGET_REQUIRED",
    "TARGET_AMBIGUOUS",
    "CONFIRM_REQUIRED",
    "PATH_INVALID",
    "PATH_SCOPE_CONFLICT",
    "SCOPE_INVALID",
    "SCOPE_NOT_WRITABLE",
    "SCOPE_NAME_INVALID",
    "SCOPE_NAME_TAKEN",
    "LOCK_TIMEOUT",
    "LOCK_RECURSION",
    "STORE_ERROR",
    "UNKNOWN_TOOL",
    "TOOL_ERROR",
    "INTERNAL_ERROR",
    "BUSY",
    "DEADLINE",
)


class DshMemoryError(Exception):
    """Base of every error this package raises on purpose.

    :param code: one of `ERROR_CODES`; what a program branches on.
    :param message: Chinese text for the model or the person, naming what was wrong and the fix.
    """

    default_code = "TOOL_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidArgument(DshMemoryError, ValueError):
    """A tool argument is missing, of the wrong type or out of range."""


class ScopeError(DshMemoryError, ValueError):
    """A scope name or alias is invalid, taken, or not writable."""

    default_code = "SCOPE_INVALID"


class LockError(DshMemoryError):
    """A scope lock could not be taken; `lock_file` names it."""

    def __init__(self, message: str, *, lock_file: str = "") -> None:
        super().__init__(message)
        self.lock_file = lock_file


class LockTimeout(LockError, TimeoutError):
    """Another writer held the scope lock for longer than the wait budget."""

    default_code = "LOCK_TIMEOUT"


class LockRecursion(LockError, RuntimeError):
    """This thread asked again for a scope lock it already holds: a bug, never a wait."""

    default_code = "LOCK_RECURSION"


class CallRefused(DshMemoryError, TimeoutError):
    """A tool call of the shared server went past its deadline (`serve`'s tool gate).

    ``BUSY``: it waited in the queue for the whole deadline and never started (nothing was done).
    ``DEADLINE``: it started but did not finish in time (a lock wait included); a write may still
    complete after the answer, so the caller should check before retrying.
    """

    default_code = "DEADLINE"


class StoreError(DshMemoryError, OSError):
    """Reading or writing the store failed; the files on disk are as they were."""

    default_code = "STORE_ERROR"

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class EmbeddingUnavailable(DshMemoryError):
    """The embedding backend is off, down, slow or broken; callers fall back to lexical search."""

    default_code = "EMBEDDING_UNAVAILABLE"
