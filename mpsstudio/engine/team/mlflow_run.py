"""A stored run as an MLflow run: its experiment (one per work: model, dataset, precision, batch), params (the run's
settings), metrics (throughput with its interval, step time, memory, energy, accuracy; each window's throughput as
a stepped series) and tags (the machine's fingerprint, and MPS Studio's run id: a run pushed twice is one MLflow
run). What leaves the machine follows the shareable rules of `--json` (history/runfiles.shareable): no host name,
user name or absolute path. MLflow's limits are kept: keys of at most 250 characters, param values of at most
PARAM_MAX, tag values of at most TAG_MAX."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import PurePath

from ..analysis.compare import run_rates
from ..analysis.repeat import median_interval, order_rank
from ..basics.frameworks import run_label
from ..basics.results import RunResult
from ..history.runfiles import JSON_FORMAT, JSON_VERSION, shareable

RUN_ID_TAG = "mpsstudio.run_id"  # a run's id, or a tool result's (KIND_TAG says which)
DONE_TAG = "mpsstudio.pushed"  # set last: a run without it was cut off mid-push and is completed by the next one
KIND_TAG = "mpsstudio.kind"  # "run", or the tool's kind ("sweep", "tune", ...)
RUN_FILE, TOOL_FILE, REPORT_FILE = "mpsstudio-run.json", "mpsstudio-tool.json", "mpsstudio-report.html"
PARAM_MAX, TAG_MAX = 6000, 8000
SETTINGS = ("device", "batch_size", "precision", "optimizer", "lr", "steps", "epochs", "warmup_steps", "mode",
            "framework", "channels_last", "compile", "workers", "accumulate", "seed", "threads", "tf32",
            "tf32_conv", "image_size", "gpus")
FINGERPRINT = {"os": "os", "macos_build": "macos_build", "machine": "machine", "cpu": "cpu", "chip": "chip",
               "device_name": "device_name", "python": "python", "torch": "torch", "torchvision": "torchvision",
               "mlx": "mlx", "mlx_lm": "mlx_lm", "cuda": "cuda", "mpsstudio": "mpsstudio",
               "memory_measure": "memory_measure", "machine_label": "machine"}


@dataclass
class Outgoing:
    """What one MLflow run carries: a stored run's (outgoing) or a tool result's (mlflow_tool.outgoing)."""

    id: str
    experiment: str
    created_at: str
    finished: bool
    tags: list[dict]
    params: list[dict] = field(default_factory=list)
    metrics: list[dict] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)  # artifact name: its bytes (the JSON a pull reads first)


def outgoing(run: RunResult) -> Outgoing:
    return Outgoing(run.id, experiment_name(run), run.created_at, run.status == "finished", tags(run), params(run),
                    metrics(run), {RUN_FILE: run_document(run), REPORT_FILE: report_document(run)})


def shown_name(name: str) -> str:
    """A model or dataset as it leaves the machine: a path's last part, a name as it is."""
    text = str(name)
    return PurePath(text).name or text if ("/" in text or "\\" in text) else text


def experiment_name(run: RunResult) -> str:
    """"mpsstudio · resnet18 · cifar10 · fp32 · batch 64": the work a run measured, whichever machine ran it."""
    c = run.config
    return (f"mpsstudio · {shown_name(c.model)} · {shown_name(c.dataset)} · {c.precision or 'fp32'} · "
            f"batch {c.batch_size}")


def millis(iso: str) -> int:
    try:
        when = datetime.fromisoformat(str(iso).replace("Z", "+00:00"))
    except ValueError:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def throughput(run: RunResult) -> dict | None:
    """The run's samples/s: the median of its windows, the 95 % interval of that median (their range below nine
    windows), the quartiles, and in words what the interval is."""
    rates = run_rates(run)
    found = median_interval(rates)
    if found is None:
        return None
    median, low, high = found
    n = len(rates)
    said = (f"range over {n} windows" if order_rank(n) == 1 else f"95 % interval of the median of {n} windows")
    s = run.summary
    return {"median": s.samples_per_s if s.samples_per_s is not None else median, "low": low, "high": high,
            "q1": s.samples_per_s_q1, "q3": s.samples_per_s_q3, "iqr": s.samples_per_s_iqr, "windows": n,
            "interval": f"{said}, within one run (window-to-window noise, not run-to-run)"}


