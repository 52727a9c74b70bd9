"""An output folder belongs to one run at a time: an exclusive flock on `<out>/.kpemu.lock`.

The lock is taken before anything in the folder is touched, and a run that cannot take it is
refused (exit 3) without changing anything. The lock file is removed on release (while still
held; a later holder checks that the file it locked is still the one in the folder), and so is a
folder the run created and left empty, so a refused run leaves the folder as it found it. The lock
is re-entrant within a process (collecting and analysing a run both hold it), and
the kernel drops it when the process dies, however it dies. On a filesystem without locks (the
guest's 9p share of the host's folder) the folder is used unlocked: the host side holds it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ParamSpec, TypeVar

from kpemu.errors import EnvironmentProblem, InputError, Problem

P = ParamSpec("P")
R = TypeVar("R")
LOCK_NAME = ".kpemu.lock"
_held: dict[Path, int] = {}  # folder -> how many holders in this process


@contextlib.contextmanager
def out_dir_lock(out: Path) -> Iterator[None]:
    """Hold `out` (created if missing) for this run; EnvironmentProblem if another run holds it."""
    key = out.resolve()
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError([Problem(str(out), "--out", f"cannot be the output folder: {e.strerror or e}; "
                                                     "give a directory (it is created if missing)")]) from None
    lock = out / LOCK_NAME
    try:
        fd = _acquire(lock)
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()
        raise
    if fd is None:  # this filesystem has no locks
        yield
        return
    _held[key] = 1
    try:
        yield
    finally:
        del _held[key]
        lock.unlink(missing_ok=True)  # while still held, so the folder is left as it was found
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()  # only if the run left nothing in it


def _acquire(lock: Path) -> int | None:
    """An open, exclusively locked descriptor of `lock`; None where locks are not supported."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return None
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise EnvironmentProblem(f"output folder {lock.parent} is in use by another kpemu run{_holder(lock)}; "
                                     "this run was refused and changed nothing",
                                     "wait for it to finish, or give this run another --out") from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a file its last holder removed between our open and our lock
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def _holder(lock: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        return f" (pid {int(lock.read_text().split()[0])})"
    return ""


def holding_out_dir(fn: Callable[P, R]) -> Callable[P, R]:
    """Run `fn(scenario, out, ...)` holding `out` (its second argument) for the whole call."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        out = kwargs["out"] if "out" in kwargs else args[1]
        with out_dir_lock(Path(out)):  # type: ignore[arg-type]
            return fn(*args, **kwargs)

    return wrapper
