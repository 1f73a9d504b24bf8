"""What changed between two device checks: since the last check of this machine (every check, by itself), or against
a baseline the user names (`check --baseline FILE`, for CI: exit 1 for a real change, 3 when it cannot tell).
Torch-free.

A case's verdict changed, or not. A product's time changed only where the fastest mode's ranges (its fastest and its
slowest process) lie apart, of the same machine; slower by --fail-over (default 5 %) or more, with the ranges apart,
is a real change, and so is a slower mode that appeared (modes.py: a gap of 25 % and at least two processes a side).
Medians apart by more than --fail-over whose ranges overlap, times of another machine, or no case in common: the
check cannot tell, and says so.
"""

from __future__ import annotations

from ...analysis.regression import DEFAULT_FAIL_OVER
from ...basics.formatting import fmt_timestamp, plural, printable
from ..records.check import CheckResult, Since
from .modes import MIN_PROCESSES

BAD = ("wrong", "not deterministic", "failed")
VERSIONS = (("torch", "torch"), ("os", "OS"), ("macos_build", "macOS build"), ("mpsstudio", "MPS Studio"))
VERDICTS = ("a real change", "cannot tell", "no real change")


def machine_of(env: dict | None) -> tuple[str, str]:
    """The computer a check ran on, whatever its software: its chip (or CPU) and its host name."""
    env = env or {}
    return str(env.get("chip") or env.get("cpu") or ""), str(env.get("hostname") or "")


def since(result: dict, earlier: list[dict]) -> dict:
    """`result` with `since`: what changed from the newest of `earlier` (checks, newest first) of the same machine;
    as it was when none is."""
    mine = machine_of(result.get("env"))
    if not mine[0]:
        return result
    last = next((e for e in earlier if machine_of(e.get("env")) == mine), None)
    if last is None:
        return result
    return {**result, "since": compared(result, last)}


def against(result: dict, baseline: dict, name: str, fail_over: float = DEFAULT_FAIL_OVER) -> dict:
    """`result` with `baseline`: what changed from the check in `baseline` (its file `name`), and the verdict."""
    chip = machine_of(result.get("env"))[0]
    same = bool(chip) and machine_of(baseline.get("env"))[0] == chip
    found = compared(result, baseline, fail_over, same_machine=same)
    return {**result, "baseline": {**found, "name": printable(name)[:200], "verdict": verdict(found)}}


def compared(now_doc: dict, then_doc: dict, fail_over: float = DEFAULT_FAIL_OVER,
             same_machine: bool = True) -> dict:
    """What differs from `then_doc` to `now_doc` (Since's fields)."""
    then, now = CheckResult.of(then_doc), CheckResult.of(now_doc)
    env_then, env_now = then.env or {}, now.env or {}
    versions = [f"{word} {printable(str(env_then.get(key)))[:40]} -> {printable(str(env_now.get(key)))[:40]}"
                for key, word in VERSIONS if env_then.get(key) != env_now.get(key)
                and env_then.get(key) is not None and env_now.get(key) is not None]  # unknown on a side: unsaid
    if then.suite != now.suite:
        versions.insert(0, f"suite {printable(then.suite)[:32]} -> {printable(now.suite)[:32]}")
    before = {(r.device, r.case, r.dtype): r for r in then.rows}
    changes, undecided, count, timed = [], [], 0, 0
    for row in now.rows:
        old = before.get((row.device, row.case, row.dtype))
        if old is None:
            continue
        count += 1
        if old.status != row.status:
            changes.append({"device": row.device, "what": f"{row.operation} {row.shape} in {row.dtype}",
                            "was": old.status, "now": row.status,
                            "worse": row.status in BAD and old.status not in BAD})
    times = {(t.device, t.shape): t for t in then.timing}
    for t in now.timing:
        old_t = times.get((t.device, t.shape))
        if old_t is None or not t.modes or not old_t.modes:
            continue
        what = f"the {t.shape} product on {t.device}"
        if not same_machine:
            undecided.append(f"{what} was timed on another machine, so its times are not compared")
            continue
        if min(len(t.ms), len(old_t.ms)) < MIN_PROCESSES:
            undecided.append(f"{what} was timed in too few processes to compare (at least {MIN_PROCESSES} a side)")
            continue
        why = contradicts(old_t) or contradicts(t)
        if why:
            undecided.append(f"{what}: {why}, so its times are not compared")
            continue
        count += 1
        timed += 1
        a, b = old_t.modes[0], t.modes[0]  # the fastest mode of each: apart only when their ranges are
        ratio = b.median_ms / a.median_ms
        if b.low_ms > a.high_ms or b.high_ms < a.low_ms:
            moved = f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster"
            changes.append({"device": t.device, "what": f"the {t.shape} product", "was": f"{a.median_ms:,.2f} ms",
                            "now": f"{b.median_ms:,.2f} ms ({moved})", "worse": ratio >= 1 + fail_over})
        elif ratio > 1 + fail_over:  # maybe slower, maybe noise (faster within the noise is no question for CI)
            undecided.append(f"{what} took {a.median_ms:,.2f} ms then and {b.median_ms:,.2f} ms now, but their "
                             "processes' ranges overlap (more --processes can tell)")
        if len(t.modes) != len(old_t.modes):
            slow = t.modes[1] if len(t.modes) == 2 else old_t.modes[1]
            said = f"two modes ({slow.count} of {len(t.ms if len(t.modes) == 2 else old_t.ms)} processes slower)"
            changes.append({"device": t.device, "what": f"the {t.shape} product",
                            "was": "one mode" if len(t.modes) == 2 else said,
                            "now": said if len(t.modes) == 2 else "one mode", "worse": len(t.modes) == 2})
    return {"created_at": str(then_doc.get("created_at") or ""), "versions": versions, "changes": changes,
            "compared": count, "timed": timed, "undecided": undecided, "same_machine": same_machine}


