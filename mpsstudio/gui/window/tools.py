"""Running a measuring tool from the window."""

from __future__ import annotations

from ...engine.basics.config import RunConfig
from ...engine.tools import toolview
from ..worker import ToolWorker


class ToolsMixin:
    """The measuring tools from the Tools menu (sweep, max-batch, inspect) on a ToolWorker; their results land in the Tools tab and the history."""

    def start_tool(self, kind: str, config: RunConfig | None = None) -> None:
        """Run a tool on the setup's config: a sweep over every checked device; max-batch and inspect on the first
        checked accelerator (else the CPU). `config`: a run's own config (the inspection after an MPS run, whose
        model file the user already allowed). Its result lands in the Tools tab and the history."""
        if self.worker is not None or self.tool_worker is not None or self.catalog is None:
            return
        if config is None:
            configs = self.setup.configs()
            if not configs:
                self.say("Check at least one available device, then choose the tool again.")
                return
            allowed = self.setup.confirm_model_file()
            if allowed is not True:
                self.say(allowed or "Not run: the model file's code runs only if you allow it.")
                return
            devices = [c.device for c in configs]
            config = next((c for c in configs if c.device != "cpu"), configs[0])
        else:
            devices = [config.device]
        self.tool_worker = ToolWorker(kind, config, devices, self.store, self)
        self.tool_worker.progress.connect(self.say)
        self.tool_worker.done.connect(self._on_tool_done)
        self.tool_worker.rejected.connect(self._on_tool_rejected)
        self.tool_worker.finished.connect(self._on_tool_finished)
        self.banner.hide()
        self._set_running(True)
        where = ", ".join(devices) if kind == "sweep" else config.device
        self.say(f"{toolview.TITLES[kind]} of {config.model} on {where}…")
        self.tool_worker.start()

    def _on_tool_done(self, record, why_not_kept: str) -> None:
        self.tools.add(record)
        if record.kind == "inspect":  # the verdict names its findings (kept in memory when the history is not)
            self.results.add_inspection(record.result)
        self.tabs.setCurrentWidget(self.tools)
        self.say(record.result.get("sentence", ""))
        if why_not_kept:
            self.banner.show_message(f"This result was not kept ({why_not_kept}); it stays in the Tools tab until "
                                     f"you quit.", warning=True)

    def _on_tool_rejected(self, message: str) -> None:
        self.banner.show_message(message, warning=True)
        self.say(message)

    def _on_tool_finished(self) -> None:
        worker, self.tool_worker = self.tool_worker, None
        if worker is not None:
            worker.deleteLater()
        self._set_running(False)
