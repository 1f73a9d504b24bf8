"""Writing files so that a crash or a full disk never leaves half a file: write beside, then rename."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(dest: str | Path) -> Iterator[Path]:
    """Yield a fresh temporary path beside `dest` (same file system); when the block ends without an error
    the temporary file replaces `dest` in one step, otherwise it is removed and `dest` is left as it was."""
    dest = Path(dest)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    os.close(fd)
    part = Path(name)
    try:
        yield part
        os.replace(part, dest)
    finally:
        part.unlink(missing_ok=True)


def write_atomic(dest: str | Path, data: str | bytes) -> None:
    """Write text (UTF-8, newlines as given) or bytes to `dest` through `atomic_path`."""
    with atomic_path(dest) as part:
        if isinstance(data, bytes):
            part.write_bytes(data)
        else:
            part.write_text(data, encoding="utf-8", newline="")
