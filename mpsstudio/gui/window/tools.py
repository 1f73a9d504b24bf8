"""Running a measuring tool from the window."""

from __future__ import annotations

import os

from ...engine.basics.config import RunConfig
from ...engine.tools import toolview
from ..worker import ToolWorker


class ToolsMixin:
    """The measuring tools from the Tools menu (sweep, max-batch, inspect) on a ToolWorker; their results land in the Tools tab and the history."""

    def open_tool_sheet(self, kind: str) -> None:
        """The Tools menu: the tool's settings first (ToolSheet: the CLI's options, prefilled from the setup, what it
        will do), then the tool on the setup's devices."""
        if self.worker is not None or self.tool_worker is not None or self.catalog is None:
            return
        configs = self.configs_to_run("choose the tool again")  # RunsMixin's: the model file's consent too
        if not configs:
            return
        devices = [c.device for c in configs]
        config = next((c for c in configs if c.device != "cpu"), configs[0])
        chosen = self.ask_tool_settings(kind, config, devices, self.setup.train_samples())
        if chosen is None:
            return
        on = devices if kind in ("sweep", "deploy-bench", "diagnose", "tune") else [config.device]
        self.start_tool(kind, chosen["config"], batch_sizes=chosen["batch_sizes"], payload=chosen["payload"],
                        devices=on)

    def ask_tool_settings(self, kind: str, config: RunConfig, devices: list[str], train: int | None, trained=None):
        """The sheet; what start_tool takes, or None when cancelled (tests replace this)."""
        from PySide6.QtWidgets import QDialog

        from ..tools.sheet import ToolSheet

        try:
            runs = self.store.all()
        except Exception:  # an unreadable history: no estimate, the tool still runs
            runs = []
        sheet = ToolSheet(kind, config, devices, runs, train, parent=self, trained=trained)
        return sheet.chosen() if sheet.exec() == QDialog.DialogCode.Accepted else None

    def start_tool(self, kind: str, config: RunConfig | None = None, batch_sizes: list[int] | None = None,
                   payload: dict | None = None, automatic: bool = False, devices: list[str] | None = None) -> None:
        """Run a tool on the setup's config: a sweep over every checked device; max-batch and inspect on the first
        checked accelerator (else the CPU). `config`: a config whose model file the user already allowed (a run's,
        for the inspection after an MPS run), run on its own device; `batch_sizes`: a sweep's sizes. Its result
        lands in the Tools tab and the history. `automatic`: started by the window (the inspection after an MPS
        run): it says its progress beside the bar, not in the status line, and its result never takes the user away
        from what they look at (a badge on the Tools tab; the verdict names its findings)."""
        if self.worker is not None or self.tool_worker is not None or self.catalog is None:
            return
        if config is None:
            configs = self.configs_to_run("choose the tool again")  # RunsMixin's
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
            payload = {"train_samples": self.setup.train_samples(), **(payload or {})}
        self.tool_worker = ToolWorker(kind, config, devices, self.store, self, batch_sizes=batch_sizes,
                                      payload=payload)
        self.tool_automatic = automatic
        self.tool_worker.progress.connect(self.run_label.setText if automatic else self.say)
        self.tool_worker.done.connect(self._on_tool_done)
        self.tool_worker.rejected.connect(self._on_tool_rejected)
        self.tool_worker.finished.connect(self._on_tool_finished)
        if not automatic:
            self.banner.hide()
        self._set_running(True)
        self.progress.setRange(0, 0)  # the tool's own progress, never the last run's "step 6 / 6 · 100 %"
        self.progress.setFormat(f"{toolview.TITLES[kind]}…")
        where = ", ".join(devices) if kind in ("sweep", "deploy-bench", "diagnose", "tune") else config.device
        started = f"{toolview.TITLES[kind]} of {config.model.replace(chr(92), '/').rsplit('/', 1)[-1]} on {where}…"
        self.run_label.setText(started) if automatic else self.say(started)
        self.tool_worker.start()

    def sweep_sizes_of(self, result: dict) -> None:
        """A largest-batch search's sizes worth measuring (`sweep_sizes`), swept on its device with the run's rules:
        the fastest batch, which the search's few steps per probe cannot tell."""
        from ...engine.basics.errors import UserError

        if self.worker is not None or self.tool_worker is not None or self.catalog is None:
            return
        try:
            config = RunConfig.from_dict(result.get("config") or {})
        except (UserError, TypeError, ValueError):
            self.say("This search's setup cannot be read back; set up the sweep from the sidebar instead.")
            return
        device, sizes = result.get("device"), result.get("sweep_sizes") or []
        if device not in [d.id for d in self.catalog["devices"] if d.available]:
            self.say(f"{device} is not available on this machine, so its batch sizes cannot be swept here.")
            return
        if config.model not in {m.name for m in self.catalog["models"]}:  # a model file: its code runs again
            allowed = self.setup.model_files.confirm(config.model)
            if allowed is not True:
                self.say(allowed or "Not run: the model file's code runs only if you allow it.")
                return
        self.start_tool("sweep", config.with_device(device), batch_sizes=list(sizes))

    def apply_tuned_settings(self, result: dict, row: dict) -> None:
        """Best Settings' Apply: the tuned setup with the chosen candidate's precision, channels_last, compile,
        batch size (and CPU threads), into the sidebar (engine tune.report.apply_to)."""
        from ...engine.basics.errors import UserError
        from ...engine.tools.tune.report import apply_to

        if self.worker is not None or self.catalog is None:
            return
        try:
            config = apply_to(RunConfig.from_dict(result.get("config") or {}), row).validate()
        except (UserError, TypeError, ValueError, KeyError):
            self.say("This result's setup cannot be read back; set the settings by hand from its table.")
            return
        self.setup.apply_config(config)
        self.say(f"Applied {row['label']} (measured on {row['device']}) to the setup.")

    def _on_tool_done(self, record, why_not_kept: str, pending: str = "") -> None:
        self.tools.add(record)
        if record.kind == "inspect":  # the verdict names its findings (kept in memory when the history is not)
            self.results.add_inspection(record.result)
        if record.kind == "diagnose":  # a comparison by what differs names the phase that moved
            self.results.contrast_chart.diagnoses.append(record.result)
        if getattr(self, "tool_automatic", False):  # the user is looking at the runs: a badge, not a jump
            self._badge_tools(True)
        else:
            self.tabs.setCurrentWidget(self.tools)
            self.say(record.result.get("sentence", ""))
        if why_not_kept:
            self.banner.show_message(f"This result was not kept ({why_not_kept}); it stays in the Tools tab until "
                                     f"you quit.", warning=True)
        elif pending:  # the history was locked: kept beside it, added at the next start
            self.banner.show_message(pending, warning=True)

    def _on_tool_rejected(self, message: str) -> None:
        self.banner.show_message(message, warning=True)
        self.say(message)

    def _on_tool_finished(self) -> None:
        worker, self.tool_worker = self.tool_worker, None
        if worker is not None:
            worker.deleteLater()
        self._set_running(False)

    def export_model(self, weights: str | None = None, path: str | None = None, fmt: str | None = None,
                     config: RunConfig | None = None, precision: str = "fp32", compress: str | None = None) -> None:
        """Export a model as Core ML, TorchScript or a torch.export program, in a run's process; the result, checked,
        lands in the Tools tab. Without arguments (Tools ▸ Export Model…): the sheet, which offers the selected run's
        trained weights first (the fresh model only when chosen, and said), the format, precision and compression."""
        from PySide6.QtWidgets import QFileDialog

        from ...engine.tools.export import FORMATS

        if self.worker is not None or self.tool_worker is not None or self.catalog is None:
            return
        if config is None:
            configs = self.configs_to_run("choose Export again")  # RunsMixin's: the model file's consent too
            if not configs:
                return
            chosen = self.ask_tool_settings("export", configs[0], ["cpu"], None, trained=self.selected_trained())
            if chosen is None:
                return
            config, payload = chosen["config"], chosen["payload"]
            weights, fmt, precision, compress = (payload["weights"], payload["format"], payload["precision"],
                                                 payload["compress"])
        fmt = fmt or "coreml"
        if path is None:
            stem = config.model.replace(chr(92), "/").rsplit("/", 1)[-1].removesuffix(".py")
            path, _ = QFileDialog.getSaveFileName(self, "Export Model", f"{stem}{FORMATS[fmt]}",
                                                  f"{fmt} (*{FORMATS[fmt]})")
            if not path:
                return
            if not path.endswith(FORMATS[fmt]):
                path += FORMATS[fmt]
        self.start_tool("export", config.with_device("cpu"),
                        payload={"format": fmt, "out": path, "weights": weights, "precision": precision,
                                 "compress": compress})

    def selected_trained(self):
        """(words, weights file, config) of the selected run's kept trained model, or None."""
        runs = self.results.whole_runs(self.results.selected_ids()[:1])
        if not runs:
            return None
        run = runs[0]
        kept = self.trained.get(run.id) or run.summary.get("saved_model")
        if run.status != "finished" or run.config.mode != "train" or not kept or not os.path.isfile(str(kept)):
            return None
        name = run.config.model.replace(chr(92), "/").rsplit("/", 1)[-1]
        return f"{name} on {run.config.device} ({run.config.dataset.replace(chr(92), '/').rsplit('/', 1)[-1]})", \
            str(kept), run.config

    def _badge_tools(self, new: bool) -> None:
        """The Tools tab says "Tools •" while it holds a result the user has not looked at."""
        index = self.tabs.indexOf(self.tools)
        self.tabs.setTabText(index, "Tools \u2022" if new else "Tools")
        self.tabs.setTabToolTip(index, "A new result: the inspection made after the MPS run." if new else "")
