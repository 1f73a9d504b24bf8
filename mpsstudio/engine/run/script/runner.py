"""A user's own training script run as a run (`mpsstudio run SCRIPT`, the window's Run Script…), in a run's process:
the script executes as `python SCRIPT ARGS` would run it, on the device MPS Studio runs it for (the only accelerator
it sees: machine.py; `mpsstudio.track.device()`, or `{device}` in its arguments, also name it), with its own
arguments plus those given for that device alone, its DataLoader workers started as plain Python starts them. Its
steps are measured by a Tracker (tracker.py): those it reports with `mpsstudio.track.step(loss, batch_size=n)`, else
those counted from its own PyTorch calls (counter.py). `--steps N` ends it cleanly after N measured steps.

The script is a user's code: it runs only with the user's consent, only here, and whatever it does (crash, hang,
exit, ignore the end of its run) ends its run as any run's process ends (engine/process)."""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Callable

from ...basics.config import RunConfig
from ...basics.errors import UserError
from ...basics.redact import KEEP_ARGS
from ...basics.events import Notice
from ...basics.formatting import printable
from ...basics.results import RunResult
from ...machine import environment
from ..failures import MODEL_INTERRUPT, outcome
from . import settings, tracker as tracked
from .counter import HookCounter
from .machine import Visibility, plain_start_method, workers_sentence
from .tracker import ScriptDone, Tracker, batch_problem

DEVICE_VAR = "MPSSTUDIO_TRACK_DEVICE"  # the device a tracked script is run for (mpsstudio.track.device)
DEFAULT_WARMUP = 10  # a script's steps before measuring (its first steps compile, allocate and cache)


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


def script_config(path: str, args: list[str], steps: int | None = None, warmup: int | None = None,
                  device: str = "cpu", batch_size: int | None = None,
                  device_args: dict[str, list[str]] | None = None, keep_args: bool = False) -> RunConfig:
    """The run of a training script at `path` with its own arguments, checked (UserError, one sentence): an
    existing .py file, `steps` from 1 (None: until the script ends), the arguments as texts; `batch_size`: the
    samples of each step when the script's own input cannot say it (None: read from the model's input);
    `device_args`: arguments added for one device alone ({"cuda": ["--accel"]}); `keep_args`: keep the arguments as
    given in the history and its exports (otherwise values that look like secrets are redacted: basics/redact.py).
    What the command line's `mpsstudio run` and the window's Run Script… both run."""
    from ...basics.config import MAX_STEPS, SCRIPT
    from ...models.user import user_model_path

    found = user_model_path(path, lambda name: UserError(
        f"{printable(name)} is not a .py script; give the path of your training script."),
        what="The script", holds="the .py file you run with python")
    if steps is not None and not 1 <= steps <= MAX_STEPS:
        raise UserError(f"The number of steps must be a whole number from 1 to {MAX_STEPS:,}, not {steps}.")
    options: dict = {"script_args": [str(a) for a in args]}
    if device_args:
        options["device_args"] = {str(k): [str(a) for a in v] for k, v in device_args.items()}
    if keep_args:
        options[KEEP_ARGS] = True
    return RunConfig(model=str(found.resolve()), dataset=SCRIPT, device=device, steps=steps, epochs=None,
                     warmup_steps=DEFAULT_WARMUP if warmup is None else warmup, batch_size=batch_size,
                     optimizer=None, lr=None, precision=None, options=options).validate()


