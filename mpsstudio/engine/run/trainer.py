"""The run loop: one path for the GUI and the CLI, measured by the rules in docs/architecture.md.

- warm-up steps are timed apart and never counted in throughput;
- the device is synchronized before every clock read;
- losses stay on the device and are fetched once per window (~0.1 s of work), never per step;
- throughput = samples in a window / synchronized window time; summary = median and IQR over windows.

Every clock read and sync of a run is in `RunLoop.execute`, so a reader can check the measurement rules in one
place; what is set up before the first step is setup.py's, a step is steps.py's, a window's bookkeeping
windows.py's, and validation, early stopping and the best epoch are epochs.py's.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..analysis.summary import RunFacts, memory_measure, perplexity, summarise
from ..basics.config import RunConfig, precision_note
from ..basics.errors import present
from ..basics.events import Ended, EpochEnd, Event, Started, Warmup
from ..basics.formatting import error_line
from ..basics.results import RunResult
from ..data import datasets
from ..data.batches import endless, shape_key
from ..machine import devices, host
from ..models import registry as models
from .failures import MODEL_INTERRUPT, Cancelled, DataError, outcome, release_reserve
from .setup import Prepared, prepare
from .steps import global_settings
from .windows import Windows


def run(config: RunConfig, *, on_event: Callable[[Event], None] | None = None,
        should_stop: Callable[[], bool] | None = None, device: devices.Device | None = None,
        data: datasets.LoadedDataset | None = None,
        progress: Callable[[str, float], None] | None = None, position: tuple[int, int] = (1, 1),
        interrupt_is_user: bool = True, save_model: str | None = None, ranks=None) -> RunResult:
    """Run one config to its end and return the result; every outcome (also failure) ends with an Ended event.

    `device` and `data` let a caller pass an already resolved device or loaded dataset (tests, comparisons);
    `position` is (this run, of how many) when several configs run together (session.run_configs).
    `should_stop` is polled once per measurement window. `save_model`: where a finished training run writes its
    trained weights and their JSON (models/saved.py); the summary says where (`saved_model`) or why not.
    `ranks`: this process's rank of a run on several GPUs (ranks.py); None for a run on one device.
    """
    if config.framework == "mlx":  # the same model in MLX, measured by the same rules (run/mlx/)
        from .mlx.runner import run as run_mlx

        return run_mlx(config, on_event=on_event, should_stop=should_stop, data=data, progress=progress,
                       position=position, interrupt_is_user=interrupt_is_user)
    result = RunResult(config=config)
    loop = RunLoop(config, result, on_event or (lambda event: None), should_stop or (lambda: False), device, data,
                   progress, position, ranks)
    try:
        with global_settings(config) as flushing:
            loop.flush_denormal = flushing
            loop.execute()
        result.status = "finished"
    except KeyboardInterrupt:  # Ctrl-C in a terminal: the run so far is kept as cancelled, then it goes on up
        if interrupt_is_user:
            result.status = "cancelled"
            raise
        # in a run's own process no Ctrl-C arrives (own session): the model's code raised it
        result.status, result.error = "failed", MODEL_INTERRUPT
    except BaseException as exc:  # every other ending is a recorded run with one sentence
        if isinstance(exc, MemoryError):
            release_reserve()  # room to summarise and send the result
        result.status, result.error = outcome(exc, config)
    finally:
        loop.end(save_model)
    return result


class RunLoop:
    """One run from set-up to summary; `execute` is the measured loop."""

    def __init__(self, config, result, emit, stop, device, data, progress, position=(1, 1), ranks=None):
        self.config, self.result, self.emit, self.stop = config, result, emit, stop
        self.ranks, self.asked = ranks, stop  # several ranks: Stop is what they agreed at a window's end
        self.device, self.data, self.progress, self.position = device, data, progress, position
        self.p: Prepared | None = None
        self.noted: dict = {}  # what setup learnt before it ended: a failed run's summary still reports it
        self.windows: Windows | None = None
        self.warmup_s: float | None = None
        self.measured_wall_s = 0.0  # warm-up end to run end, validation excluded: includes all engine overhead
        self.val: tuple[float, float] | None = None
        self.flush_denormal = False
        # other programs' CPU use over the measured phase (a rank's own: every rank torchrun started here)
        self.load = host.LoadMeter(os.getppid() if ranks is not None else None)
        self.saved: dict = {}  # saved_model (its path) or saved_model_error, for the summary
        self.shapes: set = set()  # the input shapes the model was fed
        self.agreeing: tuple | None = None  # several ranks: a window whose agreement is under way, and its record
        if ranks is not None:
            self.stop = lambda: ranks.stopped

    @property
    def measured(self) -> Windows:
        """The run's measurement windows (made when its set-up is done)."""
        return present(self.windows, "the run has not been set up")

    @property
    def prepared(self) -> Prepared:
        """What the run's set-up made."""
        return present(self.p, "the run has not been set up")

    def _check_stop(self) -> None:
        """Setup and warm-up honour Stop too (measured steps check it once a window)."""
        if self.stop():
            raise Cancelled()

    def _start(self) -> Prepared:
        p = self.p = prepare(self.config, self.device, self.data, self.progress, self._check_stop,
                             self.flush_denormal, self.noted, self.ranks)
        self.device, self.data = p.device, p.data
        self.result.env = p.env
        self.windows = Windows(self.config, p.device, p.meter, self.result.losses, self.result.windows, self.emit,
                               p.warm, p.total, p.memory_base, self.ranks.world if self.ranks else 1)
        self.emit(Started(run_id=self.result.id, config=self.config.to_dict(), env=p.env, device=p.device.to_dict(),
                          dataset=self.noted["dataset"], parameters=p.steps.parameters, total_steps=p.total,
                          warmup_steps=p.warm, notes=[*p.data.notes, *p.notes, *filter(None, [precision_note(self.config),
                                                                          self.ranks and self.ranks.note()])],
                          run_index=self.position[0],
                          run_count=self.position[1], train_size=self.noted["train_size"],
                          tokens_per_step=tokens_per_step(p, self.config.batch_size, self.ranks)))
        return p

    def _idle(self, meter) -> None:
        """The device's idle power, read before the warm-up (env["energy"]: idle_w, idle_s, idle_reason),
        so energy can be given above idle as well as for the whole device."""
        if self.stop():
            return
        watts, seconds, why = meter.idle()
        info = self.result.env.get("energy") if isinstance(self.result.env, dict) else None
        if isinstance(info, dict):
            info.update(idle_w=watts, idle_s=seconds, idle_reason=why)

    def execute(self) -> None:
        p = self._start()
        cfg, dev, steps, win, meter = self.config, p.device, p.steps, self.measured, p.meter
        step_fn = steps.choose()
        p.model.train(cfg.mode == "train")
        dev.reset_peak()
        stream = endless(p.train)
        by_epoch = cfg.steps is None
        win_losses: list = []
        win_wait = validation_s = 0.0
        epoch = 0
        dev.synchronize()
        # Idle power before the warm-up, never between it and the measured phase: a GPU left idle for the reading
        # comes back slowly (the lent H200s: the first windows after it at 40-60 % on 2 GPUs, a 60-step run slow
        # throughout), and the warm-up is what brings the device back to speed.
        self._idle(meter)
        if p.warm == 0:
            meter.begin()
        run_start = epoch_start = clock = time.perf_counter()
        warm_end = run_start
        if p.warm == 0:
            self.load.start()
        # On a GPU a window's bookkeeping (its record and event) waits until the next step is queued, so the device
        # computes meanwhile: measured on an H100 (docs/benchmarks.md), ~3 ms of it at every window's end with the
        # device idle cost resnet18 3 % of its wall-clock throughput. The next window then starts at this one's end.
        overlap = dev.kind in ("cuda", "mps")
        # On CUDA a window is timed by events recorded in the stream (win.marks): its end is marked and its losses'
        # copy queued without draining the device; both are read once the next step is queued (_settle).
        marks = win.marks
        start_mark = marks.mark() if p.warm == 0 else None
        pending: tuple | None = None
        try:
            for step in range(1, p.total + 1):
                t = time.perf_counter()
                try:
                    x, y = next(stream)
                except Exception as exc:
                    raise DataError() from exc
                win_wait += time.perf_counter() - t
                self.shapes.add(shape_key(x))  # distinct input shapes: the driver's caches grow with them (memory.py)
                win_losses.append(step_fn(x, y) if step > 1 else steps.first(step_fn, x, y))
                if pending is not None:  # (cleared first: a window that fails its check is not settled twice)
                    settling, pending = pending, None
                    self._settle(settling, soon=True)
                # epochs matter only in epoch mode: a steps run closes windows by time alone
                epoch_end = by_epoch and step % p.steps_per_epoch == 0
                in_warm = step <= p.warm
                if in_warm and step < p.warm and self.stop():  # warm-up steps can be slow: Stop need not wait
                    win.fetch(win_losses, step - len(win_losses) + 1)
                    raise Cancelled()
                if not (step == p.warm or step == p.total or epoch_end or (not in_warm and win.full(len(win_losses)))):
                    continue
                first = step - len(win_losses) + 1
                if marks.enabled and not in_warm and not epoch_end and step != p.total:  # no drain: settled later
                    staged = win.stage(win_losses)
                    end_mark = marks.mark()
                    now = time.perf_counter()
                    reading = meter.end(close=False)
                    eta: float | None = (now - warm_end) / (step - p.warm) * (p.total - step)
                    pending = (first, staged, None, win_wait, step, now - run_start, eta, reading, (start_mark, end_mark))
                    start_mark, win_losses, win_wait = end_mark, [], 0.0
                    if self.stop():
                        settling, pending = pending, None
                        self._settle(settling)
                        win.close_span()
                        self._close_wall(warm_end, validation_s)
                        raise Cancelled()
                    meter.begin()
                    clock = now
                    continue
                dev.synchronize()
                now = time.perf_counter()
                # energy over spans of whole windows, closed before every break (validation, the end; a stop: below)
                reading = None if in_warm else meter.end(close=step == p.total or epoch_end)
                seconds = now - clock
                timed = (start_mark, marks.mark()) if marks.enabled and not in_warm else None
                if in_warm and self.ranks is not None:  # Stop agreed by every rank at the warm-up's end too
                    self.ranks.agree(seconds, step, self.asked())
                values = win.fetch(win_losses, first)
                if in_warm:
                    if step == p.warm:
                        self.warmup_s = now - run_start
                        self.emit(Warmup(steps=p.warm, seconds=self.warmup_s, losses=self.result.losses[:p.warm]))
                        warm_end = time.perf_counter()
                        self.load.start()
                else:
                    spent, done = now - warm_end, step - p.warm  # validation included, so the estimate covers it
                    eta = spent / done * (p.total - step) if done > 0 else None
                    pending = (first, values, seconds, win_wait, step, now - run_start, eta, reading, timed)
                    if not overlap or epoch_end or step == p.total:
                        settling, pending = pending, None
                        self._settle(settling)
                win_losses, win_wait = [], 0.0
                if epoch_end:
                    epoch += 1
                    t_val = time.perf_counter()
                    stop_early = self._end_epoch(epoch, step, now - epoch_start)
                    validation_s += time.perf_counter() - t_val  # a checkpoint copy is not training time either
                    if stop_early:
                        break
                if self.stop():
                    if pending is not None:
                        settling, pending = pending, None
                        self._settle(settling)
                    win.close_span()
                    self._close_wall(warm_end, validation_s)
                    raise Cancelled()
                if pending is None:  # after the warm-up, a validation or on the CPU: the next window starts now
                    dev.synchronize()
                    if step >= p.warm:  # the next window is measured
                        meter.begin()
                    clock = time.perf_counter()
                    start_mark = marks.mark()
                else:  # ... or at this one's end, its bookkeeping done while the next step runs
                    meter.begin()
                    clock = now
                if epoch_end:
                    epoch_start = clock
        finally:
            if pending is not None:  # the next step failed: the window before it still counts
                self._settle(pending)
            self._agreed()
        if self.ranks is not None:  # the all-reduce's share of a step, after the measured phase (never counted)
            t_comm = time.perf_counter()
            self.ranks.communication(steps, step_fn, stream, dev.synchronize, win.steps_per_s())
            validation_s += time.perf_counter() - t_comm
        if not by_epoch:
            t_val = time.perf_counter()
            self.val = p.epochs.validate()
            validation_s += time.perf_counter() - t_val
        self._close_wall(warm_end, validation_s)
        evaluation = p.epochs.finish(len(self.result.epochs))
        if evaluation is not None:
            self.result.evaluation = evaluation

    def _settle(self, pending: tuple, soon: bool = False) -> None:
        """Record a measured window: one timed by CUDA events has its end and its losses' copy read now (the device
        reached them while the next step was queued), and every rank agrees on its seconds (the slowest rank's).
        `soon`: several ranks' agreement is begun and taken at the next window's (Ranks.agree_soon), so no rank
        waits for the others while its GPU runs out of work; every other settle takes it at once."""
        first, values, seconds, wait, step, elapsed, eta, reading, timed = pending
        if timed is not None:
            start, end = timed
            end.synchronize()
            seconds = start.elapsed_time(end) / 1000
            if not isinstance(values, list):
                values = self.measured.unstage(values, first)
        if self.ranks is not None:
            self._agreed()  # the window before first: windows are recorded in order
            begun = self.ranks.agree_soon(seconds, step, self.asked())
            if soon:
                self.agreeing = (begun, (first, values, wait, step, elapsed, eta, reading))
                return
            seconds = self.ranks.agreed(begun)
        self.measured.record(first, values, seconds, wait, step, elapsed, eta, reading)

    def _agreed(self) -> None:
        """The window whose agreement is under way, recorded with every rank's answer."""
        if self.agreeing is None or self.ranks is None:
            return
        begun, (first, values, wait, step, elapsed, eta, reading) = self.agreeing
        self.agreeing = None
        self.measured.record(first, values, self.ranks.agreed(begun), wait, step, elapsed, eta, reading)

    def _end_epoch(self, epoch: int, step: int, train_s: float) -> bool:
        """Validation, the epoch's record and event, early stopping and the best checkpoint; True to stop now."""
        epochs = self.prepared.epochs
        self.val = epochs.val = epochs.validate()
        val_loss, val_accuracy = self.val or (None, None)
        ended = EpochEnd(epoch, train_s, val_loss, val_accuracy, step=step,
                         val_perplexity=perplexity(val_loss) if epochs.data.text is not None else None)
        self.result.epochs.append(ended.record())
        self.emit(ended)
        return epochs.after_epoch(epoch)

    def _close_wall(self, warm_end: float, validation_s: float) -> None:
        self.device.synchronize()
        self.measured_wall_s = time.perf_counter() - warm_end - validation_s
        if self.result.env:
            self.result.env["host_load"] = self.load.stop()

    def end(self, save_model: str | None) -> None:
        """Whatever the ending: the meter closed, the summary from what was measured, the model saved when asked
        (a finished training run), and the Ended event."""
        if self.p is not None:
            self.p.meter.close()
        self.summarise()
        if self.ranks is not None:
            from .ranks import summary_of

            ranks = summary_of(self.ranks, self.result, self.windows, self.device)
            self.result.summary = self.result.summary.replaced(**ranks)
        if save_model and self.result.status == "finished" and self.p is not None:
            self.save_model(save_model)
        self.result.summary = self.result.summary.replaced(**self.saved)
        self.emit(Ended(self.result))

    def save_model(self, path: str) -> None:
        """Write the trained weights and their JSON; a disk that refuses is a sentence in the summary, never a
        failed run (what it measured stands)."""
        from ..models import saved as savedmodel

        if self.config.mode != "train":
            self.saved = {"saved_model_error": "an inference run trains nothing, so there is no model to save"}
            return
        try:
            meta = savedmodel.describe(self.config, self.data, self.prepared.model_spec, self.result.id,
                                       self.result.summary)
            savedmodel.save(self.prepared.model, path, meta)
        except Exception as exc:  # a full disk, a model whose state cannot be written: said, the run stands
            # an OSError's own words without its file name (the temporary .part beside the target)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else error_line(exc, with_type=False)
            self.saved = {"saved_model_error": f"the trained model could not be written to {path} ({reason})"}
            return
        self.saved = {"saved_model": str(path)}

    def summarise(self) -> None:
        """Fill result.summary from what was measured so far (also for failed and cancelled runs)."""
        if self.result.env and "host_load" not in self.result.env:  # ended early: up to now
            self.result.env["host_load"] = self.load.stop()
        p, noted = self.p, self.noted
        world = self.ranks.world if self.ranks is not None else 1  # several ranks: every rank's samples
        summarise(self.result, RunFacts(
            batch_size=self.config.batch_size * world, parameters=p.steps.parameters if p else noted.get("parameters", 0),
            dataset=noted.get("dataset", ""), warmup_steps=p.warm if p else 0, warmup_s=self.warmup_s,
            measured_wall_s=self.measured_wall_s, train_size=noted.get("train_size", 0) * world, val=self.val,
            peak_memory=self.windows.peak_memory if self.windows else 0,
            memory_measure=memory_measure(self.config.device, self.result.env), input_shapes=len(self.shapes) or None,
            tokens_per_sample=tokens_per_sample(p), text=p.data.text if p else None,
            seq_len=p.model_spec.seq_len if p and p.model_spec.kind == "tokens" else None,
            trainable_parameters=models.count_parameters(p.model, trainable=True) if p else None))
        if p is not None:
            self.result.summary = self.result.summary.replaced(**p.epochs.summary())
        if noted.get("preflight"):
            self.result.summary = self.result.summary.replaced(preflight=noted["preflight"])


def tokens_per_step(p: Prepared, batch_size: int, ranks) -> float | None:
    """A step's real tokens over every rank (the loss plot's tokens axis); None for image input."""
    per = tokens_per_sample(p)
    return per * batch_size * (ranks.world if ranks is not None else 1) if per else None


def tokens_per_sample(p: Prepared | None) -> float | None:
    """The tokens a sample carries, for tokens/s: a text dataset's real tokens a row (padding excluded), else the
    sequence length of token input (None for images)."""
    if p is None or p.model_spec.kind != "tokens":
        return None
    if p.data.text is not None:
        return float(p.data.text["tokens_per_sample"])
    return p.model_spec.seq_len

