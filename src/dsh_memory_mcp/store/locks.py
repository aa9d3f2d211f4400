"""Exclusive lock files shared with other implementations, plus an in-process thread guard.

A lock is the file ``<locks_dir>/<sha1(name)>.lock``, created with ``O_CREAT|O_EXCL`` and holding
``{"pid":…,"host":…,"createdAt":…,"nonce":…}``. That is exactly what Node's ``openSync(p, "wx")``
gives the DSH plugin, so every implementation writing the store excludes every other one (SPEC §4).
``fcntl.flock`` (filelock's ``FileLock``) would not: it neither sees an O_EXCL marker nor is seen by
one, and filelock's ``SoftFileLock`` writes a marker format the other writers do not parse.

The file only excludes *processes*. Threads of one process (the MCP SDK runs sync tools in worker
threads) are excluded by a per-lock-file ``threading.Lock`` that is process-wide, so two
`LockManager` objects over the same directory still exclude each other in-process.

Because the marker is a plain file, a holder that dies leaves it behind. Waiters therefore break
*stale* markers: the holder's pid is dead on this host, the marker is older than ``stale_after``,
or it stayed empty/unparseable for a couple of seconds (a holder between ``open`` and ``write``).
Breaking is the dangerous part, see `LockManager._break`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.errors import LockRecursion, LockTimeout, StoreError
from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.scopes import scope_sha1

__all__ = ["LockManager"]

logger = logging.getLogger("dsh_memory_mcp.store.locks")

_HOST = socket.gethostname()
_O_BINARY: int = getattr(os, "O_BINARY", 0)
_EXCL_FLAGS = os.O_CREAT | os.O_EXCL | os.O_WRONLY | _O_BINARY
_MAX_MARKER = 1 << 20


class _Guard:
    """The in-process half of a lock: a plain (non-reentrant) mutex and the thread holding it."""

    __slots__ = ("lock", "owner")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: int | None = None


# Process-wide on purpose: the lock *file* belongs to the process (its pid is in the marker), so
# the thread guard must be process-wide too, or two LockManager objects on one directory would
# only meet at the file and a thread re-entering through the other object would wait for itself.
_guards: dict[str, _Guard] = {}
_guards_lock = threading.Lock()
# Nonces of the markers this process holds right now → holding thread. A marker carrying our own
# pid is either one of these (alive, maybe reached through a symlinked path that got another
# guard) or a leftover of a crashed earlier hold (stale).
_live_nonces: dict[str, int] = {}


def _guard_for(path: str) -> _Guard:
    with _guards_lock:
        guard = _guards.get(path)
        if guard is None:
            guard = _guards[path] = _Guard()
        return guard


def _reset_after_fork() -> None:
    """A forked child inherits locked mutexes of threads that do not exist in it: start afresh."""
    global _guards, _guards_lock
    _guards = {}
    _guards_lock = threading.Lock()
    _live_nonces.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@dataclass(frozen=True)
class _Seen:
    """One observation of a marker: its bytes and the inode they were read from."""

    content: bytes
    dev: int
    ino: int
    mtime: float
    #: With dev and ino, tells two lock files apart even when the second reuses the first's
    #: inode number (lock files are created and removed many times a second).
    mtime_ns: int


@dataclass(frozen=True)
class _Held:
    """The marker this process wrote, to recognise it again on release."""

    path: str
    content: bytes
    dev: int
    ino: int
    nonce: str


def _read_marker(path: str) -> _Seen | None:
    """The marker's bytes and identity, or None when there is no marker (any more)."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_BINARY)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        chunks: list[bytes] = []
        size = 0
        while size < _MAX_MARKER:  # a real marker is ~100 bytes; do not slurp a huge foreign file
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return _Seen(b"".join(chunks), st.st_dev, st.st_ino, st.st_mtime, st.st_mtime_ns)


