"""Writing result files safely: atomically (temporary file in the same folder, fsync, rename)
with the permissions the user's umask gives a new file, and a check to call before long work
so an unwritable output fails in a second, not after an hour of measuring.

A reader never sees half a file: it sees the old content or the new one. A failed write
leaves the old file as it was and removes the temporary file.
"""
from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator

from .errors import AbductuneError

__all__ = ["atomic_write_text", "atomic_write_bytes", "atomic_writer", "check_writable",
           "current_umask"]


def current_umask() -> int:
    """The process umask. Read from /proc when possible: os.umask() can only be read by
    setting it, which races with other threads creating files."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _why(e: OSError) -> str:
    if e.errno in (errno.EROFS,):
        return "the file system is read-only"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    if e.errno == errno.ENOENT:
        return "the folder does not exist or does not accept new files"
    return e.strerror or type(e).__name__


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def check_writable(path: str | os.PathLike[str]) -> Path:
    """Raise AbductuneError naming `path` unless a file can be written there (its folder
    exists, is a folder and accepts a new file; `path` itself is not a folder). Call it before
    spending time on the result. Tries a real temporary file, because permission bits lie for
    root and for special file systems such as /proc."""
    p = Path(os.fspath(path))
    folder = _folder(p)
    if p.is_dir():
        raise AbductuneError(f"cannot write {p}: it is a folder; give a file name")
    if not folder.exists():
        raise AbductuneError(f"cannot write {p}: folder {folder} does not exist; create it first")
    if not folder.is_dir():
        raise AbductuneError(f"cannot write {p}: {folder} is not a folder")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".check", dir=folder)
    except OSError as e:
        raise AbductuneError(f"cannot write {p}: {_why(e)}; choose a writable location") from None
    os.close(fd)
    os.unlink(tmp)
    return p


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, binary: bool = False,
                  encoding: str = "utf-8") -> Iterator[IO]:
    """A file object writing to a temporary file beside `path`; on a clean exit it is
    flushed, fsync'ed, given the umask's permissions and renamed over `path`. On an
    exception the temporary file is removed and `path` keeps its old content."""
    p = Path(os.fspath(path))
    folder = _folder(p)
    if not folder.is_dir():
        raise AbductuneError(f"cannot write {p}: folder {folder} does not exist; create it first")
    if p.is_dir():
        raise AbductuneError(f"cannot write {p}: it is a folder; give a file name")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise AbductuneError(f"cannot write {p}: {_why(e)}; choose a writable location") from None
    try:
        with (os.fdopen(fd, "wb") if binary else
              os.fdopen(fd, "w", encoding=encoding, newline="")) as f:
            # mkstemp makes 0600 files; a result file should look like any file the user creates
            os.fchmod(f.fileno(), 0o666 & ~current_umask())
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, IsADirectoryError):
            raise AbductuneError(f"cannot write {p}: it is a folder; give a file name") from None
        if isinstance(e, OSError) and not isinstance(e, AbductuneError):
            raise AbductuneError(f"cannot write {p}: {_why(e)}") from None
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (best effort: not every system can open a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace `path` with `data` atomically (see `atomic_writer`)."""
    with atomic_writer(path, binary=True) as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Replace `path` with `text` atomically (see `atomic_writer`)."""
    with atomic_writer(path, encoding=encoding) as f:
        f.write(text)
