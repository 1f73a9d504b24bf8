"""The largest batch that trains: full training steps, doubling then bisecting to the exact boundary.

The usual recipe (double the batch until "out of memory", forward pass only) misses the backward pass and the
optimizer's state, and on a Mac it can push the machine into swap before MPS raises anything: the GPU shares
RAM with everything else. So each probe here is `PROBE_STEPS` full training steps (forward, backward, optimizer
step) after one untimed step, on a batch shaped like the run's.

The limit is enforced by the allocator itself where there is one (`enforce_limit`): on CUDA
`torch.cuda.set_per_process_memory_fraction` caps PyTorch's caching allocator at --memory-limit (without one, the
card itself is the limit); on MPS `torch.mps.set_per_process_memory_fraction` caps the MPS allocator at the limit,
by default `torch.mps.recommended_max_memory()` (what Metal says the GPU may use without hurting the system). So
the boundary there is a real out-of-memory error in the search's own process, not a prediction. A probe does not
fit when:

- it raised out of memory (CUDA, MPS, or the host);
- its memory went above a limit no allocator enforces: on the CPU a safe share of the RAM available when the
  search began (`CPU_SHARE`, or --memory-limit);
- where no allocator enforces the limit (the CPU), its memory, extrapolated from the two largest batches that fit,
  would be more than `PREDICT_MARGIN` times the limit (it is then not run: this keeps a CPU search out of swap); a
  prediction is never above the memory measured for a larger batch and never rules out a batch smaller than one
  that trained;
- the system swapped out more than `SWAP_LIMIT` bytes during it (CPU and MPS: the GPU shares the RAM);
- its throughput fell below `COLLAPSE` of the best smaller batch's, measured twice, while it used at least
  `PRESSURE_SHARE` of the limit, and that smaller batch measured again just after is still fast (CPU and MPS:
  memory pressure; slow far below the limit, or slow with the smaller batch slow too, is another program's load);
- its process died (MPS can abort instead of raising: an assertion on one array over 4 GiB, pytorch#143859): the
  search goes on in a fresh process from the probes it had (process.run_tool, `resume`).

Between probes the allocator is emptied (torch.mps.empty_cache / torch.cuda.empty_cache) and Python's garbage
collected. Bisection ends at the exact boundary (a gap of 1) up to `EXACT_UP_TO`, and within 1/`RESOLUTION` of
the batch above it. The probes' throughput comes from a few steps, too few to rank batch sizes: the result names
the sizes worth a sweep (`maxbatch_answer.sweep_sizes`), which measures them with the run's rules.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import psutil
import torch

from . import toolkit
from .memory import RssPeak, ceiling, enforce_limit, free, is_oom, limit_for, swapped_out
from ..run import steps
from ..basics.config import MAX_BATCH, RunConfig
from ..basics.errors import UserError
from ..basics.formatting import error_line, fmt_bytes, fmt_rate
from .maxbatch_answer import DEFAULT_CAP, PROBE_STEPS, report
from ..machine import footprint

SWAP_LIMIT = 256 * 1024 * 1024  # swapped out during one probe: the machine is short of memory
COLLAPSE = 0.5  # throughput below this share of the best smaller batch's: memory pressure ...
PRESSURE_SHARE = 0.5  # ... when the probe used at least this share of the limit (else: another program's load)
EXACT_UP_TO = 1024  # bisect to a gap of 1 below this batch ...
RESOLUTION = 128  # ... and to largest/RESOLUTION above it
PREDICT_MARGIN = 1.25  # a batch is skipped unrun only when predicted above this multiple of the limit


class _Search:
    def __init__(self, setup: toolkit.Setup, limit: int | None, cap: int, progress, stop, enforced: str = "",
                 resume: list[dict] | None = None, checkpoint=None, axis: str = "batch", at: int = 1):
        self.setup, self.limit, self.cap = setup, limit, cap
        # what a probe's size is: the batch, or the sequence length of token input at the batch `at`
        self.axis, self.at = axis, at
        # probes an earlier process of this search made (the last one killed it): taken as they were, not run again
        self.known = {p["batch_size"]: p for p in resume or []}
        self.checkpoint = checkpoint or (lambda answer, deadline_s: None)
        self.enforced = enforced  # how the allocator enforces the limit ("": it does not)
        self.shares_ram = setup.device.kind in ("cpu", "mps")  # swap and memory pressure can hit these
        self.progress, self.stop = progress, stop
        self.dev = setup.device
        self.probes: list[dict] = []
        self.current = 1  # the batch being probed
        self.model = toolkit.build(setup).to(setup.tdev)
        self.optimizer = steps.make_optimizer(setup.config, self.model)
        self.dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(setup.config.precision or "fp32")
        # one untimed batch-1 step first: PyTorch's one-time set-up (thread pools, kernels, optimizer state) is
        # not memory a batch needs, so CPU growth counts from the level after it
        x, y = self._batch(1)
        self._step(x, y)
        del x, y
        self.optimizer.zero_grad(set_to_none=True)
        free(self.dev.kind)
        self.base_rss = psutil.Process().memory_info().rss

    def _batch(self, n: int):
        """A probe's inputs: `n` samples of the model's input, or `at` samples of `n` tokens each."""
        if self.axis == "batch":
            return toolkit.synthetic_batch(self.setup.model_spec, n, self.setup.tdev, self.setup.config.seed,
                                           self.setup.feed)
        spec = replace(self.setup.model_spec, seq_len=n)
        return toolkit.synthetic_batch(spec, self.at, self.setup.tdev, self.setup.config.seed,
                                       toolkit.feed_at(self.setup, spec))

    def _work(self, n: int) -> int:
        """What a step of size `n` trains on: its samples (the batch axis) or its tokens (the sequence axis, whose
        samples/s falls with the length by itself: a collapse is read from tokens/s)."""
        return n if self.axis == "batch" else self.at * n

    def _fresh(self) -> None:
        """Each probe starts as a run does: the model built and moved to the device, a new optimizer whose state
        is made in the first step at the probe's batch size, the allocator emptied before. Where the optimizer's
        state and the weights land among a step's memory moves the boundary by a few batches near a cap."""
        del self.model, self.optimizer  # the last references: freed before the next are made
        free(self.dev.kind)
        self.model = toolkit.build(self.setup).to(self.setup.tdev)
        self.optimizer = steps.make_optimizer(self.setup.config, self.model)

    def _memory(self, rss_peak: int) -> tuple[int, str]:
        kind = self.dev.kind
        if kind == "cuda":
            return int(torch.cuda.max_memory_allocated(self.dev.index)), "allocator_peak"
        if kind == "mps":  # PyTorch's peak where the loaded torch keeps one (footprint.mps_peak), else Metal's figure
            peak = footprint.mps_peak()
            if peak is not None:
                return peak, "allocator_peak"
            return int(torch.mps.driver_allocated_memory()), "driver_allocated"
        return max(0, rss_peak - self.base_rss), "rss_growth"

    def _step(self, x, y) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        if self.dtype is not None:  # mixed precision, as the run does it
            with torch.autocast(self.setup.tdev.type, dtype=self.dtype):
                loss = self.setup.feed.loss_of(self.model, x, y)
        else:
            loss = self.setup.feed.loss_of(self.model, x, y)
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

    def _pressure(self, sps: float | None, memory: int, best: float) -> str:
        """Why a probe that trained is memory pressure ("" when it is not): its throughput collapsed below
        `COLLAPSE` of the best smaller batch's while it used at least `PRESSURE_SHARE` of the limit (slow far from
        the limit is a busy machine), and that smaller batch, measured again just after, is still fast."""
        if (sps is None or not best or sps >= COLLAPSE * best or self.limit is None
                or memory < PRESSURE_SHARE * self.limit):
            return ""
        reference = max(p["batch_size"] for p in self.probes if p["fits"] and p["samples_per_s"] == best)
        now = self._rate_now(reference)
        if sps >= COLLAPSE * now:
            return ""
        return (f"throughput fell to {fmt_rate(sps)} samples/s, under {COLLAPSE:.0%} of the {fmt_rate(now)} of batch "
                f"{reference:,} measured again just after (memory pressure)")

    def _rate_now(self, batch: int) -> float:
        """The throughput of a smaller batch that trained, measured again now: a collapse is memory pressure only
        when that batch is still fast (a machine that became busy slows both: measured under load, a faked MPS
        search took its own boundary for memory pressure)."""
        x = y = None
        try:
            x, y = self._batch(batch)
            self._step(x, y)
            self.dev.synchronize()
            seconds = self._timed(x, y)
        finally:
            del x, y
            self.optimizer.zero_grad(set_to_none=True)
            free(self.dev.kind)
        return self._work(batch) * PROBE_STEPS / seconds if seconds > 0 else float("inf")

    def predicted(self, batch: int) -> int | None:
        """Memory of `batch` extrapolated linearly from the two largest probes that fit, and never above the memory
        measured for a larger batch (memory is not monotonic in the batch: other kernels, other workspaces)."""
        fits = sorted((p for p in self.probes if p["fits"] and p["memory"] is not None),
                      key=lambda p: p["batch_size"])
        if len(fits) < 2:
            return None
        a, b = fits[-2], fits[-1]
        slope = (b["memory"] - a["memory"]) / max(1, b["batch_size"] - a["batch_size"])
        guess = int(b["memory"] + max(0.0, slope) * (batch - b["batch_size"]))
        larger = [p["memory"] for p in self.probes if p["batch_size"] > batch and p["memory"] is not None
                  and p["memory_measure"] != "predicted"]
        return min([guess, *larger])

    def probe(self, batch: int) -> dict:
        if self.stop():
            raise toolkit.Stopped()
        self.current = batch
        if batch in self.known:
            self.probes.append(self.known.pop(batch))
            return self.probes[-1]
        size = f"batch {batch:,}" if self.axis == "batch" else f"{batch:,} tokens at batch {self.at:,}"
        self.progress(f"{size}: training {PROBE_STEPS} steps", 0.0)
        record: dict = {"batch_size": batch, "fits": False, "samples_per_s": None, "step_ms": None, "memory": None,
                  "memory_measure": None, "reason": ""}
        # where an allocator enforces the limit, every batch is run (an out-of-memory error there is cheap and
        # exact); elsewhere a batch predicted far past the limit is skipped, unless a larger one trained
        guess = None if self.enforced else self.predicted(batch)
        trained_larger = any(p["fits"] and p["batch_size"] >= batch for p in self.probes)
        if (self.limit is not None and guess is not None and guess > PREDICT_MARGIN * self.limit
                and not trained_larger):
            record.update(why="predicted", memory_measure="predicted",
                          reason=f"not run: it would need about {fmt_bytes(guess)}, far above the limit of "
                                 f"{fmt_bytes(self.limit)}")
            self.probes.append(record)
            return record
        # MPS can abort the process rather than raise (an assertion on one array over 4 GiB: pytorch#143859): if
        # this probe kills it, the search goes on in a fresh one with this batch failed (process.run_tool)
        self.checkpoint({"resume": list(self.probes), "probing": batch}, None)
        self._fresh()
        self.dev.reset_peak()
        swap_before = swapped_out()
        x = y = None
        try:
            with RssPeak() as rss:
                x, y = self._batch(batch)
                self._step(x, y)
                self.dev.synchronize()
                seconds = self._timed(x, y)
                best = max((p["samples_per_s"] or 0 for p in self.probes if p["fits"]), default=0)
                if best and self._work(batch) * PROBE_STEPS / seconds < COLLAPSE * best:  # measure again first
                    seconds = min(seconds, self._timed(x, y))  # a collapse: another program may have run
            memory, measure = self._memory(rss.peak)
        except toolkit.Stopped:
            raise
        except Exception as exc:
            if not is_oom(exc):
                raise
            under = f"under the {fmt_bytes(self.limit)} cap, " if self.enforced else ""
            record.update(why="out of memory", reason=f"out of memory ({under}{error_line(exc, 160, with_type=False)})")
            self.probes.append(record)
            return record
        finally:
            del x, y
            self.optimizer.zero_grad(set_to_none=True)
            free(self.dev.kind)
        sps = self._work(batch) * PROBE_STEPS / seconds if seconds > 0 else None
        record.update(samples_per_s=sps, step_ms=seconds / PROBE_STEPS * 1000, memory=memory,
                      memory_measure=measure)
        swapped = swapped_out() - swap_before
        best = max((p["samples_per_s"] or 0 for p in self.probes if p["fits"]), default=0)
        if self.limit is not None and not self.enforced and memory > self.limit:
            record.update(why="over the limit", reason=f"used {fmt_bytes(memory)}, above the limit of "
                                                       f"{fmt_bytes(self.limit)}")
        elif self.shares_ram and swapped > SWAP_LIMIT:
            record.update(why="swap", reason=f"the system swapped out {fmt_bytes(swapped)} while it ran")
        elif self.shares_ram and (pressure := self._pressure(sps, memory, best)):
            record.update(why="memory pressure", reason=pressure)
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
        while fail - fit > (1 if fit < EXACT_UP_TO else max(1, fit // RESOLUTION)):  # bisecting
            mid = (fit + fail) // 2
            if self.probe(mid)["fits"]:
                fit = mid
            else:
                fail = mid


def search(config: RunConfig, *, memory_limit: int | None = None, cap: int = DEFAULT_CAP, start: int = 1,
           progress: Callable[[str, float], None] | None = None,
           should_stop: Callable[[], bool] | None = None, resume: list[dict] | None = None,
           checkpoint: Callable[[dict | None, float | None], None] | None = None, axis: str = "batch",
           at: int = 1) -> dict:
    """Find the largest batch of `config` that trains on its device, and the fastest; see the module docstring.
    `resume`: the probes of an earlier process of the same search, which died in its last one; `checkpoint`: told
    before each probe what to resume from should this process die in it.

    `axis` "seq_len": the longest sequence of a token model that trains at the batch `at` instead (up to the
    positions the model takes).

    Raises UserError for bad input or a model that fails for another reason than memory at the first batch."""
    if isinstance(cap, bool) or not isinstance(cap, int) or not 1 <= cap <= MAX_BATCH:
        raise UserError(f"The largest batch to try must be a whole number from 1 to {MAX_BATCH:,}.")
    if memory_limit is not None and (isinstance(memory_limit, bool) or not isinstance(memory_limit, int)
                                     or memory_limit < 1024 * 1024):
        raise UserError("The memory limit must be at least 1 MiB, e.g. 8G or 512M.")
    progress = progress or (lambda message, fraction: None)
    stop = should_stop or (lambda: False)
    setup = toolkit.prepare(config.with_device(config.device), progress)
    if axis == "seq_len":
        cap, cap_source = sequence_cap(setup, cap, at)
    else:
        cap, cap_source = data_cap(setup, cap)
    limit, source = limit_for(setup, memory_limit)
    stopped = False
    probes: list[dict] = []
    enforced, lift = enforce_limit(setup.device, limit)
    if resume is not None and not (isinstance(resume, list) and all(
            isinstance(p, dict) and isinstance(p.get("batch_size"), int) and isinstance(p.get("fits"), bool)
            for p in resume)):
        raise UserError("The max-batch search was asked to resume from probes it cannot read.")
    try:
        probes, stopped = _searched(setup, config, limit, cap, progress, stop, enforced, start, resume, checkpoint,
                                    axis, at)
    finally:
        lift()
    if checkpoint is not None:  # the search is over: nothing to resume
        checkpoint(None, None)
    return report(probes, device=setup.device.id, limit=limit, limit_source=source, cap=cap, stopped=stopped,
                  env=setup.env, config=setup.config.to_dict(), enforced=enforced, cap_source=cap_source,
                  axis=axis, at=at, ceiling=ceiling(setup.device))


def sequence_cap(setup: toolkit.Setup, cap: int, at: int) -> tuple[int, str]:
    """The longest sequence worth trying: `cap`, or the positions the model takes when fewer; UserError for a model
    whose input is not tokens, or whose own make_batch decides its length."""
    from ..basics.config import MAX_SEQ

    if setup.model_spec.kind != "tokens":
        raise UserError(f"{setup.config.model} takes images; the longest-sequence search is for a model of tokens "
                        "(search the largest batch instead).")
    toolkit.feed_at(setup, setup.model_spec)  # (UserError for a model file's own make_batch: its own length)
    if isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= MAX_BATCH:
        raise UserError(f"The batch of the longest-sequence search must be a whole number from 1 to {MAX_BATCH:,}.")
    cap = min(cap, MAX_SEQ)
    positions = toolkit.positions(setup)
    if positions and positions < cap:
        return positions, f"the {positions:,} positions the model takes"
    return cap, "asked"


def data_cap(setup: toolkit.Setup, cap: int) -> tuple[int, str]:
    """The largest batch worth trying: `cap`, or a dataset's training samples when fewer (a run's batch is at most
    that many; synthetic data and a model's own make_batch make batches of any size). (cap, what set it)."""
    if str(setup.config.dataset).lower() == "synthetic" or setup.feed.made:
        return cap, "asked"
    samples = setup.data.train_count
    if samples < cap:
        return max(1, samples), f"the {samples:,} training samples of {setup.data.name} (a run's batch is at most that)"
    return cap, "asked"


def _searched(setup, config, limit, cap, progress, stop, enforced, start, resume, checkpoint, axis="batch", at=1
              ) -> tuple[list[dict], bool]:
    stopped, probes = False, []
    with steps.global_settings(setup.config):
        finder = None
        try:
            finder = _Search(setup, limit, cap, progress, stop, enforced, resume, checkpoint, axis, at)
            probes = finder.probes
            finder.run(max(1, min(start, cap)))
        except toolkit.Stopped:
            stopped = True
        except UserError:
            raise
        except Exception as exc:
            if finder is None and is_oom(exc):  # even the first batch-1 step ran out of memory
                probes = [{"batch_size": 1, "fits": False, "samples_per_s": None, "step_ms": None, "memory": None,
                           "memory_measure": None, "why": "out of memory",
                           "reason": f"out of memory ({error_line(exc, 160, with_type=False)})"}]
            else:
                at = finder.current if finder is not None else 1
                raise UserError(f"{config.model} failed a training step at batch {at:,} for another reason than "
                                f"memory ({error_line(exc, 200)}); fix the model or pick another.") from exc
    return probes, stopped


def run_tool(config: RunConfig, payload: dict, *, progress=None, should_stop=None, checkpoint=None) -> dict:
    """The search as the tool table carries it out in a run process (tools/registry.py)."""
    return search(config, memory_limit=payload.get("memory_limit"), cap=payload.get("cap", DEFAULT_CAP),
                  progress=progress, should_stop=should_stop, resume=payload.get("resume"), checkpoint=checkpoint,
                  axis=payload.get("axis", "batch"), at=payload.get("at", 1))
