"""What the window is doing, without a widget: the catalogue it loaded, the run or tool in progress, what each Run
left (its ended runs, its trained models, a refusal), and the rules on what may happen next. The views observe it
(`subscribe`) and show it; the controllers (gui/window/) change it through its methods. No Qt here: the rules are
tested as plain Python (napari's ViewerModel under its QtViewer is the pattern).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class WindowState:
    """The window's state. `run_job` and `tool_job` are the background jobs in progress (gui/jobs.py), None when
    idle; at most one of them runs at a time."""

    catalog: dict | None = None  # models, datasets, devices and their checks, once PyTorch has loaded
    run_job: Any = None  # the Run in progress (its runs one after another)
    tool_job: Any = None  # the tool in progress
    tool_automatic: bool = False  # the tool was started by the window (the inspection after an MPS run)
    probing: bool = False  # the Run is the launch benchmark's probe: its runs estimate the time and are not kept
    launch_jobs: list | None = None  # the launch benchmark's runs, waiting for the user's yes after the probe
    rejected: str = ""  # the sentence when the last Run's setup could not run at all
    run_ended: list = field(default_factory=list)  # the last Run's ended runs, in order
    trained: dict[str, str] = field(default_factory=dict)  # run id -> its trained model kept in the cache
    epochs: dict[str, tuple[int, int]] = field(default_factory=dict)  # run id -> (epochs, steps) of an epoch run
    pending_folder: str | None = None  # a folder dropped before PyTorch loaded: checked once it has
    rechecking: bool = False  # Check Again asked for the catalogue once more
    stopping: bool = False  # Stop was asked of the job in progress
    _listeners: list[Callable[[], None]] = field(default_factory=list, repr=False)

    # -- the rules ------------------------------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self.catalog is not None

    @property
    def busy(self) -> bool:
        """A Run or a tool is in progress."""
        return self.run_job is not None or self.tool_job is not None

    def may_start(self) -> bool:
        """A Run, a tool, a script or the launch benchmark may start now: PyTorch has loaded and nothing runs."""
        return self.loaded and not self.busy

    def may_apply(self) -> bool:
        """Settings may go into the setup (a tune's Apply): loaded, and no Run reads the setup meanwhile."""
        return self.loaded and self.run_job is None

    def may_show_stored(self) -> bool:
        """The plots may draw stored runs: no Run draws its live curves there."""
        return self.run_job is None

    def may_prepare_spare(self) -> bool:
        """A spare run process may be made: loaded and idle (making one imports torch: never beside a measured run)."""
        return self.may_start()

    def actions(self) -> dict[str, bool]:
        """Which of the window's commands are enabled: "start" (Run, the tools, a script, the launch benchmark),
        "stop" (once per job)."""
        return {"start": self.may_start(), "stop": self.busy and not self.stopping}

    def available_devices(self) -> list[str]:
        return [d.id for d in (self.catalog or {}).get("devices", []) if d.available]

    # -- changes --------------------------------------------------------------------------------------------------
    def subscribe(self, listener: Callable[[], None]) -> None:
        """`listener()` after every change made through the methods below."""
        self._listeners.append(listener)

    def _changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    def set_catalog(self, catalog: dict) -> None:
        self.catalog = catalog
        self.rechecking = False
        self._changed()

    def start_run(self, job: Any, probing: bool = False) -> None:
        """A Run begins: what the last one left is forgotten."""
        if self.busy:
            raise RuntimeError("a Run or a tool is already in progress")
        self.run_job, self.probing, self.stopping = job, probing, False
        self.run_ended, self.rejected = [], ""
        self._changed()

    def end_run(self) -> Any:
        """The Run has ended; its job (to be waited for and deleted), None when none ran."""
        job, self.run_job = self.run_job, None
        self.stopping = self.stopping and self.tool_job is not None
        self._changed()
        return job

    def start_tool(self, job: Any, automatic: bool = False) -> None:
        if self.busy:
            raise RuntimeError("a Run or a tool is already in progress")
        self.tool_job, self.tool_automatic, self.stopping = job, automatic, False
        self._changed()

    def end_tool(self) -> Any:
        job, self.tool_job = self.tool_job, None
        self.stopping = self.stopping and self.run_job is not None
        self._changed()
        return job

    def ask_stop(self) -> list:
        """Stop was asked: the jobs to stop (none when idle)."""
        jobs = [j for j in (self.tool_job, self.run_job) if j is not None]
        if jobs:
            self.stopping = True
            self._changed()
        return jobs

    def run_has_ended(self, result) -> None:
        """One run of the Run ended (kept in order; its trained model noted where it saved one)."""
        self.run_ended.append(result)
        saved = result.summary.get("saved_model") if not self.probing else None
        if saved:
            self.trained[result.id] = saved

    def ended_ids(self) -> list[str]:
        return [r.id for r in self.run_ended]

    def probe_rates(self) -> dict[str, float | None]:
        """The launch benchmark's probe: samples/s per device of its finished runs."""
        return {r.config.device: r.summary.get("samples_per_s") for r in self.run_ended if r.status == "finished"}

    def failures(self) -> list[str]:
        """"device: error" of each run of the Run that did not finish, and the refusal, if any."""
        out = [f"{r.config.device}: {r.error}" for r in self.run_ended if r.status != "finished"]
        return out + ([self.rejected] if self.rejected else [])
