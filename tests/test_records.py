"""JSONL lines: byte-exact round trips, unknown fields kept, corrupt lines kept."""

from __future__ import annotations

import json

from dsh_memory_mcp.store.records import (
    CorruptLine,
    Record,
    dump_line,
    new_record,
    parse_bytes,
    parse_line,
    parse_lines,
    render_bytes,
)


def test_a_new_record_has_the_spec_key_order_and_compact_utf8_json():
    r = new_record(
        scope="global", content="中文 content", kind="fact", tags=["a"], importance=0.9, now=1000, record_id="id-1"
    )
    assert r.raw == (
        '{"id":"id-1","scope":"global","kind":"fact","content":"中文 content","tags":["a"],"source":{"origin":"explicit"},'
        '"createdAt":1000,"updatedAt":1000,"lastAccessedAt":1000,"accessCount":0,"importance":0.9}'
    )


def test_an_unchanged_record_keeps_its_exact_text_even_with_unusual_spacing():
    raw = '{ "id" : "x1", "content":"a\\u00e9", "weird":[1,2] }\r'
    line = parse_line(raw)
    assert isinstance(line, Record) and line.raw == raw and line.content == "aé"
    assert render_bytes([line]) == (raw + "\n").encode()


def test_changes_keep_unknown_fields_and_their_place():
    r = parse_line('{"id":"x","extra":{"k":1},"accessCount":1}')
    assert isinstance(r, Record)
    changed = r.with_changes(accessCount=2, expiredAt=5)
    assert changed.raw == '{"id":"x","extra":{"k":1},"accessCount":2,"expiredAt":5}'


def test_lines_that_are_not_records_are_kept_as_corrupt_lines():
    lines = parse_lines('{"id":"a"}\n{"id":\n[1,2]\n{"noid":1}\n\n{"id":""}\n')
    kinds = [type(x).__name__ for x in lines]
    assert kinds == ["Record", "CorruptLine", "CorruptLine", "CorruptLine", "CorruptLine"]
    assert render_bytes(lines) == (b'{"id":"a"}\n{"id":\n[1,2]\n{"noid":1}\n{"id":""}\n')
    assert isinstance(lines[1], CorruptLine) and lines[1].lineno == 2


def test_lone_surrogates_are_escaped_like_json_stringify_and_integral_floats_lose_their_point():
    text = dump_line({"id": "x", "c": "a\ud800b", "n": 1.0, "f": 0.5})
    assert text == '{"id":"x","c":"a\\ud800b","n":1,"f":0.5}'
    text.encode("utf-8")
    assert json.loads(text)["c"] == "a\ud800b"


def test_field_accessors_tolerate_wrong_types_written_by_other_tools():
    r = parse_line('{"id":"x","tags":"notalist","importance":true,"accessCount":-3,"updatedAt":"soon","expiredAt":10}')
    assert isinstance(r, Record)
    assert r.tags == [] and r.importance is None and r.access_count == 0 and r.updated_at == 0
    assert r.is_expired(11) and not r.is_expired(10)


def test_lines_that_only_parse_when_joined_do_not_fool_the_bulk_parse():
    text = '{"id":"a","x":[1\n2]}\n{"id":"b"}\n'
    lines = parse_lines(text)
    assert [type(x).__name__ for x in lines] == ["CorruptLine", "CorruptLine", "Record"]
    assert render_bytes(lines) == text.encode()


def test_the_bulk_parse_and_the_line_by_line_parse_agree():
    good = "".join(new_record(scope="global", content=f"记忆 {i}", record_id=f"id-{i}").raw + "\n" for i in range(50))
    bulk = parse_lines(good)
    single = [parse_line(raw) for raw in good.splitlines()]
    assert [r.raw for r in bulk] == [r.raw for r in single]
    assert [r.content for r in bulk] == [f"记忆 {i}" for i in range(50)]


def test_a_record_keeps_no_parsed_dict_but_still_offers_the_whole_mapping():
    r = parse_line('{"id":"x","scope":"global","extra":{"deep":[1,2]}}')
    assert isinstance(r, Record)
    assert not hasattr(r, "__dict__")
    assert r.data == {"id": "x", "scope": "global", "extra": {"deep": [1, 2]}}
    assert r == parse_line(r.raw) and hash(r) == hash(parse_line(r.raw))


