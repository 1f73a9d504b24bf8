"""The largest batch that trains: full training steps, doubling then bisecting, stopping before memory runs out.

The usual recipe (double the batch until "out of memory", forward pass only) misses the backward pass and the
optimizer's state, and on a Mac it can push the machine into swap before MPS raises anything: the GPU shares
RAM with everything else. So each probe here is `PROBE_STEPS` full training steps (forward, backward, optimizer
step) after one untimed step, on a batch shaped like the run's, and a probe does not fit when:

- it raised out of memory (CUDA, MPS, or the host);
- its memory went above the limit: on MPS `torch.mps.recommended_max_memory()` (what Metal says the GPU may
  use without hurting the system), on the CPU a safe share of the RAM available when the search began
  (`CPU_SHARE`, or --memory-limit), on CUDA the card itself (a real out-of-memory error);
- the next batch's memory, extrapolated from the probes so far, would be above the limit (it is then not run:
  this is what keeps a CPU or MPS search out of swap);
- the system swapped out more than `SWAP_LIMIT` bytes during it;
- its throughput fell below `COLLAPSE` of the best smaller batch's, measured twice, while it used at least
  `PRESSURE_SHARE` of the limit (memory pressure; slow far below the limit is another program's load).

Between probes the allocator is emptied (torch.mps.empty_cache / torch.cuda.empty_cache) and Python's garbage
collected. Bisection stops when the gap is at most 1/`RESOLUTION` of the batch that fits (the result says it).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

import psutil
import torch
import torch.nn.functional as F

from . import toolkit
from ..run import steps
from ..basics.config import MAX_BATCH, RunConfig
from ..basics.errors import UserError
from ..basics.formatting import error_line, fmt_bytes, fmt_rate

PROBE_STEPS = 3  # timed training steps per probe, after one untimed step
CPU_SHARE = 0.5  # CPU runs: default limit, this share of the memory available when the search starts
SWAP_LIMIT = 256 * 1024 * 1024  # swapped out during one probe: the machine is short of memory
COLLAPSE = 0.5  # throughput below this share of the best smaller batch's: memory pressure ...
PRESSURE_SHARE = 0.5  # ... when the probe used at least this share of the limit (else: another program's load)
RESOLUTION = 16  # bisect until the gap is at most largest/RESOLUTION (and at least 1)
DEFAULT_CAP = 65536  # the largest batch tried unless asked (a tiny model fits batches nobody trains with)
RSS_SAMPLE_S = 0.01


def limit_for(setup: toolkit.Setup, memory_limit: int | None) -> tuple[int | None, str]:
    """The memory a probe may use (bytes, or None: the device's own out-of-memory error), and where it comes from."""
    if memory_limit is not None:
        return memory_limit, "--memory-limit"
    kind = setup.device.kind
    if kind == "mps":
        return int(torch.mps.recommended_max_memory()), "torch.mps.recommended_max_memory()"
    if kind == "cpu":
        available = int(psutil.virtual_memory().available)
        return int(available * CPU_SHARE), f"{CPU_SHARE:.0%} of the {fmt_bytes(available)} available at the start"
    return None, "the GPU's own memory (a real out-of-memory error)"


class _RssPeak:
    """The process's peak resident size while a probe runs (sampled in a thread; CPU and MPS share RAM)."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._proc = psutil.Process()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="rss-peak")

    def _watch(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            self._stop.wait(RSS_SAMPLE_S)

    def __enter__(self):
        self.peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def _swapped_out() -> int:
    try:
        return int(psutil.swap_memory().sout)
    except Exception:  # no swap information here (some containers)
        return 0


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or "out of memory" in text \
        or "cannot allocate memory" in text or "can't allocate memory" in text


def _free(device_kind: str) -> None:
    gc.collect()
    if device_kind == "cuda":
        torch.cuda.empty_cache()
    elif device_kind == "mps":
        torch.mps.empty_cache()


class _Search:
    def __init__(self, setup: toolkit.Setup, limit: int | None, cap: int, progress, stop):
        self.setup, self.limit, self.cap = setup, limit, cap
        self.progress, self.stop = progress, stop
        self.dev = setup.device
        self.probes: list[dict] = []
        self.current = 1  # the batch being probed
        self.model = toolkit.build(setup).to(setup.tdev)
        self.optimizer = steps.make_optimizer(setup.config, self.model)
        self.dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(setup.config.precision)
        # one untimed batch-1 step first: PyTorch's one-time set-up (thread pools, kernels, optimizer state) is
        # not memory a batch needs, so CPU growth counts from the level after it
        x, y = toolkit.synthetic_batch(setup.model_spec, 1, setup.tdev, setup.config.seed)
        self._step(x, y)
        del x, y
        self.optimizer.zero_grad(set_to_none=True)
        _free(self.dev.kind)
        self.base_rss = psutil.Process().memory_info().rss

    def _memory(self, rss_peak: int) -> tuple[int, str]:
        kind = self.dev.kind
        if kind == "cuda":
            return int(torch.cuda.max_memory_allocated(self.dev.index)), "allocator_peak"
        if kind == "mps":
            return int(torch.mps.driver_allocated_memory()), "driver_allocated"
        return max(0, rss_peak - self.base_rss), "rss_growth"

    def _step(self, x, y) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        if self.dtype is not None:  # mixed precision, as the run does it
            with torch.autocast(self.setup.tdev.type, dtype=self.dtype):
                loss = F.cross_entropy(self.model(x), y)
        else:
            loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()

    def _timed(self, x, y) -> float:
        """Seconds for PROBE_STEPS training steps, the device synchronized before and after."""
        start = time.perf_counter()
        for _ in range(PROBE_STEPS):
            if self.stop():
                raise toolkit.Stopped()
            self._step(x, y)
        self.dev.synchronize()
        return time.perf_counter() - start

    def predicted(self, batch: int) -> int | None:
        """Memory of `batch` extrapolated linearly from the two largest probes that fit."""
        fits = sorted((p for p in self.probes if p["fits"] and p["memory"] is not None),
                      key=lambda p: p["batch_size"])
        if len(fits) < 2:
            return None
        a, b = fits[-2], fits[-1]
        slope = (b["memory"] - a["memory"]) / max(1, b["batch_size"] - a["batch_size"])
        return int(b["memory"] + max(0.0, slope) * (batch - b["batch_size"]))

    def probe(self, batch: int) -> dict:
        if self.stop():
            raise toolkit.Stopped()
        self.current = batch
        self.progress(f"batch {batch:,}: training {PROBE_STEPS} steps", 0.0)
        record = {"batch_size": batch, "fits": False, "samples_per_s": None, "step_ms": None, "memory": None,
                  "memory_measure": None, "reason": ""}
        guess = self.predicted(batch)
        if self.limit is not None and guess is not None and guess > self.limit:
            record["reason"] = (f"not run: it would need about {fmt_bytes(guess)}, above the limit of "
                                f"{fmt_bytes(self.limit)}")
            record["memory_measure"] = "predicted"
            self.probes.append(record)
            return record
        _free(self.dev.kind)
        if self.dev.kind == "cuda":
            torch.cuda.reset_peak_memory_stats(self.dev.index)
        swap_before = _swapped_out()
        x = y = None
        try:
            with _RssPeak() as rss:
                x, y = toolkit.synthetic_batch(self.setup.model_spec, batch, self.setup.tdev, self.setup.config.seed)
                self._step(x, y)
                self.dev.synchronize()
                seconds = self._timed(x, y)
                best = max((p["samples_per_s"] or 0 for p in self.probes if p["fits"]), default=0)
                if best and batch * PROBE_STEPS / seconds < COLLAPSE * best:  # measure again before calling it
                    seconds = min(seconds, self._timed(x, y))  # a collapse: another program may have run
            memory, measure = self._memory(rss.peak)
        except toolkit.Stopped:
            raise
        except Exception as exc:
            if not _is_oom(exc):
                raise
            record["reason"] = f"out of memory ({error_line(exc, 160, with_type=False)})"
            self.probes.append(record)
            return record
        finally:
            del x, y
            self.optimizer.zero_grad(set_to_none=True)
            _free(self.dev.kind)
        sps = batch * PROBE_STEPS / seconds if seconds > 0 else None
        record.update(samples_per_s=sps, step_ms=seconds / PROBE_STEPS * 1000, memory=memory,
                      memory_measure=measure)
        swapped = _swapped_out() - swap_before
        best = max((p["samples_per_s"] or 0 for p in self.probes if p["fits"]), default=0)
        if self.limit is not None and memory > self.limit:
            record["reason"] = f"used {fmt_bytes(memory)}, above the limit of {fmt_bytes(self.limit)}"
        elif swapped > SWAP_LIMIT:
            record["reason"] = f"the system swapped out {fmt_bytes(swapped)} while it ran"
        elif (sps is not None and best and sps < COLLAPSE * best and self.limit is not None
              and memory >= PRESSURE_SHARE * self.limit):  # slow far from the limit is a busy machine, not memory
            record["reason"] = (f"throughput fell to {fmt_rate(sps)} samples/s, under {COLLAPSE:.0%} of the "
                                f"{fmt_rate(best)} of a smaller batch (memory pressure)")
        else:
            record["fits"] = True
        self.probes.append(record)
        return record

    def run(self, start: int) -> None:
        batch, fit, fail = start, None, None
        while True:  # doubling
            if self.probe(batch)["fits"]:
                fit = batch
                if batch >= self.cap:
                    return
                batch = min(batch * 2, self.cap)
            else:
                fail = batch
                break
        if fit is None:
            return
        while fail - fit > max(1, fit // RESOLUTION):  # bisecting
            mid = (fit + fail) // 2
            if self.probe(mid)["fits"]:
                fit = mid
            else:
                fail = mid


def search(config: RunConfig, *, memory_limit: int | None = None, cap: int = DEFAULT_CAP, start: int = 1,
           progress: Callable[[str, float], None] | None = None,
           should_stop: Callable[[], bool] | None = None) -> dict:
    """Find the largest batch of `config` that trains on its device, and the fastest; see the module docstring.

    Raises UserError for bad input or a model that fails for another reason than memory at the first batch."""
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_BATCH:
        raise UserError(f"The largest batch to try must be a whole number from 1 to {MAX_BATCH:,}.")
    if memory_limit is not None and (isinstance(memory_limit, bool) or not isinstance(memory_limit, int)
                                     or memory_limit < 1024 * 1024):
        raise UserError("The memory limit must be at least 1 MiB, e.g. 8G or 512M.")
    progress = progress or (lambda message, fraction: None)
    stop = should_stop or (lambda: False)
    setup = toolkit.prepare(config.with_device(config.device), progress)
    limit, source = limit_for(setup, memory_limit)
    stopped, probes = False, []
    with steps.global_settings(setup.config):
        finder = None
        try:
            finder = _Search(setup, limit, cap, progress, stop)
            probes = finder.probes
            finder.run(max(1, min(start, cap)))
        except toolkit.Stopped:
            stopped = True
        except UserError:
            raise
        except Exception as exc:
            if finder is None and _is_oom(exc):  # even the first batch-1 step ran out of memory
                probes = [{"batch_size": 1, "fits": False, "samples_per_s": None, "step_ms": None, "memory": None,
                           "memory_measure": None, "reason": f"out of memory ({error_line(exc, 160, with_type=False)})"}]
            else:
                at = finder.current if finder is not None else 1
                raise UserError(f"{config.model} failed a training step at batch {at:,} for another reason than "
                                f"memory ({error_line(exc, 200)}); fix the model or pick another.") from exc
    return report(probes, device=setup.device.id, limit=limit, limit_source=source, cap=cap,
                  stopped=stopped, env=setup.env, config=setup.config.to_dict())


def report(probes: list[dict], *, device: str, limit: int | None, limit_source: str, cap: int, stopped: bool,
           env: dict, config: dict) -> dict:
    """The result of a search: largest and fastest batch, every probe, and one sentence."""
    fits = [p for p in probes if p["fits"]]
    largest = max(fits, key=lambda p: p["batch_size"]) if fits else None
    fastest = max(fits, key=lambda p: p["samples_per_s"] or 0) if fits else None
    failed_above = sorted(p["batch_size"] for p in probes if not p["fits"]
                          and largest is not None and p["batch_size"] > largest["batch_size"])
    capped = largest is not None and largest["batch_size"] >= cap and not failed_above
    if largest is None:
        first = probes[0] if probes else None
        sentence = (f"No batch trained on {device}" + (f": batch {first['batch_size']:,} {first['reason']}" if first
                                                        else "") + ".")
    else:
        sentence = (f"Largest batch that trains on {device}: {largest['batch_size']:,} "
                    f"({fmt_bytes(largest['memory'])} {_measure_words(largest['memory_measure'])})")
        if failed_above:
            above = next(p for p in probes if p["batch_size"] == failed_above[0] and not p["fits"])
            sentence += (f"; {failed_above[0]:,} would not fit (predicted from the smaller batches)"
                         if above["memory_measure"] == "predicted" else f"; {failed_above[0]:,} did not fit")
        elif capped:
            sentence += f"; the search stopped at the cap of {cap:,}, not at a memory limit"
        sentence += (f". Fastest: batch {fastest['batch_size']:,} at {fmt_rate(fastest['samples_per_s'])} "
                     f"samples/s (measured over {PROBE_STEPS} training steps).")
    if stopped:
        sentence += " Stopped before the search ended."
    return {
        "tool": "max-batch",
        "device": device,
        "largest_batch": largest["batch_size"] if largest else None,
        "fastest_batch": fastest["batch_size"] if fastest else None,
        "probes": probes,
        "limit": limit,
        "limit_source": limit_source,
        "cap": cap,
        "capped": capped,
        "stopped": stopped,
        "probe_steps": PROBE_STEPS,
        "sentence": sentence,
        "env": env,
        "config": config,
    }


def _measure_words(measure: str | None) -> str:
    return {"allocator_peak": "peak allocated by PyTorch", "driver_allocated": "allocated by the Metal driver",
            "rss_growth": "growth of the process's resident memory over its level after a batch-1 step"}.get(measure or "", "memory")
