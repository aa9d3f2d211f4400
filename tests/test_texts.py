"""Messages for people below the CLI: a `texts.Text` is the Chinese string itself and can be shown in English.

The tables must be complete and in step with the code: every template passed to `msg` (and every Chinese
log template) has an English entry with the same fields, in the same order for ``%``-style ones; no entry is
left over; and the CLI's own Chinese goes through `t`/`N_` (or is a log template the CLI's table knows).
"""

from __future__ import annotations

import ast
import json
import re
import string
from pathlib import Path

import pytest

from dsh_memory_mcp import config, texts
from dsh_memory_mcp.errors import InvalidArgument, StoreError
from dsh_memory_mcp.texts import Text, english, joined, language_of, localized, msg, pair

PKG = Path(__file__).resolve().parent.parent / "src" / "dsh_memory_mcp"
CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical"}
PERCENT = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdrgfx%]")
#: English values that keep Chinese on purpose: the success line scripts written for the Chinese default grep.
KEPT_CHINESE = {"已启动 dsh-memory-mcp v%s(stdio)", "已启动 dsh-memory-mcp v%s(serve,%s)"}


def _calls() -> list[tuple[Path, int, str, str]]:
    """(file, line, kind, template): kind ``msg``, ``log`` (a Chinese log template) or ``t`` (`t`/`N_`)."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id == "msg":
                found.append((path, node.lineno, "msg", first.value))
            elif isinstance(func, ast.Name) and func.id in ("t", "N_"):
                found.append((path, node.lineno, "t", first.value))
            elif isinstance(func, ast.Attribute) and func.attr in LOG_METHODS and CJK.search(first.value):
                found.append((path, node.lineno, "log", first.value))
    return found


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def _table_for(path: Path, kind: str) -> dict[str, str]:
    return texts.EN  # one table for every layer


def test_every_msg_and_chinese_log_template_has_an_english_entry_with_the_same_fields():
    calls = _calls()
    assert sum(kind == "msg" for *_, kind, _ in calls) > 300  # the scan sees the package's messages
    missing = [
        (path.name, line, template[:50])
        for path, line, kind, template in calls
        if kind != "t" and CJK.search(template) and template not in _table_for(path, kind)
    ]
    assert missing == []
    for zh, en in texts.EN.items():
        assert _fields(zh) == _fields(en), zh[:60]
        assert PERCENT.findall(zh) == PERCENT.findall(en), zh[:60]  # log templates: same arguments, same order


def test_no_english_entry_is_left_over_and_none_is_chinese():
    used = {template for path, _, kind, template in _calls() if _table_for(path, kind) is texts.EN}
    assert set(texts.EN) - used == set()

    def said(en: str) -> str:  # a Chinese name quoted in 「」 (a README section) is a quotation
        return re.sub(r"「[^」]*」", "", en)

    chinese = [en[:50] for zh, en in texts.EN.items() if CJK.search(said(en)) and zh not in KEPT_CHINESE]
    assert chinese == []


def test_every_chinese_literal_in_the_cli_goes_through_the_cli_table():
    """Except what finds or builds pieces of the tools' (Chinese) texts: `human_text`'s and `forget`'s
    patterns, `_import_target`'s tool-shaped error (shown from its structured form in English), the
    start-up flag that watches for the success line, and what the hook adds to a model's context (`_pack`)."""
    allowed = {"human_text", "cmd_forget", "_import_target", "filter", "_pack"}
    loose = []
    for path in sorted((PKG / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        covered: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) and node.body:
                head = node.body[0]
                if isinstance(head, ast.Expr) and isinstance(head.value, ast.Constant):
                    covered.add(id(head.value))  # docstrings
            if isinstance(node, ast.FunctionDef) and node.name in allowed:
                covered.update(id(sub) for sub in ast.walk(node))
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                named = isinstance(func, ast.Name) and func.id in ("t", "N_", "msg")
                logged = isinstance(func, ast.Attribute) and func.attr in LOG_METHODS
                if named or logged:
                    covered.update(id(sub) for sub in ast.walk(node.args[0]))
            if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id in ("EN", "HELP_ZH", "HELP_EN", "_COUNT_KIND")
                for target in node.targets
            ):
                covered.update(id(sub) for sub in ast.walk(node.value))
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "EN":
                covered.update(id(sub) for sub in ast.walk(node))
        for node in ast.walk(tree):
            chinese = isinstance(node, ast.Constant) and isinstance(node.value, str) and CJK.search(node.value)
            if chinese and id(node) not in covered:
                loose.append((path.name, node.lineno, node.value[:40]))
    assert loose == []


