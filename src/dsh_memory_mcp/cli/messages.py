"""The human command line in the user's language: Chinese by default, English when the locale asks.

One table, no gettext: every text the CLI shows a person (help, diagnostics, subcommand output)
is written in the code in Chinese and passed through `t` (formatted now) or marked with `N_`
(a constant translated when it is shown, e.g. a subcommand's summary). `EN` maps each Chinese
template to its English one; both use ``str.format`` fields (``{path}``), and a few fields are
always available (`GLOBALS`: ``{prog}``, ``{version}``, the default ports). The language comes
from `config.ui_language` (``LC_ALL`` → ``LC_MESSAGES`` → ``LANG``; ``en*`` means English).

What stays Chinese whatever the locale: the tools' texts (they are written for the model, and
``list``/``search``/``get``/``forget``/``save`` print them as the tools return them), the store's
and the transports' own messages that reach the CLI (a `StoreError`'s text, serve's start-up
lines), and `config`'s warnings. `tests/test_messages.py` checks that every CJK literal in
``cli/`` goes through `t`/`N_` and has an English entry with the same fields.
"""

from __future__ import annotations

from collections.abc import Mapping

from dsh_memory_mcp import __version__, config
from dsh_memory_mcp.cli.output import PROG

__all__ = ["EN", "GLOBALS", "N_", "english", "t"]

#: Fields every template may use without the caller passing them.
GLOBALS: Mapping[str, object] = {
    "prog": PROG,
    "version": __version__,
    "serve_port": config.DEFAULT_SERVE_PORT,
    "embed_port": config.DEFAULT_EMBED_PORT,
    "embed_threads": config.DEFAULT_EMBED_THREADS,
}


def english(env: Mapping[str, str] | None = None) -> bool:
    """Whether the human CLI speaks English now (the locale asks for ``en*``)."""
    return config.ui_language(config.environ() if env is None else env) == "en"


def N_(zh: str) -> str:
    """Mark a constant for translation; `t` translates it where it is shown."""
    return zh


def t(zh: str, /, **values: object) -> str:
    """`zh` (a Chinese template) in the user's language, with `values` (and `GLOBALS`) filled in.

    A template without an English entry is shown in Chinese (the test keeps the table complete).
    """
    template = EN.get(zh, zh) if english() else zh
    return template.format_map({**GLOBALS, **values})


#: Chinese template → English template. Keep the fields the same on both sides.
EN: dict[str, str] = {}
