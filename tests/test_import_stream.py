"""The page's import body read as it arrives gives what parsing it whole gave, in any chunking.

The oracle is the code `web.py` ran before: `json.loads` of the whole body, then ``data`` (strict
base64) or ``text`` (UTF-8 with surrogates kept), then `transfer.plan_import` of the whole file.
The streamed reader gets the same body through a real Starlette `Request` whose ASGI receive
channel hands it over in random pieces (cut inside escapes, multi-byte characters, base64 quads).
"""

from __future__ import annotations

import base64
import json
import random
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from dsh_memory_mcp.config import Settings
from dsh_memory_mcp.service import transfer
from dsh_memory_mcp.transports import import_stream

CHECKS = Settings(store_dir="", project_dir="", max_content=2_000, allow_secrets=False)
LIMIT = 4 << 20

_LINES = [
    json.dumps(
        {"id": "r-1", "scope": "global", "content": "部署前先跑 make check", "kind": "rule"}, ensure_ascii=False
    ),
    json.dumps({"id": "r-2", "scope": "project:/srv/app", "content": "用 pnpm,不用 npm 😀", "tags": ["工具"]}),
    json.dumps({"id": "r-3", "scope": "global", "content": "   "}),  # refused: empty
    json.dumps({"id": "r-4", "scope": "global", "content": "AKIAQWERTYUIOPASDFGH wJalrXUtnFEMI/K7MDENG/bPxRfiCY"}),
    json.dumps({"type": "entity", "name": "张三", "entityType": "person", "observations": ["喜欢深色主题", ""]}),
    json.dumps({"type": "relation", "from": "张三", "relationType": "works_on", "to": "dsh"}),
    json.dumps({"entities": [{"name": "李四", "observations": ["用 Vim"]}], "relations": []}),
    '{"id": 1, "scope": "global", "content": "x"}',
    "not json at all",
    "[1, 2, 3]",
    "",
    "   ",
    '{"id": "r-5", "scope": "global", "content": "tab\\tand \\u00e9 and \\ud83d\\ude00"}',
]
_RAW_LINES = [b"\xff\xfe not utf-8", b"\xed\xa0\x80 a lone surrogate", "第三行\r".encode()]


def _file(rng: random.Random) -> bytes:
    parts = [
        rng.choice(_LINES).encode() if rng.random() < 0.85 else rng.choice(_RAW_LINES)
        for _ in range(rng.randint(0, 12))
    ]
    data = b"\n".join(parts)
    if rng.random() < 0.5:
        data += b"\n"
    if rng.random() < 0.1:
        data = "\ufeff".encode() + data
    return data


def _escape_slashes(text: str, rng: random.Random) -> str:
    """`json.dumps` output with some ``/`` written ``\\/`` and some letters as ``\\u00XX`` (both legal)."""
    out = []
    in_string = escaped = False
    for ch in text:
        if in_string and not escaped and ch == "/" and rng.random() < 0.5:
            out.append("\\/")
        elif in_string and not escaped and ch.isalpha() and ch.isascii() and rng.random() < 0.05:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
        if ch == '"' and not escaped:
            in_string = not in_string
        escaped = ch == "\\" and not escaped
    return "".join(out)


def _body(rng: random.Random) -> bytes:
    data = _file(rng)
    members: list[tuple[str, Any]] = []
    form = rng.random()
    if form < 0.45:
        members.append(("data", base64.b64encode(data).decode()))
    elif form < 0.8:
        members.append(("text", data.decode("utf-8", "surrogateescape").replace("\udcff", "?").replace("\udcfe", "?")))
    elif form < 0.9:
        members.append(("data", base64.b64encode(data).decode()))
        members.append(("text", "ignored: data wins"))
    else:
        bad = base64.b64encode(data).decode()
        choice = rng.randrange(4)
        bad = [bad + "*", bad[:-1] if bad.endswith("=") else bad + "A", "A===" + bad, bad + "\n"][choice]
        members.append(("data", bad))
    if rng.random() < 0.7:
        members.append(("scope", rng.choice(["global", "project", "all", "", 5, None])))
    if rng.random() < 0.6:
        members.append(("dryRun", rng.choice([True, False, 0, "no", None])))
    if rng.random() < 0.3:
        members.append(("extra", {"nested": [1, 2.5e3, {"deep": "值"}], "n": -0.0}))
    if rng.random() < 0.2:
        members.append(("scope", "global"))  # a repeated member: the last one wins
    rng.shuffle(members)
    sep = rng.choice([",", ", ", ",\n  ", "\t,\r\n"])
    text = "{" + sep.join(f"{json.dumps(k)}:{json.dumps(v, ensure_ascii=rng.random() < 0.5)}" for k, v in members) + "}"
    text = _escape_slashes(text, rng)
    raw = text.encode("utf-8", "surrogatepass")
    damage = rng.random()
    if damage < 0.04:
        raw = raw[: rng.randrange(len(raw))]  # cut short
    elif damage < 0.07:
        raw += b" garbage"
    elif damage < 0.09:
        raw = b"[" + raw + b"]"
    elif damage < 0.11:
        raw = raw.replace(b'"', b'"\x01', 1)  # a raw control character inside a string
    elif damage < 0.13:
        raw = raw.replace(b"{", b"{\xc3", 1)  # invalid UTF-8
    elif damage < 0.15:
        raw = b" \r\n\t" + raw + b"\n "
    return raw


