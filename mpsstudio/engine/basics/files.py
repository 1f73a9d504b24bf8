"""Writing files so that a crash or a full disk never leaves half a file: write beside, then rename."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import UserError
from .formatting import printable


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_umask()  # what open() would give a new file here (mkstemp gives 0600)
# A file name's limit on APFS, ext4 and most others is 255 bytes; atomic_path's temporary name adds 15.
MAX_WRITTEN_NAME_BYTES = 255 - 15


def check_name_length(name: str, what: str, spare_bytes: int = 0) -> None:
    """UserError when `name` (plus `spare_bytes` a caller will add to it) is too long to be written atomically."""
    if len(name.encode("utf-8", "surrogatepass")) + spare_bytes > MAX_WRITTEN_NAME_BYTES:
        raise UserError(f"The file name {printable(name[:40])}... is too long; choose a shorter one for {what}.")


@contextmanager
def atomic_path(dest: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary path beside `dest` (same file system); when the block ends without an error
    the temporary file replaces `dest` in one step, otherwise it is removed and `dest` is left as it was."""
    dest = Path(dest)
    try:
        mode = os.stat(dest).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):  # a folder, a device, a pipe: never replaced by a file
        raise OSError(errno.EISDIR if stat.S_ISDIR(mode) else errno.EPERM,
                      "it is a folder" if stat.S_ISDIR(mode) else "it is not a regular file", str(dest))
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    os.close(fd)
    part = Path(name)
    try:
        yield part
        os.chmod(part, stat.S_IMODE(mode) if mode is not None else _NEW_FILE_MODE)
        os.replace(part, dest)
    finally:
        part.unlink(missing_ok=True)


def write_atomic(dest: str | Path, data: str | bytes) -> None:
    """Write text (UTF-8, newlines as given) or bytes to `dest` through `atomic_path`."""
    with atomic_path(dest) as part:
        if isinstance(data, bytes):
            part.write_bytes(data)
        else:
            # a lone surrogate (an undecodable byte of a file name) is written as "?", never a failed export
            part.write_text(data, encoding="utf-8", errors="replace", newline="")


def check_writable_file(path: str, what: str) -> Path:
    """Where `what` (e.g. "--json") may write a file: a file name (not a folder, not a device) in an existing
    folder this user can write; the path made absolute. UserError (one sentence) otherwise, before any work."""
    if not path.strip():
        raise UserError(f"{what} needs a file name; name the file to write.")
    try:
        target = Path(path).expanduser().resolve()
    except (RuntimeError, OSError, ValueError):
        raise UserError(f"{printable(path)} is not a path this user can reach (unknown ~user, a loop of links, "
                        f"or a NUL); choose another path for {what}.") from None
    try:
        _check_target(path, target, what)
    except OSError as exc:  # a name too long for the file system, a path through a file
        raise UserError(f"{printable(target)} cannot be written ({exc.strerror or type(exc).__name__}); choose "
                        f"another path for {what}.") from None
    return target


def _check_target(path: str, target: Path, what: str) -> None:
    check_name_length(target.name, what)
    if path.endswith(("/", os.sep)) or target.is_dir():
        raise UserError(f"{printable(target)} is a folder; give {what} a file name inside it.")
    folder = target.parent
    if not folder.is_dir():
        raise UserError(f"The folder {printable(folder)} does not exist; choose another path for {what}.")
    if target.exists() and not target.is_file():
        raise UserError(f"{printable(target)} is not a regular file (a device or a pipe); choose another path "
                        f"for {what}.")
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise UserError(f"{printable(target)} cannot be written (no permission); choose another path for {what}.")


def staged_path(dest: str | Path) -> Path:
    """Where a writer in another process puts a finished `dest` for its parent to land (`land`): beside it, named
    as clear_partials removes what was never landed."""
    dest = Path(dest)
    return dest.with_name(f".{dest.name}.{os.getpid()}-{os.urandom(4).hex()}.part.staged{dest.suffix}")


def land(staged: str | Path, dest: str | Path) -> None:
    """Put a finished file or package folder `staged` (staged_path) in place of `dest` in one step (an older
    package folder is moved aside first and removed after); what was at `dest` before stays if this fails."""
    import shutil

    staged, dest = Path(staged), Path(dest)
    if staged.parent != dest.parent or ".part.staged" not in staged.name:
        raise UserError(f"{printable(staged.name)} is not a staged export of {printable(dest.name)}.")
    if not staged.is_dir():
        os.replace(staged, dest)
        return
    old = None
    if dest.exists():
        old = dest.with_name(f".{dest.name}.{os.getpid()}.part.old")
        os.replace(dest, old)
    try:
        os.replace(staged, dest)
    except OSError:
        if old is not None:
            os.replace(old, dest)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def clear_partials(dest: str | Path) -> int:
    """Remove what a writer stopped outright (a killed process) left beside `dest`: `.<name>.*.part` files of
    atomic_path and `.<name>.*.part.*` folders (a package written whole); only this user's, never through a link.
    Returns how many went."""
    import shutil

    dest = Path(dest)
    removed = 0
    try:
        entries = list(dest.parent.glob(f".{dest.name}.*.part*"))
    except OSError:
        return 0
    for path in entries:
        try:
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(path)
            else:
                path.unlink()
            removed += 1
        except (OSError, AttributeError):
            continue
    return removed

