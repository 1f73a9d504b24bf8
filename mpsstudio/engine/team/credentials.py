"""Who the team's server is told we are, never stored by MPS Studio.

MLflow's own sources first, in its client's order (mlflow/utils/credentials.py, rest_utils.py): a user and password
(MLFLOW_TRACKING_USERNAME / _PASSWORD, each else from ~/.mlflow/credentials' [mlflow] section) as basic auth, else
MLFLOW_TRACKING_TOKEN as a bearer token. Where none is set, the system keychain's item for that server: service
SERVICE, account the server's address as check_url keeps it, its secret a token, or {"username", "password"} as JSON
for a server with MLflow's basic-auth app. `history --login URL` and Preferences keep it there; `security
add-generic-password -s "MPS Studio team server" -a URL -w TOKEN` does too.

The keychain is keyring's (the optional extra `mpsstudio[team]`): on macOS its macOS backend, named directly (the
frozen app finds no entry points), which reads the login keychain through Security.framework (the ledger's
`keychain` row: an item not found is None, a denied access KeyringLocked, any other failure KeyringError, a delete
of a missing item PasswordDeleteError); elsewhere the backend keyring chooses (Secret Service, Windows), or none."""

from __future__ import annotations

import base64
import configparser
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..basics.errors import UserError
from ..basics.formatting import one_line

SERVICE = "MPS Studio team server"
CREDENTIALS_FILE = "~/.mlflow/credentials"  # MLflow's client reads its [mlflow] section
MAX_SECRET = 16 * 1024
ENVIRONMENT = "set MLFLOW_TRACKING_TOKEN (or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD) in the environment"


@dataclass(frozen=True)
class Credentials:
    """An Authorization header and where it came from (said when a server refuses it); its repr shows no secret."""

    header: str
    source: str

    def __repr__(self) -> str:
        return f"Credentials(from {self.source})"

    def hide(self, text: str) -> str:
        """`text` (a server's words, kept with the queue or said) with the secret in any form it was sent replaced by
        "***": a server may echo what it was given."""
        kind, _, value = self.header.partition(" ")
        secrets = [value]
        if kind == "Basic":
            pair = base64.b64decode(value).decode("utf-8", "replace")
            secrets += [pair, pair.partition(":")[2]]
        for secret in sorted((x for x in secrets if len(x) >= 3), key=len, reverse=True):
            text = text.replace(secret, "***")
        return text


def system_keychain():
    """(the keychain's keyring backend, "") or (None, why there is none): what the login and a push use."""
    try:
        import keyring
    except ImportError:
        return None, "the keychain needs the keyring package (pip install 'mpsstudio[team]')"
    except Exception as exc:  # a keyring that fails to load (a broken install): no keychain, said
        return None, f"keyring could not be loaded ({one_line(str(exc), 120)})"
    if sys.platform == "darwin":
        from keyring.backends import macOS

        if not macOS.Keyring.viable:  # api.py could not load Security.framework
            return None, "macOS's Security framework could not be loaded"
        return macOS.Keyring(), ""
    from keyring.backends import fail, null

    try:
        ring = keyring.get_keyring()
    except Exception as exc:
        return None, f"no system keychain answers here ({one_line(str(exc), 120)})"
    if isinstance(ring, (fail.Keyring, null.Keyring)):
        return None, "no system keychain answers here (no Secret Service or Windows Credential Locker)"
    return ring, ""


def find(url: str, env=None, keychain=None) -> tuple[Credentials | None, str]:
    """The credentials for the server at `url` (as check_url keeps it) and, where the keychain was asked and could
    not answer, why (said when the server refuses us)."""
    env = os.environ if env is None else env
    file_user, file_password = _mlflow_file()
    user = env.get("MLFLOW_TRACKING_USERNAME") or file_user
    password = env.get("MLFLOW_TRACKING_PASSWORD") or file_password
    if user and password:
        where = ("MLFLOW_TRACKING_USERNAME and _PASSWORD" if env.get("MLFLOW_TRACKING_USERNAME") and
                 env.get("MLFLOW_TRACKING_PASSWORD") else CREDENTIALS_FILE)
        return Credentials(_basic(user, password), where), ""
    if env.get("MLFLOW_TRACKING_TOKEN"):
        return Credentials(f"Bearer {env['MLFLOW_TRACKING_TOKEN']}", "MLFLOW_TRACKING_TOKEN"), ""
    half = ("MLFLOW_TRACKING_USERNAME is set without MLFLOW_TRACKING_PASSWORD" if user and not password else
            "MLFLOW_TRACKING_PASSWORD is set without MLFLOW_TRACKING_USERNAME" if password and not user else "")
    ring, why = (keychain or system_keychain)()
    if ring is None:
        return None, half or why
    try:
        secret = ring.get_password(SERVICE, url)
    except Exception as exc:  # keyring.errors.KeyringLocked (access denied), KeyringError (unsigned app, ...)
        return None, _refused_words(exc, "read")
    if not secret:
        return None, half
    return Credentials(_header(secret), "the keychain"), ""