def parse_device_args(items: list[str]) -> dict[str, list[str]]:
    """`--args-for DEVICE=ARGS` values ("cuda=--accel --amp") as {"cuda": ["--accel", "--amp"]}, split as a shell
    splits words; UserError (one sentence) for one that is not DEVICE=ARGS or names no device."""
    import shlex

    from ...basics.config import DEVICE_PATTERN

    out: dict[str, list[str]] = {}
    for item in items:
        device, sep, text = str(item).partition("=")
        device = device.strip()
        if not sep or not DEVICE_PATTERN.fullmatch(device):
            raise UserError(f"--args-for takes DEVICE=ARGUMENTS (e.g. --args-for cuda=\"--accel\"), not "
                            f"{printable(str(item))[:60]!r}.")
        try:
            out.setdefault(device, []).extend(shlex.split(text))
        except ValueError as exc:
            raise UserError(f"The arguments for {device} cannot be split as a shell would ({exc}); close the "
                            "quotes.") from None
    return out


def arguments_for(config: RunConfig) -> list[str]:
    """The script's arguments in the run for `config.device`: its own, then those given for that device (or its
    kind: "cuda" for cuda:1), with {device} replaced."""
    extra = config.options.get("device_args") or {}
    kind = config.device.split(":")[0]
    mine: list = (extra.get(config.device, extra.get(kind)) or []) if isinstance(extra, dict) else []
    return [str(a).replace("{device}", config.device) for a in [*(config.options.get("script_args") or []), *mine]]


def run_script(config: RunConfig, *, on_event: Callable, should_stop: Callable[[], bool],
               prepared: Callable[[], None] | None = None) -> RunResult:
    """Run the script `config.model` once on `config.device` as a tracked run; every ending is a run with one
    sentence (and an Ended event)."""
    path = config.model
    if not os.path.isfile(path):
        raise UserError(f"The script {printable(path)} was not found; check the path.")
    args = arguments_for(config)
    given = config.batch_size
    machine = environment.environment()  # before anything is hidden from the script (its GPUs are the machine's)
    tracker = Tracker(config, on_event, should_stop, limit=config.steps, how="optimizer hook", asked=True,
                      machine=machine)
    counter = HookCounter(tracker, batch_size=given, notice=lambda text: on_event(Notice(text, config.device)))
    visibility = Visibility(config.device)
    switches: dict = {}

    def measuring() -> None:  # the first measured step: the script's settings as it left them
        counter.want_settings = True
        switches.update(settings.flags())
        if counter.optimizers:  # the learning rate now: a scheduler may take it to 0 by the run's end
            switches["lr"] = settings.learning_rate(counter.optimizers[0])

    def concluding() -> None:  # the run ends (however): its config says what the script used, where it was seen
        if tracker.config.batch_size is None and counter.batch is not None and not batch_problem(counter.batch):
            # what was seen (never a default, nor a count no run can keep)
            tracker.configure(batch_size=counter.batch)
            tracker.batch_from = tracker.batch_from or counter.input.said
        found = settings.seen(counter.optimizers, counter.model, counter.model_input, counter.autocast,
                              switches) if switches else {}
        if found:
            tracker.configure(**settings.changes(config, found))
            tracker.result.summary = tracker.result.summary.replaced(
                script_settings=found, script_settings_words=settings.words(found, config.device))
    tracker.on_measure, tracker.on_finish = measuring, concluding
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
        with counter.installed(), visibility, plain_start_method():
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
                    error = workers_sentence(exc, path) or (
                        "The script stopped with an error: " + error[len("The run stopped with an error: "):])
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
            "after each update (import mpsstudio.track as mt), or train with a torch.optim optimizer (its steps are "
            "counted).")
    result = tracker.finish(status, error) if not tracker.ended else tracker.result
    if result.status == "finished" and tracker.limit and tracker.count < tracker.total:
        measured = max(0, tracker.count - tracker.warm)
        result.summary = result.summary.replaced(ended_early=f"the script ended after {measured:,} measured steps, "
                                                             f"before the {tracker.limit:,} asked")
    return result


def _print_traceback(exc: BaseException, path: str) -> None:
    """The script's traceback on stderr from its own first frame (MPS Studio's and runpy's frames left out)."""
    tb, target = exc.__traceback__, os.path.abspath(path)
    while tb is not None and os.path.abspath(tb.tb_frame.f_code.co_filename) != target:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
