"""Reading MLflow's REST answers, which are untrusted: a field of the type MLflow's API gives, or one sentence
(UserError) saying the address does not answer as an MLflow tracking server does."""

from __future__ import annotations

from ..basics.errors import UserError
from .server import Server


def object_in(answer: dict, key: str, server: Server) -> dict:
    value = answer.get(key)
    if not isinstance(value, dict):
        raise UserError(f"The tracking server at {server.url} answered without the {key} MLflow's API gives; check "
                        "that the address is an MLflow tracking server.")
    return value


def text_in(answer: dict, key: str, server: Server) -> str:
    value = answer.get(key)
    if not isinstance(value, str) or not value or len(value) > 200:
        raise UserError(f"The tracking server at {server.url} answered with no {key} MLflow's API gives; check "
                        "that the address is an MLflow tracking server.")
    return value


def tag_of(run: dict, key: str) -> str | None:
    data = run.get("data")
    entries = data.get("tags") if isinstance(data, dict) else None
    for t in entries if isinstance(entries, list) else []:
        if isinstance(t, dict) and t.get("key") == key:
            value = t.get("value")
            return value if isinstance(value, str) else None
    return None


def artifact_folder(info: dict) -> str | None:
    """Where a run's artifacts lie under the server's artifact proxy (its `mlflow-artifacts:/` URI's path), or None
    where it is not served by the server or would step out of it (`..`, `.`, a backslash, an empty segment): a
    request, and the credentials with it, never goes elsewhere on the host."""
    uri = info.get("artifact_uri")
    if not isinstance(uri, str) or not uri.startswith("mlflow-artifacts:/") or len(uri) > 1000:
        return None
    path = uri[len("mlflow-artifacts:/"):].strip("/")
    parts = path.split("/")
    if not path or any(p in ("", ".", "..") or "\\" in p or not p.isprintable() for p in parts):
        return None
    return path
