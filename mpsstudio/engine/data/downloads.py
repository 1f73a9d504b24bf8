"""A small downloader for dataset files: mirrors, md5 check, progress, and no half-written files.

Everything is written to a temporary file in the target folder and renamed into place only when complete
and verified, so an interrupted download (or a cancel raised from the progress callback) leaves nothing behind.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import shutil
import socket
import ssl
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from ..basics.errors import UserError
from ..basics.files import atomic_path

Progress = Callable[[str, float], None]

CHUNK = 1 << 16
TIMEOUT_S = 30.0
_NETWORK_ERRORS = (urllib.error.URLError, socket.timeout, ConnectionError, http.client.HTTPException)


class _ChecksumMismatch(Exception):
    pass


def _report(progress: Progress | None, message: str, fraction: float, span: tuple[float, float]) -> None:
    if progress is not None:
        lo, hi = span
        progress(message, lo + (hi - lo) * min(max(fraction, 0.0), 1.0))


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _fetch(url: str, part: Path, md5: str | None, label: str, progress: Progress | None,
           span: tuple[float, float]) -> None:
    """Stream one URL into part, hashing as it goes; raises a network error or _ChecksumMismatch."""
    name = url.rsplit("/", 1)[-1]
    digest = hashlib.md5(usedforsecurity=False)
    request = urllib.request.Request(url, headers={"User-Agent": "mpsstudio"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, open(part, "wb") as out:
        total = int(response.headers.get("Content-Length") or 0) or None
        done = 0
        _report(progress, f"Downloading {label}: {name}", 0.0, span)
        while chunk := response.read(CHUNK):
            out.write(chunk)
            digest.update(chunk)
            done += len(chunk)
            size = f"{_megabytes(done)} of {_megabytes(total)}" if total else _megabytes(done)
            _report(progress, f"Downloading {label}: {name} ({size})", done / total if total else 0.0, span)
    if md5 is not None and digest.hexdigest() != md5:
        raise _ChecksumMismatch(name)


def download(urls: Sequence[str], dest: Path, *, md5: str | None, label: str, where: Path,
             progress: Progress | None = None, span: tuple[float, float] = (0.0, 1.0)) -> Path:
    """Download dest from the first mirror that works and matches md5.

    label names the dataset in messages ("MNIST"); where is the folder the user may fill by hand instead.
    progress(message, fraction) gets fractions mapped into span, so several files can share one 0..1 bar.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    failure: str | None = None
    for url in urls:
        try:
            with atomic_path(dest) as part:
                _fetch(url, part, md5, label, progress, span)
            _report(progress, f"Downloaded {label}: {dest.name}", 1.0, span)
            return dest
        except _ChecksumMismatch:
            failure = "checksum"
        except urllib.error.HTTPError as err:
            failure = failure or f"the server answered {err.code} {err.reason}"
        except urllib.error.URLError as err:
            if isinstance(err.reason, ssl.SSLCertVerificationError):
                raise UserError(f"Could not download {label} because this Python cannot verify the server's "
                                "certificate; on macOS run 'Install Certificates.command' from your Python folder "
                                f"and try again, or put the files in {where}.") from err
            failure = failure or "network"
        except _NETWORK_ERRORS:
            failure = failure or "network"
        except OSError as err:
            raise UserError(f"Could not save {label} to {dest.parent} ({err.strerror or err}); "
                            "free some disk space or check the folder's permissions.") from err
    if failure == "checksum":
        raise UserError(f"The downloaded {label} file {dest.name} was damaged (checksum mismatch); "
                        f"try again, or put the files in {where}.")
    if failure and failure != "network":
        raise UserError(f"Could not download {label} ({failure}); try again later, or put the files in {where}.")
    raise UserError(f"Could not download {label} (no network connection?); "
                    f"connect to the internet and try again, or put the files in {where}.")


def extract_gzip(src: Path, dest: Path, label: str) -> Path:
    """Decompress src (.gz) to dest via a temporary file."""
    try:
        with atomic_path(dest) as part, gzip.open(src, "rb") as f_in, open(part, "wb") as f_out:
            shutil.copyfileobj(f_in, f_out, CHUNK)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise UserError(f"The {label} file {src} is damaged ({err}); delete it and try again.") from err
    return dest


def _safe_extractall(tar: tarfile.TarFile, dest: str) -> None:
    """Extract only plain files and folders inside dest (the 'data' filter, or its equivalent on older Pythons)."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
    for m in members:
        if os.path.isabs(m.name) or ".." in Path(m.name).parts:
            raise tarfile.TarError(f"unsafe path {m.name!r}")
    tar.extractall(dest, members=members)


def extract_tar(src: Path, member_dir: str, dest_parent: Path, label: str) -> Path:
    """Extract the folder member_dir of a .tar.gz into dest_parent, via a temporary folder renamed into place."""
    dest_parent.mkdir(parents=True, exist_ok=True)
    target = dest_parent / member_dir
    with tempfile.TemporaryDirectory(prefix=".extract-", dir=dest_parent) as tmp:
        try:
            with tarfile.open(src, "r:*") as tar:
                _safe_extractall(tar, tmp)
        except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
            raise UserError(f"The {label} archive {src} is damaged or unreadable ({err}); "
                            "delete it and try again.") from err
        extracted = Path(tmp) / member_dir
        if not extracted.is_dir():
            raise UserError(f"The {label} archive {src} has no '{member_dir}' folder; delete it and try again.")
        if target.exists():
            shutil.rmtree(target)
        os.replace(extracted, target)
    return target