def _parse_marker(content: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import ctypes

    def _pid_alive(pid: int) -> bool:
        """Whether a process exists. `os.kill(pid, 0)` must not be used: on Windows it kills."""
        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            # 87 = ERROR_INVALID_PARAMETER: no such process. Anything else (access denied): alive.
            return bool(kernel32.GetLastError() != 87)
        try:
            code = ctypes.c_ulong()
            if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
                return True
            return code.value == 259  # STILL_ACTIVE
        finally:
            kernel32.CloseHandle(handle)

else:

    def _pid_alive(pid: int) -> bool:
        """Whether a process exists on this host (a zombie counts as alive until reaped)."""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # EPERM: it exists, it is just not ours
            return True
        return True


class LockManager:
    """Named exclusive locks, each a marker file in `locks_dir` (see the module docstring).

    :param locks_dir: the store's ``.locks`` directory; created (0o700) on first use.
    :param timeout: the total wait for one `hold` (thread guard + file), in seconds.
    :param stale_after: a marker older than this (by its ``createdAt``) is broken.
    :param poll: seconds between attempts while another process holds the file (jittered).
    :param unreadable_grace: an empty/unparseable marker unchanged for this long is broken.
    :param breaker_stale: a leftover ``.break`` file older than this (by mtime) is removed.
    """

    def __init__(
        self,
        locks_dir: str,
        *,
        timeout: float = 10.0,
        stale_after: float = 30.0,
        poll: float = 0.02,
        unreadable_grace: float = 2.0,
        breaker_stale: float = 5.0,
    ) -> None:
        self.locks_dir = locks_dir
        self.timeout = timeout
        self.stale_after = stale_after
        self.poll = poll
        self.unreadable_grace = unreadable_grace
        self.breaker_stale = breaker_stale
        # path → (identity of an unparseable marker, monotonic time it was first seen like that)
        self._unreadable: dict[str, tuple[tuple[int, int, int, bytes], float]] = {}
        self._unreadable_lock = threading.Lock()

    def lock_path(self, name: str) -> str:
        """``<locks_dir>/<sha1(name)>.lock``."""
        return os.path.join(self.locks_dir, scope_sha1(name) + ".lock")

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """Hold the lock `name` for the duration of the ``with`` block.

        :raises LockRecursion: this thread already holds `name` (a bug; never waits).
        :raises LockTimeout: another thread or process held it for the whole `timeout`.
        :raises StoreError: the lock directory or file cannot be created at all.
        """
        path = self.lock_path(name)
        deadline = time.monotonic() + self.timeout
        guard = _guard_for(os.path.abspath(path))
        me = threading.get_ident()
        if guard.owner == me:
            raise LockRecursion(
                f"同一线程重复获取锁 {name!r}(锁文件 {path}):这是程序错误,已拒绝以免自己等自己。",
                lock_file=path,
            )
        if not guard.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise LockTimeout(
                f"等待锁超时({self.timeout:g} 秒):锁文件 {path} 正被本进程的另一个请求持有,"
                "它正在写入记忆库。请稍后重试。",
                lock_file=path,
            )
        guard.owner = me
        try:
            held = self._acquire_file(path, deadline)
            _live_nonces[held.nonce] = me
            try:
                yield
            finally:
                _live_nonces.pop(held.nonce, None)
                self._release_file(held)
        finally:
            guard.owner = None
            guard.lock.release()

    # -- the file half ---------------------------------------------------------------------

    def _acquire_file(self, path: str, deadline: float) -> _Held:
        while True:
            try:
                fd = os.open(path, _EXCL_FLAGS, 0o600)
            except FileExistsError:
                pass
            except FileNotFoundError:
                self._make_dir(path)
                if time.monotonic() >= deadline:
                    raise self._timeout(path, None) from None
                continue
            except OSError as exc:
                raise StoreError(
                    f"无法创建锁文件 {path}:{exc.strerror or exc}。请检查记忆库目录的权限。", path=path
                ) from exc
            else:
                return self._write_marker(fd, path)

            try:
                seen = _read_marker(path)
            except OSError as exc:
                raise StoreError(f"无法读取锁文件 {path}:{exc.strerror or exc}。", path=path) from exc
            progressed = seen is None  # released between our open and our read: retry at once
            if seen is None:
                with self._unreadable_lock:
                    self._unreadable.pop(path, None)
            if seen is not None:
                reason = self._stale_reason(path, seen)
                if reason is not None:
                    progressed = self._break(path, seen, reason)
            if progressed:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout(path, seen)
            # Aging: the longer we have waited, the more often we try (down to a twentieth of
            # `poll`), so among many writers the oldest waiter tends to win the next release
            # instead of one unlucky process running into LOCK_TIMEOUT (16 writers on a 50k
            # record scope: 4 of 320 saves timed out with a flat interval).
            waited = self.timeout - remaining
            factor = max(0.05, 1.0 / (1.0 + 2.0 * waited))
            time.sleep(min(remaining, self.poll * factor * random.uniform(0.5, 1.5)))

    def _make_dir(self, path: str) -> None:
        directory = os.path.dirname(path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"无法创建锁目录 {directory}:{exc.strerror or exc}。请检查记忆库目录的权限。", path=directory
            ) from exc

    def _write_marker(self, fd: int, path: str) -> _Held:
        nonce = uuid.uuid4().hex
        marker = {"pid": os.getpid(), "host": _HOST, "createdAt": time.time_ns() // 1_000_000, "nonce": nonce}
        content = json.dumps(marker, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            try:
                fileio.write_all(fd, content)
                st = os.fstat(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise StoreError(f"无法写入锁文件 {path}:{exc.strerror or exc}。", path=path) from exc
        with self._unreadable_lock:
            self._unreadable.pop(path, None)
        return _Held(path, content, st.st_dev, st.st_ino, nonce)

    def _release_file(self, held: _Held) -> None:
        """Remove our marker, but only if it is still ours (it may have been broken as stale)."""
        try:
            current = _read_marker(held.path)
            if current is None or current.content != held.content or current.ino != held.ino:
                logger.warning(
                    "锁文件 %s 在持有期间被其他进程当作陈旧锁清除了(持有超过 %g 秒?)", held.path, self.stale_after
                )
                return
            _unlink(held.path)
        except OSError as exc:
            # Never mask the caller's own outcome; a marker left behind is broken as stale later.
            logger.warning("无法删除锁文件 %s:%s", held.path, exc.strerror or exc)

    def _stale_reason(self, path: str, seen: _Seen) -> str | None:
        """Why the observed marker may be broken, or None while its holder may still be working."""
        now = time.time()
        info = _parse_marker(seen.content)
        if info is None:
            # A holder writes its marker right after creating it; empty or garbled content that
            # stays so is a holder that died in between (or a damaged file). "Stays so" means
            # the very same file: same inode *and* mtime (a new lock file may get a freed inode
            # number back), seen without interruption — any other observation resets the clock.
            # Judging by inode alone once broke a live holder's lock under 16 writers.
            key = (seen.dev, seen.ino, seen.mtime_ns, seen.content)
            mono = time.monotonic()
            with self._unreadable_lock:
                previous = self._unreadable.get(path)
                if previous is None or previous[0] != key:
                    self._unreadable[path] = (key, mono)
                    first = mono
                else:
                    first = previous[1]
            if mono - first >= self.unreadable_grace or now - seen.mtime >= self.unreadable_grace:
                return f"锁文件内容为空或无法解析,且 {self.unreadable_grace:g} 秒未变"
            return None
        with self._unreadable_lock:
            self._unreadable.pop(path, None)
        pid, host, created, nonce = info.get("pid"), info.get("host"), info.get("createdAt"), info.get("nonce")
        if host == _HOST and isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
            if pid == os.getpid():
                owner = _live_nonces.get(nonce) if isinstance(nonce, str) else None
                if owner is None:
                    return "本进程先前遗留的锁"
                if owner == threading.get_ident():
                    raise LockRecursion(
                        f"同一线程重复获取锁文件 {path}:这是程序错误,已拒绝以免自己等自己。", lock_file=path
                    )
                return None
            if not _pid_alive(pid):
                return f"持有进程 pid={pid} 已不存在"
        if isinstance(created, (int, float)) and not isinstance(created, bool) and math.isfinite(created):
            age = now - created / 1000.0
            if age > self.stale_after:
                return f"锁已存在 {age:.0f} 秒(超过 {self.stale_after:g} 秒)"
            return None
        # A marker of a format we do not know: judge by the file's own age.
        if now - seen.mtime > self.stale_after:
            return f"锁文件已 {now - seen.mtime:.0f} 秒未更新(超过 {self.stale_after:g} 秒)"
        return None

    def _break(self, path: str, seen: _Seen, reason: str) -> bool:
        """Remove the stale marker `seen`, unless someone else got there first. True if it is gone.

        Why a breaker lock: a waiter decides "stale" from a marker it read earlier. Without
        coordination two waiters A and B both judge the same dead marker stale; A unlinks it and
        creates its own, then B's unlink removes *A's live marker* and B takes the lock too.
        So breaking is itself done under ``<lock>.break`` (O_EXCL), and inside it the marker is
        read again and removed only if it is the very same one judged stale (same bytes and same
        inode): if anyone replaced it in between, it is left alone and the waiter starts over.
        A breaker that dies inside leaves ``.break`` behind; it is removed when older than
        `breaker_stale` by mtime (breaking takes microseconds, so that is generous).
        """
        breaker = path + ".break"
        try:
            fd = os.open(breaker, _EXCL_FLAGS, 0o600)
        except FileExistsError:
            self._clear_stale_breaker(breaker)
            return False
        except OSError:
            return False
        try:
            try:
                fileio.write_all(fd, json.dumps({"pid": os.getpid(), "host": _HOST}).encode("utf-8"))
                breaker_ino = os.fstat(fd).st_ino
            finally:
                os.close(fd)
            current = _read_marker(path)
            if current is None:
                return True
            if (current.content, current.dev, current.ino, current.mtime_ns) != (
                seen.content,
                seen.dev,
                seen.ino,
                seen.mtime_ns,
            ):
                return False
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            except OSError:
                return False
            logger.warning("已清除陈旧锁 %s:%s", path, reason)
            with self._unreadable_lock:
                self._unreadable.pop(path, None)
            return True
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                if os.stat(breaker).st_ino == breaker_ino:
                    _unlink(breaker)

    def _clear_stale_breaker(self, breaker: str) -> None:
        """Remove a ``.break`` file whose creator evidently died while breaking."""
        try:
            st = os.stat(breaker)
        except OSError:
            return
        if time.time() - st.st_mtime <= self.breaker_stale:
            return
        try:
            again = os.stat(breaker)
            if (again.st_ino, again.st_mtime_ns) == (st.st_ino, st.st_mtime_ns):
                os.unlink(breaker)
                logger.warning("已清除遗留的破锁标记 %s", breaker)
        except OSError:
            pass

    def _timeout(self, path: str, seen: _Seen | None) -> LockTimeout:
        holder = ""
        info = _parse_marker(seen.content) if seen is not None else None
        if info is not None:
            holder = f"(持有者 pid={info.get('pid')},主机 {info.get('host')})"
        return LockTimeout(
            f"等待锁超时({self.timeout:g} 秒):锁文件 {path} 被另一个进程持有{holder},"
            "它正在写入记忆库。请稍后重试;超过 "
            f"{self.stale_after:g} 秒未释放的锁会被自动清除。",
            lock_file=path,
        )


def _unlink(path: str) -> None:
    """Unlink, retrying briefly where an open reader blocks deletion (Windows sharing rules)."""
    for attempt in range(50):
        try:
            os.unlink(path)
            return
        except FileNotFoundError:
            return
        except PermissionError:
            if sys.platform != "win32" or attempt == 49:
                raise
            time.sleep(0.01)
