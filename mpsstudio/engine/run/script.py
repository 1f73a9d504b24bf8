"""A user's own training script run as a run (`mpsstudio run SCRIPT`, the window's Run Script…), in a run's process:
the script executes as `python SCRIPT ARGS` would run it, with the device MPS Studio chose for it
(`mpsstudio.track.device()`, or `{device}` in its arguments), and its steps are measured by a Tracker (tracked.py):
those it reports with `mpsstudio.track.step(loss, batch_size=n)`, else those counted by PyTorch's own global hooks
(the optimizer step post-hook; the loss is the tensor `backward()` was last called on, the batch size the first
dimension of the outermost module's first input). `--steps N` ends it cleanly after N measured steps.

The script is a user's code: it runs only with the user's consent, only here, and whatever it does (crash, hang,
exit, ignore the end of its run) ends its run as any run's process ends (engine/process)."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable
from contextlib import contextmanager

import torch

from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.formatting import printable
from ..basics.results import RunResult
from .failures import MODEL_INTERRUPT, outcome
from .tracked import ScriptDone, Tracker

DEVICE_VAR = "MPSSTUDIO_TRACK_DEVICE"  # the device a tracked script is run for (mpsstudio.track.device)


class HookCounter:
    """Steps counted from the script's optimizers (torch.optim's global step post-hook), for a script that does not
    report them. A training step is one round of the script's optimizers: a GAN's discriminator and generator steps
    are one step, which ends when an optimizer of the round steps again. A step is handed to the tracker then (or at
    the end): if the script reports steps itself (`mpsstudio.track.step`) meanwhile, it is the script's count that is
    kept and the hooks go quiet. Its loss is the tensor backward() was last called on (Tensor.backward or
    torch.autograd.backward; a loss of several values counts by its mean), its batch the first dimension of the
    outermost module call's first input."""

    def __init__(self, tracker: Tracker):
        self.tracker = tracker
        self.explicit = False
        self.pending: tuple | None = None
        self.loss: torch.Tensor | None = None
        self.batch: int | None = None
        self.depth = 0
        self.round: set[int] = set()  # the optimizers that stepped in the step going on
        self.sizes: dict[int, int] = {}  # parameters of each optimizer seen
        self.unseen_loss = False  # an optimizer stepped with no backward() seen
        self._handles: list = []

    def on_optimizer_step(self, optimizer, args, kwargs) -> None:
        key = id(optimizer)
        if key not in self.sizes:
            self.sizes[key] = sum(p.numel() for g in optimizer.param_groups for p in g["params"])
            self.tracker.parameters = sum(self.sizes.values())
        self.depth = 0
        if self.explicit:
            return
        if key in self.round:  # this optimizer again: the last step is over, a new one begins
            self.round = set()
            if self.pending is not None:
                pending, self.pending = self.pending, None
                self.tracker.step(*pending)
        self.round.add(key)
        if self.loss is not None:
            self.pending = (self.loss, self.batch or 1)
        elif self.pending is None:
            self.unseen_loss = True
        self.loss = None

    def on_reported(self) -> None:
        """The script reports its steps: the hooks' pending step is the same step, dropped."""
        self.explicit, self.pending = True, None
        self.tracker.how = "mt.step"

    def flush(self) -> None:
        if self.pending is not None and not self.explicit:
            pending, self.pending = self.pending, None
            self.tracker.step(*pending)

    def _pre_forward(self, module, args) -> None:
        if self.depth == 0:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            if first is not None and first.dim() > 0:
                self.batch = int(first.shape[0])
        self.depth += 1

    def _post_forward(self, module, args, output) -> None:
        self.depth = max(0, self.depth - 1)

    def _saw_backward(self, tensor) -> None:
        if isinstance(tensor, (tuple, list)):
            tensor = next((t for t in tensor if isinstance(t, torch.Tensor)), None)
        if isinstance(tensor, torch.Tensor):
            kept = tensor.detach()
            self.loss = kept if kept.numel() == 1 else kept.float().mean()

    @contextmanager
    def installed(self):
        from torch.optim.optimizer import register_optimizer_step_post_hook

        counter = self
        original, autograd_backward = torch.Tensor.backward, torch.autograd.backward

        def backward(tensor, *args, **kwargs):  # the loss of the step: the tensor backward() is called on
            counter._saw_backward(tensor)
            return original(tensor, *args, **kwargs)

        def autograd(tensors, *args, **kwargs):  # torch.autograd.backward(tensors, grad_tensors=...)
            counter._saw_backward(tensors)
            return autograd_backward(tensors, *args, **kwargs)
        self._handles = [register_optimizer_step_post_hook(self.on_optimizer_step),
                         torch.nn.modules.module.register_module_forward_pre_hook(self._pre_forward),
                         torch.nn.modules.module.register_module_forward_hook(self._post_forward)]
        torch.Tensor.backward, torch.autograd.backward = backward, autograd
        try:
            yield self
        finally:
            torch.Tensor.backward, torch.autograd.backward = original, autograd_backward
            for h in self._handles:
                h.remove()