def test_known_lines_are_reused_and_only_new_lines_are_parsed():
    first = parse_lines('{"id":"a","content":"x"}\n{"id":"b","content":"y"}\n')
    known = {r.raw: r for r in first if isinstance(r, Record)}
    again = parse_lines('{"id":"a","content":"x"}\n{"id":"c","content":"z"}\n{"id":"b","content":"y"}\nbroken\n', known)
    assert again[0] is first[0] and again[2] is first[1]
    assert isinstance(again[1], Record) and again[1].content == "z"
    assert isinstance(again[3], CorruptLine) and again[3].lineno == 4


def test_three_invalid_lines_that_form_three_objects_when_joined_stay_three_corrupt_lines():
    text = (
        '{"id":"xxxxxxxx-1","content":"a","s":"\n'
        'yyyyyyyy-2"}\n'
        '{"id":"yyyyyyyy-2","content":"b"},{"id":"zzzzzzzz-3","content":"c"}\n'
    )
    lines = parse_lines(text)
    assert [type(x).__name__ for x in lines] == ["CorruptLine", "CorruptLine", "CorruptLine"]
    assert [x.lineno for x in lines if isinstance(x, CorruptLine)] == [1, 2, 3]
    assert render_bytes(lines) == text.encode()


def test_a_split_array_plus_a_line_holding_two_objects_cannot_line_up_with_borrowed_ids():
    text = (
        '{"id":"aaaaaaaa-1","x":[1\n'
        '"bbbbbbbb-2"]}\n'
        '{"id":"bbbbbbbb-2"},{"id":"cccccccc-3"}\n'
        '{"id":"dddddddd-4","content":"ok"}\n'
    )
    lines = parse_lines(text)
    assert [type(x).__name__ for x in lines] == ["CorruptLine", "CorruptLine", "CorruptLine", "Record"]
    assert render_bytes(lines) == text.encode()


def test_every_record_comes_from_its_own_line_in_a_mixed_thousand_line_file():
    good = [new_record(scope="global", content=f"记忆 {i}", record_id=f"id-{i:04d}").raw for i in range(1000)]
    raws = list(good)
    for at in (3, 500, 999):
        raws[at] = raws[at][:-1]  # cut the closing brace: invalid on its own
    lines = parse_lines("\n".join(raws) + "\n")
    assert len(lines) == 1000
    for at, line in enumerate(lines):
        assert line.raw == raws[at]
        assert isinstance(line, CorruptLine) == (at in (3, 500, 999))


def test_content_read_back_from_the_line_is_exactly_what_json_parses_whatever_the_line_holds():
    lines = [
        '{"id":"a","content":"plain text 中文"}',
        '{"id":"b","content":"a \\"quoted\\" word and a back\\\\slash"}',
        '{"id":"c","content":"a\\/b and \\u00e9 and a\\nnewline"}',
        '{"id":"d","content":"lone \\ud800 surrogate"}',
        '{"id":"e","meta":{"content":"decoy"},"content":"real"}',
        '{"id":"f","content":"ab","content":"a"}',  # a duplicate key: JSON keeps the last
        '{"id":"g","content":"a","content":"a\\u0000"}',
        '{"id":"h", "content" : "spaced 记忆"}',
        '{"id":"i","content":"  padded  "}',
        '{"id":"j","content":""}',
        '{"id":"k","content":42}',
    ]
    expected = [json.loads(line)["content"] for line in lines]
    expected = [c if isinstance(c, str) else "" for c in expected]
    text = "\n".join(lines) + "\n"
    for parsed in (
        parse_lines(text),
        parse_bytes(text.encode("utf-8", "surrogatepass")),
        [parse_line(x) for x in lines],
    ):
        assert [r.content for r in parsed if isinstance(r, Record)] == expected
    kept_as_text = Record({"id": "s", "content": "x\ud800y"}, '{"id":"s","content":"x\ud800y"}')  # not encodable
    assert kept_as_text.content == "x\ud800y" and kept_as_text.raw == '{"id":"s","content":"x\ud800y"}'
    first = parse_line(lines[0])
    assert isinstance(first, Record)
    changed = first.with_changes(content="新的 text")
    assert changed.content == "新的 text" and json.loads(changed.raw)["content"] == "新的 text"
