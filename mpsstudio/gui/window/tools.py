"""Running a measuring tool from the window."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from ...engine.basics.config import RunConfig
from ...engine.basics.request import RunRequest
from ...engine.tools import toolview
from ...engine.tools.registry import TOOLS
from ..jobs import tool_job

if TYPE_CHECKING:
    from .main_window import MainWindow
    from ...engine.tools.records.tune import TuneRow



class ToolControl(QObject):
    """The measuring tools from the Tools menu (sweep, max-batch, inspect, ...) as one job at a time; their results
    land in the Tools tab and the history. The sheet is the window's question (`ask_tool_settings`: tests answer
    it), and `start_tool` the window's command (tests watch it)."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)  # a QObject of the window: what the jobs send is handled in its thread
        self.w = w

    def open_sheet(self, kind: str) -> None:
        """The Tools menu: the tool's settings first (ToolSheet: the CLI's options, prefilled from the setup, what it
        will do), then the tool on the setup's devices."""
        w = self.w
        if not w.state.may_start():
            return
        configs = w.runs.configs_to_run("choose the tool again")  # the model file's consent too
        if not configs:
            return
        devices = [c.device for c in configs]
        config = next((c for c in configs if c.device != "cpu"), configs[0])
        chosen = w.ask_tool_settings(kind, config, devices, w.setup.train_samples())
        if chosen is None:
            return
        on = devices if TOOLS[kind].every_device else [config.device]  # (else the first accelerator)
        w.start_tool(kind, chosen["config"], batch_sizes=chosen["batch_sizes"], payload=chosen["payload"],
                     devices=on)

    def start(self, kind: str, config: RunConfig | None = None, batch_sizes: list[int] | None = None,
              payload: dict | None = None, automatic: bool = False, devices: list[str] | None = None) -> None:
        """Run a tool on the setup's config: a sweep over every checked device; max-batch and inspect on the first
        checked accelerator (else the CPU). `config`: a config whose model file the user already allowed (a run's,
        for the inspection after an MPS run), run on its own device; `batch_sizes`: a sweep's sizes. Its result
        lands in the Tools tab and the history. `automatic`: started by the window (the inspection after an MPS
        run): it says its progress beside the bar, not in the status line, and its result never takes the user away
        from what they look at (a badge on the Tools tab; the verdict names its findings)."""
        w = self.w
        if not w.state.may_start():
            return
        if config is None:
            configs = w.runs.configs_to_run("choose the tool again")
            if not configs:
                return
            devices = [c.device for c in configs]
            config = next((c for c in configs if c.device != "cpu"), configs[0])
        else:
            devices = list(devices or [config.device])
        if kind == "deploy-bench":  # the setup's model on every checked device, at the benchmark's batch sizes
            payload = {"models": [config.model], "devices": devices, **(payload or {})}
        if kind == "diagnose":  # the setup on every checked device, each layer compared
            payload = {"devices": devices, "layers": True, **(payload or {})}
        if kind == "tune":  # the candidates around the setup's batch, within its training samples
            payload = {"train_samples": w.setup.train_samples(), **(payload or {})}
        job = tool_job(kind, config, devices, w.store, w, batch_sizes=batch_sizes, payload=payload)
        say = w.run_label.setText if automatic else w.say
        job.progress.connect(self.on_progress)
        job.done.connect(self.on_done)
        job.rejected.connect(self.on_rejected)
        job.ended.connect(self.on_ended)
        if not automatic:
            w.banner.hide()
        w.state.start_tool(job, automatic=automatic)
        w.progress.setRange(0, 0)  # the tool's own progress, never the last run's "step 6 / 6 · 100 %"
        w.progress.setFormat(f"{toolview.TITLES[kind]}…")
        where = ", ".join(devices) if TOOLS[kind].every_device else config.device
        of = f" of {config.model.replace(chr(92), '/').rsplit('/', 1)[-1]}" if TOOLS[kind].on_model else ""
        started = f"{toolview.TITLES[kind]}{of} on {where}…"
        say(started)
        job.start()

    def sweep_sizes_of(self, result: dict) -> None:
        """A largest-batch search's sizes worth measuring (`sweep_sizes`), swept on its device with the run's rules:
        the fastest batch, which the search's few steps per probe cannot tell."""
        from ...engine.basics.errors import UserError

        w = self.w
        if not w.state.may_start():
            return
        try:
            config = RunConfig.from_dict(result.get("config") or {})
        except (UserError, TypeError, ValueError):
            w.say("This search's setup cannot be read back; set up the sweep from the sidebar instead.")
            return
        device, sizes = result.get("device"), result.get("sweep_sizes") or []
        if device not in w.state.available_devices():
            w.say(f"{device} is not available on this machine, so its batch sizes cannot be swept here.")
            return
        if config.model not in {m.name for m in (w.state.catalog or {}).get("models", [])}:  # a model file: its code runs again
            allowed = w.setup.model_files.confirm(config.model)
            if allowed is not True:
                w.say(allowed or "Not run: the model file's code runs only if you allow it.")
                return
        try:
            config = w.setup.plan_of(RunRequest.of(config, devices=(device,))).configs[0]
        except UserError as exc:
            w.say(str(exc))
            return
        w.start_tool("sweep", config, batch_sizes=list(sizes))

    def apply_tuned(self, result: dict, row: TuneRow | dict) -> None:
        """Best Settings' Apply: the tuned setup with the chosen candidate's precision, channels_last, compile,
        batch size (and CPU threads, TF32), into the sidebar (engine tune.report.apply_to)."""
        from ...engine.basics.errors import UserError
        from ...engine.tools.records.tune import TuneRow
        from ...engine.tools.tune.report import apply_to

        w = self.w
        if not w.state.may_apply():
            return
        try:
            row = TuneRow.of(row)
            config = apply_to(RunConfig.from_dict(result.get("config") or {}), row).validate()
        except (UserError, TypeError, ValueError, KeyError):
            w.say("This result's setup cannot be read back; set the settings by hand from its table.")
            return
        w.setup.apply_config(config)
        w.say(f"Applied {row.label} (measured on {row.device}) to the setup.")

    def on_progress(self, values: tuple) -> None:
        """One line of what the tool does: beside the bar for one the window started, else in the status line."""
        (self.w.run_label.setText if self.w.state.tool_automatic else self.w.say)(values[0])

    def on_done(self, answer) -> None:
        record, why_not_kept, pending = answer
        w = self.w
        w.tools.add(record)
        if record.kind == "inspect":  # the verdict names its findings (kept in memory when the history is not)
            w.results.add_inspection(record.result)
        if record.kind == "diagnose":  # a comparison by what differs names the phase that moved
            w.results.contrast_chart.diagnoses.append(record.result)
        if w.state.tool_automatic:  # the user is looking at the runs: a badge, not a jump
            self.badge(True)
        else:
            w.tabs.setCurrentWidget(w.tools)
            w.say(record.result.get("sentence", ""))
        if why_not_kept:
            w.banner.show_message(f"This result was not kept ({why_not_kept}); it stays in the Tools tab until "
                                  f"you quit.", warning=True)
        elif pending:  # the history was locked: kept beside it, added at the next start
            w.banner.show_message(pending, warning=True)

    def on_rejected(self, message: str) -> None:
        self.w.banner.show_message(message, warning=True)
        self.w.say(message)

    def on_ended(self) -> None:
        job = self.w.state.end_tool()
        if job is not None:
            job.wait()
            job.deleteLater()

    def export_model(self, weights: str | None = None, path: str | None = None, fmt: str | None = None,
                     config: RunConfig | None = None, precision: str = "fp32", compress: str | None = None) -> None:
        """Export a model as Core ML, TorchScript or a torch.export program, in a run's process; the result, checked,
        lands in the Tools tab. Without arguments (Tools ▸ Export Model…): the sheet, which offers the selected run's
        trained weights first (the fresh model only when chosen, and said), the format, precision and compression."""
        from PySide6.QtWidgets import QFileDialog

        from ...engine.tools.deploy.export import FORMATS

        w = self.w
        if not w.state.may_start():
            return
        if config is None:
            configs = w.runs.configs_to_run("choose Export again")  # the model file's consent too
            if not configs:
                return
            chosen = w.ask_tool_settings("export", configs[0], ["cpu"], None, trained=self.selected_trained())
            if chosen is None:
                return
            config, payload = chosen["config"], chosen["payload"]
            weights, fmt, precision, compress = (payload["weights"], payload["format"], payload["precision"],
                                                 payload["compress"])
        fmt = fmt or "coreml"
        if path is None:
            stem = config.model.replace(chr(92), "/").rsplit("/", 1)[-1].removesuffix(".py")
            path, _ = QFileDialog.getSaveFileName(w, "Export Model", f"{stem}{FORMATS[fmt]}",
                                                  f"{fmt} (*{FORMATS[fmt]})")
            if not path:
                return
            if not path.endswith(FORMATS[fmt]):
                path += FORMATS[fmt]
        w.start_tool("export", RunRequest.of(config, device="cpu").settings,
                     payload={"format": fmt, "out": path, "weights": weights, "precision": precision,
                              "compress": compress})

    def selected_trained(self):
        """(words, weights file, config) of the selected run's kept trained model, or None."""
        w = self.w
        runs = w.results.whole_runs(w.results.selected_ids()[:1])
        if not runs:
            return None
        run = runs[0]
        kept = w.state.trained.get(run.id) or run.summary.saved_model
        if run.status != "finished" or run.config.mode != "train" or not kept or not os.path.isfile(str(kept)):
            return None
        name = run.config.model.replace(chr(92), "/").rsplit("/", 1)[-1]
        return f"{name} on {run.config.device} ({run.config.dataset.replace(chr(92), '/').rsplit('/', 1)[-1]})", \
            str(kept), run.config

    def badge(self, new: bool) -> None:
        """The Tools tab says "Tools •" while it holds a result the user has not looked at."""
        tabs = self.w.tabs
        index = tabs.indexOf(self.w.tools)
        tabs.setTabText(index, "Tools \u2022" if new else "Tools")
        tabs.setTabToolTip(index, "A new result: the inspection made after the MPS run." if new else "")