def test_a_text_is_its_chinese_everywhere_a_string_goes_and_english_only_where_asked():
    reason = msg("无法访问:{why}", why="Permission denied")
    error = StoreError(
        msg(
            "记忆库目录不可用:{path} {reason}。{hint}",
            path="/s",
            reason=reason,
            hint=msg("请用 --store-dir 或环境变量 DSH_MEMORY_STORE_DIR 指定一个可写的目录。"),
        )
    )
    chinese = "记忆库目录不可用:/s 无法访问:Permission denied。请用 --store-dir 或环境变量 DSH_MEMORY_STORE_DIR 指定一个可写的目录。"
    assert str(error) == chinese and error.message == chinese
    assert f"错误 {error.code}:{error.message}" == f"错误 STORE_ERROR:{chinese}"  # the tools' text: unchanged
    assert json.dumps({"message": error.message}, ensure_ascii=False) == json.dumps(
        {"message": chinese}, ensure_ascii=False
    )
    assert english(error) == (
        "the memory store directory is unusable: /s cannot be accessed: Permission denied. "
        "Give a writable directory with --store-dir or DSH_MEMORY_STORE_DIR."
    )
    # Content is never a Text: a Chinese memory stays Chinese in English output.
    assert english("用户喜欢深色主题") == "用户喜欢深色主题"
    # Anything made from a Text by string operations is plain Chinese again (it shows as it is, never wrongly).
    assert not isinstance(reason + "", Text) and not isinstance(reason.strip(), Text)


def test_localized_shows_every_text_of_an_answer_in_english_and_leaves_the_rest():
    answer = {
        "ok": False,
        "code": "KIND_INVALID",
        "message": msg("kind 只能是 {value} 之一(收到 {show})。", value="fact / note", show='"x"'),
        "problems": [msg("第 {lineno} 行{why},已跳过:{preview}", lineno=2, why=msg("不是 JSON"), preview="不是 json")],
        "content": "内容不翻译",
        "count": 3,
    }
    shown = localized(answer, "en")
    assert shown == {
        "ok": False,
        "code": "KIND_INVALID",
        "message": 'kind must be one of fact / note (got "x").',
        "problems": ["line 2 is not JSON; skipped: 不是 json"],
        "content": "内容不翻译",
        "count": 3,
    }
    assert localized(answer, "zh") is answer


def test_joined_and_pair_show_each_part_in_the_readers_language():
    parts = joined([msg("名字为空"), "literal"], sep=";", en_sep="; ")
    assert str(parts) == "名字为空;literal"
    assert english(parts) == "the name is empty; literal"
    both = pair("当前目录", "the current directory")
    assert str(both) == "当前目录" and english(both) == "the current directory"


@pytest.mark.parametrize(
    ("header", "language"),
    [
        (None, "zh"),
        ("", "zh"),
        ("en", "en"),
        ("en-US,en;q=0.9", "en"),
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("fr-FR, en;q=0.5", "en"),  # the first tag the page can speak decides
        ("de", "zh"),
        ("*", "zh"),
    ],
)
def test_an_http_readers_language_is_the_first_en_or_zh_tag_of_accept_language(header, language):
    assert language_of(header) == language


def test_every_variable_has_an_english_doc_and_helps_english_lines_are_the_tables():
    assert all(var.en and not CJK.search(var.en) for var in config.VARIABLES)
    lines = config.env_help_lines("en")
    assert [line.split()[0] for line in lines] == [var.name for var in config.VARIABLES]
    assert not any(CJK.search(line) for line in lines)
    assert config.env_help_lines() == config.env_help_lines("zh")  # Chinese stays the default


def test_a_config_warning_is_chinese_and_shows_in_english_with_the_defaults_english_words():
    problems: list[str] = []
    assert config.read("DSH_MEMORY_RELAY", {"DSH_MEMORY_RELAY": "maybe"}, problems) is True
    (warning,) = problems
    assert warning == (
        "DSH_MEMORY_RELAY='maybe' 不是开关值(开:1/true/yes/on,关:0/false/no/off/disabled),已忽略,按缺省(开)"
    )
    assert english(warning) == (
        "DSH_MEMORY_RELAY='maybe' is not a switch value (on: 1/true/yes/on, off: 0/false/no/off/disabled): "
        "ignored, the default (on) applies"
    )


def test_a_tool_error_from_validation_keeps_the_tools_chinese_and_carries_its_english():
    from dsh_memory_mcp.service.validate import kind_arg

    with pytest.raises(InvalidArgument) as caught:
        kind_arg("bogus", default=None)
    assert (
        caught.value.message
        == 'kind 只能是 fact / decision / preference / procedure / note / rule 之一(收到 "bogus")。'
    )
    assert english(caught.value.message) == (
        'kind must be one of fact / decision / preference / procedure / note / rule (got "bogus").'
    )
