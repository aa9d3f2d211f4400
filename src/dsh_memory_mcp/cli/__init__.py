"""The command line: argument parsing, diagnostics, human subcommands, doctor."""
