"""What a report or a shared file must not name, and how it is taken out of a text: absolute paths become their
last part, the home folder "~", the user's name "user" and host names "a host" (whole words) or "user"/"host"
(inside file names and identifiers). Used by reports (engine/report) and by files meant to be shared (a bench's
--json baseline). No torch."""

from __future__ import annotations

import getpass
import os
import re

from .formatting import printable

# An absolute path: a slash (or a drive, a UNC share, ~) not preceded by a word, a dot or another slash; inner
# parts may hold spaces ("/Volumes/My Drive/x.pt"), the last one may not
_PART = r"[^/\\\s\"'<>|()\[\]{}`*,;~]+"
_PATH = re.compile(rf"(?<![\w./\\])(?:~|[A-Za-z]:)?[/\\]*(?:[/\\]{_PART}(?: {_PART})*(?=[/\\]))*[/\\]{_PART}")
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
# Words a host or user name is never taken for (they name devices, data and units in every report)
_RESERVED = {"cpu", "mps", "cuda", "gpu", "localhost", "local", "synthetic", "shapes", "mnist", "mlp", "user",
             "root", "host", "batch", "samples", "vm", "linux", "mac", "macos", "server", "node", "machine"}
# (a host called "vm" made "no energy counter readable on this Linux VM" read "this Linux a host")


def secrets(hosts=(), user: str | None = None) -> list[tuple[str, str]]:
    """(text, what it becomes) for what a pasted report must not name: the user's name and home, host names (whole,
    and their first label). `user`: the user name (default: this process's)."""
    out = []
    home = os.path.expanduser("~")
    if home and home not in ("/", "~"):
        out.append((home, "~"))
    if user is None:
        try:
            user = getpass.getuser()
        except Exception:  # no user name known (a container): nothing to hide
            user = ""
    if len(user) >= MIN_NAME and user.lower() not in _RESERVED:
        out.append((user, "user"))
    for host in hosts:
        if isinstance(host, str) and host.strip():
            for name in {host.strip(), host.strip().split(".")[0]}:
                if len(name) >= MIN_NAME and name.lower() not in _RESERVED:
                    out.append((name, "host"))
    return sorted(set(out), key=lambda pair: -len(pair[0]))


MIN_NAME = 2  # a user or host name shorter than this is never looked for
INSIDE_WORDS = 5  # a name this long is replaced inside plain words too ("alicexdata"); shorter ones only inside
# identifiers and file names, at a boundary ("al-data", "al_2"), so that prose keeps its words ("also", "samples")
# A token a name may hide in: a path part, a file name, an identifier (letters, digits, "_", "-", ".")
_TOKEN = re.compile(r"[A-Za-z0-9_.\-]+")


def _identifier(token: str) -> bool:
    """A file name or an identifier rather than a plain word: it holds "_", "-", ".", a digit, or a capital
    after its first letter (CamelCase)."""
    return bool(re.search(r"[-_.\d]", token)) or any(c.isupper() for c in token[1:])


def _hide_in(token: str, name: str, word: str) -> str:
    """`token` with `name` replaced wherever the rules above allow (case-insensitive)."""
    low, key = token.lower(), name.lower()
    if key not in low:
        return token
    if low == key:
        return word
    if not (_identifier(token) or len(name) >= INSIDE_WORDS):
        return token
    if len(name) < INSIDE_WORDS:  # short: only where it stands apart ("al-data", "run_al", "al2")
        pattern = rf"(?<![A-Za-z]){re.escape(name)}(?![a-z])"
    else:
        pattern = re.escape(name)
    return re.sub(pattern, word, token, flags=re.IGNORECASE)


def scrub(text: str, hidden: list[tuple[str, str]]) -> str:
    """`text` with control characters made visible ("?"), every absolute path reduced to its last part and every
    hidden name replaced wherever it stands: a whole word ("a host" in a sentence), or inside a file name or an
    identifier ("alicex-train.py" -> "user-train.py", "alicebox-7_node" -> "host_node"); ordinary words that merely
    hold a short name keep it ("samples" keeps its "sam")."""
    text = printable(str(text))
    names = []
    for secret, word in hidden:
        if secret.startswith(("/", "~")) or "\\" in secret:
            text = text.replace(secret, word)
        else:
            names.append((secret, word))

    def base(match: re.Match) -> str:
        whole = match.group(0).rstrip("/\\")
        name = re.split(r"[/\\]", whole)[-1]
        return name or whole
    urls: list[str] = []  # a URL is not a path ("postgres://db/x" stays itself): set aside, put back after

    def aside(match: re.Match) -> str:
        urls.append(match.group(0))
        return f"\x00{len(urls) - 1}\x00"
    text = _URL.sub(aside, text)
    text = _PATH.sub(base, text)
    text = re.sub("\x00(\\d+)\x00", lambda m: urls[int(m.group(1))], text)
    if not names:
        return text

    def token(match: re.Match) -> str:
        found = match.group(0)
        if any(found.lower() == name.lower() for name, _ in names):  # the whole word: as a sentence says it
            word = next(w for n, w in names if n.lower() == found.lower())
            return "a host" if word == "host" else word
        for name, word in names:
            found = _hide_in(found, name, word)
        return found
    return _TOKEN.sub(token, text)


