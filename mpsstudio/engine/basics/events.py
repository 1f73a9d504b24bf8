"""Events a run emits, in order: Started, Warmup, Window... (EpochEnd...), Ended; a Notice at any time.

They are plain dataclasses so the GUI worker can forward them as signals and the CLI can print them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .results import EpochRow, RunResult, WindowRow


@dataclass
class Started:
    run_id: str
    config: dict
    env: dict
    device: dict
    dataset: str  # one-line summary of the data
    parameters: int
    total_steps: int  # warm-up steps included
    warmup_steps: int
    notes: list[str] = field(default_factory=list)
    run_index: int = 1  # this run's place among the configs run together (a comparison), from 1
    run_count: int = 1
    train_size: int = 0  # training samples (for s/epoch)
    tokens_per_step: float | None = None  # a token model's real tokens a step, every rank's (padded text: the mean)


@dataclass
class Warmup:
    """Warm-up finished: its steps are timed apart and never counted in throughput."""

    steps: int
    seconds: float
    losses: list[float]


RECENT_WINDOWS = 5  # windows in Window.recent_samples_per_s
UNBOUNDED_STEPS = 10**9  # a Window's total_steps in a script's run that goes to the script's own end (no --steps)


@dataclass
class Window:
    """One measurement window: per-step losses (fetched in bulk) and the window's synchronized throughput."""

    index: int
    first_step: int  # 1-based step number of losses[0], warm-up steps included
    losses: list[float]
    seconds: float  # synchronized wall time of the window
    samples: int
    samples_per_s: float
    data_wait_s: float  # host time spent waiting for batches within the window
    memory: int  # bytes in use on the device (see Device.in_use)
    memory_detail: dict
    steps_done: int
    total_steps: int
    elapsed_s: float  # since the run started (setup excluded)
    eta_s: float | None  # estimated time left: the steps left at the pace of every step since warm-up, validation included
    # set on the window that closes an energy span (engine/machine/energy/), else None:
    energy_j: float | None = None  # joules of the device's part over the span; None: not measured
    energy_s: float | None = None  # the span's seconds (between its two counter readings)
    energy_windows: int | None = None  # how many windows the span covers, this one included
    energy_parts: dict | None = None  # joules of every part the source gives ("gpu", "cpu", "dram", "ane")
    utilization: float | None = None  # the device's busy share over the span, percent
    # the median samples/s of the last RECENT_WINDOWS windows, this one included: what a readout shows (one
    # window's rate jumps with every scheduler hiccup)
    recent_samples_per_s: float | None = None
    # the memory plot's other lines (Device.memory_lines), bytes or None where not read: the driver's memory on MPS
    # or the caching allocator's reserve on CUDA, the run process's memory (its footprint on macOS), the machine's swap
    memory_driver: int | None = None
    memory_process: int | None = None
    swap_used: int | None = None

    @property
    def power_w(self) -> float | None:
        """Average watts of the device's part over the span this window closed (None otherwise)."""
        if self.energy_j is None or not self.energy_s or self.energy_s <= 0:
            return None
        return self.energy_j / self.energy_s

    def record(self) -> WindowRow:
        """The window as RunResult.windows keeps it."""
        return WindowRow(first_step=self.first_step, steps=len(self.losses), seconds=self.seconds,
                         samples=self.samples, samples_per_s=self.samples_per_s, data_wait_s=self.data_wait_s,
                         memory=self.memory, energy_j=self.energy_j, energy_s=self.energy_s,
                         energy_windows=self.energy_windows, energy_parts=self.energy_parts,
                         utilization=self.utilization, memory_driver=self.memory_driver,
                         memory_process=self.memory_process, swap_used=self.swap_used)


@dataclass
class EpochEnd:
    epoch: int
    seconds: float  # training time of the epoch, validation excluded
    val_loss: float | None
    val_accuracy: float | None
    step: int | None = None  # the step the epoch ended at (warm-up steps included)
    val_perplexity: float | None = None  # a language model's on text: exp(val_loss)

    def record(self) -> EpochRow:
        """The epoch as RunResult.epochs keeps it."""
        return EpochRow(epoch=self.epoch, step=self.step if isinstance(self.step, int) else None,
                        seconds=self.seconds, val_loss=self.val_loss, val_accuracy=self.val_accuracy,
                        val_perplexity=self.val_perplexity)


@dataclass
class Notice:
    """A sentence for the run in progress that is not a measurement (a script whose steps are not counted yet):
    shown by the front ends as it comes, not kept with the run."""

    text: str
    device: str = ""  # the run's device (a notice can come before Started)


@dataclass
class Ended:
    """The run is over: result.status is finished, failed or cancelled."""

    result: RunResult


Event = Started | Warmup | Window | EpochEnd | Notice | Ended


@dataclass(frozen=True)
class Stop:
    """The one message the other way, parent to child: stop the job in progress at the end of its measurement window
    (or its step). The front end sends it to a run's process (process/messages.py), a run's process to its torchrun
    ranks (run/distributed.py)."""


STOP = Stop()