def contradicts(t) -> str:
    """Why a product's timing contradicts itself ("" when it does not): its modes' counts against its processes, a
    median outside its range, a range outside the processes' times (a file written by hand, or damaged)."""
    if sum(m.count for m in t.modes) != len(t.ms):
        return f"its modes count {sum(m.count for m in t.modes)} processes of its {len(t.ms)}"
    lowest, highest = min(t.ms), max(t.ms)
    for m in t.modes:
        if not (m.low_ms <= m.median_ms <= m.high_ms) or m.low_ms < lowest or m.high_ms > highest:
            return "a mode's median or range does not fit its processes' times"
    return ""


def verdict(found: dict) -> str:
    """One of VERDICTS: a worse change is real; no worse change but something undecided, or nothing in common,
    cannot tell; else no real change (a change for the better, or none)."""
    if any(c.get("worse") for c in found["changes"]):
        return VERDICTS[0]
    if found["undecided"] or not found["compared"]:
        return VERDICTS[1]
    return VERDICTS[2]


def since_sentence(found: Since, baseline: bool = False) -> str:
    """"Since the check of 2026-12-02 09:00 on this machine (torch 2.14.1 -> 2.15.0): ..."; against a baseline,
    "Against the baseline base.json (the check of ..., the same versions): ... Verdict: no real change."."""
    when = fmt_timestamp(found.created_at) if found.created_at else "an undated check"
    if baseline:
        versions = "; ".join(found.versions) or "the same versions"
        where = "" if found.same_machine else ", of another machine"
        head = f"Against the baseline {found.name} (the check of {when}{where}, {versions})"
    else:
        versions = f" ({'; '.join(found.versions)})" if found.versions else " (the same versions)"
        head = f"Since the check of {when} on this machine{versions}"
    if not found.compared:
        text = f"{head}: nothing of the two checks is the same case, so nothing is compared"
    elif not found.changes:
        text = f"{head}: the same verdicts" + (", and the products' times within their ranges" if found.timed and
                                               not found.undecided else "")
    else:
        said = "; ".join(f"{c.what} on {c.device} {c.was}, now {c.now}" for c in found.changes[:4])
        more = f" (and {plural(len(found.changes) - 4, 'more change')})" if len(found.changes) > 4 else ""
        text = f"{head}: {said}{more}"
    if found.undecided:
        more = f" (and {plural(len(found.undecided) - 3, 'more')})" if len(found.undecided) > 3 else ""
        text += f"; cannot tell: {'; '.join(found.undecided[:3])}{more}"
    return f"{text}." + (f" Verdict: {found.verdict}." if baseline and found.verdict else "")
