"""A stored tool result (a sweep, a tune, a max batch, a diagnosis, ...) as an MLflow run: an experiment per tool and
work ("mpsstudio · sweep · resnet18 · cifar10"), params = what the tool was asked (its config), tags = the machine's
fingerprint, the tool's kind and MPS Studio's id of the result, and as artifacts the result's JSON (what `--json`
writes and a pull reads, checked as an import) and its report. No metrics: each tool's figures are its own tables,
which the report carries with their units and intervals. Shareable as a run is: no host, user or absolute path."""

from __future__ import annotations

import json

from ..history.rows import ToolRecord
from ..history.runfiles import shareable
from ..tools import toolview
from .mlflow_run import (KIND_TAG, PARAM_MAX, REPORT_FILE, RUN_ID_TAG, TAG_MAX, TOOL_FILE, Outgoing, fingerprint,
                         shown_name, text)


def _part(record: ToolRecord, key: str) -> dict:
    """The result's `config` or `env` (a dict where the result carries one)."""
    value = record.result.get(key)
    return value if isinstance(value, dict) else {}


def outgoing(record: ToolRecord) -> Outgoing:
    result = record.result
    env = _part(record, "env")
    hosts = [env.get("hostname")]
    return Outgoing(record.id, experiment_name(record), record.created_at, not result.get("stopped"),
                    _tags(record, env, hosts), _params(record, hosts), [],
                    {TOOL_FILE: tool_document(record, hosts), REPORT_FILE: report_document(record)})


def experiment_name(record: ToolRecord) -> str:
    config = _part(record, "config")
    work = [shown_name(config[k]) for k in ("model", "dataset") if isinstance(config.get(k), str) and config[k]]
    return " · ".join(["mpsstudio", record.kind, *work])


VARIED = ("device", "batch_size", "precision", "channels_last", "compile", "threads", "tf32")


def _params(record: ToolRecord, hosts) -> list[dict]:
    """What the tool was asked: its config, where a setting it measured over (a sweep's batch sizes, a tune's
    precisions, ...) is said as `measured.<setting>` (its values), not as the config's one value it did not keep to."""
    config = _part(record, "config")
    values: dict = {"tool": record.kind}
    rows = [r for key in ("points", "candidates") for r in (record.result.get(key) or []) if isinstance(r, dict)]
    varied = {k: sorted({str(r[k]) for r in rows if r.get(k) is not None}, key=_natural) for k in VARIED}
    varied = {k: v for k, v in varied.items() if len(v) > 1}
    values.update({k: shown_name(v) if k in ("model", "dataset") and isinstance(v, str) else v
                   for k, v in sorted(config.items()) if v is not None and k not in varied})
    values.update({f"measured.{k}": ", ".join(v) for k, v in varied.items()})
    clean = shareable(values, hosts)
    return [{"key": str(key)[:250], "value": text(value)[:PARAM_MAX]} for key, value in clean.items()]


def _natural(text: str):
    """4 before 16 (numbers as numbers), words in their order."""
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def _tags(record: ToolRecord, env: dict, hosts) -> list[dict]:
    values = {RUN_ID_TAG: record.id, KIND_TAG: record.kind, "mpsstudio.created_at": record.created_at,
              "mlflow.runName": f"{env.get('machine_label') or record.kind} · {record.kind} · {record.id[:8]}"}
    title = toolview.title(record.kind, record.result)
    if title:
        values["mlflow.note.content"] = f"{title}: {record.result.get('sentence') or ''}".strip(": ")
    values.update(fingerprint(env))
    clean = shareable(values, hosts)
    clean[RUN_ID_TAG] = record.id
    return [{"key": key[:250], "value": text(value)[:TAG_MAX]} for key, value in clean.items()]


def tool_document(record: ToolRecord, hosts=()) -> bytes:
    """The result as the CLI's --json and the window's Export JSON… write it (kind, id, created_at, the result),
    shareable: the artifact a pull reads (history/runfiles.import_tool_json)."""
    from ..basics.results import json_safe

    body = {k: v for k, v in record.result.items() if k != "imported_from"}
    doc = {**body, "kind": record.kind, "id": record.id, "created_at": record.created_at}
    return json.dumps(shareable(json_safe(doc), hosts), allow_nan=False).encode()


def report_document(record: ToolRecord) -> bytes:
    from ..report import parts as reporting, scrubbed
    from ..report.render import to_html

    env = _part(record, "env")
    part = reporting.tool_part(record.kind, record.result, record.created_at)
    hosts = [env["hostname"]] if isinstance(env.get("hostname"), str) else []
    return to_html(scrubbed(reporting.report([part]), hosts)).encode()