def require_keychain(keychain=None):
    """The keychain's backend; UserError, one sentence, where there is none (said before a secret is asked for)."""
    ring, why = (keychain or system_keychain)()
    if ring is None:
        raise UserError(f"Nothing can be kept: {why}; {ENVIRONMENT} instead.")
    return ring


def remember(url: str, secret: str, username: str = "", keychain=None) -> str:
    """Keep the token (or, with `username`, the password) for the server at `url` in the keychain: the sentence
    said; UserError where there is no keychain or it refuses."""
    secret = str(secret).strip()
    if not secret or len(secret) > MAX_SECRET or any(c in secret for c in "\r\n\0"):
        raise UserError("The token must be one line of text; nothing was kept in the keychain.")
    ring = require_keychain(keychain)
    value = json.dumps({"username": username, "password": secret}) if username else secret
    try:
        ring.set_password(SERVICE, url, value)
    except Exception as exc:
        raise UserError(f"Nothing was kept: {_refused_words(exc, 'write')}.") from None
    kind = f"{username}'s password" if username else "the token"
    return f"Kept {kind} for {url} in the keychain; pushes and pulls to that server send it."


def forget(url: str, keychain=None) -> str:
    """Remove what the keychain keeps for the server at `url`: the sentence said."""
    ring, why = (keychain or system_keychain)()
    if ring is None:
        raise UserError(f"Nothing was removed: {why}.")
    try:
        if not ring.get_password(SERVICE, url):
            return f"The keychain keeps nothing for {url}."
        ring.delete_password(SERVICE, url)
    except Exception as exc:  # the macOS backend raises PasswordDeleteError for a missing item too: asked first
        raise UserError(f"Nothing was removed: {_refused_words(exc, 'change')}.") from None
    return f"Removed what the keychain kept for {url}."


def advice(url: str, keychain=None) -> str:
    """Where credentials for the server at `url` can go, in words: the keychain where there is one (`history --login`,
    Preferences), else the environment."""
    ring, _ = (keychain or system_keychain)()
    if ring is None:
        return ENVIRONMENT
    return (f"keep a token (or a user's password) in the keychain with `mpsstudio history --login {url}` or in "
            f"Preferences, or {ENVIRONMENT}")


def kept(url: str, keychain=None) -> bool | None:
    """Whether the keychain keeps something for `url` (None: no keychain, or it would not say)."""
    ring, _ = (keychain or system_keychain)()
    if ring is None:
        return None
    try:
        return bool(ring.get_password(SERVICE, url))
    except Exception:
        return None


def _header(secret: str) -> str:
    """A kept secret as its Authorization header: {"username", "password"} as basic auth, any other text a token."""
    try:
        found = json.loads(secret)
    except ValueError:
        found = None
    if isinstance(found, dict) and isinstance(found.get("username"), str) and isinstance(found.get("password"), str):
        return _basic(found["username"], found["password"])
    return f"Bearer {secret.strip()}"


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _mlflow_file() -> tuple[str | None, str | None]:
    """MLflow's ~/.mlflow/credentials: its [mlflow] section's user and password (None where unreadable)."""
    path = Path(os.path.expanduser(CREDENTIALS_FILE))
    config = configparser.ConfigParser(interpolation=None)
    try:
        if not path.is_file():
            return None, None
        config.read(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None, None
    if "mlflow" not in config:
        return None, None
    section = config["mlflow"]
    return section.get("mlflow_tracking_username"), section.get("mlflow_tracking_password")


def _refused_words(exc: Exception, verb: str) -> str:
    """What a keychain failure means, in words: denied (KeyringLocked), or its own words."""
    name = type(exc).__name__
    detail = one_line(str(exc), 160)
    if name == "KeyringLocked":
        return f"the keychain did not let MPS Studio {verb} it (access denied: allow it in the prompt, or in " \
               f"Keychain Access)"
    return f"the keychain could not be {'read' if verb == 'read' else 'changed'} ({detail or name})"
