"""Settings: pure resolution from command-line values, environment and defaults.

Resolving configuration never touches the disk (no directory is created, nothing is checked):
the store directory is created and checked when the server actually starts, so `--help`,
`--version` and a rejected command line leave no trace (SPEC §2).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

__all__ = [
    "DEFAULT_EMBED_MODEL_ID",
    "DEFAULT_EMBED_PORT",
    "DEFAULT_EMBED_THREADS",
    "DEPENDENCIES",
    "SDK_REQUIREMENT",
    "ServeSettings",
    "Settings",
    "VectorSettings",
    "default_store_dir",
    "env_flag",
    "infer_pooling",
    "model_id_from_path",
    "relay_off",
    "resolve_serve_settings",
    "resolve_settings",
    "resolve_vector_settings",
    "ui_language",
]

#: The runtime dependencies as pip requirements, quoted by the CLI's import diagnostics and by
#: `doctor`. pyproject.toml is the source of truth; tests/test_config.py checks they agree.
SDK_REQUIREMENT = "mcp>=2.3,<3"
DEPENDENCIES: tuple[tuple[str, str], ...] = (
    ("numpy", "numpy>=1.26"),
    ("httpx", "httpx>=0.27,<1"),
    ("filelock", "filelock>=3.13"),
    ("platformdirs", "platformdirs>=4"),
)

#: Longest `content` a save accepts unless `DSH_MEMORY_MAX_CONTENT` says otherwise.
DEFAULT_MAX_CONTENT = 20_000
DEFAULT_EMBED_PORT = 8199
DEFAULT_EMBED_THREADS = 6
#: `memory_forget` by query deletes up to this many matches without `confirm: true` (issue 15).
DEFAULT_FORGET_CONFIRM_OVER = 3
FORGET_CONFIRM_MAX = 1_000_000
#: DSH's own default; sidecars written by DSH start with `#qwen3-embedding-0.6b\t1024`.
DEFAULT_EMBED_MODEL_ID = "qwen3-embedding-0.6b"

_TRUE = frozenset({"1", "true", "yes", "on"})
_OFF = frozenset({"off", "0", "false", "no", "disabled"})
_POOLINGS = frozenset({"none", "mean", "cls", "last", "rank"})


def env_flag(value: str | None) -> bool:
    """Whether an environment value means "on" (1/true/yes/on, any case, padded)."""
    return value is not None and value.strip().lower() in _TRUE


def _env(env: Mapping[str, str], name: str) -> str | None:
    """An environment value, stripped; empty counts as unset."""
    value = env.get(name)
    if value is None:
        return None
    value = value.strip()
    return value or None


def relay_off(env: Mapping[str, str]) -> bool:
    """``DSH_MEMORY_RELAY=off`` (or 0/false/no/disabled): stdio starts never relay to a serve."""
    return (_env(env, "DSH_MEMORY_RELAY") or "").lower() in _OFF


def ui_language(env: Mapping[str, str]) -> Literal["zh", "en"]:
    """The human CLI's language: the first of ``LC_ALL``, ``LC_MESSAGES``, ``LANG`` that is set
    decides (the POSIX order); ``en…`` (``en_US.UTF-8``, ``en``) means English, anything else
    (``zh_CN.UTF-8``, ``C.UTF-8``, unset) Chinese. The tools' texts never depend on it."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = (env.get(name) or "").strip()
        if value:
            return "en" if value.lower().startswith("en") else "zh"
    return "zh"


def default_store_dir(env: Mapping[str, str] | None = None) -> str:
    """`~/.dsh-memory-store`, the same on every platform (the DSH plugin's documented default)."""
    env = os.environ if env is None else env
    home = _env(env, "HOME") or _env(env, "USERPROFILE") or str(Path.home())
    return os.path.join(home, ".dsh-memory-store")


