"""Read-only means read-only: search, list, get, stats, export and doctor change no byte and
create no file or directory under the store — also with `path` plus a new custom scope name."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dsh_memory_mcp.config import resolve_settings
from dsh_memory_mcp.service.tools import MemoryService
from dsh_memory_mcp.store.shared import SharedStore
from tests.conftest import PYTHON, subprocess_env


def everything(root: Path) -> dict[str, bytes | None]:
    """Every entry under `root`: file bytes, None for a directory (symlinks by their target text)."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = str(path.readlink()).encode()
        elif path.is_dir():
            out[rel] = None
        else:
            out[rel] = path.read_bytes()
    return out


def seeded(store_dir: Path, project: Path) -> tuple[SharedStore, str]:
    store = SharedStore(str(store_dir))
    store.prepare()
    rid = store.save("global", "Docker images are built with buildx").record.id
    store.save(f"project:{project}", "this project uses uv")
    store.register_alias("team", f"project:{project}")
    store.delete_ids([store.save("global", "to be forgotten").record.id])  # the journal exists too
    store.close()
    return store, rid


def test_the_read_tools_write_nothing_even_with_path_and_a_new_custom_scope(tmp_path: Path, store_dir: Path):
    project = tmp_path / "ws"
    project.mkdir()
    _, rid = seeded(store_dir, project)
    before = everything(store_dir)
    settings = resolve_settings(store_dir=str(store_dir), project_dir=str(project), env={}, cwd=str(project))
    service = MemoryService(settings=settings, store=SharedStore(str(store_dir)))
    calls = [
        ("memory_list", {"path": str(project), "scope": "brand-new-name"}),
        ("memory_list", {"scope": "all"}),
        ("memory_search", {"query": "zzzz-no-such-word", "path": str(project), "scope": "another-name"}),
        ("memory_get", {"ids": [rid[:8]]}),
    ]
    for name, args in calls:
        result = service.call(name, args)
        assert not result.is_error, (name, result.text)
    service.store.close()
    assert everything(store_dir) == before


def test_the_read_only_commands_write_nothing(tmp_path: Path, store_dir: Path):
    project = tmp_path / "ws"
    project.mkdir()
    _, rid = seeded(store_dir, project)
    before = everything(store_dir)
    where = ["--store-dir", str(store_dir), "--project", str(project)]
    scoped = ["--path", str(project), "--scope", "brand-new-name"]
    for args in (
        ["list", *scoped],
        ["search", "zzzz-no-such-word", *scoped],
        ["get", rid],
        ["stats", *scoped],
        ["stats"],
        ["export", *scoped],
        ["export"],
        ["doctor"],
        ["recover", "--dry-run"],
    ):
        proc = subprocess.run(
            [PYTHON, "-m", "dsh_memory_mcp", *args, *where],
            capture_output=True,
            env=subprocess_env(DSH_MEMORY_VECTOR="off"),
            timeout=60,
            input=b"",
        )
        assert proc.returncode in (0, 1), (args, proc.stderr)  # doctor may find problems (exit 1)
        assert everything(store_dir) == before, args


def test_the_read_commands_write_nothing_with_a_live_embedding_backend(tmp_path: Path, store_dir: Path):
    # A store with sidecars (made by a real `reembed`), no cached calibration, and one record saved
    # after the sidecars were written: a writing vector channel would backfill it and save the
    # model's calibration. The read commands must leave every byte as it was.
    from tests.helpers.fake_llama import FakeLlama

    project = tmp_path / "ws"
    project.mkdir()
    _, rid = seeded(store_dir, project)
    where = ["--store-dir", str(store_dir), "--project", str(project)]
    with FakeLlama() as fake:
        env = subprocess_env(DSH_MEMORY_VECTOR="on", DSH_MEMORY_EMBED_ENDPOINT=fake.url)

        def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run(
                [PYTHON, "-m", "dsh_memory_mcp", *args, *where], capture_output=True, env=env, timeout=60, input=b""
            )

        assert cli("reembed").returncode == 0
        vectors = store_dir / ".vectors"
        (vectors / "calibration.json").unlink()
        store = SharedStore(str(store_dir))
        store.save("global", "Kubernetes manifests live in deploy/k8s")  # no vector yet
        store.close()
        sidecars = sorted(store_dir.rglob("*.vec"))
        assert sidecars
        before = everything(store_dir)
        served = fake.embedding_requests()
        for args in (
            ["search", "zzzz-no-such-word"],
            ["search", "zzzz-no-such-word", "--scope", "all", "--json"],
            ["list", "--scope", "all"],
            ["get", rid],
            ["stats"],
            ["export"],
        ):
            proc = cli(*args)
            assert proc.returncode == 0, (args, proc.stderr.decode())
            assert everything(store_dir) == before, args
        # The searches did use the backend (the query, and the calibration probes held in memory).
        assert fake.embedding_requests() > served
    assert not (vectors / "calibration.json").exists()
