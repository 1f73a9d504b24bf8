"""Journals of runs in progress, as a front end writes them, and a pid that is surely gone."""

from __future__ import annotations

import json

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.events import Started, Window
from mpsstudio.engine.process import journal


def journal_of(tmp_path, events, pid=None) -> journal.Journal:
    cfg = RunConfig(model="mlp", dataset="synthetic", device="cpu", batch_size=8, steps=10)
    j = journal.Journal(cfg, where=tmp_path)
    for e in events:
        j.add(e)
    if pid is not None:  # as if another front end (now gone) had written it
        lines = j.path.read_bytes().split(b"\n", 1)
        head = json.loads(lines[0])
        head["pid"] = pid
        j.path.write_bytes(json.dumps(head).encode() + b"\n" + lines[1])
    return j


def journal_events():
    started = Started(run_id="a" * 32, config={}, env={"machine": "test"}, device={}, dataset="synthetic",
                      parameters=10, total_steps=10, warmup_steps=1, train_size=64)
    window = Window(index=0, first_step=2, losses=[2.0, 1.9, 1.8, 1.7], seconds=0.1, samples=32,
                    samples_per_s=320.0, data_wait_s=0.0, memory=1000, memory_detail={}, steps_done=5,
                    total_steps=10, elapsed_s=0.2, eta_s=0.2)
    return [started, window]


def gone_pid() -> int:
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid

