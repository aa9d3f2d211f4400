"""The `.vec` sidecar format: header, base64 little-endian float32 lines, appends and rewrites."""

from __future__ import annotations

import base64
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from dsh_memory_mcp.search import sidecar
from tests.conftest import SRC

HEADER = ("all-minilm-l6-v2", 4)


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_sidecar_is_a_header_then_id_tab_base64_of_little_endian_float32(tmp_path: Path) -> None:
    path = str(tmp_path / "global.vec")
    sidecar.write(path, HEADER, [("id-1", unit(1, 2, 3, 4)), ("id-2", unit(0, 0, 0, 1))])
    lines = Path(path).read_bytes().split(b"\n")
    assert lines[0] == b"#all-minilm-l6-v2\t4"
    assert lines[-1] == b""  # every line ends with \n
    rid, b64 = lines[1].split(b"\t")
    assert rid == b"id-1"
    assert base64.b64decode(b64) == struct.pack("<4f", *unit(1, 2, 3, 4).tolist())
    assert lines[2] == b"id-2\t" + base64.b64encode(struct.pack("<4f", 0, 0, 0, 1))


def test_reading_gives_ids_a_matrix_and_the_end_offset(tmp_path: Path) -> None:
    path = str(tmp_path / "s.vec")
    sidecar.write(path, HEADER, [("a", unit(1, 0, 0, 0)), ("b", unit(0, 1, 0, 0))])
    got = sidecar.read(path)
    assert got is not None
    assert got.header == HEADER
    assert got.ids == ["a", "b"]
    assert got.vectors.dtype == np.float32 and got.vectors.shape == (2, 4)
    assert got.end == os.path.getsize(path)
    assert sidecar.read(str(tmp_path / "missing.vec")) is None


def test_an_append_is_read_back_as_a_tail_from_the_previous_end(tmp_path: Path) -> None:
    path = str(tmp_path / "s.vec")
    sidecar.write(path, HEADER, [("a", unit(1, 0, 0, 0))])
    first = sidecar.read(path)
    assert first is not None
    assert sidecar.append(path, HEADER, [("b", unit(0, 1, 0, 0)), ("c", unit(0, 0, 1, 0))])
    tail = sidecar.read(path, start=first.end, header=HEADER)
    assert tail is not None
    assert tail.ids == ["b", "c"]
    assert tail.identity == first.identity  # same inode: extend, don't re-read
    np.testing.assert_allclose(tail.vectors[1], unit(0, 0, 1, 0))


def test_a_half_written_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    path = str(tmp_path / "s.vec")
    sidecar.write(path, HEADER, [("a", unit(1, 0, 0, 0))])
    full = sidecar.entry_line("b", unit(0, 1, 0, 0)).encode()
    with open(path, "ab") as fh:
        fh.write(full[:10])
    got = sidecar.read(path)
    assert got is not None and got.ids == ["a"]
    with open(path, "ab") as fh:
        fh.write(full[10:])
    tail = sidecar.read(path, start=got.end, header=HEADER)
    assert tail is not None and tail.ids == ["b"]


def test_garbage_lines_and_wrong_widths_are_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "s.vec"
    good = sidecar.entry_line("ok", unit(1, 1, 1, 1))
    short = "short\t" + base64.b64encode(struct.pack("<2f", 1, 0)).decode() + "\n"
    path.write_text(f"#all-minilm-l6-v2\t4\n{good}not a vector line\n{short}x\t!!!notbase64\n#all-minilm-l6-v2\t4\n", encoding="utf-8")
    got = sidecar.read(str(path))
    assert got is not None and got.ids == ["ok"]


@pytest.mark.parametrize(
    ("first_line", "expected"),
    [
        ("#qwen3-embedding-0.6b\t1024", ("qwen3-embedding-0.6b", 1024)),
        ("#qwen3-embedding-0.6b\t1024\r", ("qwen3-embedding-0.6b", 1024)),
        ("#model\twith\ttabs\t8", ("model\twith\ttabs", 8)),
        ("qwen3\t1024", None),
        ("#qwen3", None),
        ("#qwen3\tbig", None),
        ("#\t4", None),
        ("#m\t0", None),
    ],
    ids=["dsh-default", "crlf", "tabs-in-id", "no-hash", "no-dims", "bad-dims", "empty-id", "zero-dims"],
)
def test_header_parsing(first_line: str, expected: tuple[str, int] | None) -> None:
    assert sidecar.parse_header(first_line) == expected


def test_append_refuses_a_missing_file_or_another_models_header(tmp_path: Path) -> None:
    path = str(tmp_path / "s.vec")
    entry = [("a", unit(1, 0, 0, 0))]
    assert not sidecar.append(path, HEADER, entry)
    assert not os.path.exists(path)  # creation is the locked path's job
    sidecar.write(path, ("qwen3-embedding-0.6b", 4), [])
    before = Path(path).read_bytes()
    assert not sidecar.append(path, HEADER, entry)
    assert Path(path).read_bytes() == before


def test_removing_ids_keeps_every_other_line_byte_for_byte(tmp_path: Path) -> None:
    path = tmp_path / "s.vec"
    foreign = "dsh-written\t" + base64.b64encode(struct.pack("<4f", 0.5, 0.5, 0.5, 0.5)).decode() + "\n"
    sidecar.write(str(path), HEADER, [("a", unit(1, 0, 0, 0)), ("b", unit(0, 1, 0, 0))])
    with open(path, "a", encoding="utf-8", newline="\n") as fh:
        fh.write(foreign)
    before = path.read_text(encoding="utf-8")
    assert not sidecar.remove_ids(str(path), ["nope"])
    assert path.read_text(encoding="utf-8") == before
    inode = path.stat().st_ino
    assert sidecar.remove_ids(str(path), ["a"])
    assert path.read_text(encoding="utf-8") == before.replace(sidecar.entry_line("a", unit(1, 0, 0, 0)), "")
    assert path.stat().st_ino != inode  # replaced whole, never edited in place
    assert [p.name for p in tmp_path.iterdir()] == ["s.vec"]  # no tmp left behind


def test_l2_normalise_makes_unit_rows_and_leaves_zero_rows_zero() -> None:
    m = sidecar.l2_normalise([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(m, [[0.6, 0.8], [0.0, 0.0]])
    assert m.dtype == np.float32


def test_concurrent_appends_from_several_processes_interleave_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "global.vec"
    header = ("qwen3-embedding-0.6b", 1024)  # 5.5 kB lines: far beyond PIPE_BUF
    sidecar.write(str(path), header, [])
    script = textwrap.dedent(
        f"""
        import sys, numpy as np
        sys.path.insert(0, {SRC!r})
        from dsh_memory_mcp.search import sidecar
        worker = int(sys.argv[1])
        rng = np.random.default_rng(worker)
        for i in range(100):
            v = sidecar.l2_normalise(rng.standard_normal(1024))[0]
            assert sidecar.append({str(path)!r}, ("qwen3-embedding-0.6b", 1024), [(f"w{{worker}}-{{i}}", v)])
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(w)]) for w in range(4)]
    try:
        for p in procs:
            assert p.wait(60) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    got = sidecar.read(str(path))
    assert got is not None
    assert sorted(got.ids) == sorted(f"w{w}-{i}" for w in range(4) for i in range(100))
    np.testing.assert_allclose(np.linalg.norm(got.vectors, axis=1), 1.0, rtol=1e-5)
    assert len(path.read_bytes().split(b"\n")) == 1 + 400 + 1
