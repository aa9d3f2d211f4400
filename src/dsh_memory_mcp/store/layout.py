"""Where things are in a store directory (docs/design.md: Store format): path arithmetic and
listing, so every part agrees; `prepare`, at server start, is the only function that creates anything.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass

from dsh_memory_mcp.errors import StoreError
from dsh_memory_mcp.store import fileio, scopes
from dsh_memory_mcp.texts import Text, msg

#: The alias file, and the name of the lock guarding it (``.locks/<sha1("scopes.json")>.lock``).
ALIASES_FILE = "scopes.json"
#: The `serve` process's address file.
SERVE_FILE = "serve.json"
#: What a person deleted, restorable for a while (`store.trash`); also the name of its lock.
TRASH_FILE = "trash.jsonl"
PROJECTS_DIR = "projects"
LOCKS_DIR = ".locks"
SCOPE_SUFFIX = ".jsonl"
VEC_SUFFIX = ".vec"

_SHA1_HEX = re.compile(r"[0-9a-f]{40}")


def vec_path_for(scope_file: str) -> str:
    """The sidecar path of a scope file: ``x.jsonl`` → ``x.vec``."""
    base = scope_file[: -len(SCOPE_SUFFIX)] if scope_file.endswith(SCOPE_SUFFIX) else scope_file
    return base + VEC_SUFFIX


@dataclass(frozen=True)
class StoreLayout:
    """The paths of one store directory. Creating one touches nothing on disk."""

    root: str

    @classmethod
    def at(cls, root: str) -> StoreLayout:
        return cls(os.path.abspath(root))

    # -- paths ------------------------------------------------------------------------------
    @property
    def projects_dir(self) -> str:
        return os.path.join(self.root, PROJECTS_DIR)

    @property
    def locks_dir(self) -> str:
        return os.path.join(self.root, LOCKS_DIR)

    @property
    def aliases_path(self) -> str:
        return os.path.join(self.root, ALIASES_FILE)

    @property
    def serve_path(self) -> str:
        return os.path.join(self.root, SERVE_FILE)

    @property
    def trash_path(self) -> str:
        return os.path.join(self.root, TRASH_FILE)

    def scope_path(self, scope: str) -> str:
        """Absolute path of the scope's JSONL file (it may not exist)."""
        return os.path.join(self.root, *scopes.scope_file_relpath(scope).split("/"))

    def vec_path(self, scope: str) -> str:
        """Absolute path of the scope's `.vec` sidecar (it may not exist)."""
        return vec_path_for(self.scope_path(scope))

    def relpath(self, path: str) -> str:
        """`path` relative to the store, with ``/`` separators (``projects/<sha1>.jsonl``)."""
        return os.path.relpath(path, self.root).replace(os.sep, "/")

    def directories(self) -> tuple[str, str, str]:
        """The directories a writable store has: the root, ``projects/`` and ``.locks/``."""
        return (self.root, self.projects_dir, self.locks_dir)

    # -- listing ----------------------------------------------------------------------------
    def _list(self, suffix: str, *, sha1_only: bool) -> list[str]:
        names: list[str] = []
        if os.path.isfile(os.path.join(self.root, scopes.GLOBAL + suffix)):
            names.append(scopes.GLOBAL + suffix)
        try:
            with os.scandir(self.projects_dir) as entries:
                found = sorted(
                    e.name
                    for e in entries
                    if e.name.endswith(suffix)
                    and (not sha1_only or _SHA1_HEX.fullmatch(e.name[: -len(suffix)]))
                    and e.is_file(follow_symlinks=True)
                )
        except OSError:
            found = []
        names.extend(f"{PROJECTS_DIR}/{name}" for name in found)
        return names

    def scope_files(self, *, sha1_only: bool = False) -> list[str]:
        """Scope files present, relative (``global.jsonl`` first, then ``projects/*.jsonl`` sorted).

        `sha1_only` keeps only ``projects/<40 hex>.jsonl`` (the names a scope key can produce).
        """
        return self._list(SCOPE_SUFFIX, sha1_only=sha1_only)

    def vec_files(self) -> list[str]:
        """Sidecar files present, relative (``global.vec`` first, then ``projects/*.vec`` sorted)."""
        return self._list(VEC_SUFFIX, sha1_only=False)

    def abspath(self, relpath: str) -> str:
        return os.path.join(self.root, *relpath.split("/"))

    # -- creating ---------------------------------------------------------------------------
    def prepare(self) -> None:
        """Create the store, ``projects/`` and ``.locks/`` (0o700) and prove them writable. An
        existing directory keeps its mode; missing parents are not created (a typo in
        ``--store-dir`` is reported, not made a new tree).

        :raises StoreError: with a Chinese message naming the path and why it is unusable.
        """
        hint = msg("请用 --store-dir 或环境变量 DSH_MEMORY_STORE_DIR 指定一个可写的目录。")

        def fail(path: str, reason: Text, exc: BaseException | None = None) -> StoreError:
            err = StoreError(
                msg("记忆库目录不可用:{path} {reason}。{hint}", path=path, reason=reason, hint=hint), path=path
            )
            err.__cause__ = exc
            return err

        for directory in self.directories():
            try:
                mode: int | None = os.stat(directory).st_mode
            except FileNotFoundError:
                mode = None
            except OSError as exc:
                raise fail(directory, msg("无法访问:{why}", why=exc.strerror or exc), exc) from exc
            if mode is not None:
                if stat.S_ISDIR(mode):
                    continue
                raise fail(directory, msg("已存在但不是目录(是一个文件)"))
            parent = os.path.dirname(directory)
            try:
                parent_is_dir = stat.S_ISDIR(os.stat(parent).st_mode)
            except FileNotFoundError as exc:
                raise fail(directory, msg("的上级目录 {parent} 不存在", parent=parent), exc) from exc
            except NotADirectoryError as exc:
                raise fail(directory, msg("的上级路径 {parent} 中有一段不是目录", parent=parent), exc) from exc
            except OSError as exc:
                raise fail(
                    directory, msg("的上级目录 {parent} 无法访问:{why}", parent=parent, why=exc.strerror or exc), exc
                ) from exc
            if not parent_is_dir:
                raise fail(directory, msg("的上级路径 {parent} 不是目录", parent=parent))
            try:
                os.mkdir(directory, 0o700)
            except FileExistsError as exc:
                if not os.path.isdir(directory):  # a dangling symlink, or a file created meanwhile
                    raise fail(directory, msg("已存在但不是目录"), exc) from exc
            except PermissionError as exc:
                raise fail(directory, msg("无法创建:没有写权限({why})", why=exc.strerror), exc) from exc
            except OSError as exc:
                raise fail(directory, msg("无法创建:{why}", why=exc.strerror or exc), exc) from exc
        # Every directory we will write to, since an existing one may belong to another user.
        for directory in self.directories():
            try:
                fd, probe = tempfile.mkstemp(dir=directory, prefix=".probe-", suffix=".tmp")
                try:
                    fileio.write_all(fd, b"ok\n")
                finally:
                    os.close(fd)
                    os.unlink(probe)
            except PermissionError as exc:
                raise fail(directory, msg("不可写:没有写权限({why})", why=exc.strerror), exc) from exc
            except OSError as exc:
                raise fail(directory, msg("不可写:{why}", why=exc.strerror or exc), exc) from exc