def _whole(body: bytes) -> tuple[Any, ...]:
    """What `web.py` answered when it parsed the body whole (the code it ran before streaming)."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return ("BAD_JSON",)
    if not isinstance(value, dict):
        return ("BAD_JSON",)
    data, text = value.get("data"), value.get("text")
    file: bytes | None = None
    if isinstance(data, str):
        try:
            file = base64.b64decode(data, validate=True)
        except ValueError:
            file = None
    elif isinstance(text, str):
        file = text.encode("utf-8", "surrogatepass")
    plan = None if file is None else _summary(transfer.plan_import(file, CHECKS))
    return ("OK", plan, value.get("dryRun", True) is not False, value.get("scope"))


def _summary(plan: transfer.ImportPlan) -> tuple[Any, ...]:
    return (
        {scope: [r.raw for r in batch] for scope, batch in plan.ours.items()},
        list(plan.graph.items()),
        [(p.lineno, p.why, p.preview) for p in plan.problems],
        [(r.lineno, r.code, r.preview) for r in plan.refused],
        plan.duplicates,
    )


def _streamed(body: bytes, cuts: list[int]) -> tuple[Any, ...]:
    pieces = []
    start = 0
    for cut in sorted({c % (len(body) + 1) for c in cuts}):
        pieces.append(body[start:cut])
        start = cut
    pieces.append(body[start:])

    async def scenario() -> tuple[Any, ...]:
        queue = list(pieces)

        async def receive() -> dict[str, Any]:
            chunk = queue.pop(0) if queue else b""
            return {"type": "http.request", "body": chunk, "more_body": bool(queue)}

        scope = {"type": "http", "method": "POST", "path": "/api/import", "headers": []}
        request = Request(scope, receive)
        try:
            upload = await import_stream.read_import(request, LIMIT, CHECKS)
        except import_stream.RequestRefused as exc:
            return (exc.code,)
        plan = None if upload.plan is None else _summary(upload.plan)
        return ("OK", plan, upload.dry_run, upload.scope)

    return anyio.run(scenario)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), cuts=st.lists(st.integers(0, 1 << 16), max_size=12))
def test_a_streamed_import_body_gives_what_parsing_it_whole_gave(seed, cuts):
    body = _body(random.Random(seed))
    assert _streamed(body, cuts) == _whole(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"data": "QUJD", "scope": "global"}',
        b'\xef\xbb\xbf{"text": "a\\nb"}',
        b'{"text": "\\ud83d\\ude00 \\ud83d x \\ude00"}',
        b'{"text": "\\ud83d"}',
        b'{"data": "QUJD\\u003d"}',
        b'{"data": "QQ=="}',
        b'{"data": "QQ="}',
        b'{"data": "Q==="}',
        b'{"data": "QQ==QQ=="}',
        b'{"dryRun": false, "text": ""}',
        b"{}",
        b"",
        b"   ",
        b'{"data": 5, "text": "x"}',
        b'{"scope": [[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]], "text": "x"}',
        b'{"text": "x"} {}',
        b'{"text": "x",}',
        b'{,"text": "x"}',
        b'{"text" "x"}',
        b'{"text": "x\\q"}',
        b'{"text": "\\u12G4"}',
        b'{"dryRun": 1e999, "text": "1"}',
    ],
)
def test_edge_bodies_get_the_same_answer_streamed_byte_by_byte(body):
    assert _streamed(body, list(range(len(body)))) == _whole(body)
    assert _streamed(body, []) == _whole(body)


def test_members_besides_the_file_are_bounded():
    body = json.dumps({"text": "x", "note": "长" * (import_stream.OTHER_MAX_BYTES // 2)}).encode()
    assert _streamed(body, [100, 5000]) == ("BODY_TOO_LARGE",)


def test_a_body_over_the_limit_is_refused_before_it_is_read_whole():
    body = json.dumps({"text": "x" * (LIMIT + 10)}).encode()
    assert _streamed(body, list(range(0, len(body), 65536))) == ("BODY_TOO_LARGE",)
