"""The run loop: one path for the GUI and the CLI, measured by the rules in docs/architecture.md.

- warm-up steps are timed apart and never counted in throughput;
- the device is synchronized before every clock read;
- losses stay on the device and are fetched once per window (~0.1 s of work), never per step;
- throughput = samples in a window / synchronized window time; summary = median and IQR over windows.

About 460 lines, on purpose: every clock read, sync and fetch of a run is in this one file, so a reader can
check the measurement rules (docs/architecture.md) in one place.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext

import torch
import torch.nn.functional as F

from ..data import datasets
from ..machine import devices, environment, host, probe
from ..machine.energy import meter as energy
from ..models import registry as models
from ..data.batches import InputConverter, make_batches
from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.events import RECENT_WINDOWS, Ended, EpochEnd, Event, Started, Warmup, Window
from ..basics.formatting import error_line, one_line
from ..basics.results import RunResult
from ..analysis.summary import RunFacts, memory_measure, summarise

# Largest image folder the 'resident' option will decode into device memory.
RESIDENT_LIMIT_BYTES = 4 * 1024**3


class Cancelled(Exception):
    """The user asked the run to stop."""


class _NonFinite(Exception):
    def __init__(self, step: int, value: float):
        self.step, self.value = step, value


class _DataError(Exception):
    """Loading a batch failed (a corrupt file, a worker crash)."""


_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def run(config: RunConfig, *, on_event: Callable[[Event], None] | None = None,
        should_stop: Callable[[], bool] | None = None, device: devices.Device | None = None,
        data: datasets.LoadedDataset | None = None,
        progress: Callable[[str, float], None] | None = None, position: tuple[int, int] = (1, 1),
        interrupt_is_user: bool = True, save_model: str | None = None) -> RunResult:
    """Run one config to its end and return the result; every outcome (also failure) ends with an Ended event.

    `device` and `data` let a caller pass an already resolved device or loaded dataset (tests, comparisons);
    `position` is (this run, of how many) when several configs run together (session.run_configs).
    `should_stop` is polled once per measurement window. `save_model`: where a finished training run writes its
    trained weights and their JSON (savedmodel.py); the summary says where (`saved_model`) or why not.
    """
    result = RunResult(config=config)
    emit = on_event or (lambda event: None)
    stop = should_stop or (lambda: False)
    loop = None
    try:
        loop = _RunLoop(config, result, emit, stop, device, data, progress, position)
        with global_settings(config) as flushing:
            loop.flush_denormal = flushing
            loop.execute()
        result.status = "finished"
    except Cancelled:
        result.status = "cancelled"
    except KeyboardInterrupt:  # Ctrl-C in a terminal: the run so far is kept as cancelled, then it goes on up
        if interrupt_is_user:
            result.status = "cancelled"
            raise
        # in a run's own process no Ctrl-C arrives (own session): the model's code raised it
        result.status = "failed"
        result.error = ("The model's code raised KeyboardInterrupt during the run; a model file must not "
                        "interrupt the program.")
    except UserError as exc:
        result.status, result.error = "failed", str(exc)
    except _NonFinite as exc:
        kind = "NaN" if math.isnan(exc.value) else "infinite"
        result.status = "failed"
        advice = f"lower the learning rate (now {config.lr:g})"
        if config.precision != "fp32":
            advice += f" or use fp32 precision (this run used {config.precision})"
        result.error = f"The loss became {kind} at step {exc.step}; {advice}."
    except _DataError as exc:
        result.status = "failed"
        result.error = f"Reading the training data failed ({error_line(exc.__cause__ or exc, with_type=False)}); check the dataset's files."
    except SystemExit as exc:  # a model's code called sys.exit(): the run fails, the process goes on
        result.status = "failed"
        result.error = (f"The model's code called sys.exit({exc.code!r}) during the run; "
                        "a model file must not exit the program.")
    except Exception as exc:  # every other failure still ends as a recorded run with one sentence
        result.status, result.error = "failed", explain_failure(exc, config)
    except BaseException as exc:  # GeneratorExit or a model's own BaseException subclass: never "finished"
        result.status = "failed"
        result.error = (f"The model's code raised {one_line(type(exc).__name__, 80)}, which is meant to end a "
                        "program, during the run; raise an Exception instead.")
    finally:
        if loop is not None:
            loop.meter.close()
            loop.summarise()
            if save_model and result.status == "finished":
                loop.save_model(save_model)
            result.summary.update(loop.saved)
        emit(Ended(result))
    return result


def _span_fields(span: energy.SpanEnergy) -> dict:
    """The Window fields of the energy span a window closed."""
    return {"energy_j": span.energy_j, "energy_s": span.seconds, "energy_windows": span.windows,
            "energy_parts": span.parts, "utilization": span.utilization}


def load_data(config: RunConfig, progress: Callable[[str, float], None] | None = None) -> datasets.LoadedDataset:
    """Load the config's dataset shaped for its model (synthetic data takes the model's input shape)."""
    info = models.get_model_info(config.model)
    return datasets.load_dataset(config.dataset, model_spec=info.default_spec,
                                 image_size=config.image_size or info.preferred_image_size,
                                 seed=config.seed, progress=progress)


def explain_failure(exc: BaseException, config: RunConfig) -> str:
    """One sentence for an exception raised by PyTorch during a run."""
    msg = error_line(exc, with_type=False)
    lowered = msg.lower()
    if isinstance(exc, MemoryError) and not isinstance(exc, torch.OutOfMemoryError):
        return (f"The run ran out of memory on {config.device} (Python could not allocate more at batch size "
                f"{config.batch_size}); try a smaller batch size, or check the model for memory it keeps.")
    if (isinstance(exc, torch.OutOfMemoryError) or "out of memory" in lowered
            or "can't allocate memory" in lowered or "cannot allocate memory" in lowered):
        smaller = max(1, config.batch_size // 2)
        return (f"Batch size {config.batch_size} ran out of memory on {config.device}; "
                f"try a batch size of {smaller} or less.")
    if isinstance(exc, NotImplementedError) and "MPS" in str(exc):
        op = re.search(r"operator '([^']+)'", str(exc))
        name = op.group(1) if op else "an operation"
        return (f"{name} is not supported on MPS by this PyTorch; turn on 'Run operations MPS lacks on the CPU' "
                f"(--mps-fallback) to run it there (slower), or pick another model.")
    return f"The run stopped with an error: {type(exc).__name__}: {msg}"


def make_optimizer(config: RunConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The config's optimizer over `model`'s parameters (runs and the measuring tools use the same)."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=0.9)
    if config.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=config.lr)
    return torch.optim.AdamW(model.parameters(), lr=config.lr)


@contextmanager
def global_settings(config: RunConfig):
    """Thread count, TF32 and denormal flushing are process-wide: set them for the run, then put them back.

    Denormals are flushed to zero on the CPU because a model that fits its data drives gradients into
    denormal floats, which the CPU computes several times slower (measured: 150 -> 430 us per step of a
    tiny model after ~750 steps); GPUs flush them anyway, so not flushing would inflate GPU speedups.
    """
    threads = torch.get_num_threads()
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        if config.threads:
            torch.set_num_threads(config.threads)
        torch.backends.cuda.matmul.allow_tf32 = config.tf32
        torch.backends.cudnn.allow_tf32 = config.tf32
        flushing = torch.set_flush_denormal(True)
        yield flushing
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


MAX_EVAL_CLASSES = 100  # a confusion matrix is kept up to this many classes (10,000 cells)


class EarlyStop:
    """Early stopping on a validation figure: the best value, its epoch, and epochs since it improved.
    Active when the config asks for early stopping or for the best epoch (keep_best)."""

    def __init__(self, config: RunConfig):
        self.patience = config.early_stop_patience
        self.monitor = config.early_stop_monitor
        self.mode = config.monitor_mode
        self.active = config.early_stop_patience is not None or config.keep_best
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.since = 0
        self.last_epoch = 0
        self.stopped_at: int | None = None

    def add(self, epoch: int, value: float | None) -> bool:
        """One epoch's value (None: not measured, never an improvement); True when it is the best so far."""
        self.last_epoch = epoch
        better = value is not None and math.isfinite(value) and (
            self.best is None or (value > self.best if self.mode == "max" else value < self.best))
        if better:
            self.best, self.best_epoch, self.since = value, epoch, 0
        else:
            self.since += 1
        return better

    def should_stop(self) -> bool:
        if self.patience is not None and self.since >= self.patience:
            self.stopped_at = self.last_epoch
            return True
        return False

    def summary(self) -> dict:
        """What the run's summary says about it (engine/summary.py copies these fields)."""
        out = {"best_epoch": self.best_epoch, "best_value": self.best, "monitor": self.monitor,
               "stopped_early_epoch": self.stopped_at}
        if self.stopped_at is not None:
            best = f"{self.best:.4g} at epoch {self.best_epoch}" if self.best is not None else "none measured"
            out["stopped_early_reason"] = (f"{self.monitor} did not improve for {self.patience} epochs "
                                           f"(mode {self.mode}; best {best})")
        return out


