"""Crash-safe file replacement (`new_tmp`, `commit`: docs/design.md, Concurrency) and what every
writer needs: `guard`, `open_regular`, `leftover_tmps`. Standard library only; callers translate `OSError`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import logging
import os
import re
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from dsh_memory_mcp.texts import msg

_O_BINARY: int = getattr(os, "O_BINARY", 0)
_O_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
_O_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC: int = getattr(os, "O_CLOEXEC", 0)

logger = logging.getLogger("dsh_memory_mcp.store.fileio")

#: Eight hex digits naming this host in tmp names (a host name may hold any character).
HOST_TAG = hashlib.sha1(socket.gethostname().encode("utf-8", "surrogateescape")).hexdigest()[:8]

#: Our tmp names: ``.<name>.<pid>-<host8>.<mkstemp random>.tmp``; and the older ``.<name>.<random>.tmp``.
_TMP = re.compile(r"^\.(?P<base>.+)\.(?P<pid>[0-9]+)-(?P<host>[0-9a-f]{8})\.[a-z0-9_]{8}\.tmp$")
_LEGACY_TMP = re.compile(r"^\.(?P<base>.+)\.[a-z0-9_]{8}\.tmp$")
#: A tmp whose writer we cannot check (another host, the older name) is a leftover after this long;
#: a live writer fills and renames its tmp within seconds.
LEFTOVER_AGE = 3600.0
#: Seconds at most a replace waits for other processes to close the file it took out of place
#: before its last look at it (`_last_look`; without /proc: `FOREIGN_GRACE`, after an appender).
FOREIGN_WAIT = 1.0
FOREIGN_GRACE = 0.05


class Changed(OSError):
    """The file a rewrite was made from was replaced or edited (not only appended to) before the
    rename: a writer that ignores the lock. Nothing was written; redo the change on the new content."""


@dataclass(frozen=True)
class Read:
    """What a rewrite of a file was made from, checked right before its rename (`commit`).

    `dev`/`ino`/`size`: the version read (``ino`` 0: the file did not exist). `same(data)` says
    whether `data` — the file's first `size` bytes now — is still the content read.
    """

    dev: int
    ino: int
    size: int
    same: Callable[[bytes], bool]


class NotRegularFile(OSError):
    """A path under the store that is a FIFO, a device, a directory or a socket (or links to one)."""


def write_all(fd: int, data: bytes | Iterable[bytes]) -> None:
    """Write every byte (`os.write` may write less than asked), from one buffer or many."""
    for chunk in (data,) if isinstance(data, bytes) else data:
        view = memoryview(chunk)
        while view:
            written = os.write(fd, view)
            view = view[written:]


def write_all_at(fd: int, data: bytes, offset: int) -> None:
    """Write every byte of `data` at `offset` (`os.pwrite`; the descriptor must not be ``O_APPEND``)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


class Durability:
    """Descriptors written under a lock whose fsync is left for after the lock is released (an
    append is visible once written; writers need not queue behind each other's fsyncs). `sync`
    flushes them in the order added and closes them; the caller acknowledges only after it.
    """

    def __init__(self) -> None:
        self._fds: list[int] = []

    def add(self, fd: int) -> None:
        self._fds.append(fd)

    def sync(self) -> None:
        """fsync every descriptor, then close them all. :raises OSError: the first failure."""
        fds, self._fds = self._fds, []
        error: OSError | None = None
        for fd in fds:
            try:
                if error is None:
                    os.fsync(fd)
            except OSError as exc:
                error = exc
            finally:
                with contextlib.suppress(OSError):
                    os.close(fd)
        if error is not None:
            raise error

    def settle(self) -> None:
        """On a failure path: flush what was written anyway (best effort, it is visible), close."""
        with contextlib.suppress(OSError):
            self.sync()


def fsync_dir(directory: str) -> None:
    """Make a rename durable (POSIX); best effort, some filesystems refuse."""
    if sys.platform == "win32":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _shared_retry(action: Callable[[], None]) -> None:
    """Run `action`, retried briefly on Windows, where an open reader blocks a rename or an unlink."""
    for attempt in range(40):
        try:
            action()
            return
        except PermissionError:
            if sys.platform != "win32" or attempt == 39:
                raise
            time.sleep(0.025)


def replace(src: str, dst: str) -> None:
    _shared_retry(functools.partial(os.replace, src, dst))


