"""No memory text in logs: a real server (debug on) is put through every tool, a corrupt store line,
a refused credential and bad input, then its log file and stderr are searched for the text."""

from __future__ import annotations

import json

from tests.helpers.mcp_session import server_params, stdio_session

SENTENCE = "紫色长颈鹿每周四在屋顶花园练习萨克斯风"
CORRUPT_TEXT = "橙色企鹅的秘密食谱藏在第三个抽屉里"
CORRUPT_ID = "corrupt1-2222-3333-4444-555555555555"


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(len(text) - size + 1)]


def test_the_log_file_holds_ids_but_no_memory_text(tmp_path, store_dir):
    store_dir.mkdir()
    # A line another program broke (unterminated string): reported on every read, kept verbatim.
    broken = json.dumps({"id": CORRUPT_ID, "scope": "global", "content": CORRUPT_TEXT}, ensure_ascii=False)[:-3]
    (store_dir / "global.jsonl").write_text(broken + "\n", encoding="utf-8")
    state = tmp_path / "state"
    params = server_params(store_dir, project=tmp_path, cwd=tmp_path, DSH_MEMORY_DEBUG="1", XDG_STATE_HOME=str(state))
    with stdio_session(params, tmp_path / "err.log") as s:
        saved = s.call("memory_save", {"content": SENTENCE, "tags": ["萨克斯风练习"]})
        rid = saved.structured_content["id"]
        assert s.call("memory_search", {"query": "紫色长颈鹿"}).structured_content["count"] == 1
        s.call("memory_list", {})
        s.call("memory_get", {"ids": [rid]})
        secret = s.call("memory_save", {"content": f"{SENTENCE} password=Xk9#mQ2!vL7pR4"})
        assert secret.structured_content["code"] == "CONTENT_SECRET"
        s.call("memory_save", {"content": SENTENCE, "tags": {"bad": SENTENCE}})
        s.call("memory_forget", {"query": "紫色长颈鹿"})
    logs = list(state.rglob("*.log"))
    assert logs, "no log file was written"
    log_text = "".join(p.read_text(encoding="utf-8") for p in logs)
    stderr = (tmp_path / "err.log").read_text(encoding="utf-8")
    for where, text in (("log file", log_text), ("stderr", stderr)):
        assert CORRUPT_ID in text, f"the corrupt line is not reported by id in the {where}"
        for piece in _pieces(SENTENCE) + _pieces(CORRUPT_TEXT) + ["Xk9#mQ2!vL7pR4"]:
            assert piece not in text, f"{piece!r} leaked into the {where}"
    for path in logs:
        assert path.stat().st_mode & 0o077 == 0, f"{path} is readable by others"
