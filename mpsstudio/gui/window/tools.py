"""Running a measuring tool from the window."""

from __future__ import annotations

from ...engine.basics.config import RunConfig
from ...engine.tools import toolview
from ..worker import ToolWorker


class ToolsMixin:
    """The measuring tools from the Tools menu (sweep, max-batch, inspect) on a ToolWorker; their results land in the Tools tab and the history."""

    def start_tool(self, kind: str, config: RunConfig | None = None, batch_sizes: list[int] | None = None,
                   payload: dict | None = None) -> None:
        """Run a tool on the setup's config: a sweep over every checked device; max-batch and inspect on the first
        checked accelerator (else the CPU). `config`: a config whose model file the user already allowed (a run's,
        for the inspection after an MPS run), run on its own device; `batch_sizes`: a sweep's sizes. Its result
        lands in the Tools tab and the history."""
        if self.worker is not None or self.tool_worker is not None or self.catalog is None:
            return
        if config is None:
            configs = self.configs_to_run("choose the tool again")  # RunsMixin's
            if not configs:
                return
            devices = [c.device for c in configs]
            config = next((c for c in configs if c.device != "cpu"), configs[0])
        else:
            devices = [config.device]
        if kind == "deploy-bench":  # the setup's model on every checked device, at the benchmark's batch sizes
            payload = {"models": [config.model], "devices": devices, **(payload or {})}
        if kind == "diagnose":  # the setup on every checked device, each layer compared
            payload = {"devices": devices, "layers": True, **(payload or {})}
        self.tool_worker = ToolWorker(kind, config, devices, self.store, self, batch_sizes=batch_sizes,
                                      payload=payload)
        self.tool_worker.progress.connect(self.say)
        self.tool_worker.done.connect(self._on_tool_done)
        self.tool_worker.rejected.connect(self._on_tool_rejected)
        self.tool_worker.finished.connect(self._on_tool_finished)
        self.banner.hide()
        self._set_running(True)
        where = ", ".join(devices) if kind in ("sweep", "deploy-bench", "diagnose") else config.device
        self.say(f"{toolview.TITLES[kind]} of {config.model} on {where}…")
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

    def _on_tool_done(self, record, why_not_kept: str, pending: str = "") -> None:
        self.tools.add(record)
        if record.kind == "inspect":  # the verdict names its findings (kept in memory when the history is not)
            self.results.add_inspection(record.result)
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
                     config: RunConfig | None = None) -> None:
        """Export the setup's model (or a trained one: `weights`, its `config`) as Core ML, TorchScript or a
        torch.export program, in a run's process; the result, checked, lands in the Tools tab."""
        from PySide6.QtWidgets import QFileDialog

        from ...engine.tools.export import FORMATS

        filters = {"Core ML package (*.mlpackage)": "coreml", "TorchScript (*.pt)": "torchscript",
                   "torch.export program (*.pt2)": "exported-program"}
        if config is None:
            configs = self.configs_to_run("choose Export again")  # RunsMixin's: the model file's consent too
            if not configs:
                return
            config = configs[0]
        if path is None:
            name = f"{config.model.rsplit('/', 1)[-1].removesuffix('.py')}.mlpackage"
            path, chosen = QFileDialog.getSaveFileName(self, "Export Model", name, ";;".join(filters))
            if not path:
                return
            fmt = filters.get(chosen, "coreml")
            if not path.endswith(FORMATS[fmt]):
                path += FORMATS[fmt]
        self.start_tool("export", config.with_device("cpu"),
                        payload={"format": fmt or "coreml", "out": path, "weights": weights,
                                 "precision": "fp16" if (fmt or "coreml") == "coreml" else "fp32"})

