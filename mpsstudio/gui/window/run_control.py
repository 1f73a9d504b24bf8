"""Run and Stop: one Run at a time (a job of gui/jobs.py); what each ended run becomes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import json
import sys

from PySide6.QtCore import QObject, QTimer

from ...engine.basics.errors import UserError
from ...engine.basics.formatting import fmt_rate
from ...engine.history.columns import BY_KEY, cell_text
from ...engine.process import STOP_GRACE_S
from ..jobs import run_job
from ..plots.redraw import REDRAW_INTERVAL_MS
from ..settings import settings

if TYPE_CHECKING:
    from .main_window import MainWindow


class RunControl(QObject):
    """Run (the setup's configs, interleaved when repeated) as one job, Stop, the end of each run (kept in the
    history, said in the status bar) and of all of them, and the spare run process made while idle."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)  # a QObject of the window: what the jobs send is handled in its thread
        self.w = w

    def configs_to_run(self, then: str, banner: bool = False, **changes) -> list:
        """The setup's configs as the engine plans them (with `changes`: the Preferences' settings), once a device
        is checked and the user allowed the model file's code; [] after saying why not (in the status bar; with
        `banner`, a refusal with its own words in the banner too)."""
        w = self.w
        if not w.setup.checked_devices() or not w.setup.request().frameworks:
            what = "available device" if not w.setup.checked_devices() else "PyTorch (under Devices)"
            w.say(f"Check at least one {what}, then {then}.")
            return []
        try:
            configs = w.setup.plan(**changes).configs
        except UserError as exc:  # the plan's refusal, said as the CLI says it
            w.say(str(exc))
            if banner:
                w.banner.show_message(str(exc), warning=True)
            return []
        allowed = w.setup.confirm_model_file()
        if allowed is not True:
            message = allowed or "Not run: the model file's code runs only if you allow it."
            w.say(message)
            if allowed and banner:
                w.banner.show_message(message, warning=True)
            return []
        return configs

    def start(self) -> None:
        w = self.w
        if not w.state.may_start():
            return
        from ...engine.analysis.repeat import interleave
        from ..preferences import Preferences

        configs = self.configs_to_run("press Run", banner=True, **Preferences.load().settings())
        if not configs:
            return
        settings().setValue("run/last_config", json.dumps(configs[0].to_dict()))
        settings().setValue("run/last_devices", json.dumps([c.device for c in configs]))
        order, tags = interleave(configs, w.setup.advanced_section.rounds())
        self.start_job(order, tags)

    def start_job(self, configs, tags, probing: bool = False) -> None:
        w = self.w
        if w.tabs.currentWidget() is w.tools:  # a run is watched on its plots: they come back with the runs
            w.tabs.setCurrentWidget(w.results)
        w.plots.clear()
        w.banner.clear("run")  # the last run's failure no longer applies
        job = run_job(configs, w, spare=w.spare if w.keep_spare else None, repeat=tags,
                      save_models=None if probing else w.trained_models.slots(configs))
        job.event.connect(w.live.on_event)
        job.output.connect(w.chrome.on_output)
        w.output.clear()
        w.chrome.badge_output(False)
        job.progress.connect(self.on_download)
        job.rejected.connect(self.on_rejected)
        job.ended.connect(self.on_all_done)
        w.state.start_run(job, probing=probing)  # a launch-benchmark probe: its runs estimate the time, not kept
        w.say("Loading the dataset…")
        job.start()

    def stop(self) -> None:
        w = self.w
        tool, run = w.state.tool_job, w.state.run_job
        w.state.ask_stop()
        if tool is not None:
            tool.stop()
            w.setup.set_stopping()
            w.say("Stopping the tool… (what it found so far is kept)")
        if run is not None:
            run.stop()
            w.setup.set_stopping()
            w.say(f"Stopping… (a run that does not stop within {STOP_GRACE_S:g} s has its process ended)")

    def fill_spare(self) -> None:
        """Idle: a spare run process for the setting the next Run starts with (its first device, prepared, and the
        MPS-fallback switch); one made for another setting is replaced in the background, never used."""
        w = self.w
        if not w.keep_spare or not w.state.may_prepare_spare():
            return
        configs = w.setup.configs()
        if configs:
            w.spare.configure(configs[0].mps_fallback, configs[0].device)
        w.spare.fill()

    def set_progress(self, done: int) -> None:
        """The status bar's bar and its words: "step 84 / 188 · 45 %" (Qt's own %p would say 44)."""
        progress = self.w.progress
        total = progress.maximum()
        if total <= 0:  # no end known (a script that runs until it ends): the step alone
            progress.setFormat(f"step {done:,}")
            return
        progress.setValue(min(done, total))
        progress.setFormat(f"step {done:,} / {total:,} \u00b7 {round(100 * done / total)} %")

    def on_download(self, values: tuple) -> None:
        """A dataset's download: (message, fraction)."""
        message, fraction = values
        self.w.say(f"{message} {fraction:.0%}")

    def on_run_ended(self, result) -> None:
        w = self.w
        w.state.run_has_ended(result)
        if w.state.probing:
            if result.id in w.plots.run_ids():
                w.plots.finish_run(result.id, result.status)
            return
        try:
            from ...engine.history.store import keep_run

            pending = keep_run(result, w.store)  # locked past the wait: written beside the history instead
            if pending:
                w.banner.show_message(pending, warning=True)
        except UserError as exc:  # read-only, full: the run stays in the table for this session
            w.banner.show_message(f"This run was not kept: {exc} It stays in the table until you quit; "
                                  "Export JSON keeps a copy.", warning=True)
        w.results.add_result(result)
        if result.id in w.plots.run_ids():
            w.plots.finish_run(result.id, result.status)
        device = result.config.where
        if result.status == "finished":
            text = finished_sentence(result)
            if result.summary.stability == "noisy":
                text += f" Noisy: {result.summary.stability_reason}."
            if result.summary.stopped_early_reason:
                text += (f" Stopped early after epoch {result.summary.stopped_early_epoch}: "
                         f"{result.summary.stopped_early_reason}.")
            w.say(text)
        elif result.status == "cancelled":
            w.say(f"{device}: stopped; the run is kept as cancelled.")
        else:
            w.say(f"{device}: {result.error}")
            w.banner.show_message(f"{device}: {result.error}", warning=True, kind="run")

    def on_rejected(self, message: str) -> None:
        """The setup cannot run at all (a dataset that does not load, say): one sentence, nothing recorded."""
        w = self.w
        w.state.rejected = message
        w.say(message)
        w.banner.show_message(message, warning=True, kind="run")

    def on_all_done(self) -> None:
        w = self.w
        job = w.state.end_run()
        if job is not None:
            job.wait()
            job.deleteLater()
        w.plots.set_redraw_interval_ms(REDRAW_INTERVAL_MS)  # idle: reviewing stored runs
        w.plots.redraw()
        self.fill_spare()  # idle again: the next Run starts without waiting for torch
        if w.state.probing:
            w.state.probing = False
            if w.state.launch_jobs is not None and not w.state.rejected:
                QTimer.singleShot(0, w.launch.after_probe)
            return
        kept = [i for i in w.state.ended_ids() if w.results.model.row_of(i) is not None]
        if kept:  # the Run's runs selected and drawn from what was kept: a failed run's last steps included
            w.results.select_ids(kept)
            w.show_selected_runs(w.results.selected_ids())  # (the selection may not have changed)
        if w.demo:
            failed = w.state.failures()
            self.finish_demo(1 if failed else 0, "; ".join(failed))
            return
        mps = next((r for r in w.state.run_ended if r.status == "finished" and r.config.device == "mps"), None)
        if mps is not None:  # what the verdict needs to explain MPS: its CPU fallbacks and parity (Tools tab)
            QTimer.singleShot(0, lambda: w.start_tool("inspect", mps.config, automatic=True))

    def finish_demo(self, code: int, message: str = "") -> None:
        self.w.exit_code = code
        if message:
            print(f"mpsstudio: {message}", file=sys.stderr)
        QTimer.singleShot(300, self._demo_screenshot_and_quit)

    def _demo_screenshot_and_quit(self) -> None:
        w = self.w
        if w.demo_screenshot:
            w.plots.redraw()
            if not w.grab().save(w.demo_screenshot):
                print(f"mpsstudio: could not write the screenshot to {w.demo_screenshot}.", file=sys.stderr)
                w.exit_code = w.exit_code or 1
            else:
                print(f"screenshot saved to {w.demo_screenshot}")
        w.close()


def finished_sentence(result) -> str:
    """The status bar's words for a finished run: "cpu: finished, 35,558 ±3 % samples/s (median ± half the IQR of 11
    windows)." (the ± of the table and the CLI: history/columns.py)."""
    device, sps = result.config.where, result.summary.samples_per_s
    if not sps:
        return f"{device}: finished."
    if BY_KEY["samples_per_s_spread"].value(result, {}) is None:
        return f"{device}: finished, {fmt_rate(sps)} samples/s."
    return (f"{device}: finished, {fmt_rate(sps)} {cell_text('samples_per_s_spread', result, {})} samples/s (median ± "
            f"half the IQR of {result.summary.windows} windows).")