def unlink(path: str) -> None:
    """`os.unlink` (nothing there is fine), retried like `replace`."""
    with contextlib.suppress(FileNotFoundError):
        _shared_retry(functools.partial(os.unlink, path))


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return msg("命名管道(FIFO)")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return msg("设备文件")
    if stat.S_ISDIR(mode):
        return msg("目录")
    if stat.S_ISSOCK(mode):
        return msg("套接字")
    if stat.S_ISLNK(mode):
        return msg("符号链接")
    return msg("特殊文件")


def _not_regular(path: str, mode: int) -> NotRegularFile:
    return NotRegularFile(errno.EINVAL, msg("不是普通文件(是{kind})", kind=_kind(mode)), path)


def open_regular(
    path: str, *, follow: bool = True, append: bool = False, update: bool = False, create: bool = False
) -> int:
    """A read-only (`append`: ``O_RDWR | O_APPEND``; `update`: ``O_RDWR``) descriptor of `path`, an
    existing regular file (after symlinks if `follow`), or with `create` a new one (``O_EXCL``,
    0o600). ``O_NONBLOCK`` then ``fstat``: a FIFO, device or directory is an error, never a hang.

    :raises FileNotFoundError: nothing there.
    :raises NotRegularFile: there is something, but not a regular file.
    """
    access = os.O_RDWR | os.O_APPEND if append else os.O_RDWR if update else os.O_RDONLY
    flags = access | _O_BINARY | _O_NONBLOCK | _O_CLOEXEC | (0 if follow else _O_NOFOLLOW)
    try:
        fd = os.open(path, flags | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise _not_regular(path, stat.S_IFLNK) from exc
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a socket, or a directory (opened for writing)
            try:
                mode = os.stat(path, follow_symlinks=follow).st_mode
            except OSError:
                raise exc from None
            raise _not_regular(path, mode) from exc
        raise
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(path, mode)
    return fd


def write_target(path: str) -> str:
    """The file a replace of `path` must write: `path`, or its final target when it is a symlink
    (written through, the link kept). The target must be a regular file or not exist yet.

    :raises NotRegularFile: `path` or its target is something else than a regular file.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    if stat.S_ISREG(st.st_mode):
        return path
    if not stat.S_ISLNK(st.st_mode):
        raise _not_regular(path, st.st_mode)
    target = os.path.realpath(path)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    return target


def private_dirs(directory: str, created: Callable[[str], None] | None = None) -> None:
    """Create `directory` and its missing parents 0o700 whatever the umask (`os.makedirs` gives
    the parents 0o777 minus the umask: 0o777 under umask 000), calling `created` on each one made.
    Existing ones are left as they are.
    """
    missing = []
    current = os.path.abspath(directory)
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for path in reversed(missing):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        os.chmod(path, 0o700)  # the umask may have taken bits away; it cannot have added any
        if created is not None:
            created(path)


def new_tmp(path: str) -> tuple[int, str]:
    """A new, uniquely named 0o600 tmp file next to `path` (its directory created 0o700), named
    with our pid and host tag so a dead writer's leftover is recognisable (`leftover_tmps`)."""
    directory = os.path.dirname(path) or "."
    private_dirs(directory)
    prefix = f".{os.path.basename(path)}.{os.getpid()}-{HOST_TAG}."
    return tempfile.mkstemp(dir=directory, prefix=prefix, suffix=".tmp")


# -- checks before a commit ------------------------------------------------------------------

_local = threading.local()


@contextlib.contextmanager
def guard(check: Callable[[], None]) -> Iterator[None]:
    """Run `check` right before every `commit` of this thread inside the ``with`` block; a check
    raises to stop the commit (the tmp is removed, the target untouched)."""
    checks: list[Callable[[], None]] | None = getattr(_local, "checks", None)
    if checks is None:
        checks = _local.checks = []
    checks.append(check)
    try:
        yield
    finally:
        checks.remove(check)


def check_guards() -> None:
    """Run this thread's `guard` checks now (for writers that append instead of `commit`)."""
    for check in tuple(getattr(_local, "checks", ())):
        check()


def commit(
    fd: int,
    tmp: str,
    path: str,
    data: bytes | Iterable[bytes],
    *,
    keep_mode: bool = False,
    read: Read | None = None,
) -> os.stat_result:
    """Write `data` to the tmp from `new_tmp`, fsync it and put it in place of `path`; the tmp's
    stat taken *before* the rename (it describes `data` alone). `keep_mode`: keep the replaced
    file's mode (else 0o600). This thread's `guard` checks run right before the rename. On failure
    the tmp is removed and `path` untouched; `fd` is always closed.

    `read`: what `data` was made from; the file must still be that version (else `Changed`). Bytes
    another program appended meanwhile are carried over to the end of the new file (a WARNING).
    """
    old: int | None = None
    done = 0
    seen = b""
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
            st = os.fstat(fd)
            if keep_mode:
                with contextlib.suppress(OSError):
                    os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
            check_guards()
            if read is not None:
                old, seen = _carry(path, fd, read)
                # The whole-file comparison takes a while: right before the rename, one stat says
                # the file is still the inode compared (new appends carried too).
                seen = _settle(path, fd, old, seen)
                done = len(seen)
                if done > read.size:
                    os.fsync(fd)  # the carried bytes (rare: only beside an unlocked appender)
        finally:
            os.close(fd)
        if old is None or not exchange(tmp, path):
            replace(tmp, path)
            old_seen = None
        else:
            old_seen = seen
    except BaseException:
        if old is not None:
            os.close(old)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if old_seen is not None:
        _swapped_out(tmp, path, old, old_seen)
    if old is not None:
        try:
            late = _last_look(old, done, appender=read is not None and done > read.size)
        finally:
            os.close(old)
        if late:
            with contextlib.suppress(OSError):
                _append_durably(path, late)
            _warn_foreign(path, len(late))
    fsync_dir(os.path.dirname(path) or ".")
    return st


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 0x2  # macOS sys/stdio.h


@functools.cache
def _libc() -> Any:
    """The C library (ctypes.CDLL) on Linux and macOS, else None."""
    if sys.platform not in ("linux", "darwin"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no C library to load
        return None


def exchange(a: str, b: str) -> bool:
    """Swap two existing paths in one step (``renameat2(RENAME_EXCHANGE)``, macOS ``renamex_np``):
    `a` then names what `b` held at that very moment. False where the system or the filesystem
    cannot (then nothing happened); OSError for any other failure. The store's rewrites and the
    host config writes (`cli/hostwrite.py`) both swap with it."""
    libc = _libc()
    if libc is None:
        return False
    import ctypes

    name_a, name_b = os.fsencode(a), os.fsencode(b)
    if sys.platform == "linux":
        fn = getattr(libc, "renameat2", None)
        if fn is None:  # glibc < 2.28
            return False
        result = fn(_AT_FDCWD, name_a, _AT_FDCWD, name_b, ctypes.c_uint(_RENAME_EXCHANGE))
    else:
        fn = getattr(libc, "renamex_np", None)
        if fn is None:  # pragma: no cover - macOS < 10.12
            return False
        result = fn(name_a, name_b, ctypes.c_uint(_RENAME_SWAP))
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), b)


def _swapped_out(tmp: str, path: str, old: int | None, seen: bytes) -> None:
    """After `exchange`: `tmp` names the file our rename took out of place. Normally the one we
    compared (`old`); when another program renamed its own version in after our last look, the
    lines it has that the compared content lacked are appended to ours. Then `tmp` goes."""
    try:
        fd = open_regular(tmp, follow=False)
    except OSError:
        return
    try:
        got = os.fstat(fd)
        mine = os.fstat(old) if old is not None else None
        if mine is not None and (got.st_dev, got.st_ino) != (mine.st_dev, mine.st_ino):
            known = set(seen.split(b"\n"))
            theirs = b"".join(raw + b"\n" for raw in read_from(fd).split(b"\n") if raw.strip() and raw not in known)
            if theirs:
                _append_durably(path, theirs)
                _warn_foreign(path, len(theirs))
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _last_look(fd: int, done: int, *, appender: bool) -> bytes:
    """What was appended to the swapped-out file `fd` past `done`. An unlocked appender that opened
    the path before the swap may still write there (descheduled between its open and its write),
    so on Linux it is read once no other process has the file open (/proc; one scan when none has,
    at most `FOREIGN_WAIT` s). Without /proc: again after a `FOREIGN_GRACE` pause when an
    `appender` was seen (bytes carried over) or bytes arrived."""
    if os.path.isdir("/proc/self/fd"):
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        deadline = time.monotonic() + FOREIGN_WAIT
        while _open_elsewhere(key) and time.monotonic() < deadline:
            time.sleep(0.005)
        return read_from(fd, done)
    late = read_from(fd, done)
    if late or appender:
        time.sleep(FOREIGN_GRACE)
        late += read_from(fd, done + len(late))
    return late


