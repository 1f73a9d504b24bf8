"""The run in progress, drawn and said as its events arrive; nothing is measured or estimated here."""

from __future__ import annotations

from typing import TYPE_CHECKING

import os

from PySide6.QtCore import QObject

from ...engine.basics.events import RECENT_WINDOWS, Ended, EpochEnd, Notice, Started, Warmup, Window
from ...engine.basics.config import SCRIPT
from ...engine.basics.formatting import fmt_duration, fmt_rate, one_line, printable
from ...engine.basics.frameworks import run_label
from ..plots.redraw import interval_for
from ..preferences import Preferences

if TYPE_CHECKING:
    from .main_window import MainWindow


class LiveView(QObject):
    """A run's events as they come: the plots, the status bar's step, samples/s (the engine's rolling median) and
    time left (the engine's estimate), notes and the power note."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)  # a QObject of the window: what the jobs send is handled in its thread
        self.w = w

    def on_event(self, event) -> None:
        w = self.w
        if isinstance(event, Notice):  # a sentence about the run in progress: said, and beside its output
            w.say(f"{event.device}: {event.text}" if event.device else event.text)
            w.banner.show_message(event.text)
            w.output.say(event.device, event.text)
            w.chrome.badge_output(True)
        elif isinstance(event, Started):
            device = event.config["device"]
            options: dict = event.config.get("options") or {}
            options = options if isinstance(options, dict) else {}
            where = run_label(str(event.config.get("framework", "torch")), device,  # "MLX · cpu" beside "cpu"
                              quantize=options.get("quantize"))
            epochs = event.config.get("epochs") if event.config.get("steps") is None else None
            if epochs:
                w.state.note_epochs(event.run_id, epochs, event.total_steps)
            # a run in another Python environment says its torch beside the device (two cpu curves stay apart)
            torch = event.env.get("torch") or "?"
            label = f"{device} · torch {torch}" if event.config.get("python") else where
            w.plots.start_run(event.run_id, label, event.warmup_steps, event.tokens_per_step)
            threads, cores = event.env.get("threads"), os.cpu_count() or 1
            w.plots.set_redraw_interval_ms(interval_for(Preferences.load().plot_refresh, device, threads, cores))
            # 0 steps in all: a script that runs until it ends (the bar is busy, its words count the steps)
            w.progress.setRange(0, event.total_steps if event.total_steps > 0 else 0)
            w.runs.set_progress(0)
            where = f"run {event.run_index} of {event.run_count}: " if event.run_count > 1 else ""
            script = event.config.get("dataset") == SCRIPT  # a user's script: its name says what runs
            name = str(event.config.get("model", "")).replace("\\", "/").rsplit("/", 1)[-1]
            what = label if event.config.get("python") else device  # another PyTorch says its torch
            w.run_label.setText(f"{where}{printable(name)} on {what}" if script else f"{where}{what}")
            w.say(f"{device}: warming up ({event.warmup_steps} steps; timed apart)…")
            for note in event.notes:
                w.banner.show_message(note)
            energy = event.env.get("energy")
            meter = energy if isinstance(energy, dict) else {}
            reason = meter.get("reason")
            w.plots.set_power_note(f"Power of {device} not measured: {one_line(str(reason), 120)}" if reason
                                      else "")
        elif isinstance(event, Warmup):
            w.plots.add_warmup(self.current_id(), event.losses, event.seconds)
            w.runs.set_progress(event.steps)
            w.say(f"Warm-up took {fmt_duration(event.seconds)}; measuring…")
        elif isinstance(event, Window):
            power = event.power_w
            w.plots.add_window(self.current_id(), event.first_step, event.losses, event.samples_per_s,
                                  event.memory, power, seconds=event.seconds,
                                  lines={"memory_driver": event.memory_driver, "memory_process": event.memory_process,
                                         "swap_used": event.swap_used})
            w.runs.set_progress(event.steps_done)
            left = f" · {fmt_duration(event.eta_s)} left (estimated)" if event.eta_s is not None else ""
            watts = f" · {power:,.0f} W" if power is not None else ""
            rate = event.recent_samples_per_s if event.recent_samples_per_s is not None else event.samples_per_s
            w.rate_label.setText(f"{fmt_rate(rate)} samples/s{watts}{left}")
            w.rate_label.setToolTip(f"Samples/s: the median of the last {RECENT_WINDOWS} measurement windows "
                                       "(one window's rate jumps). Time left: the steps left at the pace of every "
                                       "step since warm-up, validation included (the engine's estimate).")
        elif isinstance(event, EpochEnd):
            run_id = self.current_id()
            epochs, total = w.state.epochs.get(run_id, (0, 0))
            if event.step is not None:
                w.plots.add_epoch(run_id, event.step, event.val_loss)
            elif epochs:
                w.plots.add_epoch(run_id, event.epoch * total // epochs, event.val_loss)
            if event.val_accuracy is not None:
                w.say(f"Epoch {event.epoch}: validation accuracy {event.val_accuracy:.1%}")
        elif isinstance(event, Ended):
            w.runs.on_run_ended(event.result)

    def current_id(self) -> str:
        ids = self.w.plots.run_ids()
        return ids[-1] if ids else ""
