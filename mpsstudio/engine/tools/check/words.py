"""What a device check (suite.py) found, in words and a table, the same on every read; and what the command line's
options mean to it. Torch-free: the window and `mpsstudio check` read results without loading torch."""

from __future__ import annotations


from ...basics.config import DEVICE_PATTERN
from ...basics.errors import UserError
from ...basics.formatting import DASH, Chart, Table, fmt_err, plural, printable
from ..records.check import CheckResult
from .modes import MIN_PROCESSES
from .since import BAD, since_sentence

PROCESSES = 10  # fresh processes the timing takes by default (pytorch#182815: a slow kernel in ~40 % of them)
MAX_PROCESSES = 100


def check_sentence(result: dict | CheckResult) -> str:
    """What the suite found, then what the timing across processes found where it found two modes."""
    r = CheckResult.of({**result, "sentence": ""}) if isinstance(result, dict) else result
    two = [t.sentence for t in r.timing if len(t.modes) == 2]
    told = [t for t in r.timing if len(t.ms) >= MIN_PROCESSES]
    if told and not two:
        what = "The matrix products and your model's step" if any("training step" in t.shape for t in told) else \
            "The matrix products"
        two = [f"{what} timed in {r.processes} fresh processes fell in one mode each (no kernel chosen slower in "
               "some processes)."]
    unchecked = [f"Not checked: {printable('; '.join(r.notes))}."] if r.rows and r.notes else []
    compared = [since_sentence(r.since)] if r.since is not None else []
    if r.baseline is not None:
        compared.append(since_sentence(r.baseline, baseline=True))
        if failed(r) and r.baseline.verdict != "a real change":  # the exit status is the check's own, said
            compared.append("This check itself " + ("checked nothing" if not any(
                row.status != "skipped" for row in r.rows) else "found a case wrong") + ", so it exits 1 whatever "
                "the baseline says.")
    return " ".join([_suite_sentence(r), *unchecked, *two, *compared])


VERDICT_WORDS = {"wrong": "is wrong", "not deterministic": "is not deterministic", "failed": "failed"}


def _suite_sentence(r: CheckResult) -> str:
    if not r.rows:
        why = f" ({'; '.join(r.notes)})" if r.notes else ""
        return f"Nothing was checked{why}."
    bad = [row for row in r.rows if row.status in BAD]
    checked = [row for row in r.rows if row.status != "skipped"]
    devices = ", ".join(r.devices) or "the device"
    if not bad:
        skipped = len(r.rows) - len(checked)
        more = f"; {plural(skipped, 'case')} skipped (why: under the table)" if skipped else ""
        return (f"{devices}: all {plural(len(checked), 'case')} of the suite agree with a float64 CPU reference within "
                f"their tolerances, fresh, after a large allocation, after emptying the cache and repeated{more}. "
                "This checks these operations at these shapes, not every kernel.")
    first = bad[0]
    why = printable(first.reason).rstrip(".")
    what = (f"{first.operation} {first.shape} in {first.dtype} on {first.device} {VERDICT_WORDS[first.status]}"
            + (f": {why}" if why else ""))
    more = f" ({plural(len(bad) - 1, 'more case')} too: see the table)" if len(bad) > 1 else ""
    return f"{what}{more}."


def subject(result: dict) -> str:
    """"cpu and mps (suite 2026-12-03)": the devices checked, the suite's version."""
    r = CheckResult.of(result)
    return f"{' and '.join(r.devices) or 'no device'} (suite {r.suite})"


def check_table(result: dict | CheckResult) -> Table:
    r = CheckResult.of(result)
    first = sorted(r.rows, key=lambda row: row.status not in BAD)  # what went wrong on top, else the suite's order
    rows = [[row.device, row.operation, row.shape, row.dtype, row.status, fmt_err(row.error), fmt_err(row.tolerance),
             row.state or DASH, fmt_err(row.repeat_error)] for row in first]
    return Table(["device", "operation", "shape", "dtype", "verdict", "error (rel.)", "tolerance", "worst state",
                  "repeat"], rows, [False, False, False, False, False, True, True, False, True])


LEGEND = ("error: max|device - reference| / max|reference|, the reference the same operation on the same rounded "
          "inputs in float64 on the CPU; tolerance: 4 u (sqrt(k) + 1), u the dtype's unit roundoff, k the "
          "operation's longest sum; repeat: the fresh call made again, against the first (measured).")


