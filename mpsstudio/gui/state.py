"""What the window is doing, without a widget: the catalogue it loaded, the run or tool in progress, what each Run
left (its ended runs, its trained models, a refusal), and the rules on what may happen next. The views observe it
(`subscribe`) and show it; the controllers (gui/window/) change it, and every change notifies: setting a field does
(napari's EventedModel is the pattern), a method that changes several notifies once, and the containers are read
only from outside (their changes go through `run_has_ended`, `note_epochs`, `forget_trained`). No Qt here: the
rules are tested as plain Python (napari's ViewerModel under its QtViewer is the pattern).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


_UNSET = object()


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
    run_ended: tuple = ()  # the last Run's ended runs, in order
    pending_folder: str | None = None  # a folder dropped before PyTorch loaded: checked once it has
    rechecking: bool = False  # Check Again asked for the catalogue once more
    stopping: bool = False  # Stop was asked of the job in progress
    _trained: dict[str, str] = field(default_factory=dict, repr=False)  # run id -> its trained model in the cache
    _epochs: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)  # run id -> (epochs, steps)
    _listeners: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _held: int = field(default=0, repr=False)  # > 0 inside `_changes`: one notification at its end
    _dirty: bool = field(default=False, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        """Every public field's change notifies (once a method's changes are all made, inside one)."""
        was = self.__dict__.get(name, _UNSET)
        object.__setattr__(self, name, value)
        if name.startswith("_") or was is _UNSET or was is value or (type(was) is type(value) and was == value):
            return
        if self._held:
            object.__setattr__(self, "_dirty", True)
        else:
            self._changed()

    @contextmanager
    def _changes(self) -> Iterator[None]:
        """Several changes, one notification (where any was made)."""
        object.__setattr__(self, "_held", self._held + 1)
        try:
            yield
        finally:
            object.__setattr__(self, "_held", self._held - 1)
            if not self._held and self._dirty:
                object.__setattr__(self, "_dirty", False)
                self._changed()

    @property
    def trained(self) -> Mapping[str, str]:
        """Run id -> its trained model kept in the cache (read only: `run_has_ended`, `forget_trained`)."""
        return MappingProxyType(self._trained)

    @property
    def epochs(self) -> Mapping[str, tuple[int, int]]:
        """Run id -> (epochs, steps) of an epoch run (read only: `note_epochs`)."""
        return MappingProxyType(self._epochs)

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
        with self._changes():
            self.catalog = catalog
            self.rechecking = False

    def start_run(self, job: Any, probing: bool = False) -> None:
        """A Run begins: what the last one left is forgotten."""
        if self.busy:
            raise RuntimeError("a Run or a tool is already in progress")
        with self._changes():
            self.run_job, self.probing, self.stopping = job, probing, False
            self.run_ended, self.rejected = (), ""

    def end_run(self) -> Any:
        """The Run has ended; its job (to be waited for and deleted), None when none ran."""
        with self._changes():
            job, self.run_job = self.run_job, None
            self.stopping = self.stopping and self.tool_job is not None
        return job

    def start_tool(self, job: Any, automatic: bool = False) -> None:
        if self.busy:
            raise RuntimeError("a Run or a tool is already in progress")
        with self._changes():
            self.tool_job, self.tool_automatic, self.stopping = job, automatic, False

    def end_tool(self) -> Any:
        with self._changes():
            job, self.tool_job = self.tool_job, None
            self.stopping = self.stopping and self.run_job is not None
        return job

    def ask_stop(self) -> list:
        """Stop was asked: the jobs to stop (none when idle)."""
        jobs = [j for j in (self.tool_job, self.run_job) if j is not None]
        if jobs:
            self.stopping = True
        return jobs

    def run_has_ended(self, result) -> None:
        """One run of the Run ended (kept in order; its trained model noted where it saved one)."""
        with self._changes():
            self.run_ended = (*self.run_ended, result)
            saved = result.summary.saved_model if not self.probing else None
            if saved:
                self._trained[result.id] = saved

    def note_epochs(self, run_id: str, epochs: int, steps: int) -> None:
        """An epoch run started: its epochs and steps in all (the progress bar's epoch words)."""
        self._epochs[run_id] = (epochs, steps)
        self._changed()

    def forget_trained(self) -> None:
        """A new Run's models replace the last one's in the cache."""
        if self._trained:
            self._trained.clear()
            self._changed()

    def ended_ids(self) -> list[str]:
        return [r.id for r in self.run_ended]

    def probe_rates(self) -> dict[str, float | None]:
        """The launch benchmark's probe: samples/s per device of its finished runs."""
        return {r.config.device: r.summary.samples_per_s for r in self.run_ended if r.status == "finished"}

    def failures(self) -> list[str]:
        """"device: error" of each run of the Run that did not finish, and the refusal, if any."""
        out = [f"{r.config.device}: {r.error}" for r in self.run_ended if r.status != "finished"]
        return out + ([self.rejected] if self.rejected else [])
