"""Text-preserving config edits (`cli/confedit.py`) and the host path table (`cli/hosts.py`).

JSON results are checked with `json.loads`, TOML results with `tomllib` (the standard library's
parser, not ours), and removal against the original bytes.
"""

from __future__ import annotations

import json
import tomllib

import pytest

from dsh_memory_mcp.cli import confedit, hosts

ENTRY = {"command": "/opt/bin/dsh-memory-mcp", "args": ["--store-dir", "/home/me/.dsh-memory-store"]}

JSON_LAYOUTS = [
    pytest.param('{\n  "mcpServers": {\n    "a": {"command": "x"}\n  }\n}\n', id="two-spaces"),
    pytest.param('{\n\t"mcpServers": {\n\t\t"a": {"command": "x"},\n\t\t"b": 1\n\t}\n}', id="tabs-no-newline"),
    pytest.param('{"mcpServers":{"a":{"command":"x"}},"z":[1,2]}', id="compact"),
    pytest.param('{\n  "mcpServers": {}\n}\n', id="empty-object"),
    pytest.param('{\n  "other": true\n}\n', id="object-missing"),
    pytest.param('{"mcpServers": {"a": 1}, "mcpServers": {"b": 2}}', id="duplicate-key-last-wins"),
    pytest.param('{\r\n  "mcpServers": {\r\n    "a": 1\r\n  }\r\n}\r\n', id="crlf"),
]


@pytest.mark.parametrize("text", JSON_LAYOUTS)
def test_json_set_adds_one_member_and_remove_gives_back_the_original_bytes(text):
    new = confedit.json_set(text, ["mcpServers"], "dsh-memory", ENTRY)
    document = json.loads(new)
    assert document["mcpServers"]["dsh-memory"] == ENTRY
    original = json.loads(text)
    document["mcpServers"].pop("dsh-memory")
    if "mcpServers" not in original:
        assert document.pop("mcpServers") == {}  # the object we had to create stays, empty
    assert document == original
    assert confedit.json_set(new, ["mcpServers"], "dsh-memory", ENTRY) == new  # idempotent
    removed = confedit.json_remove(new, ["mcpServers"], "dsh-memory")
    if "mcpServers" in original:
        assert removed == text


def test_json_set_replaces_an_existing_member_in_place_and_keeps_comments_and_trailing_commas():
    text = '// mine\n{\n  "servers": {\n    "dsh-memory": {"command": "old"}, // ours\n    "x": 1,\n  },\n}\n'
    new = confedit.json_set(text, ["servers"], "dsh-memory", ENTRY)
    assert new.startswith('// mine\n{\n  "servers": {\n    "dsh-memory": {')
    assert '}, // ours\n    "x": 1,\n  },\n}\n' in new
    assert confedit.parse_json(new) == {"servers": {"dsh-memory": ENTRY, "x": 1}}


def test_json_set_creates_nested_objects_and_an_empty_file_becomes_a_document():
    assert json.loads(confedit.json_set("", ["mcp", "servers"], "dsh-memory", ENTRY)) == {
        "mcp": {"servers": {"dsh-memory": ENTRY}}
    }
    text = '{\n  "mcp": {"timeout": 5}\n}\n'
    assert json.loads(confedit.json_set(text, ["mcp", "servers"], "k", 1)) == {
        "mcp": {"timeout": 5, "servers": {"k": 1}}
    }


def test_json_remove_takes_out_every_copy_of_a_repeated_key_and_leaves_absent_ones_alone():
    text = '{"s": {"k": 1, "a": 2, "k": 3}}'
    assert confedit.json_remove(text, ["s"], "k") == '{"s": {"a": 2}}'
    assert confedit.json_remove(text, ["s"], "zz") == text
    assert confedit.json_remove("", ["s"], "k") == ""


@pytest.mark.parametrize(
    ("text", "line"),
    [
        pytest.param('{"a": 1,,}', 1, id="double-comma"),
        pytest.param('{\n  "a": 1\n  "b": 2\n}', 3, id="missing-comma"),
        pytest.param('{"a": "unterminated}', 1, id="open-string"),
        pytest.param('{"a": 1} trailing', 1, id="garbage-after"),
        pytest.param("/* never closed\n{}", 1, id="open-comment"),
        # A comment inside keeps the C scanner out: the span parser's own depth bound decides.
        pytest.param('{"x": ' + "[" * 600 + "/* c */" + "]" * 600 + "}", 1, id="too-deep"),
    ],
)
def test_json_that_does_not_parse_raises_a_syntax_error_naming_the_line(text, line):
    with pytest.raises(confedit.ConfigSyntaxError) as info:
        confedit.json_set(text, ["mcpServers"], "dsh-memory", ENTRY)
    assert info.value.line == line


def test_json_refuses_to_edit_when_the_server_table_is_not_an_object():
    with pytest.raises(confedit.ConfigSyntaxError, match="mcpServers 不是对象"):
        confedit.json_set('{"mcpServers": []}', ["mcpServers"], "dsh-memory", ENTRY)


HOSTILE = [
    "",
    'quote " and backslash \\',
    "C:\\Users\\me\\.dsh-memory-store",
    "line\nbreak\ttab\rcr",
    "\x00\x01\x1f\x7f control",
    "中文 ✅ emoji 🧠",
    '\'single\' """ triple',
    "trailing backslash \\",
]


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_the_toml_writer_round_trips_hostile_strings_through_tomllib(value):
    section = confedit.toml_dumps_table(
        ["mcp_servers", "dsh-memory"],
        {"command": value, "args": [value, "--x"], "env": {"K": value, "odd key.with dot": value}},
    )
    parsed = tomllib.loads(section)["mcp_servers"]["dsh-memory"]
    assert parsed == {"command": value, "args": [value, "--x"], "env": {"K": value, "odd key.with dot": value}}


