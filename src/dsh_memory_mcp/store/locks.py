"""Exclusive lock files shared with other implementations (docs/design.md, Concurrency: the marker,
staleness, breaking; ``flock`` would not exclude DSH's ``O_EXCL`` create), plus a process-wide
``threading.Lock`` per lock file for threads. The staleness verdict is `LockManager._stale_reason`.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import math
import os
import random
import socket
import threading
import uuid
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.errors import CallRefused, LockError, LockRecursion, LockTimeout, StoreError
from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.clock import SYSTEM, Clock
from dsh_memory_mcp.store.scopes import scope_sha1
from dsh_memory_mcp.texts import msg

logger = logging.getLogger("dsh_memory_mcp.store.locks")

_HOST = socket.gethostname()


class LockLost(LockError):
    """The marker of a lock we held is no longer ours at commit time: nothing is committed.
    Code ``LOCK_TIMEOUT`` (the fix is the same: retry); not an `OSError`, so no I/O handler swallows it."""

    default_code = "LOCK_TIMEOUT"


_O_BINARY: int = getattr(os, "O_BINARY", 0)
_EXCL_FLAGS = os.O_CREAT | os.O_EXCL | os.O_WRONLY | _O_BINARY
_MAX_MARKER = 1 << 20


#: The monotonic time (on the tool gate's clock) by which the current tool call must be answered,
#: or None. A context variable, so it follows the call into the SDK's worker thread (anyio copies
#: the context) without a parameter through every store method.
_CALL_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("dsh_call_deadline", default=None)


@contextlib.contextmanager
def call_deadline(deadline: float | None) -> Iterator[None]:
    """Lock waits inside the block end by `deadline` (monotonic) with ``DEADLINE`` instead of waiting on."""
    token = _CALL_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _CALL_DEADLINE.reset(token)


def current_call_deadline() -> float | None:
    """The deadline `call_deadline` set for the call running in this context, or None."""
    return _CALL_DEADLINE.get()


class _Guard:
    """The in-process half of a lock: a plain (non-reentrant) mutex and the thread holding it.
    `users`: threads holding or waiting for it (under `_guards_lock`); at zero it leaves `_guards`."""

    __slots__ = ("lock", "owner", "users")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.owner: int | None = None
        self.users = 0


# Process-wide, like the lock file (its pid is in the marker): two LockManagers on one directory share it.
_guards: dict[str, _Guard] = {}
_guards_lock = threading.Lock()
# Nonces of the markers this process holds → holding thread; a marker with our pid and another
# nonce is a leftover of an earlier hold (stale).
_live_nonces: dict[str, int] = {}


def _guard_for(path: str) -> _Guard:
    """The guard of `path`, counted as used by the caller until `_guard_done`."""
    with _guards_lock:
        guard = _guards.get(path)
        if guard is None:
            guard = _guards[path] = _Guard()
        guard.users += 1
        return guard


def _guard_done(path: str, guard: _Guard) -> None:
    """The caller no longer holds or waits for `guard`; drop the entry when nobody does."""
    with _guards_lock:
        guard.users -= 1
        if guard.users <= 0 and _guards.get(path) is guard:
            del _guards[path]


class _Heartbeat:
    """One daemon thread refreshing the mtime of every marker this process holds (waiters age a
    marker by it), so a long hold is not taken for a dead one. Started by the first hold; a test
    clock's thread ends when nothing is held."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._cond = threading.Condition(threading.Lock())
        self._held: dict[str, tuple[_Held, float, float]] = {}  # nonce → (held, interval, due)
        self._thread: threading.Thread | None = None

    def add(self, held: _Held, interval: float) -> None:
        with self._cond:
            self._held[held.nonce] = (held, interval, self._clock.monotonic() + interval)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dsh-memory-lock-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, held: _Held) -> None:
        with self._cond:
            self._held.pop(held.nonce, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._held and self._clock is not SYSTEM:
                    self._thread = None
                    return
                now = self._clock.monotonic()
                due = [(h, iv) for h, iv, at in self._held.values() if at <= now]
                for h, iv in due:
                    self._held[h.nonce] = (h, iv, now + iv)
                if not due:
                    wait = min((at for _, _, at in self._held.values()), default=now + 3600.0) - now
                    self._clock.wait(self._cond, max(0.01, wait))
                    continue
            for h, _ in due:
                _refresh(h)


def _refresh(held: _Held) -> None:
    """Set our marker's mtime to now, through a descriptor of *our* inode (never someone else's)."""
    try:
        fd = fileio.open_regular(held.path, follow=False)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) == (held.dev, held.ino) and os.utime in os.supports_fd:
            os.utime(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# One heartbeat per clock: `SYSTEM`'s, and a test clock's while it lives.
_heartbeats: weakref.WeakKeyDictionary[Clock, _Heartbeat] = weakref.WeakKeyDictionary()
_heartbeats_lock = threading.Lock()


def _heartbeat_for(clock: Clock) -> _Heartbeat:
    with _heartbeats_lock:
        beat = _heartbeats.get(clock)
        if beat is None:
            beat = _heartbeats[clock] = _Heartbeat(clock)
        return beat


def _reset_after_fork() -> None:
    """A forked child inherits locked mutexes of threads that do not exist in it: start afresh."""
    global _guards, _guards_lock, _heartbeats, _heartbeats_lock
    _guards = {}
    _guards_lock = threading.Lock()
    _live_nonces.clear()
    _heartbeats = weakref.WeakKeyDictionary()
    _heartbeats_lock = threading.Lock()


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
    #: False for a symlink, a directory, a FIFO… at the lock path (its content is then empty).
    regular: bool = True


@dataclass(frozen=True)
class _Held:
    """The marker this process wrote, to recognise it again on release."""

    path: str
    content: bytes
    dev: int
    ino: int
    nonce: str

    def still_ours(self) -> bool:
        """Whether the marker at `path` is still the one we wrote (not broken as stale and replaced)."""
        current = _read_marker(self.path)
        mine = (self.dev, self.ino, self.content)
        return current is not None and current.regular and (current.dev, current.ino, current.content) == mine


def _read_marker(path: str) -> _Seen | None:
    """The marker's bytes and identity, or None when there is none. Anything that is not a regular
    file (never followed, never blocked on) comes back ``regular=False`` with its lstat identity."""
    try:
        fd = fileio.open_regular(path, follow=False)
    except FileNotFoundError:
        return None
    except fileio.NotRegularFile:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        return _Seen(b"", st.st_dev, st.st_ino, st.st_mtime, st.st_mtime_ns, regular=False)
    try:
        st = os.fstat(fd)
        content = os.read(fd, _MAX_MARKER)  # a real marker is ~100 bytes; do not slurp a huge foreign file
    finally:
        os.close(fd)
    return _Seen(content, st.st_dev, st.st_ino, st.st_mtime, st.st_mtime_ns)


#: A waiter reads and judges the marker in place again at most this often while it is unchanged.
_RECHECK_SECS = 0.05
#: The shortest interval between tries while the holder has only just taken the lock, and the
#: shortest sleep at all.
_MIN_POLL_SECS = 0.002
_FLOOR_SECS = 0.0005


def _marker_identity(path: str) -> tuple[int, int, int] | None:
    """``(dev, ino, mtime_ns)`` of whatever is at the lock path (not followed), None if nothing."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _remove_entry(path: str, seen: _Seen) -> None:
    """Remove what is at a lock path: a file or link by unlink, an (empty) directory by rmdir."""
    if seen.regular:
        fileio.unlink(path)
        return
    try:
        os.unlink(path)
    except (IsADirectoryError, PermissionError) as exc:
        if not os.path.isdir(path) or os.path.islink(path):
            raise
        try:
            os.rmdir(path)
        except OSError:
            raise exc from None


def _parse_marker(content: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _pid_started_after(pid: int, created_ms: float) -> bool:
    """Whether process `pid` of this host started after `created_ms`: its pid was reused. Linux
    only (``/proc``); elsewhere False, i.e. the pid is taken at its word."""
    fields = fileio.proc_stat(pid)
    if fields is None:
        return False
    try:
        start_ticks = int(fields[19])
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime"))
        started = btime + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    # btime is whole seconds and drifts a little with NTP: demand a clear margin.
    return started > created_ms / 1000.0 + 5.0


class LockManager:
    """Named exclusive locks, each a marker file in `locks_dir` (see the module docstring).

    :param locks_dir: the store's ``.locks`` directory; created (0o700) on first use.
    :param timeout: the total wait for one `hold` (thread guard + file), in seconds.
    :param stale_after: / unreadable_grace: / breaker_stale: see `_stale_reason` and `_break`.
    :param poll: the longest pause between attempts (`_pause`). A held marker is refreshed every
        ``stale_after / 6`` seconds.
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
        clock: Clock = SYSTEM,
    ) -> None:
        self.locks_dir = locks_dir
        self.clock = clock
        self.timeout = timeout
        self.stale_after = stale_after
        self.poll = poll
        self.unreadable_grace = unreadable_grace
        self.breaker_stale = breaker_stale
        # path → (identity of a marker, monotonic time it was first seen like that)
        self._observed: dict[str, tuple[tuple[int, int, int, bytes], float]] = {}
        self._observed_lock = threading.Lock()

    def lock_path(self, name: str) -> str:
        """``<locks_dir>/<sha1(name)>.lock``."""
        return os.path.join(self.locks_dir, scope_sha1(name) + ".lock")

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        """Hold the lock `name` for the ``with`` block (heartbeat; `verify` before every commit).

        :raises LockRecursion: this thread already holds `name` (a bug; never waits).
        :raises LockTimeout: another thread or process held it for the whole `timeout`.
        :raises LockLost: at a commit inside the block, the marker is no longer ours.
        :raises StoreError: the lock directory or file cannot be created at all.
        """
        path = self.lock_path(name)
        deadline = self.clock.monotonic() + self.timeout
        call_ends = _CALL_DEADLINE.get()
        by_call = call_ends is not None and call_ends < deadline
        if call_ends is not None and by_call:
            deadline = call_ends  # the call's deadline comes first (serve's tool gate)
        key = os.path.abspath(path)
        guard = _guard_for(key)
        try:
            with self._guarded(name, path, guard, deadline, by_call):
                yield
        finally:
            _guard_done(key, guard)

    @contextlib.contextmanager
    def _guarded(self, name: str, path: str, guard: _Guard, deadline: float, by_call: bool) -> Iterator[None]:
        me = threading.get_ident()
        if guard.owner == me:
            raise LockRecursion(
                msg(
                    "同一线程重复获取锁 {name!r}(锁文件 {path}):这是程序错误,已拒绝以免自己等自己。",
                    name=name,
                    path=path,
                ),
                lock_file=path,
            )
        if not guard.lock.acquire(timeout=max(0.0, deadline - self.clock.monotonic())):
            if by_call:
                raise self._deadline(path)
            raise LockTimeout(
                msg(
                    "等待锁超时({timeout} 秒):锁文件 {path} 正被本进程的另一个请求持有,它正在写入记忆库。请稍后重试。",
                    timeout=f"{self.timeout:g}",
                    path=path,
                ),
                lock_file=path,
            )
        guard.owner = me
        try:
            try:
                held = self._acquire_file(path, deadline)
            except LockTimeout as exc:
                if by_call:
                    raise self._deadline(path) from exc
                raise
            _live_nonces[held.nonce] = me
            heartbeat = _heartbeat_for(self.clock)
            heartbeat.add(held, max(0.05, self.stale_after / 6.0))
            try:
                with fileio.guard(functools.partial(self.verify, held)):
                    yield
            finally:
                heartbeat.remove(held)
                _live_nonces.pop(held.nonce, None)
                self._release_file(held)
        finally:
            guard.owner = None
            guard.lock.release()

    def verify(self, held: _Held) -> None:
        """Raise `LockLost` unless the marker at `held.path` is still the one we wrote (before each
        commit inside `hold`: a holder broken while it stalled must not write over the next one's work)."""
        with contextlib.suppress(OSError):
            if held.still_ours():
                return
        logger.warning("锁文件 %s 在持有期间已不属于本进程(被当作陈旧锁清除?),本次写入不提交", held.path)
        raise LockLost(
            msg(
                "写入前发现锁文件 {path} 已不属于本进程:持有期间它被其他进程当作陈旧锁清除了(本进程停顿超过 "
                "{stale_after} 秒?)。为免覆盖别人在此期间的写入,本次写入没有提交,文件保持对方写入后的样子。请重试。",
                path=held.path,
                stale_after=f"{self.stale_after:g}",
            ),
            lock_file=held.path,
        )

    # -- the file half ---------------------------------------------------------------------

    def _acquire_file(self, path: str, deadline: float) -> _Held:
        quick = 0  # retries without a sleep in a row: bounded, so nothing can make us spin
        checked: tuple[int, int, int] | None = None  # (dev, ino, mtime_ns) of the marker last judged
        checked_at = 0.0
        first_seen = self.clock.monotonic()  # when the marker now in place was first seen by this wait
        seen: _Seen | None = None
        remade = 0  # times the lock directory was found missing and made again
        while True:
            try:
                fd = os.open(path, _EXCL_FLAGS, 0o600)
            except FileExistsError:
                pass
            except FileNotFoundError:
                # The lock directory is missing: making it is no wait for a holder, so the first
                # re-creation is always followed by a try; only a directory that keeps vanishing times out.
                self._make_dir(path)
                remade += 1
                if remade > 1 and self.clock.monotonic() >= deadline:
                    raise self._timeout(path, None) from None
                continue
            except OSError as exc:
                raise StoreError(
                    msg("无法创建锁文件 {path}:{why}。请检查记忆库目录的权限。", path=path, why=exc.strerror or exc),
                    path=path,
                ) from exc
            else:
                return self._write_marker(fd, path)

            now = self.clock.monotonic()
            ident = _marker_identity(path)
            if ident is not None and ident != checked:
                first_seen = now
            if ident is not None and ident == checked and now - checked_at < _RECHECK_SECS:
                # The marker we judged a moment ago is still there: its holder is at work. A stat
                # instead of reading and parsing it again keeps many waiters' polling cheap.
                progressed = False
            else:
                try:
                    seen = _read_marker(path)
                except OSError as exc:
                    raise StoreError(
                        msg("无法读取锁文件 {path}:{why}。", path=path, why=exc.strerror or exc), path=path
                    ) from exc
                progressed = seen is None  # released between our open and our read: retry at once
                if seen is None:
                    self._forget(path)
                else:
                    checked, checked_at = (seen.dev, seen.ino, seen.mtime_ns), now
                    reason = self._stale_reason(path, seen)
                    if reason is not None:
                        progressed = self._break(path, seen, reason)
            remaining = deadline - self.clock.monotonic()
            if (progressed or ident is None) and quick < 100:
                quick += 1
                continue
            quick = 0
            if remaining <= 0:
                raise self._timeout(path, seen)
            self.clock.sleep(min(remaining, self._pause(now - first_seen, self.timeout - remaining)))

    def _pause(self, held_for: float, waited: float) -> float:
        """The sleep before the next try, while a holder has had the lock `held_for` (as seen by this
        wait) and we have waited `waited` seconds: short for a new holder (a save holds it ~1 ms),
        up to `poll` for a long one; shorter the longer we waited (the oldest waiter tends to win);
        jittered."""
        base = min(self.poll, max(_MIN_POLL_SECS, held_for / 4.0))
        factor = max(0.05, 1.0 / (1.0 + 2.0 * waited))
        return max(_FLOOR_SECS, base * factor * random.uniform(0.5, 1.5))

    def _make_dir(self, path: str) -> None:
        directory = os.path.dirname(path)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                msg(
                    "无法创建锁目录 {directory}:{why}。请检查记忆库目录的权限。",
                    directory=directory,
                    why=exc.strerror or exc,
                ),
                path=directory,
            ) from exc

    def _write_marker(self, fd: int, path: str) -> _Held:
        nonce = uuid.uuid4().hex
        created = int(self.clock.time() * 1000)
        marker = {"pid": os.getpid(), "host": _HOST, "createdAt": created, "nonce": nonce}
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
            raise StoreError(
                msg("无法写入锁文件 {path}:{why}。", path=path, why=exc.strerror or exc), path=path
            ) from exc
        self._forget(path)
        return _Held(path, content, st.st_dev, st.st_ino, nonce)

    def _release_file(self, held: _Held) -> None:
        """Remove our marker, but only if it is still ours (it may have been broken as stale)."""
        try:
            if not held.still_ours():
                logger.warning(
                    "锁文件 %s 在持有期间被其他进程当作陈旧锁清除了(持有超过 %g 秒?)", held.path, self.stale_after
                )
                return
            fileio.unlink(held.path)
        except OSError as exc:
            # Never mask the caller's own outcome; a marker left behind is broken as stale later.
            logger.warning("无法删除锁文件 %s:%s", held.path, exc.strerror or exc)

    def _forget(self, path: str) -> None:
        with self._observed_lock:
            self._observed.pop(path, None)

    def _unchanged_for(self, path: str, seen: _Seen) -> float:
        """How long the marker has provably stayed exactly as `seen`, as observed here (seconds): the
        larger of its mtime's age on this host's clock (not if in the future) and how long this
        manager has seen the same inode, mtime and bytes without interruption."""
        key = (seen.dev, seen.ino, seen.mtime_ns, seen.content)
        mono = self.clock.monotonic()
        with self._observed_lock:
            previous = self._observed.get(path)
            if previous is None or previous[0] != key:
                self._observed[path] = (key, mono)
                first = mono
            else:
                first = previous[1]
        by_mtime = self.clock.time() - seen.mtime
        return max(mono - first, by_mtime if by_mtime >= 0 else 0.0)

    def _stale_reason(self, path: str, seen: _Seen) -> str | None:
        """Why the observed marker may be broken, or None while its holder may still be working."""
        unchanged = self._unchanged_for(path, seen)
        info = _parse_marker(seen.content) if seen.regular else None
        if info is None:
            # Empty or garbled for long: a holder that died between create and write (or garbage).
            if unchanged >= self.unreadable_grace:
                what = msg("内容为空或无法解析") if seen.regular else msg("不是普通文件(符号链接、目录等)")
                return msg(
                    "锁文件{what},且 {unreadable_grace} 秒未变",
                    what=what,
                    unreadable_grace=f"{self.unreadable_grace:g}",
                )
            return None
        pid, host, created, nonce = info.get("pid"), info.get("host"), info.get("createdAt"), info.get("nonce")
        if host == _HOST and isinstance(pid, int) and not isinstance(pid, bool) and pid > 0:
            if pid == os.getpid():
                owner = _live_nonces.get(nonce) if isinstance(nonce, str) else None
                if owner is None:
                    return msg("本进程先前遗留的锁")
                if owner == threading.get_ident():
                    raise LockRecursion(
                        msg("同一线程重复获取锁文件 {path}:这是程序错误,已拒绝以免自己等自己。", path=path),
                        lock_file=path,
                    )
                return None
            if not fileio.pid_alive(pid):
                return msg("持有进程 pid={pid} 已不存在", pid=pid)
            if (
                isinstance(created, (int, float))
                and not isinstance(created, bool)
                and math.isfinite(created)
                and _pid_started_after(pid, created)
            ):
                return msg("持有进程 pid={pid} 已不存在(该 pid 已被新进程重用)", pid=pid)
            return None  # alive on this host: waited for, whatever its age
        # Another host, or no usable pid: by the last refresh as observed here, never by the
        # createdAt of another clock (a future one would wedge the scope, a past one break it).
        if unchanged > self.stale_after:
            return msg(
                "锁文件已 {unchanged} 秒未刷新(超过 {stale_after} 秒)",
                unchanged=f"{unchanged:.0f}",
                stale_after=f"{self.stale_after:g}",
            )
        return None

    def _break(self, path: str, seen: _Seen, reason: str) -> bool:
        """Remove the stale marker `seen`, unless someone else got there first. True if it is gone.

        Under ``<lock>.break`` (O_EXCL), the marker is read again and removed only if it is the very
        one judged stale: else two waiters judging one dead marker could have the second remove the
        first one's new, live marker. A ``.break`` left by a dead breaker goes after `breaker_stale`.
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
                breaker_st = os.fstat(fd)
            finally:
                os.close(fd)
            current = _read_marker(path)
            if current is None:
                return True
            if current != seen:  # replaced or refreshed since it was judged stale
                return False
            try:
                _remove_entry(path, current)
            except FileNotFoundError:
                pass
            except OSError:
                return False
            logger.warning("已清除陈旧锁 %s:%s", path, reason)
            self._forget(path)
            return True
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                again = os.lstat(breaker)
                if (again.st_dev, again.st_ino) == (breaker_st.st_dev, breaker_st.st_ino):
                    fileio.unlink(breaker)

    def _clear_stale_breaker(self, breaker: str) -> None:
        """Remove a ``.break`` entry whose creator evidently died while breaking (never followed)."""
        seen = _read_marker(breaker)
        if seen is None or self._unchanged_for(breaker, seen) <= self.breaker_stale:
            return
        try:
            again = os.lstat(breaker)
            if (again.st_dev, again.st_ino, again.st_mtime_ns) == (seen.dev, seen.ino, seen.mtime_ns):
                _remove_entry(breaker, seen)
                self._forget(breaker)
                logger.warning("已清除遗留的破锁标记 %s", breaker)
        except OSError:
            pass

    def _timeout(self, path: str, seen: _Seen | None) -> LockTimeout:
        holder = ""
        info = _parse_marker(seen.content) if seen is not None else None
        if info is not None:
            holder = msg("(持有者 pid={pid},主机 {host})", pid=info.get("pid"), host=info.get("host"))
        elif seen is not None and not seen.regular:
            holder = msg("(它不是普通文件,若它一直在,请手动删除它)")
        return LockTimeout(
            msg(
                "等待锁超时({timeout} 秒):锁文件 {path} 被另一个进程持有{holder},它正在写入记忆库。请稍后重试;"
                "本机上仍在运行的持有者会一直被等待,其他主机上超过 {stale_after} 秒未刷新的锁会被自动清除。",
                timeout=f"{self.timeout:g}",
                path=path,
                holder=holder,
                stale_after=f"{self.stale_after:g}",
            ),
            lock_file=path,
        )

    def _deadline(self, path: str) -> CallRefused:
        return CallRefused(
            msg(
                "等待锁 {path} 时到了这次调用的截止时间:另一个写入者一直占着该作用域,本次调用没有写入任何内容。"
                "请稍后重试。",
                path=path,
            ),
            code="DEADLINE",
        )
