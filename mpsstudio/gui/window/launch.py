"""Runs that are not the sidebar's setup: the launch-benchmark preset (probe, estimate, ask, run) and the user's own
training script (Run Your Training Script…)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import json

from PySide6.QtCore import QObject

from ..settings import settings

if TYPE_CHECKING:
    from .main_window import MainWindow


SCRIPT_KEY = "script/last"  # the last script, its arguments, steps and warm-up, offered again


class Launch(QObject):
    """PyTorch's launch benchmark from the Run menu (a short probe whose estimate the user sees first, then ordinary
    runs) and the user's training script, run on the checked devices after their consent. The questions are the
    window's (`ask`, `ask_script`: tests answer them)."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)  # a QObject of the window: what the jobs send is handled in its thread
        self.w = w

    def run_script(self) -> None:
        """Run Your Training Script…: the script and its arguments (the dialog), consent to run its code (once per
        content), then one run per checked device through the one run path (a Run job, a process per run)."""
        w = self.w
        if not w.state.may_start():
            return
        devices = w.setup.checked_devices()
        if not devices:
            w.say("Check at least one available device, then run your script.")
            return
        config = w.ask_script(devices)
        if config is None:
            return
        allowed = w.setup.model_files.confirm(config.model, script=True)
        if allowed is not True:
            w.say(allowed or "Not run: the script's code runs only if you allow it.")
            return
        from ...engine.basics.errors import UserError
        from ...engine.basics.request import RunRequest
        from ..preferences import Preferences

        try:
            configs = w.setup.plan_of(RunRequest.of(config, devices=tuple(devices),
                                                    **Preferences.load().settings())).configs
        except UserError as exc:  # the plan's refusal, said as `mpsstudio run` says it
            w.say(str(exc))
            return
        w.runs.start_job(configs, None)
        w.say(f"Starting {config.model.replace(chr(92), '/').rsplit('/', 1)[-1]} on {', '.join(devices)}…")

    def remembered_script(self) -> dict:
        try:
            last = json.loads(settings().value(SCRIPT_KEY) or "{}")
        except (TypeError, ValueError):
            last = {}
        return last if isinstance(last, dict) else {}

    def launch_benchmark(self) -> None:
        """PyTorch's launch workloads on every available device: a short probe first, whose estimate the user
        sees before anything long starts; then ordinary runs (stored, compared, stoppable with Stop)."""
        from ...engine.tools import launch

        w = self.w
        if not w.state.may_start():
            return
        devices = w.state.available_devices()
        jobs = launch.plan(devices)
        runs = sum(len(j.configs) for j in jobs)
        text = (f"ResNet50 (batch 128), BERT-base (batch 64) and VGG16 (batch 64), in training and inference, on "
                f"{', '.join(devices)}: {runs} runs of {launch.DEFAULT_STEPS} measured steps, compared with the "
                f"published claim ({launch.CLAIMS['train'][1]} training, {launch.CLAIMS['inference'][1]} "
                f"evaluation on an M1 Ultra).\n\nA short probe on each device first estimates how long it takes; "
                "you decide then.")
        text += "".join(f"\n\n{note}" for note in launch.notes(jobs))
        if not w.ask("PyTorch Launch Benchmark", text, "Estimate"):
            return
        w.state.launch_jobs = jobs
        from ...engine.basics.request import RunRequest

        w.runs.start_job(w.setup.plan_of(RunRequest.of(launch.PROBE, devices=tuple(devices))).configs, None,
                         probing=True)
        w.say("Probing each device to estimate the launch benchmark's time…")

    def after_probe(self) -> None:
        from ...engine.tools import launch

        w = self.w
        jobs, w.state.launch_jobs = w.state.launch_jobs, None
        if not jobs:  # the probe of no launch benchmark (none was waiting for it)
            return
        probes = w.state.probe_rates()
        devices = [c.device for c in jobs[0].configs]
        estimate = launch.estimate_s(jobs, {d: probes.get(d) for d in devices})
        known = [v for v in estimate.values() if v is not None]
        total = f"{launch.fmt_estimate(sum(known))} in all" if known else "unknown"
        lines = "\n".join(f"{d}: {launch.fmt_estimate(estimate[d])}" for d in devices)
        text = (f"Estimated time (from the probe; it can be off by 2-3\u00d7):\n{lines}\n{total}.\n\n"
                "Stop (\u2318.) ends it at any time; the runs done so far are kept.")
        if w.ask("PyTorch Launch Benchmark", text, "Start"):
            configs = [c for job in jobs for c in job.configs]
            w.runs.start_job(configs, None)
            w.say(f"Launch benchmark: {len(configs)} runs.")
        else:
            w.say("Launch benchmark not started.")