class _RunLoop:
    def __init__(self, config, result, emit, stop, device, data, progress, position=(1, 1)):
        self.config, self.result, self.emit, self.stop = config, result, emit, stop
        self.device, self.data, self.progress = device, data, progress
        self.losses: list[float] = result.losses
        self.windows: list[dict] = result.windows
        self.warmup_s: float | None = None
        self.warm = 0
        self.measured_wall_s = 0.0  # warm-up end to run end, validation excluded: includes all engine overhead
        self.parameters = 0
        self.peak_memory = 0
        self.val: tuple[float, float] | None = None
        self.train_size = 0
        self.dataset_summary = ""
        self.flush_denormal = False
        self.position = position
        self.load = host.LoadMeter()  # other programs' CPU use over the measured phase
        self.memory_base = 0  # CPU runs: the process's resident size before the run's model and batches
        self.meter = energy.Meter()  # energy and busy share over spans of windows: the device's own once set up
        self.micro = 0  # micro-batches since the run started (gradient accumulation)
        self.watch = EarlyStop(config) if config.mode == "train" else None
        self.best_state: dict | None = None  # the best epoch's weights, on the CPU (keep_best)
        self.confusion = None  # the last validation's (true, predicted) counts, on the device; see _validate
        self.best_confusion = None
        self.saved: dict = {}  # saved_model (its path) or saved_model_error, for the summary

    # -- setup -------------------------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg = self.config.check_runs_here()
        dev = self.device or devices.resolve_device(cfg.device)
        self.device = dev
        probe.require(dev)  # "available but not working" now, not a misleading out-of-memory error later
        reason = devices.precision_unsupported_reason(dev, cfg.precision)
        if reason:
            raise UserError(f"{cfg.precision} precision is not available on {dev.id}: {reason}.")
        info = models.get_model_info(cfg.model)
        if self.data is None:
            self.data = load_data(cfg, self.progress)
        data = self.data
        if data.spec.kind not in info.input_kind:
            raise UserError(f"{cfg.model} takes {info.input_kind} input but {data.name} holds {data.spec.kind}; "
                            f"pick another model or dataset.")
        self._check_stop()
        if dev.kind == "cpu":
            self.memory_base = dev.in_use(dev.memory())
        model_spec = models.input_spec_for(cfg.model, data.spec)
        self.model_spec = model_spec
        self.num_classes = model_spec.num_classes
        torch.manual_seed(cfg.seed)
        model = models.build_model(cfg.model, model_spec)
        self.parameters = models.count_parameters(model)
        self._check_stop()
        tdev = torch.device(dev.torch_device or dev.id)
        self.tdev = tdev
        model = model.to(tdev)
        if cfg.channels_last and data.spec.kind == "image":
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.optimizer = make_optimizer(cfg, model) if cfg.mode == "train" else None
        self.forward = torch.compile(model) if cfg.compile else model
        self.scaler = None
        if cfg.precision == "fp16" and cfg.mode == "train" and devices.grad_scaler_supported(dev):
            self.scaler = torch.amp.GradScaler(tdev.type)
        self.autocast = (lambda: torch.autocast(tdev.type, dtype=_DTYPES[cfg.precision])) \
            if cfg.precision in _DTYPES else nullcontext

        convert = InputConverter(data.spec, model_spec, data.mean, data.std, tdev, cfg.channels_last)
        if cfg.resident and not hasattr(data.train, "x"):
            need = len(data.train) * math.prod(data.spec.sample_shape)
            if need > RESIDENT_LIMIT_BYTES:
                raise UserError(f"{data.name} needs {need / 1024**3:.1f} GiB to keep on the device, more than the "
                                f"{RESIDENT_LIMIT_BYTES / 1024**3:.0f} GiB limit; turn off 'resident'.")
        synthetic = data.name == "synthetic"
        self.train = make_batches(data.train, batch_size=cfg.batch_size, device=tdev, convert=convert,
                                  resident=cfg.resident, workers=cfg.workers, synthetic=synthetic, seed=cfg.seed)
        self.val_batches = None
        if data.val is not None and len(data.val) > 0:
            self.val_batches = make_batches(data.val, batch_size=cfg.batch_size, device=tdev, convert=convert,
                                            resident=cfg.resident, workers=cfg.workers, train=False)
        self.train_size = len(data.train)
        self.dataset_summary = data.summary()
        if (cfg.early_stop_patience is not None or cfg.keep_best) and self.val_batches is None:
            raise UserError(f"Early stopping and the best epoch watch the validation split, and {data.name} has "
                            "none; choose a dataset with one (a folder of images gets one) or turn them off.")
        if self.train.steps_per_epoch < 1:
            raise UserError(f"{data.name} has {self.train_size} training samples, fewer than one batch of "
                            f"{cfg.batch_size}; use a batch size of at most {self.train_size}.")

        env = environment.environment()
        env["threads"] = torch.get_num_threads()
        env["tf32"] = cfg.tf32
        env["flush_denormal"] = self.flush_denormal
        env["device_name"] = dev.name
        env["machine_label"] = environment.machine_label(env)
        env["host"] = host.conditions()
        self.meter = energy.meter_for(dev.kind, dev.index, devices.cuda_uuid(dev))
        env["energy"] = self.meter.describe()
        self.result.env = env
        self.spe = self.train.steps_per_epoch
        if cfg.steps is not None:
            self.warm, self.total = cfg.warmup_steps, cfg.warmup_steps + cfg.steps
        else:
            self.total = cfg.epochs * self.spe
            self.warm = min(cfg.warmup_steps, self.total - 1)
        if cfg.mode == "train" and cfg.accumulate > self.total:
            raise UserError(f"Gradient accumulation over {cfg.accumulate} micro-batches needs at least that many "
                            f"steps, and this run has {self.total} (warm-up included); accumulate over fewer or run longer.")
        self.emit(Started(run_id=self.result.id, config=cfg.to_dict(), env=env, device=dev.to_dict(),
                          dataset=self.dataset_summary, parameters=self.parameters, total_steps=self.total,
                          warmup_steps=self.warm, notes=list(data.notes), run_index=self.position[0],
                          run_count=self.position[1], train_size=self.train_size))

    def _check_stop(self) -> None:
        """Setup and warm-up honour Stop too (measured steps check it once a window)."""
        if self.stop():
            raise Cancelled()


    # -- one step --------------------------------------------------------------------------------------
    def _train_step(self, x, y) -> torch.Tensor:
        """fp32 training step: the hot path, kept as lean as the bare loop it is benchmarked against."""
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.forward(x), y)
        loss.backward()
        self.optimizer.step()
        return loss.detach()

    def _train_step_amp(self, x, y) -> torch.Tensor:
        """Mixed-precision training step (autocast; a GradScaler for fp16 where the device has one)."""
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = F.cross_entropy(self.forward(x), y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.detach()

    def _train_step_accumulate(self, x, y) -> torch.Tensor:
        """One micro-batch of gradient accumulation: gradients add up over `accumulate` micro-batches (each loss
        divided by it, so the step is that of their mean), then one optimizer step."""
        n = self.config.accumulate
        if self.micro % n == 0:
            self.optimizer.zero_grad(set_to_none=True)
        with self.autocast():
            loss = F.cross_entropy(self.forward(x), y)
        scaled = loss / n
        (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
        self.micro += 1
        if self.micro % n == 0:
            if self.scaler is not None:
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                self.optimizer.step()
        return loss.detach()

    def _infer_step(self, x, y) -> torch.Tensor:
        with torch.inference_mode(), self.autocast():
            return F.cross_entropy(self.forward(x), y)

    def _first_step(self, step_fn, x, y) -> torch.Tensor:
        """The first step, checking once that the model returns logits (N, num_classes): a user's model that
        does not gets a sentence naming the shape, not a loss function's error."""
        forward = self.forward
        expected = (int(x.shape[0]), self.num_classes)

        def checked(inputs):
            out = forward(inputs)
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            if got != expected:
                raise UserError(f"{self.config.model} returned {'an output of shape ' if isinstance(got, tuple) else ''}"
                                f"{got}; MPS Studio needs logits of shape (N, num_classes), here {expected}: "
                                "return one score per class for each sample.")
            return out
        self.forward = checked
        try:
            return step_fn(x, y)
        finally:
            self.forward = forward
            self.parameters = models.count_parameters(self.model)  # lazy modules have their shapes now

    def _batches(self):
        """Endless stream of training batches, epoch after epoch."""
        while True:
            yield from self.train.epoch()

    # -- the loop --------------------------------------------------------------------------------------
    def execute(self) -> None:
        self._setup()
        cfg, dev = self.config, self.device
        if cfg.mode == "inference":
            step_fn = self._infer_step
        elif cfg.accumulate > 1:
            step_fn = self._train_step_accumulate
        else:
            step_fn = self._train_step if cfg.precision == "fp32" else self._train_step_amp
        if cfg.mode == "train":
            self.model.train()
        else:
            self.model.eval()
        dev.reset_peak()
        stream = self._batches()
        by_epoch = cfg.steps is None
        target = 1  # steps per window; adapted after each window to ~window_s of work
        cap = max(1, math.ceil((self.total - self.warm) / 8))  # at least ~8 windows for a median and IQR
        win_losses: list[torch.Tensor] = []
        win_wait = 0.0
        epoch = 0
        validation_s = 0.0
        dev.synchronize()
        if self.warm == 0:
            self.meter.begin()
        run_start = epoch_start = clock = time.perf_counter()
        warm_end = run_start
        if self.warm == 0:
            self.load.start()
        for step in range(1, self.total + 1):
            t = time.perf_counter()
            try:
                x, y = next(stream)
            except Exception as exc:
                raise _DataError() from exc
            win_wait += time.perf_counter() - t
            win_losses.append(step_fn(x, y) if step > 1 else self._first_step(step_fn, x, y))
            # epochs matter only in epoch mode: a steps run closes windows by time alone
            epoch_end = by_epoch and step % self.spe == 0
            in_warm = step <= self.warm
            if in_warm and step < self.warm and self.stop():  # warm-up steps can be slow: Stop need not wait
                self._fetch(win_losses, step - len(win_losses) + 1)
                raise Cancelled()
            if not (step == self.warm or step == self.total or epoch_end
                    or (not in_warm and len(win_losses) >= target)):
                continue
            dev.synchronize()
            now = time.perf_counter()
            # energy over spans of whole windows, closed before every break (validation, the end; a stop: below)
            reading = None if in_warm else self.meter.end(close=step == self.total or epoch_end)
            seconds = now - clock
            first = step - len(win_losses) + 1
            values = self._fetch(win_losses, first)
            if in_warm:
                if step == self.warm:
                    self.warmup_s = now - run_start
                    warm_end = now
                    self.load.start()
                    self.emit(Warmup(steps=self.warm, seconds=self.warmup_s, losses=self.losses[:self.warm]))
            else:
                n = len(win_losses)
                target = max(1, min(cap, round(cfg.window_s * n / seconds) if seconds > 0 else cap))
                spent = now - warm_end  # validation included, so the estimate covers it too
                done = step - self.warm
                eta = spent / done * (self.total - step) if done > 0 else None
                self._record_window(first, values, seconds, win_wait, step, now - run_start, eta, reading)
            win_losses, win_wait = [], 0.0
            if epoch_end:
                epoch += 1
                train_s = now - epoch_start
                t_val = time.perf_counter()
                self.val = self._validate()
                validation_s += time.perf_counter() - t_val
                self.result.epochs.append({"epoch": epoch, "step": step, "seconds": train_s,
                                           "val_loss": self.val[0] if self.val else None,
                                           "val_accuracy": self.val[1] if self.val else None})
                self.emit(EpochEnd(epoch, train_s, *(self.val or (None, None)), step=step))
                t_best = time.perf_counter()
                stop_early = self._after_epoch(epoch)
                validation_s += time.perf_counter() - t_best  # a checkpoint copy is not training time either
                if stop_early:
                    break
            if self.stop():
                self._close_span()
                self._close_wall(warm_end, validation_s)
                raise Cancelled()
            dev.synchronize()
            if step >= self.warm:  # the next window is measured
                self.meter.begin()
            clock = time.perf_counter()
            if epoch_end:
                epoch_start = clock
        if not by_epoch:
            t_val = time.perf_counter()
            self.val = self._validate()
            validation_s += time.perf_counter() - t_val
        self._close_wall(warm_end, validation_s)
        self._finish_training()

    def save_model(self, path: str) -> None:
        """Write the trained weights and their JSON; a disk that refuses is a sentence in the summary, never a
        failed run (what it measured stands)."""
        from ..models import saved as savedmodel

        if self.config.mode != "train":
            self.saved = {"saved_model_error": "an inference run trains nothing, so there is no model to save"}
            return
        try:
            meta = savedmodel.describe(self.config, self.data, self.model_spec, self.result.id, self.result.summary)
            savedmodel.save(self.model, path, meta)
        except Exception as exc:  # a full disk, a model whose state cannot be written: said, the run stands
            # an OSError's own words without its file name (the temporary .part beside the target)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else error_line(exc, with_type=False)
            self.saved = {"saved_model_error": f"the trained model could not be written to {path} ({reason})"}
            return
        self.saved = {"saved_model": str(path)}

    def _after_epoch(self, epoch: int) -> bool:
        """Early stopping and the best checkpoint after an epoch's validation; True to stop now."""
        if self.watch is None or not self.watch.active:
            return False
        value = None
        if self.val is not None:
            value = self.val[1] if self.config.early_stop_monitor == "val_accuracy" else self.val[0]
        improved = self.watch.add(epoch, value)
        if improved:
            self.best_confusion = self.confusion
            if self.config.keep_best:
                self.best_state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        return self.watch.should_stop()

    def _finish_training(self) -> None:
        """After the last step: the best epoch's weights back in the model (keep_best), and what early stopping,
        the best epoch and the evaluation say, in the run's summary."""
        cfg = self.config
        if cfg.keep_best and self.best_state is not None:
            self.model.load_state_dict(self.best_state)
        counts = self.best_confusion if (cfg.keep_best and self.best_confusion is not None) else self.confusion
        if counts is not None:
            n = self.num_classes
            matrix = counts.cpu().view(n, n).tolist()
            epoch = self.watch.best_epoch if (cfg.keep_best and self.watch is not None and self.watch.best_epoch) \
                else len(self.result.epochs) or None
            self.result.evaluation = {"classes": [str(c)[:200] for c in self.data.classes][:n], "matrix": matrix,
                                      "epoch": epoch, "split": "validation"}

    def _close_span(self) -> None:
        """A stop right after a window: its open energy span ends with that window (the device was synchronized
        there, and nothing ran since but bookkeeping)."""
        span = self.meter.flush()
        if span is not None and self.windows:
            self.windows[-1].update(_span_fields(span))

    def _close_wall(self, warm_end: float, validation_s: float) -> None:
        self.device.synchronize()
        self.measured_wall_s = time.perf_counter() - warm_end - validation_s
        if self.result.env:
            self.result.env["host_load"] = self.load.stop()

    def _fetch(self, win_losses: list[torch.Tensor], first: int) -> list[float]:
        """One device-to-host transfer for the whole window; checks for NaN/inf."""
        values = torch.stack(win_losses).float().cpu().tolist()
        self.losses.extend(values)
        for i, v in enumerate(values):
            if not math.isfinite(v):
                raise _NonFinite(first + i, v)
        return values

    def _record_window(self, first, values, seconds, wait, step, elapsed, eta, reading) -> None:
        memory = self.device.memory()
        in_use = max(0, self.device.in_use(memory) - self.memory_base)
        self.peak_memory = max(self.peak_memory, in_use, memory.get("peak_allocated", 0))
        samples = len(values) * self.config.batch_size
        sps = samples / seconds if seconds > 0 else float("inf")
        recent = [w["samples_per_s"] for w in self.windows[-(RECENT_WINDOWS - 1):]] + [sps]
        recent = [v for v in recent if math.isfinite(v)]
        window = Window(index=len(self.windows), first_step=first, losses=values, seconds=seconds,
                        samples=samples, samples_per_s=sps, data_wait_s=wait, memory=in_use,
                        memory_detail=memory, steps_done=step, total_steps=self.total, elapsed_s=elapsed,
                        eta_s=eta, recent_samples_per_s=statistics.median(recent) if recent else None,
                        **(_span_fields(reading) if reading is not None else {}))
        self.windows.append(window.record())
        self.emit(window)

    def _validate(self) -> tuple[float, float] | None:
        """Validation loss and accuracy, summed on the device and fetched once."""
        if self.val_batches is None:
            return None
        was_training = self.model.training
        self.model.eval()
        loss_sum = torch.zeros((), device=self.tdev)
        correct = torch.zeros((), device=self.tdev)
        classes = self.num_classes
        confusion = None
        if self.data.spec.kind == "image" and 1 < classes <= MAX_EVAL_CLASSES and self.data.name != "synthetic":
            confusion = torch.zeros(classes * classes, dtype=torch.int64, device=self.tdev)
        n = 0
        with torch.inference_mode(), self.autocast():
            for x, y in self.val_batches.epoch():
                out = self.forward(x)
                loss_sum += F.cross_entropy(out.float(), y, reduction="sum")
                predicted = out.argmax(1)
                correct += (predicted == y).sum()
                if confusion is not None:  # (true, predicted) pairs, counted on the device: no sync here
                    confusion += torch.bincount(y * classes + predicted, minlength=classes * classes)
                n += int(y.shape[0])
        self.confusion = confusion
        self.model.train(was_training)
        if n == 0:
            return None
        loss, right = torch.stack([loss_sum, correct.float()]).cpu().tolist()
        return loss / n, right / n

    # -- summary ---------------------------------------------------------------------------------------
    def summarise(self) -> None:
        """Fill result.summary from what was measured so far (also for failed and cancelled runs)."""
        if self.result.env and "host_load" not in self.result.env:  # ended early: up to now
            self.result.env["host_load"] = self.load.stop()
        summarise(self.result, RunFacts(
            batch_size=self.config.batch_size, parameters=self.parameters, dataset=self.dataset_summary,
            warmup_steps=self.warm, warmup_s=self.warmup_s, measured_wall_s=self.measured_wall_s,
            train_size=self.train_size, val=self.val, peak_memory=self.peak_memory,
            memory_measure=memory_measure(self.config.device)))
        if self.watch is not None and self.watch.active:
            self.result.summary.update(self.watch.summary())

