"""An MLflow tracking server spoken to through its REST API (`/api/2.0/mlflow/...`, and the artifact proxy
`/api/2.0/mlflow-artifacts/artifacts/...` of `mlflow server`'s default --serve-artifacts), never its tables: their
Alembic migrations change them (mlflow#15197, #23751), the REST API does not.

Every call has a timeout and reads at most MAX_ANSWER bytes. What the server answers is untrusted: an answer that is
not MLflow's JSON is one sentence (UserError), as is a refused token. A server that does not answer (refused, timed
out, a 5xx or 429) raises Unreachable: the push waits in the queue and goes when it answers. The credentials come
from MLflow's own sources or the system keychain (credentials.py) and are never stored: a URL carrying a user, a
password or a query is refused, so what the queue keeps of a server is its address alone."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from ..basics.errors import UserError
from ..basics.formatting import one_line, printable
from . import credentials

TIMEOUT_S = 10.0
MAX_ANSWER = 8 * 1024 * 1024  # an answer of MLflow's JSON (a page of runs) is far smaller
MAX_ARTIFACT = 32 * 1024 * 1024  # a run's JSON as an artifact (an export of one run is capped alike)
WHOLE_ANSWER_TIMES = 6  # a whole answer within this many timeouts
API = "/api/2.0/mlflow/"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts/"


class Unreachable(Exception):
    """The server did not answer (refused, timed out, reset) or answered that it cannot now (5xx, 429): try later."""


class Refused(UserError):
    """The server answered a request with an MLflow error (4xx): `code` its error_code (RESOURCE_DOES_NOT_EXIST,
    RESOURCE_ALREADY_EXISTS, INVALID_PARAMETER_VALUE, ...)."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code


MAX_URL = 2000  # characters of an address (browsers and proxies stop near here)


def check_url(url: str) -> str:
    """The server's address as kept (scheme, host, port and path; no trailing slash); UserError for one that is not
    an http(s) address a request can be made to (a host name that is not one, port 0, spaces or control characters,
    too long), or carries a user, a password, a query or a fragment (a secret would be kept with it)."""
    text = str(url).strip()
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
        host = parts.hostname or ""
        if host and ":" not in host:  # a name (an IPv6 address is checked by urlsplit): each label as DNS has it
            host.encode("idna")
    except (ValueError, UnicodeError):
        parts, port, host = None, None, ""
    usable = (parts is not None and parts.scheme in ("http", "https") and host and port != 0
              and len(text) <= MAX_URL and text.isprintable() and " " not in text)
    if not usable:
        raise UserError(f"{printable(text)[:120]!r}{'…' if len(text) > 120 else ''} is not a tracking server's "
                        "address; give one such as http://127.0.0.1:5000 (MLflow's `mlflow server`).")
    assert parts is not None
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise UserError("The server's address must not carry a user, a password or a query (it would be kept with "
                        "the queue); put the token in MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and "
                        "MLFLOW_TRACKING_PASSWORD, or the keychain (`mpsstudio history --login URL`).")
    shown = host if ":" not in host else f"[{host}]"
    return f"{parts.scheme}://{shown}{f':{port}' if port else ''}{parts.path.rstrip('/')}"


