"""Run and Stop: one RunWorker at a time; what each ended run becomes."""

from __future__ import annotations

import json
import sys

from PySide6.QtCore import QTimer, Slot

from ...engine.basics.errors import UserError
from ...engine.basics.formatting import fmt_rate
from ...engine.history.columns import BY_KEY, cell_text
from ...engine.process import STOP_GRACE_S
from ..plots.redraw import REDRAW_INTERVAL_MS
from ..settings import settings
from ..worker import RunWorker


class RunsMixin:
    """Run control: Run (the setup's configs, interleaved when repeated) on a RunWorker, Stop, the end of each run (kept in the history, said in the status bar) and of all of them."""

    def configs_to_run(self, then: str, banner: bool = False) -> list:
        """The setup's configs, once a device is checked and the user allowed the model file's code; [] after
        saying why not (in the status bar; with `banner`, a refusal with its own words in the banner too)."""
        configs = self.setup.configs()
        if not configs:
            what = "available device" if not self.setup.checked_devices() else "PyTorch (under Devices)"
            self.say(f"Check at least one {what}, then {then}.")
            return []
        allowed = self.setup.confirm_model_file()
        if allowed is not True:
            message = allowed or "Not run: the model file's code runs only if you allow it."
            self.say(message)
            if allowed and banner:
                self.banner.show_message(message, warning=True)
            return []
        return configs

    @Slot()
    def start_run(self) -> None:
        if self.worker is not None or self.catalog is None:
            return
        configs = self.configs_to_run("press Run", banner=True)
        if not configs:
            return
        from ..preferences import Preferences

        prefs = Preferences.load()
        for cfg in configs:
            prefs.apply(cfg)
        settings().setValue("run/last_config", json.dumps(configs[0].to_dict()))
        settings().setValue("run/last_devices", json.dumps([c.device for c in configs]))
        from ...engine.analysis.repeat import interleave

        order, tags = interleave(configs, self.setup.rounds())
        self._start_worker(order, tags)

    def _start_worker(self, configs, tags, probing: bool = False) -> None:
        if self.tabs.currentWidget() is self.tools:  # a run is watched on its plots: they come back with the runs
            self.tabs.setCurrentWidget(self.results)
        self.plots.clear()
        self.banner.clear("run")  # the last run's failure no longer applies
        self.run_ended = []
        self.rejected = ""
        self.probing = probing  # a launch-benchmark probe: its runs estimate the time and are not kept
        self.worker = RunWorker(configs, self, spare=self.spare if self.keep_spare else None, repeat=tags,
                                save_models=None if probing else self._model_slots(configs))
        self.worker.event.connect(self._on_event)
        self.worker.output.connect(self._on_output)
        self.output.clear()
        self._badge_output(False)
        self.worker.progress.connect(self._on_download)
        self.worker.rejected.connect(self._on_rejected)
        self.worker.all_done.connect(self._on_all_done)
        self._set_running(True)
        self.say("Loading the dataset…")
        self.worker.start()

    @Slot()
    def stop_run(self) -> None:
        if self.tool_worker is not None:
            self.tool_worker.stop()
            self._stopping()
            self.say("Stopping the tool… (what it found so far is kept)")
        if self.worker is not None:
            self.worker.stop()
            self._stopping()
            self.say(f"Stopping… (a run that does not stop within {STOP_GRACE_S:g} s has its process ended)")

    def _fill_spare(self) -> None:
        """Idle: a spare run process for the setting the next Run starts with (its first device, prepared, and the
        MPS-fallback switch); one made for another setting is replaced in the background, never used."""
        if not self.keep_spare or self.catalog is None or self.worker is not None or self.tool_worker is not None:
            return
        configs = self.setup.configs()
        if configs:
            self.spare.configure(configs[0].mps_fallback, configs[0].device)
        self.spare.fill()

    def _stopping(self) -> None:
        self.stop_action.setEnabled(False)
        self.setup.set_stopping()

    def _set_running(self, running: bool) -> None:
        self.setup.set_running(running)
        self.launch_action.setEnabled(not running and self.catalog is not None)
        self.script_action.setEnabled(not running and self.catalog is not None)
        self.file_script_action.setEnabled(not running and self.catalog is not None)
        for a in self.tool_actions:
            a.setEnabled(not running and self.catalog is not None)
        self.run_action.setEnabled(not running and self.catalog is not None)
        self.stop_action.setEnabled(running)
        self.progress.setVisible(running)
        if not running:
            self.run_label.setText("")
            self.rate_label.setText("")

    def set_progress(self, done: int) -> None:
        """The status bar's bar and its words: "step 84 / 188 · 45 %" (Qt's own %p would say 44)."""
        total = self.progress.maximum()
        if total <= 0:  # no end known (a script that runs until it ends): the step alone
            self.progress.setFormat(f"step {done:,}")
            return
        self.progress.setValue(min(done, total))
        self.progress.setFormat(f"step {done:,} / {total:,} \u00b7 {round(100 * done / total)} %")

    def _on_download(self, message: str, fraction: float) -> None:
        self.say(f"{message} {fraction:.0%}")

    def _on_run_ended(self, result) -> None:
        self.run_ended.append(result)
        if self.probing:
            if result.id in self.plots.run_ids():
                self.plots.finish_run(result.id, result.status)
            return
        try:
            from ...engine.history.store import keep_run

            pending = keep_run(result, self.store)  # locked past the wait: written beside the history instead
            if pending:
                self.banner.show_message(pending, warning=True)
        except UserError as exc:  # read-only, full: the run stays in the table for this session
            self.banner.show_message(f"This run was not kept: {exc} It stays in the table until you quit; "
                                     "Export JSON keeps a copy.", warning=True)
        if result.summary.get("saved_model"):
            self.trained[result.id] = result.summary["saved_model"]
        self.results.add_result(result)
        if result.id in self.plots.run_ids():
            self.plots.finish_run(result.id, result.status)
        device = result.config.device
        if result.status == "finished":
            text = finished_sentence(result)
            if result.summary.get("stability") == "noisy":
                text += f" Noisy: {result.summary.get('stability_reason')}."
            if result.summary.get("stopped_early_reason"):
                text += (f" Stopped early after epoch {result.summary.get('stopped_early_epoch')}: "
                         f"{result.summary['stopped_early_reason']}.")
            self.say(text)
        elif result.status == "cancelled":
            self.say(f"{device}: stopped; the run is kept as cancelled.")
        else:
            self.say(f"{device}: {result.error}")
            self.banner.show_message(f"{device}: {result.error}", warning=True, kind="run")

    def _on_rejected(self, message: str) -> None:
        """The setup cannot run at all (a dataset that does not load, say): one sentence, nothing recorded."""
        self.rejected = message
        self.say(message)
        self.banner.show_message(message, warning=True, kind="run")

    def _on_all_done(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.wait()
            worker.deleteLater()
        self._set_running(False)
        self.plots.set_redraw_interval_ms(REDRAW_INTERVAL_MS)  # idle: reviewing stored runs
        self.plots.redraw()
        self._fill_spare()  # idle again: the next Run starts without waiting for torch
        if self.probing:
            self.probing = False
            if self._launch_jobs is not None and not self.rejected:
                QTimer.singleShot(0, self._after_probe)
            return
        kept = [r.id for r in self.run_ended if self.results.model.row_of(r.id) is not None]
        if kept:  # the Run's runs selected and drawn from what was kept: a failed run's last steps included
            self.results.select_ids(kept)
            self.show_selected_runs(self.results.selected_ids())  # (the selection may not have changed)
        if self.demo:
            failed = [f"{r.config.device}: {r.error}" for r in self.run_ended if r.status != "finished"]
            failed += [self.rejected] if self.rejected else []
            self._finish_demo(1 if failed else 0, "; ".join(failed))
            return
        mps = next((r for r in self.run_ended if r.status == "finished" and r.config.device == "mps"), None)
        if mps is not None:  # what the verdict needs to explain MPS: its CPU fallbacks and parity (Tools tab)
            QTimer.singleShot(0, lambda: self.start_tool("inspect", mps.config, automatic=True))

    def _finish_demo(self, code: int, message: str = "") -> None:
        self.exit_code = code
        if message:
            print(f"mpsstudio: {message}", file=sys.stderr)
        QTimer.singleShot(300, self._demo_screenshot_and_quit)

    def _demo_screenshot_and_quit(self) -> None:
        if self.demo_screenshot:
            self.plots.redraw()
            if not self.grab().save(self.demo_screenshot):
                print(f"mpsstudio: could not write the screenshot to {self.demo_screenshot}.", file=sys.stderr)
                self.exit_code = self.exit_code or 1
            else:
                print(f"screenshot saved to {self.demo_screenshot}")
        self.close()


def finished_sentence(result) -> str:
    """The status bar's words for a finished run: "cpu: finished, 35,558 ±3 % samples/s (median ± half the IQR of 11
    windows)." (the ± of the table and the CLI: history/columns.py)."""
    device, sps = result.config.device, result.summary.get("samples_per_s")
    if not sps:
        return f"{device}: finished."
    if BY_KEY["samples_per_s_spread"].value(result, {}) is None:
        return f"{device}: finished, {fmt_rate(sps)} samples/s."
    return (f"{device}: finished, {fmt_rate(sps)} {cell_text('samples_per_s_spread', result, {})} samples/s (median ± "
            f"half the IQR of {result.summary.get('windows')} windows).")