def timing_table(result: dict | CheckResult) -> Table:
    r = CheckResult.of(result)
    rows = []
    for t in r.timing:
        modes = [f"{m.median_ms:,.2f} [{m.low_ms:,.2f}-{m.high_ms:,.2f}]" for m in t.modes]
        rows.append([t.device, t.shape, str(len(t.ms)), "two" if len(t.modes) == 2 else "one",
                     modes[0] if modes else DASH, f"{modes[1]} ({t.modes[1].count})" if len(modes) == 2 else DASH])
    return Table(["device", "product", "processes", "modes", "ms (fastest mode)", "ms (slower mode, processes)"],
                 rows, [False, False, True, False, True, True])


TIMING_LEGEND = ("Each fresh process's median of 10 synchronized calls after 3 warm-up calls (measured); a mode's "
                 "median process and its range.")


def legend(result: dict | CheckResult) -> str:
    """LEGEND, then why each skipped case was skipped."""
    r = CheckResult.of(result) if isinstance(result, dict) else result
    why = [f"{row.operation} in {row.dtype} on {row.device}: {printable(row.reason)}" for row in r.rows
           if row.status == "skipped"]
    model = (" Your model: inspect's parity, one forward and backward against float64, within the precision's "
             "tolerance or 4x the CPU's own error in it.") if any(row.case.startswith("model:") for row in r.rows) else ""
    return LEGEND + model + (f" Skipped: {'; '.join(why)}." if why else "")


def check_section(result: dict) -> tuple[list[Table], Chart | None]:
    tables = [check_table(result).with_legend(legend(result))]
    if CheckResult.of(result).timing:
        tables.append(timing_table(result).with_legend(TIMING_LEGEND))
    return tables, None


def check_printed(result: dict) -> tuple[list[Table], list[str]]:
    """What `mpsstudio check` prints before its sentence: the suite's table, and a line for each product timed."""
    timed = [f"timing: {t.sentence}" for t in CheckResult.of(result).timing]
    return [check_table(result).with_legend(legend(result))], timed + ([f"timing: {TIMING_LEGEND}"] if timed else [])


def check_rederived(result: dict) -> dict:
    result["sentence"] = check_sentence(result)
    return result


def arguments(values: dict) -> dict:
    """--devices as the check's list of devices (none: every available one; UserError for a name that is none),
    --processes, --model and --dataset (the setup of the model it adds: `config`), and --python (the environment it runs in: cli/tools.run_one_tool takes it out of the payload)."""
    text = values.get("devices")
    names = list(dict.fromkeys(d.strip().lower() for d in text.split(",") if d.strip())) if text else []
    for name in names:
        if not DEVICE_PATTERN.fullmatch(name):
            raise UserError(f"--devices: {printable(name)[:40]!r} is not a device; name cpu, mps, cuda or cuda:N, "
                            "comma-separated.")
    processes = values.get("processes")
    processes = PROCESSES if processes is None else processes
    if not 0 <= processes <= MAX_PROCESSES:
        raise UserError(f"--processes must be a whole number from 0 to {MAX_PROCESSES}, not {processes}.")
    python = values.get("python")
    model = values.get("model")
    if values.get("dataset") and not model:
        raise UserError("--dataset is the data of the model the check adds: give --model too.")
    return {"devices": names, "processes": processes, **({"python": python} if python else {}),
            **({"config": model_config(model, values.get("dataset")).to_dict()} if model else {})}


def model_config(model: str, dataset: str | None = None):
    """The setup of the user's model the check adds (`--model`, `--dataset`, default synthetic): checked before
    anything runs (an unknown model or dataset is one sentence)."""
    from ...basics.config import RunConfig
    from ...models import registry as models

    from ...data.datasets import check_name

    models.get_model_info(model)
    check_name(dataset or "synthetic")
    return RunConfig(model=model, dataset=dataset or "synthetic", device="cpu").validate()


def failed(result: dict | CheckResult) -> bool:
    """A case wrong, not deterministic or failing, or nothing checked (the command exits 1)."""
    rows = (CheckResult.of(result) if isinstance(result, dict) else result).rows
    return not any(row.status != "skipped" for row in rows) or any(row.status in BAD for row in rows)