class LastLine:
    """sys.stderr as it was, remembering the last line written to it (an argparse error, a warning before an exit):
    the run's sentence quotes it; everything still goes where it went (the run's output log)."""

    def __init__(self, stream):
        self._stream, self.last = stream, ""

    def write(self, text):
        line = next((part.strip() for part in reversed(str(text).splitlines()) if part.strip()), "")
        if line:
            self.last = line[:300]
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


DEFAULT_WARMUP = 10  # a script's steps before measuring (its first steps compile, allocate and cache)


def script_config(path: str, args: list[str], steps: int | None = None, warmup: int | None = None,
                  device: str = "cpu") -> RunConfig:
    """The run of a training script at `path` with its own arguments, checked (UserError, one sentence): an
    existing .py file, `steps` from 1 (None: until the script ends), the arguments as texts. What the command line's
    `mpsstudio run` and the window's Run Script… both run."""
    from ..basics.config import MAX_STEPS, SCRIPT
    from ..models.user import user_model_path

    found = user_model_path(path, lambda name: UserError(
        f"{printable(name)} is not a .py script; give the path of your training script."),
        what="The script", holds="the .py file you run with python")
    if steps is not None and not 1 <= steps <= MAX_STEPS:
        raise UserError(f"The number of steps must be a whole number from 1 to {MAX_STEPS:,}, not {steps}.")
    return RunConfig(model=str(found.resolve()), dataset=SCRIPT, device=device, steps=steps, epochs=None,
                     warmup_steps=DEFAULT_WARMUP if warmup is None else warmup,
                     options={"script_args": [str(a) for a in args]}).validate()


def run_script(config: RunConfig, *, on_event: Callable, should_stop: Callable[[], bool],
               prepared: Callable[[], None] | None = None) -> RunResult:
    """Run the script `config.model` with `config.options["script_args"]` once, on `config.device`, as a tracked
    run; every ending is a run with one sentence (and an Ended event)."""
    from . import tracked

    path = config.model
    if not os.path.isfile(path):
        raise UserError(f"The script {printable(path)} was not found; check the path.")
    args = [str(a).replace("{device}", config.device) for a in config.options.get("script_args") or []]
    tracker = Tracker(config, on_event, should_stop, limit=config.steps, how="optimizer hook")
    counter = HookCounter(tracker)
    if prepared is not None:
        prepared()
    status, error = "finished", ""
    saved = (list(sys.argv), list(sys.path), os.environ.get(DEVICE_VAR), sys.stderr)
    os.environ[DEVICE_VAR] = config.device
    sys.stderr = said = LastLine(sys.stderr)
    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    tracked.bind(tracker, counter)
    try:
        with counter.installed():
            try:
                runpy.run_path(path, run_name="__main__")
                counter.flush()
            except ScriptDone:
                pass
            except SystemExit as exc:  # the script's own exit: 0 (or none) is its end
                counter.flush()
                if exc.code not in (0, None):
                    last = f" (it wrote last: {printable(said.last)[:200]})" if said.last else ""
                    status, error = "failed", f"The script exited with code {printable(str(exc.code))[:80]}{last}."
            except KeyboardInterrupt:
                status, error = "failed", MODEL_INTERRUPT.replace("model's code", "script")
            except BaseException as exc:  # its own error: the run says it, with what was measured until then
                _print_traceback(exc, path)  # where in the script: in the run's output log, as python prints it
                status, error = outcome(exc, config)
                if status == "failed" and error.startswith("The run stopped with an error: "):
                    error = "The script stopped with an error: " + error[len("The run stopped with an error: "):]
    except ScriptDone:  # the end of the run, raised while a hook ran
        pass
    finally:
        tracked.unbind()
        sys.argv, sys.path[:], sys.stderr = saved[0], saved[1], saved[3]
        if saved[2] is None:
            os.environ.pop(DEVICE_VAR, None)
        else:
            os.environ[DEVICE_VAR] = saved[2]
    if not tracker.ended and tracker.count == 0 and status == "finished":
        status, error = "failed", (
            "The script's optimizer stepped, but no loss was seen (backward() was not called on a tensor); call "
            "mpsstudio.track.step(loss, batch_size=n) after optimizer.step()." if counter.unseen_loss else
            "The script ended without a training step to measure: call mpsstudio.track.step(loss, batch_size=n) "
            "after optimizer.step(), or train with a torch.optim optimizer (its steps are counted).")
    result = tracker.finish(status, error) if not tracker.ended else tracker.result
    if result.status == "finished" and tracker.limit and tracker.count < tracker.total:
        result.summary["ended_early"] = (f"the script ended after {max(0, tracker.count - tracker.warm):,} measured "
                                         f"steps, before the {tracker.limit:,} asked")
    return result


def _print_traceback(exc: BaseException, path: str) -> None:
    """The script's traceback on stderr from its own first frame (MPS Studio's and runpy's frames left out)."""
    tb, target = exc.__traceback__, os.path.abspath(path)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