def _absolute(path: str, cwd: str) -> str:
    """Absolute and normalised, without resolving symlinks."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        path = os.path.join(cwd, path)
    return os.path.normpath(path)


@dataclass(frozen=True)
class VectorSettings:
    """How (and whether) to reach an embedding backend (SPEC §8)."""

    enabled: bool = True
    endpoint: str | None = None
    exe: str = "llama-server"
    model: str | None = None
    port: int = DEFAULT_EMBED_PORT
    threads: int = DEFAULT_EMBED_THREADS
    #: `None`: pass no `--pooling` and let the GGUF's metadata decide.
    pooling: str | None = None
    model_id: str = DEFAULT_EMBED_MODEL_ID
    #: Why vectors are off or unusable, for the one stderr line; `None` when usable.
    unavailable_reason: str | None = None
    #: A `DSH_MEMORY_EMBED_POOLING` value we did not understand (ignored, and warned about at start).
    invalid_pooling: str | None = None
    #: Environment values that were invalid and replaced by their default (one Chinese line each).
    warnings: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        return self.enabled and self.unavailable_reason is None


@dataclass(frozen=True)
class Settings:
    """Everything the server needs to know, resolved once at start."""

    store_dir: str
    project_dir: str
    store_dir_is_default: bool = False
    scope_all: bool = False
    debug: bool = False
    vector: VectorSettings = field(default_factory=VectorSettings)
    #: Longest `content` a save accepts (`DSH_MEMORY_MAX_CONTENT`); longer → CONTENT_TOO_LONG.
    max_content: int = DEFAULT_MAX_CONTENT
    #: `DSH_MEMORY_ALLOW_SECRETS=1`: save content that looks like a credential (off: CONTENT_SECRET).
    allow_secrets: bool = False
    #: Where `project_dir` came from: "flag" (`--project`), "env" (`DSH_MEMORY_PROJECT`) or "cwd".
    project_source: Literal["flag", "env", "cwd"] = "cwd"
    #: Seconds between two background rewrites of one scope file for access counts
    #: (``DSH_MEMORY_TOUCH_INTERVAL_SECS``; exit and explicit flushes still write at once).
    touch_interval: int = 30
    #: `memory_forget` by query deletes at most this many matches without `confirm: true`
    #: (`DSH_MEMORY_FORGET_CONFIRM_OVER`); more → `CONFIRM_REQUIRED` with the list, nothing deleted.
    forget_confirm_over: int = DEFAULT_FORGET_CONFIRM_OVER
    #: Environment values that were invalid and replaced by their default (one Chinese line each;
    #: the CLI prints them at start, `doctor` lists them). Includes `vector.warnings`.
    warnings: tuple[str, ...] = ()

    @property
    def default_save_scope(self) -> str:
        return "project" if self.scope_all else "global"


def model_id_from_path(model_path: str) -> str:
    """`Qwen3-Embedding-0.6B-Q8_0.gguf` → `qwen3-embedding-0.6b` (lower case, no extension, no quant)."""
    name = re.split(r"[\\/]", model_path)[-1].lower()
    if name.endswith(".gguf"):
        name = name[: -len(".gguf")]
    # Quantisation suffixes: -q8_0, -q4_k_m, -iq4_xs, -f16, -f32, -bf16, -fp16 (also with "." or "_").
    name = re.sub(r"[-_.](?:i?q\d+(?:_[a-z0-9]+)*|b?f(?:p)?\d+)$", "", name)
    return name or DEFAULT_EMBED_MODEL_ID


def infer_pooling(model_id: str) -> str | None:
    """Pooling by model family; `None` means "pass no flag, let the GGUF decide".

    A wrong pooling silently puts vectors in another space (cosine with the right one ≈ 0.35 for
    Qwen3 with cls), so only families we know are mapped.
    """
    name = model_id.lower()
    if "qwen3-embedding" in name or name.startswith("qwen"):
        return "last"
    if name.startswith("bge") or "/bge" in name:
        return "cls"
    if any(name.startswith(p) for p in ("nomic", "all-minilm", "minilm", "e5", "multilingual-e5", "gte")):
        return "mean"
    if "minilm" in name:
        return "mean"
    return None


def resolve_vector_settings(env: Mapping[str, str], cwd: str) -> VectorSettings:
    """Vector backend settings from the environment (SPEC §2, §8)."""
    raw = _env(env, "DSH_MEMORY_VECTOR")
    if raw is not None and raw.lower() in _OFF:
        return VectorSettings(enabled=False, unavailable_reason="DSH_MEMORY_VECTOR=off")
    endpoint = _env(env, "DSH_MEMORY_EMBED_ENDPOINT")
    if endpoint is not None:
        endpoint = endpoint.rstrip("/")
    exe = _env(env, "DSH_MEMORY_EMBED_EXE") or "llama-server"
    model = _env(env, "DSH_MEMORY_EMBED_MODEL")
    if model is not None:
        model = _absolute(model, cwd)
    problems: list[str] = []
    port = _int_env(env, "DSH_MEMORY_EMBED_PORT", DEFAULT_EMBED_PORT, 1, 65535, problems)
    threads = _int_env(env, "DSH_MEMORY_EMBED_THREADS", DEFAULT_EMBED_THREADS, 1, 512, problems)
    model_id = model_id_from_path(model) if model else DEFAULT_EMBED_MODEL_ID
    pooling_raw = _env(env, "DSH_MEMORY_EMBED_POOLING")
    pooling = pooling_raw.lower() if pooling_raw and pooling_raw.lower() in _POOLINGS else None
    invalid_pooling = pooling_raw if pooling_raw is not None and pooling is None else None
    if pooling is None and model:
        pooling = infer_pooling(model_id)
    reason = None
    if endpoint is None and model is None:
        reason = "未设置 DSH_MEMORY_EMBED_MODEL 或 DSH_MEMORY_EMBED_ENDPOINT"
    return VectorSettings(
        enabled=True,
        endpoint=endpoint,
        exe=exe,
        model=model,
        port=port,
        threads=threads,
        pooling=pooling,
        model_id=model_id,
        unavailable_reason=reason,
        invalid_pooling=invalid_pooling,
        warnings=tuple(problems),
    )


def _int_env(
    env: Mapping[str, str], name: str, default: int, low: int, high: int, problems: list[str] | None = None
) -> int:
    """An integer variable in [low, high]; anything else is the default, and `problems` says so."""
    raw = _env(env, name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is not None and low <= value <= high:
        return value
    if problems is not None:
        problems.append(f"{name}={raw!r} 不是 {low}~{high} 之间的整数,已忽略,改用缺省值 {default}")
    return default


def resolve_settings(
    *,
    store_dir: str | None = None,
    project_dir: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> Settings:
    """Combine command-line values (already parsed) with the environment and defaults.

    Flags win over environment variables, which win over defaults. Relative paths resolve
    against `cwd`. Creates nothing.
    """
    env = os.environ if env is None else env
    cwd = os.getcwd() if cwd is None else cwd
    is_default = False
    store = store_dir if store_dir is not None else _env(env, "DSH_MEMORY_STORE_DIR")
    if store is None:
        store = default_store_dir(env)
        is_default = True
    project = project_dir if project_dir is not None else _env(env, "DSH_MEMORY_PROJECT")
    source: Literal["flag", "env", "cwd"] = "flag" if project_dir is not None else "env"
    if project is None:
        project = cwd
        source = "cwd"
    problems: list[str] = []
    confirm_over = _int_env(
        env, "DSH_MEMORY_FORGET_CONFIRM_OVER", DEFAULT_FORGET_CONFIRM_OVER, 0, FORGET_CONFIRM_MAX, problems
    )
    touch_interval = _int_env(env, "DSH_MEMORY_TOUCH_INTERVAL_SECS", 30, 0, 86_400, problems)
    max_content = _int_env(env, "DSH_MEMORY_MAX_CONTENT", DEFAULT_MAX_CONTENT, 1, 10_000_000, problems)
    vector = resolve_vector_settings(env, cwd)
    return Settings(
        store_dir=_absolute(store, cwd),
        project_dir=_absolute(project, cwd),
        store_dir_is_default=is_default,
        scope_all=env_flag(env.get("DSH_MEMORY_SCOPE_ALL")),
        debug=env_flag(env.get("DSH_MEMORY_DEBUG")),
        vector=vector,
        max_content=max_content,
        allow_secrets=env_flag(env.get("DSH_MEMORY_ALLOW_SECRETS")),
        project_source=source,
        touch_interval=touch_interval,
        forget_confirm_over=confirm_over,
        warnings=(*problems, *vector.warnings),
    )


DEFAULT_SERVE_HOST = "127.0.0.1"
DEFAULT_SERVE_PORT = 7766
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class ServeSettings:
    """`dsh-memory-mcp serve`: where to listen and how much to allow (issue 11)."""

    host: str = DEFAULT_SERVE_HOST
    port: int = DEFAULT_SERVE_PORT
    #: `DSH_MEMORY_TOKEN`, or None: `serve` then uses `kept_token` (and trusts only loopback names).
    token: str | None = None
    #: Without `DSH_MEMORY_TOKEN`: the token kept for this store across restarts (the CLI reads it
    #: from the user's state dir); None → a fresh one per start. Not a user-set token.
    kept_token: str | None = None
    #: `DSH_MEMORY_ALLOWED_HOSTS` items (host or host:port), honoured only with a user-set token.
    allowed_hosts: tuple[str, ...] = ()
    #: `DSH_MEMORY_ALLOWED_ORIGINS` items (scheme://host[:port]).
    allowed_origins: tuple[str, ...] = ()
    session_idle_secs: float = 600.0
    #: A session that never sends `notifications/initialized` ends after this (capped by the idle time).
    session_init_secs: float = 60.0
    max_tool_calls: int = 16
    #: 0 = no deadline.
    tool_deadline_secs: float = 300.0
    #: How long a web page login lasts (`DSH_MEMORY_WEB_LOGIN_SECS`); then the login URL is needed again.
    web_login_secs: float = 43_200.0
    #: Values that were not understood (the default was used); printed at start.
    warnings: tuple[str, ...] = ()

    @property
    def loopback(self) -> bool:
        return self.host.strip().lower() in LOOPBACK_HOSTS


def _list_env(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    raw = _env(env, name)
    if raw is None:
        return ()
    return tuple(dict.fromkeys(item.strip() for item in raw.split(",") if item.strip()))


def _float_env(
    env: Mapping[str, str], name: str, default: float, low: float, high: float, problems: list[str]
) -> float:
    """A number in [low, high]; anything else is the default, and `problems` says so."""
    raw = _env(env, name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isfinite(value) and low <= value <= high:
        return value
    problems.append(f"{name}={raw!r} 不是 {low:g}~{high:g} 之间的数字,已忽略,改用缺省值 {default:g}")
    return default


def resolve_serve_settings(
    *, host: str | None = None, port: int | None = None, env: Mapping[str, str] | None = None
) -> ServeSettings:
    """`serve`'s settings from its flags and the environment; an out-of-range number keeps its default."""
    env = os.environ if env is None else env
    problems: list[str] = []
    return ServeSettings(
        host=(host or DEFAULT_SERVE_HOST).strip(),
        port=DEFAULT_SERVE_PORT if port is None else port,
        token=_env(env, "DSH_MEMORY_TOKEN"),
        allowed_hosts=_list_env(env, "DSH_MEMORY_ALLOWED_HOSTS"),
        allowed_origins=tuple(o.rstrip("/") for o in _list_env(env, "DSH_MEMORY_ALLOWED_ORIGINS")),
        session_idle_secs=_float_env(env, "DSH_MEMORY_SESSION_IDLE_SECS", 600.0, 0.1, 7 * 86400.0, problems),
        session_init_secs=_float_env(env, "DSH_MEMORY_SESSION_INIT_SECS", 60.0, 0.1, 86400.0, problems),
        max_tool_calls=_int_env(env, "DSH_MEMORY_MAX_TOOL_CALLS", 16, 1, 1024, problems),
        tool_deadline_secs=_float_env(env, "DSH_MEMORY_TOOL_DEADLINE_SECS", 300.0, 0.0, 86400.0, problems),
        web_login_secs=_float_env(env, "DSH_MEMORY_WEB_LOGIN_SECS", 43_200.0, 1.0, 30 * 86400.0, problems),
        warnings=tuple(problems),
    )
