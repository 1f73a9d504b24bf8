"""A run rebuilt from its events: for a run whose process died or was ended before its Ended event (process/runs.py), for
one whose front end was killed (process/journal.py), and for a run on several GPUs whose rank 0 did not end it (run/distributed.py)."""

from __future__ import annotations

from .summary import RunFacts, memory_measure, summarise
from ..basics.config import RunConfig
from ..basics.events import EpochEnd, Event, Started, Warmup, Window
from ..basics.results import RunResult


class Recorder:
    """Rebuilds a run from its events, for a child that died or was ended before its Ended event."""

    def __init__(self, cfg: RunConfig):
        self.result = RunResult(config=cfg)
        self.facts = RunFacts(batch_size=cfg.batch_size, memory_measure=memory_measure(cfg.device))

    def add(self, event: Event) -> None:
        r, f = self.result, self.facts
        if isinstance(event, Started):
            r.id, r.env = event.run_id, event.env
            if r.config.is_script:  # a script's batch and windows are what its first step said (run/tracked.py)
                for key in ("batch_size", "window_s"):
                    value = event.config.get(key)
                    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                        setattr(r.config, key, value)
                f.batch_size = r.config.batch_size
            f.parameters, f.dataset, f.train_size = event.parameters, event.dataset, event.train_size
            f.warmup_steps = event.warmup_steps
            ranks = event.env.get("ranks") if isinstance(event.env, dict) else None
            world = ranks.get("world") if isinstance(ranks, dict) else None
            if isinstance(world, int) and not isinstance(world, bool) and 1 < world <= 100_000:
                f.batch_size, f.train_size = f.batch_size * world, f.train_size * world  # every rank's samples
        elif isinstance(event, Warmup):
            r.losses.extend(event.losses)
            f.warmup_s = event.seconds
        elif isinstance(event, Window):
            r.losses.extend(event.losses)
            r.windows.append(event.record())
            f.peak_memory = max(f.peak_memory, event.memory, event.memory_detail.get("peak_allocated", 0) or 0)
        elif isinstance(event, EpochEnd):
            r.epochs.append({"epoch": event.epoch, "seconds": event.seconds, "val_loss": event.val_loss,
                             "val_accuracy": event.val_accuracy,
                             **({"step": event.step} if isinstance(event.step, int) else {})})
            if event.val_loss is not None and event.val_accuracy is not None:
                f.val = (event.val_loss, event.val_accuracy)

    def finish(self, status: str, error: str) -> RunResult:
        r = self.result
        r.status, r.error = status, error
        summarise(r, self.facts)
        return r