def metrics(run: RunResult) -> list[dict]:
    """The run's figures as MLflow metrics (each at the run's time, step 0), then each window's samples/s at its
    step; only finite numbers."""
    at = millis(run.created_at)
    s = run.summary
    found = throughput(run) or {}
    figures = {
        "samples_per_s": found.get("median"), "samples_per_s_low": found.get("low"),
        "samples_per_s_high": found.get("high"), "samples_per_s_q1": found.get("q1"),
        "samples_per_s_q3": found.get("q3"), "samples_per_s_iqr": found.get("iqr"),
        "wall_samples_per_s": s.wall_samples_per_s, "tokens_per_s": s.tokens_per_s, "step_ms": s.step_ms,
        "warmup_s": s.warmup_s, "peak_memory_bytes": s.peak_memory, "energy_j": s.energy_j,
        "j_per_sample": s.j_per_sample, "avg_power_w": s.avg_power_w, "final_loss": s.final_loss,
        "val_loss": s.val_loss, "val_accuracy": s.val_accuracy, "val_perplexity": s.val_perplexity,
    }
    out = [{"key": key, "value": number, "timestamp": at, "step": 0}
           for key, value in figures.items() if (number := _finite(value)) is not None]
    for i, w in enumerate(run.windows):
        if (rate := _finite(w.samples_per_s)) is not None:
            out.append({"key": "window_samples_per_s", "value": rate, "timestamp": at + i, "step": i})
    return out


def _finite(value) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) < 1e300:
        return float(value)
    return None


def params(run: RunResult) -> list[dict]:
    c = run.config
    values = {"model": shown_name(c.model), "dataset": shown_name(c.dataset)}
    values.update({k: getattr(c, k) for k in SETTINGS if getattr(c, k, None) is not None})
    for key, value in sorted((c.options or {}).items()):
        values[f"options.{key}"] = value
    clean = shareable(values, [run.env.get("hostname")])
    return [{"key": key[:250], "value": text(value)[:PARAM_MAX]} for key, value in clean.items()]


def tags(run: RunResult) -> list[dict]:
    """The machine's fingerprint, what the figures are, and MPS Studio's run id (DONE_TAG is set apart, last)."""
    env = run.env
    values = {RUN_ID_TAG: run.id, KIND_TAG: "run", "mpsstudio.machine": run.machine,
              "mpsstudio.device": run_label(run.config.framework or "torch", run.config.device,
                                            quantize=(run.config.options or {}).get("quantize")),
              "mpsstudio.status": run.status, "mpsstudio.created_at": run.created_at,
              "mlflow.runName": f"{run.machine} · {run.config.device} · {run.id[:8]}"}
    values.update(fingerprint(env))
    found = throughput(run)
    if found:
        values["mpsstudio.samples_per_s.interval"] = found["interval"]
    if run.summary.memory_measure:
        values["mpsstudio.peak_memory.measure"] = run.summary.memory_measure
    if run.summary.energy_measure:
        values["mpsstudio.energy.measure"] = run.summary.energy_measure
    if run.note:
        values["mlflow.note.content"] = run.note
    clean = shareable(values, [env.get("hostname")])
    clean[RUN_ID_TAG] = run.id
    return [{"key": key[:250], "value": text(value)[:TAG_MAX]} for key, value in clean.items()]


def fingerprint(env: dict) -> dict:
    """The machine a figure was measured on, as tags (mpsstudio.env.chip, .macos_build, .torch, ...)."""
    values = {f"mpsstudio.env.{tag}": env[key] for key, tag in FINGERPRINT.items() if env.get(key) not in (None, "", [])}
    gpus = env.get("gpus")
    if isinstance(gpus, list) and gpus:
        values["mpsstudio.env.gpus"] = ", ".join(str(g.get("name", g) if isinstance(g, dict) else g) for g in gpus)
    return values


def text(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def run_document(run: RunResult) -> bytes:
    """The run as an export of one run (the shape `history --import` reads), shareable: the artifact a pull takes."""
    doc = {"format": JSON_FORMAT, "version": JSON_VERSION, "runs": [run.to_dict()], "comparisons": []}
    return json.dumps(shareable(doc, [run.env.get("hostname")]), allow_nan=False).encode()


def report_document(run: RunResult) -> bytes:
    """The run's report alone (report/parts.run_parts: its figures, settings and machine) as one HTML file, host
    names and paths scrubbed as every report's are."""
    from ..report import parts as reporting, scrubbed
    from ..report.render import to_html

    return to_html(scrubbed(reporting.report(reporting.run_parts(run, [run]), runs=[run]))).encode()


def batches(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)] or [[]]
