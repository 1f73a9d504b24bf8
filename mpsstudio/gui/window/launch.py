"""Runs that are not the sidebar's setup: the launch-benchmark preset (probe, estimate, ask, run) and the user's own
training script (Run Your Training Script…)."""

from __future__ import annotations

import json

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QDialog, QMessageBox

from ..settings import settings

SCRIPT_KEY = "script/last"  # the last script, its arguments, steps and warm-up, offered again


class LaunchMixin:
    """PyTorch's launch benchmark from the Run menu (a short probe whose estimate the user sees first, then ordinary
    runs) and the user's training script, run on the checked devices after their consent."""

    @Slot()
    def run_script_dialog(self) -> None:
        """Run Your Training Script…: the script and its arguments (the dialog), consent to run its code (once per
        content), then one run per checked device through the one run path (RunWorker, a process per run)."""
        if self.worker is not None or self.tool_worker is not None or self.catalog is None:
            return
        devices = self.setup.checked_devices()
        if not devices:
            self.say("Check at least one available device, then run your script.")
            return
        config = self.ask_script(devices)
        if config is None:
            return
        allowed = self.setup.model_files.confirm(config.model, script=True)
        if allowed is not True:
            self.say(allowed or "Not run: the script's code runs only if you allow it.")
            return
        from ..preferences import Preferences

        prefs = Preferences.load()
        configs = [config.with_device(d) for d in devices]
        for cfg in configs:
            prefs.apply(cfg)
        self._start_worker(configs, None)
        self.say(f"Starting {config.model.replace(chr(92), '/').rsplit('/', 1)[-1]} on {', '.join(devices)}…")

    def ask_script(self, devices: list[str]):
        """The dialog; the engine-checked RunConfig of the script, or None when cancelled (tests replace this)."""
        from ..script_dialog import ScriptDialog

        try:
            last = json.loads(settings().value(SCRIPT_KEY) or "{}")
        except (TypeError, ValueError):
            last = {}
        dialog = ScriptDialog(devices, last if isinstance(last, dict) else {}, parent=self)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        settings().setValue(SCRIPT_KEY, json.dumps(dialog.remembered()))
        return dialog.config

    @Slot()
    def launch_benchmark(self) -> None:
        """PyTorch's launch workloads on every available device: a short probe first, whose estimate the user
        sees before anything long starts; then ordinary runs (stored, compared, stoppable with Stop)."""
        from ...engine.tools import launch

        if self.worker is not None or self.catalog is None:
            return
        devices = [d.id for d in self.catalog["devices"] if d.available]
        jobs = launch.plan(devices)
        runs = sum(len(j.configs) for j in jobs)
        text = (f"ResNet50 (batch 128), BERT-base (batch 64) and VGG16 (batch 64), in training and inference, on "
                f"{', '.join(devices)}: {runs} runs of {launch.DEFAULT_STEPS} measured steps, compared with the "
                f"published claim ({launch.CLAIMS['train'][1]} training, {launch.CLAIMS['inference'][1]} "
                f"evaluation on an M1 Ultra).\n\nA short probe on each device first estimates how long it takes; "
                "you decide then.")
        text += "".join(f"\n\n{note}" for note in launch.notes(jobs))
        if not self.ask("PyTorch Launch Benchmark", text, "Estimate"):
            return
        self._launch_jobs = jobs
        self._start_worker([launch.PROBE.with_device(d) for d in devices], None, probing=True)
        self.say("Probing each device to estimate the launch benchmark's time…")

    def _after_probe(self) -> None:
        from ...engine.tools import launch

        jobs, self._launch_jobs = self._launch_jobs, None
        probes = {r.config.device: r.summary.get("samples_per_s") for r in self.run_ended if r.status == "finished"}
        devices = [c.device for c in jobs[0].configs]
        estimate = launch.estimate_s(jobs, {d: probes.get(d) for d in devices})
        known = [v for v in estimate.values() if v is not None]
        total = f"{launch.fmt_estimate(sum(known))} in all" if known else "unknown"
        lines = "\n".join(f"{d}: {launch.fmt_estimate(estimate[d])}" for d in devices)
        text = (f"Estimated time (from the probe; it can be off by 2-3\u00d7):\n{lines}\n{total}.\n\n"
                "Stop (\u2318.) ends it at any time; the runs done so far are kept.")
        if self.ask("PyTorch Launch Benchmark", text, "Start"):
            configs = [c for job in jobs for c in job.configs]
            self._start_worker(configs, None)
            self.say(f"Launch benchmark: {len(configs)} runs.")
        else:
            self.say("Launch benchmark not started.")

    def ask(self, title: str, text: str, yes: str) -> bool:
        """A question with a named default button; tests replace it."""
        box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=self)
        go = box.addButton(yes, QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(go)
        box.exec()
        return box.clickedButton() is go
