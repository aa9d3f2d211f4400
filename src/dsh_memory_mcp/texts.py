"""Texts for people that the layers below the CLI write: Chinese, with an English form a front door can show.

A message a person may read (a store error, a config warning, an import problem, a vector status,
the web API's errors) is made with `msg(zh_template, **fields)`: a `Text`, which *is* the formatted
Chinese string (so every tool text, log line and test that used the plain string sees the same
bytes) and also remembers its template and fields. A front door that knows its reader speaks
English (the CLI under an ``en*`` locale, the page with English chosen) calls `english` or
`localized`, which look the template up in `EN` and fill the English template with the fields
(fields that are `Text` themselves are shown in English too). What is not a `Text` — memory
content, a path, a tool's text written for the model — is never translated.

Log templates (``log.warning("… %s", x)``, ``%``-style) are looked up in `EN` too: the CLI's log
handler shows them in English under an English locale (`english_log`), with no change at the call.

A `Text` stays one only as itself: an f-string, ``+`` or ``.strip()`` of it is a plain (Chinese)
string. Build longer messages with `msg` (a `Text` as a field) or `joined`.
``tests/test_texts.py`` checks that every template the code passes to `msg` (and every Chinese log
template) has an entry here with the same fields, and that no entry is left unused.
"""

# ruff: noqa: E501 - one message per line, however long: the table reads as pairs
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

__all__ = [
    "EN",
    "Language",
    "Text",
    "english",
    "english_log",
    "joined",
    "language_of",
    "localized",
    "msg",
    "pair",
    "shown",
]

Language = Literal["zh", "en"]


class Text(str):
    """A Chinese message that remembers how it was made (`template`, `fields`), so it can be shown in English."""

    template: str
    fields: Mapping[str, object]

    def __new__(cls, template: str, fields: Mapping[str, object]) -> Text:
        self = super().__new__(cls, template.format_map(fields))
        self.template = template
        self.fields = fields
        return self

    def english(self) -> str:
        # A template the table lacks keeps its words (the test keeps the table complete for every
        # template with Chinese in it); its fields are still shown in English.
        template = EN.get(self.template, self.template)
        return template.format_map({key: _english_field(value) for key, value in self.fields.items()})


class _Joined(Text):
    """Parts joined by a separator, each part shown in the reader's language."""

    def __new__(cls, parts: tuple[object, ...], sep: str, en_sep: str) -> _Joined:
        self = str.__new__(cls, sep.join(str(p) for p in parts))
        self.template = ""
        self.fields = {}
        self.parts = parts
        self.en_sep = en_sep
        return self

    parts: tuple[object, ...]
    en_sep: str

    def english(self) -> str:
        return self.en_sep.join(english(p) for p in self.parts)


class _Pair(Text):
    """A text whose English is given with it (words from a table of their own, like `config.VARIABLES`)."""

    def __new__(cls, zh: str, en: str) -> _Pair:
        self = Text.__new__(cls, "{zh}", {"zh": zh})
        self.en = en
        return self

    en: str

    def english(self) -> str:
        return self.en


def pair(zh: str, en: str) -> Text:
    """`zh`, shown as `en` to an English reader: for words whose English lives next to them already."""
    return _Pair(zh, en)


def msg(template: str, /, **fields: object) -> Text:
    """`template` (Chinese, ``str.format`` fields) filled with `fields`; `english` shows it in English."""
    return Text(template, fields)


def joined(parts: Iterable[object], sep: str = ",", en_sep: str = ", ") -> Text:
    """``sep.join(parts)`` that shows each part (and the separator) in the reader's language."""
    return _Joined(tuple(parts), sep, en_sep)


def _english_field(value: object) -> object:
    return value.english() if isinstance(value, Text) else value


def english(value: object) -> str:
    """`value` as an English reader sees it: a `Text` in English (when the table has it), anything else as is.

    Not a string (an exception whose message is a `Text`): its ``str()``, shown the same way."""
    if not isinstance(value, str):
        value = str(value)
    return value.english() if isinstance(value, Text) else value


def shown(value: object, language: Language) -> str:
    """`value` in `language` (Chinese: the text itself)."""
    return english(value) if language == "en" else str(value)


def localized(data: Any, language: Language) -> Any:
    """`data` (JSON-like: dicts, lists, strings) with every `Text` in it shown in `language`."""
    if language != "en":
        return data
    if isinstance(data, Text):
        return data.english()
    if isinstance(data, Mapping):
        return {key: localized(value, language) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [localized(value, language) for value in data]
    return data


def english_log(template: str, args: tuple[object, ...]) -> tuple[str, tuple[object, ...]]:
    """A ``%``-style log template and its arguments for an English reader (the template unchanged when
    the table does not have it; `Text` arguments in English either way)."""
    return EN.get(template, template), tuple(_english_field(a) for a in args)


_TAG = re.compile(r"^\s*([A-Za-z]{2,3})")


def language_of(accept_language: str | None) -> Language:
    """The language an HTTP reader asks for: the first tag of ``Accept-Language`` that is ``en…`` or
    ``zh…`` decides (the page sends its own choice there); anything else, or nothing, is Chinese."""
    for part in (accept_language or "").split(","):
        match = _TAG.match(part)
        if match:
            tag = match.group(1).lower()
            if tag == "en":
                return "en"
            if tag == "zh":
                return "zh"
    return "zh"


#: Chinese template → English template, for every message below the CLI a person may read.
#: ``str.format`` fields for `msg` templates, ``%s``/``%d`` for log templates; keep them the same on both sides.
EN: dict[str, str] = {
    # -- config: values that were not understood, vectors not configured
    "{name}={raw!r} 不是开关值(开:1/true/yes/on,关:0/false/no/off/disabled),已忽略,按缺省({default})": "{name}={raw!r} is not a switch value (on: 1/true/yes/on, off: 0/false/no/off/disabled): ignored, the default ({default}) applies",
    "{name}={raw!r} 不是 {choices} 之一,已忽略": "{name}={raw!r} is not one of {choices}: ignored",
    "{name}={raw!r} 不是 {low}~{high} 之间的整数,已忽略,改用缺省值 {default}": "{name}={raw!r} is not a whole number from {low} to {high}: ignored, the default {default} applies",
    "{name}={raw!r} 不是 {low}~{high} 之间的数字,已忽略,改用缺省值 {default}": "{name}={raw!r} is not a number from {low} to {high}: ignored, the default {default} applies",
    "未设置 DSH_MEMORY_EMBED_MODEL 或 DSH_MEMORY_EMBED_ENDPOINT": "neither DSH_MEMORY_EMBED_MODEL nor DSH_MEMORY_EMBED_ENDPOINT is set",
}
