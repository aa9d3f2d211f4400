"""Command line entry point: argv → the stdio server (`runtime`) or a human subcommand (`registry`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from dsh_memory_mcp.cli import parser, runtime
from dsh_memory_mcp.cli.diagnostics import explain_store_problem as explain_store_problem
from dsh_memory_mcp.cli.messages import t
from dsh_memory_mcp.cli.output import (
    EXIT_OK,
    EXIT_USAGE,
    PREFIX,
    harden,
    write_stderr_lines,
    write_stdout,
)
from dsh_memory_mcp.cli.parser import Command as Command
from dsh_memory_mcp.cli.parser import Invocation, UsageError
from dsh_memory_mcp.cli.registry import COMMANDS
from dsh_memory_mcp.cli.runtime import ServeFn


def parse_args(argv: Sequence[str]) -> Invocation:
    """`parser.parse_args` against the registered subcommands; raises `UsageError`."""
    return parser.parse_args(argv, COMMANDS)


def main(argv: Sequence[str] | None = None, *, serve: ServeFn | None = None) -> int:
    """Run the command line; returns the exit code. `serve` replaces the stdio server (tests of
    start-up diagnostics); the real one is imported only when the server starts."""
    harden(sys.stderr)
    words = list(sys.argv[1:] if argv is None else argv)
    try:
        invocation = parse_args(words)
    except UsageError as exc:
        write_stderr_lines(
            [
                t("❌ 参数错误:{message}", message=exc.message),
                *(f"⇒ {hint}" for hint in exc.hints),
                t("⇒ 用 --help 查看用法"),
            ],
            # A human subcommand's: no prefix (it marks the server's lines among a host's).
            prefix="" if any(word in COMMANDS for word in words) else PREFIX,
        )
        return EXIT_USAGE
    if invocation.help:
        command = COMMANDS.get(invocation.command) if invocation.command is not None else None
        write_stdout(parser.command_help_text(command) if command is not None else parser.help_text(COMMANDS))
        return EXIT_OK
    if invocation.version:
        write_stdout(parser.version_text())
        return EXIT_OK
    if invocation.command is not None:
        return COMMANDS[invocation.command].run(invocation)
    return runtime.run_server(invocation, serve)
