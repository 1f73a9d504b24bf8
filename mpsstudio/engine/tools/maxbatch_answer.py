"""What a largest-batch search answers (tools/maxbatch.py searches): the largest batch that trained, the smallest
that did not and why, the sizes worth a sweep, and one sentence; the probes to resume from when the search's process
died. Torch-free: the parent reads a checkpoint, and the window's sheet its default, without loading torch."""

from __future__ import annotations

from ..basics.formatting import fmt_bytes

PROBE_STEPS = 3  # timed training steps per probe, after one untimed step
DEFAULT_CAP = 65536  # the largest batch tried unless asked (a tiny model fits batches nobody trains with)


def arguments(values: dict) -> dict:
    """The command line's --memory-limit and --max-batch as the search's settings; UserError naming the option."""
    from ..basics.config import MAX_BATCH
    from ..basics.errors import UserError
    from ..basics.formatting import parse_memory_size

    text, cap = values["memory_limit"], values["max_batch"]
    limit = parse_memory_size(text, "--memory-limit") if text is not None else None
    cap = cap if cap is not None else DEFAULT_CAP
    if not 1 <= cap <= MAX_BATCH:
        raise UserError(f"--max-batch must be a whole number from 1 to {MAX_BATCH:,}, not {cap}.")
    at = values.get("at_batch")
    if not values.get("longest_sequence"):
        if at is not None:
            raise UserError("--at-batch is the batch of the longest-sequence search: give --longest-sequence too.")
        return {"memory_limit": limit, "cap": cap}
    at = 1 if at is None else at
    if not 1 <= at <= MAX_BATCH:
        raise UserError(f"--at-batch must be a whole number from 1 to {MAX_BATCH:,}, not {at}.")
    return {"memory_limit": limit, "cap": cap, "axis": "seq_len", "at": at}


def found_none(result: dict) -> bool:
    """No batch trained (the command exits 1)."""
    from .records import MaxBatchResult

    return not MaxBatchResult.of(result).largest_batch


def sweep_sizes(largest: int) -> list[int]:
    """The batch sizes worth measuring with the run's rules to find the fastest: the largest that trains and the
    powers of two below it down to an eighth of it."""
    sizes, b = [largest], 1 << (max(1, largest).bit_length() - 1)
    while b >= max(1, largest // 8):
        if b != largest:
            sizes.append(b)
        b //= 2
    return sorted(sizes)


def report(probes: list[dict], *, device: str, limit: int | None, limit_source: str, cap: int, stopped: bool,
           env: dict, config: dict, enforced: str = "", cap_source: str = "asked", axis: str = "batch",
           at: int = 1, ceiling: str = "") -> dict:
    """The result of a search: the largest batch that trained, the smallest that did not and why, every probe, the
    sizes worth a sweep, and one sentence. `axis` "seq_len": the sizes are sequence lengths at the batch `at`."""
    fits = [p for p in probes if p["fits"]]
    largest = max(fits, key=lambda p: p["batch_size"]) if fits else None
    fastest = max(fits, key=lambda p: p["samples_per_s"] or 0) if fits else None
    above = sorted((p for p in probes if not p["fits"]
                    and (largest is None or p["batch_size"] > largest["batch_size"])), key=lambda p: p["batch_size"])
    failed = above[0] if above else None
    capped = largest is not None and largest["batch_size"] >= cap and failed is None
    sizes = sweep_sizes(largest["batch_size"]) if largest and axis == "batch" else []
    if axis == "seq_len":
        sentence = sequence_sentence(largest, failed, device, at, cap, cap_source, capped)
    elif largest is None:
        sentence = f"No batch trained on {device}" + (f": batch {failed['batch_size']:,} {failed['reason']}"
                                                       if failed else "") + "."
    else:
        sentence = (f"Largest batch that trains on {device}: {largest['batch_size']:,} "
                    f"({fmt_bytes(largest['memory'])} {_measure_words(largest['memory_measure'])})")
        if failed is not None:
            sentence += f"; {failed['batch_size']:,} did not: {failed['reason']}"
        elif capped and cap_source != "asked":
            sentence += f"; the search stopped at {cap_source}, not at a memory limit"
        elif capped:
            sentence += f"; the search stopped at the cap of {cap:,}, not at a memory limit"
        sentence += (f". The probes' throughput comes from {PROBE_STEPS} training steps each, too few to rank batch "
                     f"sizes: sweep {', '.join(f'{b:,}' for b in sizes)} to find the fastest with the run's rules.")
    if ceiling:
        sentence += f" {ceiling}"
    if stopped:
        sentence += " Stopped before the search ended."
    return {
        "tool": "max-batch",
        "ceiling": ceiling,
        "axis": axis,
        "at_batch": at if axis == "seq_len" else None,
        "device": device,
        "largest_batch": largest["batch_size"] if largest else None,
        "smallest_failed": ({"batch_size": failed["batch_size"], "why": failed.get("why") or "",
                             "reason": failed["reason"]} if failed else None),
        "fastest_batch": fastest["batch_size"] if fastest else None,
        "sweep_sizes": sizes,
        "probes": probes,
        "limit": limit,
        "limit_source": limit_source,
        "limit_enforced": enforced,
        "cap": cap,
        "cap_source": cap_source,
        "capped": capped,
        "stopped": stopped,
        "probe_steps": PROBE_STEPS,
        "sentence": sentence,
        "env": env,
        "config": config,
    }


def sequence_sentence(longest: dict | None, failed: dict | None, device: str, at: int, cap: int, cap_source: str,
                      capped: bool) -> str:
    """The longest-sequence search in one sentence (its probes' sizes are sequence lengths at batch `at`)."""
    if longest is None:
        return (f"No sequence trained on {device} at batch {at:,}" + (f": {failed['batch_size']:,} tokens "
                                                                     f"{failed['reason']}" if failed else "") + ".")
    words = ("growth of the process's resident memory over its level after a first short step"
             if longest["memory_measure"] == "rss_growth" else _measure_words(longest["memory_measure"]))
    sentence = (f"Longest sequence that trains on {device} at batch {at:,}: {longest['batch_size']:,} tokens "
                f"({fmt_bytes(longest['memory'])} {words})")
    if failed is not None:
        sentence += f"; {failed['batch_size']:,} did not: {failed['reason']}"
    elif capped:
        sentence += (f"; the search stopped at {cap_source}, not at a memory limit" if cap_source != "asked" else
                     f"; the search stopped at the cap of {cap:,} tokens, not at a memory limit")
    return sentence + "."


def _measure_words(measure: str | None) -> str:
    return {"allocator_peak": "peak allocated by PyTorch", "driver_allocated": "allocated by the Metal driver",
            "rss_growth": "growth of the process's resident memory over its level after a batch-1 step"}.get(measure or "", "memory")


def from_checkpoint(answer, how: str, said: str) -> dict:
    """The probes to resume from in a fresh process when the search's process died in a probe (`said`: how, in
    words), the one it died in failed. ShapeError when the checkpoint cannot be read."""
    from ..basics.shape import List, Obj
    from .records import BATCH, Probe

    answer = Obj(need={"resume": List(Probe.declared_shape(), max=1_000), "probing": BATCH}).check(answer)
    probes, batch = answer["resume"], answer["probing"]
    died = {"batch_size": batch, "fits": False, "samples_per_s": None, "step_ms": None, "memory": None,
            "memory_measure": None, "why": "process died", "reason": f"its process died ({said})"}
    return {"resume": [*probes, died], "how": how}
