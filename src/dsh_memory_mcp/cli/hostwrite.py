"""Replacing a host's config file as a compare-and-swap while the host itself may be rewriting it,
keeping its owner, group and mode (docs/design.md: Host configs). Where the OS has no atomic exchange
the old file is held open across a plain `os.replace`; the gaps no check can close without the host's
cooperation are measured in docs/performance.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from dsh_memory_mcp.cli.messages import t
from dsh_memory_mcp.store import fileio
from dsh_memory_mcp.store.fileio import exchange

#: Config files larger than this are not ours to rewrite (a mistake, or not a config file).
MAX_CONFIG_BYTES = 32 * 1024 * 1024
#: How many times an edit starts over because the host changed the file under it.
MAX_ATTEMPTS = 60
#: A file that does not parse is re-read this long before it counts as broken (a host mid-write).
SETTLE_SECONDS = 0.3


@dataclass(frozen=True)
class Snapshot:
    """A config file as read at one moment: its bytes and what identifies that version."""

    data: bytes
    dev: int
    ino: int
    size: int
    mtime_ns: int
    uid: int
    gid: int
    mode: int

    def same_version(self, other: Snapshot | None) -> bool:
        return (
            other is not None
            and (self.dev, self.ino, self.size, self.mtime_ns) == (other.dev, other.ino, other.size, other.mtime_ns)
            and self.data == other.data
        )


class ForeignOwner(ValueError):
    """The file belongs to another user and we could not give the new file that owner."""


class Busy(ValueError):
    """The file changed under every attempt: the host keeps rewriting it."""


@dataclass(frozen=True)
class Replaced:
    """What `replace_config` did."""

    #: Whether the file now holds our bytes (False: nothing needed changing).
    changed: bool
    backup: str | None
    #: How many times the edit started over because the host changed the file.
    restarts: int
    #: The file's bytes right after our swap, read again: not ours → the host rewrote it at once.
    after: bytes | None


def _snapshot_fd(fd: int) -> Snapshot:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
        raise ValueError(t("不是普通文件"))
    chunks: list[bytes] = []
    total = 0
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_CONFIG_BYTES:
            raise ValueError(t("超过 {mb} MB,不像配置文件", mb=MAX_CONFIG_BYTES // (1024 * 1024)))
    after = os.fstat(fd)
    # Size and mtime from the same descriptor, after the read: a write during it shows up as a
    # version the pre-swap check will not match.
    return Snapshot(
        b"".join(chunks), st.st_dev, st.st_ino, after.st_size, after.st_mtime_ns, st.st_uid, st.st_gid, st.st_mode
    )


def read_snapshot(path: str) -> Snapshot | None:
    """The file's bytes and identity, None when it does not exist; ValueError if it is not a
    regular file or too large."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return None
    try:
        return _snapshot_fd(fd)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------------------------
# Owners
# --------------------------------------------------------------------------------------------


def _euid() -> int | None:
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else None


def owner_problem(old: Snapshot | None) -> str | None:
    """Why we must not replace this file (another user's, and we are not root), or None."""
    euid = _euid()
    if old is None or euid is None or old.uid == euid or euid == 0:
        return None
    return t("属于另一个用户(uid {uid}),当前用户(uid {euid})改写后它就不再属于原主人", uid=old.uid, euid=euid)


def _creator(path: str) -> tuple[int, int] | None:
    """As root, the owner a new file at `path` should get: its nearest existing directory's, when
    that is another user's (``sudo -E setup`` in a user's home). None otherwise."""
    if _euid() != 0:
        return None
    directory = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(directory) and os.path.dirname(directory) != directory:
        directory = os.path.dirname(directory)
    try:
        st = os.stat(directory)
    except OSError:
        return None
    return (st.st_uid, st.st_gid) if st.st_uid != 0 else None


def _give(path_or_fd: int | str, ids: tuple[int, int] | None) -> None:
    if ids is None:
        return
    if isinstance(path_or_fd, int):
        os.fchown(path_or_fd, *ids)
    else:
        os.chown(path_or_fd, *ids, follow_symlinks=False)


def _dress(fd: int, old: Snapshot | None, *, secret: bool, creator: tuple[int, int] | None) -> None:
    """Give the tmp the old file's mode, owner and group (a token-bearing file: 0600)."""
    if old is None:
        _give(fd, creator)
        return
    os.fchmod(fd, 0o600 if secret else stat.S_IMODE(old.mode))
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) != (old.uid, old.gid):
        try:
            os.fchown(fd, old.uid if st.st_uid != old.uid else -1, old.gid)
        except PermissionError as exc:
            raise ForeignOwner(t("无法保持它的属组(gid {gid}),没有改动", gid=old.gid)) from exc


# --------------------------------------------------------------------------------------------
# The edit
# --------------------------------------------------------------------------------------------


def _changed(
    path: str, seen: Snapshot | None, seconds: float, sleep: Callable[[float], None]
) -> tuple[bool, Snapshot | None]:
    """(True, the version `path` became) if it changes from `seen` within `seconds`, else (False, `seen`):
    a host mid-write finishes within that time, a really broken or empty file stays as it is."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sleep(0.01)
        now = read_snapshot(path)
        if seen is None or not seen.same_version(now):
            return True, now
    return False, seen


def replace_config(
    path: str,
    make: Callable[[bytes | None], bytes | None],
    *,
    secret: bool,
    backup_name: Callable[[str], str],
    sleep: Callable[[float], None] = time.sleep,
) -> Replaced:
    """Put ``make(current bytes)`` in place of `path` unless the host changes the file meanwhile.

    `make` gets the bytes (None: no file) and returns the new bytes, or None when nothing needs
    changing; it raises ValueError for a file it cannot edit. It is called again on the newest
    bytes whenever the file changed under us. `backup_name(target)` names the backup of the
    original bytes (written 0600, with the original's owner, before the first swap; removed again
    if the edit ends without a change).

    :raises ForeignOwner: another user's file and we are not root; a group we cannot keep.
    :raises Busy: the file changed under every one of `MAX_ATTEMPTS` attempts.
    :raises ValueError: `make` refused, or the file is not a regular file / too large.
    :raises OSError: the file or the backup could not be written (the file is then untouched).
    """
    target = fileio.write_target(path)
    start = read_snapshot(target)
    expected = start
    base = start.data if start is not None else None
    backup: str | None = None
    creator = _creator(target) if start is None else None
    try:
        for attempt in range(MAX_ATTEMPTS):
            if attempt > 20:  # the host keeps winning: leave it a moment now and then
                sleep(0.005)
            problem = owner_problem(expected)
            if problem is not None:
                raise ForeignOwner(problem)
            if expected is not None and not expected.data and base == expected.data:
                # An existing empty file may be a host between its truncate and its write (an
                # in-place writer): planning from "empty" would replace its whole config.
                changed, expected = _changed(target, expected, 0.05, sleep)
                if changed:
                    base = expected.data if expected is not None else None
                    continue
            try:
                new = make(base)
            except ValueError:
                changed, expected = _changed(target, read_snapshot(target), SETTLE_SECONDS, sleep)
                if not changed:
                    raise
                base = expected.data if expected is not None else None
                continue
            if new is None and expected is not None and base is not None and base != expected.data:
                # The host's newest bytes, caught in a file we swapped out, already hold our
                # change but are not at the path: put them back there.
                new = base
            if new is None:
                _drop(backup)
                return Replaced(False, None, attempt, expected.data if expected is not None else None)
            if backup is None and start is not None and expected is not None:
                backup = _write_backup(target, start, backup_name)
            fileio.private_dirs(os.path.dirname(target) or ".", lambda made: _give(made, creator))
            fd, tmp = fileio.new_tmp(target)
            try:
                fileio.write_all(fd, new)
                _dress(fd, expected, secret=secret, creator=creator)
                # The fsync comes after the swap where the swap can be inspected (an exchange):
                # before it, it would widen the time in which the host's next write makes this
                # attempt start over (an fsync costs tens of ms on a busy disk). Until it is done
                # the replaced file stays at the tmp's name and the backup holds the original.
                moved = _swap(target, tmp, expected, fd, new)
                if moved is None:
                    os.fsync(fd)
            finally:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            if moved is not None:
                expected = moved.now
                base = moved.base if moved.base is not None else (expected.data if expected is not None else None)
                continue
            fileio.fsync_dir(os.path.dirname(target) or ".")
            after = read_snapshot(target)
            return Replaced(True, backup, attempt, after.data if after is not None else None)
    except BaseException:
        _drop(backup)
        raise
    _drop(backup)
    raise Busy(t("在 {attempts} 次尝试里每次都被别的程序改写了(多半是宿主正在运行),没有改动", attempts=MAX_ATTEMPTS))


def _drop(backup: str | None) -> None:
    if backup is not None:
        with contextlib.suppress(OSError):
            os.unlink(backup)


@dataclass(frozen=True)
class _Moved:
    """The file was not the version we planned from: `now` is the version there now; `base` the
    bytes to plan from when they are not `now`'s (a host's edit that went into the replaced file)."""

    now: Snapshot | None
    base: bytes | None = None


def _swap(target: str, tmp: str, expected: Snapshot | None, fd: int, written: bytes) -> _Moved | None:
    """Check `target` is still `expected`, then swap our `tmp` (open as `fd`, holding `written`) in; None when done,
    else the newest version to plan from again (our tmp was not put in place, or swapped back out).
    Where the swap cannot be inspected (a new file, no exchange) `fd` is fsynced before it."""
    now = read_snapshot(target)
    if expected is None:
        os.fsync(fd)
        now = read_snapshot(target)
        if now is not None:
            return _Moved(now)
        try:
            os.link(tmp, target)  # only if nobody created it meanwhile
        except FileExistsError:
            return _Moved(read_snapshot(target))
        except OSError:
            # No hard links on this filesystem: O_EXCL create of the final name, then copy in.
            return None if _create_exclusive(tmp, target) else _Moved(read_snapshot(target))
        return None
    if not expected.same_version(now):
        return _Moved(now)
    if exchange(tmp, target):
        out = read_snapshot(tmp)  # the file we just replaced
        if not expected.same_version(out):
            # A writer got in between the check and the swap: its version goes back at once.
            if not exchange(tmp, target):  # pragma: no cover - the first exchange worked
                raise OSError(errno.EIO, "swap back failed", target)
            # An in-place writer may also have opened the path while our file was there and
            # written into it (or be about to): that file is at the tmp's name again, to be
            # unlinked. What such a writer wrote is the host's newest edit: plan again from it.
            mine = _snapshot_fd(fd)
            if mine.data != written:
                mine = _settled(fd, mine)
                if mine.data:
                    return _Moved(read_snapshot(target), base=mine.data)
            return _Moved(read_snapshot(target))
        return None
    os.fsync(fd)
    return _checked_replace(target, tmp, expected)


def _checked_replace(target: str, tmp: str, expected: Snapshot) -> _Moved | None:
    """No exchange here: hold the old file open across `os.replace` and look at it after. An
    in-place writer (``O_TRUNC``) that opened it before our rename shows up there; its bytes then
    become the newest version (our file is already in place, so the next attempt replaces ours)."""
    try:
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return _Moved(None)
    try:
        held = _snapshot_fd(fd)
        if not expected.same_version(held):
            return _Moved(held)
        fileio.replace(tmp, target)
        old = _snapshot_fd(fd)
        if not expected.same_version(old):
            old = _settled(fd, old)
    finally:
        os.close(fd)
    if expected.same_version(old):
        return None
    mine = read_snapshot(target)
    # The host's newest bytes went into the old file: plan again from them, over ours.
    return _Moved(mine, base=old.data)


def _settled(fd: int, seen: Snapshot) -> Snapshot:
    """The held file once a writer caught in it has finished (unchanged for 20 ms, at most
    `SETTLE_SECONDS`): its bytes are the host's newest edit."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.02)
        now = _snapshot_fd(fd)
        if now.same_version(seen):
            return now
        seen = now
    return seen


def _create_exclusive(tmp: str, target: str) -> bool:
    try:
        fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_BINARY", 0), 0o600)
    except FileExistsError:
        return False
    try:
        with open(tmp, "rb") as source:
            fileio.write_all(fd, source.read())
        os.fsync(fd)
        st = os.stat(tmp)
        with contextlib.suppress(OSError):
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
            os.fchown(fd, st.st_uid, st.st_gid)
    finally:
        os.close(fd)
    return True


def _write_backup(target: str, original: Snapshot, backup_name: Callable[[str], str]) -> str:
    """The original bytes, 0600, owned like the original."""
    path = backup_name(target)
    fd, tmp = fileio.new_tmp(path)
    euid = _euid()
    if euid is not None and original.uid != euid:
        try:
            os.fchown(fd, original.uid, original.gid)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    fileio.commit(fd, tmp, path, original.data)
    return path