@dataclass
class Server:
    """One tracking server: `url` as check_url keeps it; `env` and `keychain` where its credentials are looked for
    (credentials.find: the process's environment and the system keychain by default)."""

    url: str
    timeout_s: float = TIMEOUT_S
    env: dict | None = None
    keychain: Callable | None = None

    def __post_init__(self) -> None:
        self.url = check_url(self.url)
        self.credentials, self.keychain_note = credentials.find(self.url, self.env, self.keychain)
        self.headers = {"Authorization": self.credentials.header} if self.credentials else {}

    def call(self, method: str, path: str, body: dict | None = None, query: dict | None = None) -> dict:
        """The JSON object the REST API answers to `method` `path` (under /api/2.0/mlflow/)."""
        raw = self._send(method, API + path, json.dumps(body).encode() if body is not None else None, query,
                         "application/json", MAX_ANSWER)
        try:
            answer = json.loads(raw.decode("utf-8") or "{}", parse_constant=_refuse_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise UserError(f"The tracking server at {self.url} answered {path} with something that is not JSON; "
                            "check that the address is an MLflow tracking server.") from None
        if not isinstance(answer, dict):
            raise UserError(f"The tracking server at {self.url} answered {path} with JSON that is not an object; "
                            "check that the address is an MLflow tracking server.")
        return answer

    def put_artifact(self, path: str, data: bytes) -> None:
        self._send("PUT", ARTIFACTS + path, data, None, "application/octet-stream", MAX_ANSWER)

    def get_artifact(self, path: str) -> bytes:
        return self._send("GET", ARTIFACTS + path, None, None, None, MAX_ARTIFACT)

    def _send(self, method: str, path: str, data: bytes | None, query: dict | None, kind: str | None,
              limit: int) -> bytes:
        address = self.url + urllib.parse.quote(path, safe="/-_.~")
        if query:
            address += "?" + urllib.parse.urlencode(query)
        headers = dict(self.headers)
        if kind:
            headers["Content-Type"] = kind
        request = urllib.request.Request(address, data=data, method=method, headers=headers)
        deadline = time.monotonic() + WHOLE_ANSWER_TIMES * self.timeout_s
        try:
            with _OPENER.open(request, timeout=self.timeout_s) as answer:
                chunks, size = [], 0
                while size <= limit:  # an answer that drips (each read within the timeout) still ends
                    chunk = answer.read1(64 * 1024)  # what one receive brings: the deadline is checked between
                    if not chunk:
                        break
                    chunks.append(chunk)
                    size += len(chunk)
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"its answer took more than {WHOLE_ANSWER_TIMES * self.timeout_s:g} s")
                if size <= limit and answer.length:  # read1 does not raise where the connection closed early
                    raise ConnectionError(f"its answer was cut off ({answer.length:,} bytes short)")
                raw = b"".join(chunks)
        except urllib.error.HTTPError as exc:
            self._refused(exc, path)
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, OSError,
                http.client.HTTPException) as exc:  # HTTPException: IncompleteRead of a chunked answer cut off
            cause = getattr(exc, "reason", exc)
            reason = self._hide(str(cause))
            if isinstance(cause, ssl.SSLError):  # not a server that is down: an https one spoken http to, or a
                # certificate this machine does not trust; waiting would not change it
                raise UserError(f"The tracking server at {self.url} could not be reached over TLS "
                                f"({one_line(reason, 120)}); check whether it is http or https, and its certificate."
                                ) from None
            raise Unreachable(f"the server at {self.url} did not answer ({one_line(reason, 120)})") from None
        except ValueError:  # an address check_url let through that http.client still refuses (InvalidURL)
            raise UserError(f"{printable(self.url)[:120]!r} is not an address a request can be made to; give one "
                            "such as http://127.0.0.1:5000.") from None
        if len(raw) > limit:
            raise UserError(f"The tracking server at {self.url} answered {printable(path)[:80]} with more than "
                            f"{limit // (1024 * 1024)} MiB; nothing was taken from it.")
        return raw

    def _refused(self, exc: urllib.error.HTTPError, path: str):
        code = exc.code
        try:
            detail = json.loads(exc.read(64 * 1024).decode("utf-8", "replace"))
        except (ValueError, OSError, RecursionError):
            detail = {}
        detail = detail if isinstance(detail, dict) else {}
        words = one_line(printable(self._hide(str(detail.get("message") or exc.reason or ""))), 200)
        if code in (429,) or code >= 500:
            raise Unreachable(f"the server at {self.url} answered {code} ({words or 'unavailable'})") from None
        if code in (401, 403):
            raise UserError(self._refused_credentials(code)) from None
        error_code = detail.get("error_code")
        raise Refused(f"The tracking server at {self.url} refused {printable(path)[:80]} ({code}"
                      f"{', ' + words if words else ''}).", error_code if isinstance(error_code, str) else "") from None


    def _hide(self, text: str) -> str:
        return self.credentials.hide(text) if self.credentials is not None else text

    def _refused_credentials(self, code: int) -> str:
        """A 401 or 403 in words: whose credentials were refused, or that it asks for some, and what to do."""
        if self.credentials is None:
            note = f" ({self.keychain_note})" if self.keychain_note else ""
            return (f"The tracking server at {self.url} asks for credentials ({code}) and none were found{note}; "
                    f"{credentials.advice(self.url, self.keychain)}.")
        source = self.credentials.source
        basic = self.credentials.header.startswith("Basic ")
        what = "a user and password" if basic else "a token"
        fix = (f"keep {what} it accepts with `mpsstudio history --login {self.url}`"
               f"{' --user NAME' if basic else ''} (or in Preferences)" if source == "the keychain" else
               f"set {source} to {what} it accepts" if source.startswith("MLFLOW") else f"correct {source}")
        if code == 403:
            return (f"The tracking server at {self.url} does not let the user of the credentials from {source} do "
                    f"this (403: allowed to read, not to write?); ask its admin for the permission, or {fix}.")
        return f"The tracking server at {self.url} refused the credentials from {source} (401); {fix}."


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed: urllib would send the token on to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise urllib.error.HTTPError(req.full_url, code, f"redirected to {newurl} (not followed)", headers, fp)


_OPENER = urllib.request.build_opener(_NoRedirect)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not JSON")