def _open_elsewhere(key: tuple[int, int]) -> bool:
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone, or not ours to look at
        for name in fds:
            try:
                st = os.stat(f"/proc/{pid}/fd/{name}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == key:
                return True
    return False


def _append_durably(path: str, data: bytes) -> None:
    out = os.open(path, os.O_WRONLY | os.O_APPEND | _O_BINARY | _O_CLOEXEC)
    try:
        write_all(out, data)
        os.fsync(out)
    finally:
        os.close(out)


def read_from(fd: int, start: int = 0) -> bytes:
    """The bytes of `fd` from `start` to its end (moves the descriptor's offset; `os.pread` is POSIX only)."""
    os.lseek(fd, start, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _settle(path: str, tmp_fd: int, old: int | None, seen: bytes) -> bytes:
    """The last look before the rename: `path` is still the inode `old` (or still absent), the
    bytes appended to it past `seen` (its content so far) carried to the tmp too; returns all of it.

    :raises Changed: it was replaced (or created) meanwhile.
    """
    while True:
        try:
            now = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            if old is None:
                return seen
            raise Changed(errno.ESTALE, msg("写入期间文件被删除或替换"), path) from None
        mine = os.fstat(old) if old is not None else None
        if old is None or mine is None or (now.st_dev, now.st_ino) != (mine.st_dev, mine.st_ino):
            raise Changed(errno.ESTALE, msg("写入期间文件被替换"), path)
        if now.st_size <= len(seen):
            return seen
        extra = read_from(old, len(seen))  # appended while we compared: carried as well
        write_all(tmp_fd, extra)
        _warn_foreign(path, len(extra))
        seen += extra


def _carry(path: str, tmp_fd: int, read: Read) -> tuple[int | None, bytes]:
    """`commit`'s pre-rename check: `path` is still the version `read` described, perhaps with
    lines appended, which go to the end of the tmp (`tmp_fd`). Returns a descriptor of the old
    file (None: there was none) and its content the tmp now covers.

    :raises Changed: the file was replaced, shrank, or its first `read.size` bytes changed.
    """
    try:
        old = open_regular(path, follow=False)
    except FileNotFoundError:
        if read.ino:
            raise Changed(errno.ESTALE, msg("写入期间文件被删除或替换"), path) from None
        return None, b""
    try:
        st = os.fstat(old)
        if (read.ino and (st.st_dev, st.st_ino) != (read.dev, read.ino)) or st.st_size < read.size:
            raise Changed(errno.ESTALE, msg("写入期间文件被替换"), path)
        data = read_from(old)
        if not read.same(data[: read.size]):
            raise Changed(errno.ESTALE, msg("写入期间文件被改动"), path)
        extra = data[read.size :]
        if extra:
            write_all(tmp_fd, extra)
            _warn_foreign(path, len(extra))
    except BaseException:
        os.close(old)
        raise
    return old, data


def _warn_foreign(path: str, size: int) -> None:
    logger.warning("重写 %s 期间,另一个不加锁的写入者在其末尾追加了 %d 字节:已原样保留在新文件末尾(未丢失)", path, size)


# -- processes and leftovers -----------------------------------------------------------------

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import ctypes

    def pid_alive(pid: int) -> bool:
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

    def pid_alive(pid: int) -> bool:
        """Whether a process exists on this host (a zombie counts as alive until reaped)."""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # EPERM: it exists, it is just not ours
            return True
        return True


def proc_stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after ``pid (comm)`` (a comm may hold spaces): [0] is the
    state, [19] the start time in clock ticks after boot. None without ``/proc`` or such a process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read(4096).rpartition(b")")[2].split()
    except OSError:
        return None


def leftover_tmps(directory: str) -> list[str]:
    """Our tmp files in `directory` (`new_tmp`'s names, regular files; DSH's ``<file>.tmp`` never)
    that no live writer can own: of this host with a dead pid, else older than `LEFTOVER_AGE`."""
    found: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return found
    wall = time.time()
    me = os.getpid()
    for name in names:
        if not name.endswith(".tmp") or not name.startswith("."):
            continue
        match = _TMP.match(name)
        if match is None and not _LEGACY_TMP.match(name):
            continue
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue
        if match is not None and match["host"] == HOST_TAG:
            pid = int(match["pid"])
            if pid != me and not pid_alive(pid):
                found.append(path)
                continue
        # Nothing to ask (another host, the older name) or a live pid that may have been reused:
        # by age. Even a live writer stalled that long only gets a failed rename, never a loss.
        if wall - st.st_mtime > LEFTOVER_AGE:
            found.append(path)
    return sorted(found)