def test_the_toml_writer_writes_numbers_booleans_and_empty_tables_and_refuses_surrogates():
    parsed = tomllib.loads(confedit.toml_dumps_table(["t"], {"a": 1, "b": True, "c": 1.5, "d": {}, "e": []}))
    assert parsed == {"t": {"a": 1, "b": True, "c": 1.5, "d": {}, "e": []}}
    with pytest.raises(ValueError):
        confedit.toml_value("\udc80")


TOML_LAYOUTS = [
    pytest.param('model = "o3"\n', id="keys-only"),
    pytest.param('model = "o3"', id="no-final-newline"),
    pytest.param("", id="empty"),
    pytest.param('[mcp_servers.a]\ncommand = "x"\n\n[profiles.p]\nmodel = "m"\n', id="tables-around"),
]


@pytest.mark.parametrize("text", TOML_LAYOUTS)
def test_toml_set_appends_one_table_that_tomllib_reads_and_remove_undoes_it(text):
    key = ["mcp_servers", "dsh-memory"]
    new = confedit.toml_set_table(text, key, ENTRY)
    document = tomllib.loads(new)
    assert document["mcp_servers"]["dsh-memory"] == ENTRY
    document["mcp_servers"].pop("dsh-memory")
    if not document["mcp_servers"]:
        del document["mcp_servers"]
    assert document == tomllib.loads(text)
    removed = confedit.toml_remove_table(new, key)
    assert removed == (text if text.endswith("\n") or not text else text + "\n")


def test_toml_set_replaces_our_table_with_its_subtables_in_place_whatever_the_quoting():
    text = (
        'a = 1\n\n[mcp_servers."dsh-memory"]\ncommand = "old"\n\n[mcp_servers."dsh-memory".env]\nX = "1"\n\n'
        '[mcp_servers.other]\ncommand = "y"\n'
    )
    new = confedit.toml_set_table(text, ["mcp_servers", "dsh-memory"], ENTRY)
    assert tomllib.loads(new) == {"a": 1, "mcp_servers": {"dsh-memory": ENTRY, "other": {"command": "y"}}}
    assert new.endswith('\n\n[mcp_servers.other]\ncommand = "y"\n') and new.startswith(
        "a = 1\n\n[mcp_servers.dsh-memory]\n"
    )


# ------------------------------------------------------------------------------------------------
# Host config paths per OS (the table the README and closing note quote)
# ------------------------------------------------------------------------------------------------

LINUX = {"HOME": "/home/me"}
MAC = {"HOME": "/Users/me"}
WINDOWS = {"USERPROFILE": "C:\\Users\\me", "APPDATA": "C:\\Users\\me\\AppData\\Roaming"}
EXPECTED = {
    "claude-code": ("/home/me/.claude.json", "/Users/me/.claude.json", "C:\\Users\\me\\.claude.json"),
    "claude-desktop": (
        "/home/me/.config/Claude/claude_desktop_config.json",
        "/Users/me/Library/Application Support/Claude/claude_desktop_config.json",
        "C:\\Users\\me\\AppData\\Roaming\\Claude\\claude_desktop_config.json",
    ),
    "cursor": ("/home/me/.cursor/mcp.json", "/Users/me/.cursor/mcp.json", "C:\\Users\\me\\.cursor\\mcp.json"),
    "vscode": (
        "/home/me/.config/Code/User/mcp.json",
        "/Users/me/Library/Application Support/Code/User/mcp.json",
        "C:\\Users\\me\\AppData\\Roaming\\Code\\User\\mcp.json",
    ),
    "codex": ("/home/me/.codex/config.toml", "/Users/me/.codex/config.toml", "C:\\Users\\me\\.codex\\config.toml"),
    "trae": (
        "/home/me/.config/Trae CN/User/mcp.json",
        "/Users/me/Library/Application Support/Trae CN/User/mcp.json",
        "C:\\Users\\me\\AppData\\Roaming\\Trae CN\\User\\mcp.json",
    ),
    "workbuddy": (
        "/home/me/.workbuddy/mcp.json",
        "/Users/me/.workbuddy/mcp.json",
        "C:\\Users\\me\\.workbuddy\\mcp.json",
    ),
    "zcode": (
        "/home/me/.zcode/cli/config.json",
        "/Users/me/.zcode/cli/config.json",
        "C:\\Users\\me\\.zcode\\cli\\config.json",
    ),
}


@pytest.mark.parametrize("host_id", list(EXPECTED))
def test_each_hosts_preferred_config_path_on_linux_macos_and_windows(host_id):
    host = hosts.by_name(host_id)
    assert host is not None
    got = tuple(
        hosts.candidates(host, env, platform)[0][0]
        for env, platform in ((LINUX, "linux"), (MAC, "darwin"), (WINDOWS, "win32"))
    )
    assert got == EXPECTED[host_id]


def test_config_dir_overrides_and_xdg_are_honoured():
    claude = hosts.by_name("claude")
    codex = hosts.by_name("codex")
    code = hosts.by_name("VS_Code")
    assert claude is not None and codex is not None and code is not None
    assert hosts.candidates(claude, {"HOME": "/h", "CLAUDE_CONFIG_DIR": "/c"}, "linux")[0][0] == "/c/.claude.json"
    assert hosts.candidates(codex, {"HOME": "/h", "CODEX_HOME": "/x"}, "linux")[0][0] == "/x/config.toml"
    assert hosts.candidates(code, {"HOME": "/h", "XDG_CONFIG_HOME": "/xdg"}, "linux")[0][0] == "/xdg/Code/User/mcp.json"
    assert hosts.by_name("nope") is None
