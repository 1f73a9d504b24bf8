"""One rank of a run on several GPUs (or CPU processes), as torchrun started it (process/rank.py): its process
group, the model in DistributedDataParallel, its share of the data, and what the ranks agree on.

The measurement rules of a run hold across ranks:
- a window ends on every rank at the same step: its length follows the window seconds every rank agreed on (the
  slowest rank's), so every rank adapts the next window the same way; the agreements go over gloo on the CPU (on
  GPUs too), so agreeing never waits on a GPU stream;
- throughput is the samples of all ranks over the slowest rank's window;
- Stop is agreed at a window's end (rank 0 hears it), so every rank stops at the same step;
- a rank waits at most `rank_timeout_s` for the others at any collective; a hung rank ends the run then.

The communication share of a step: pairs of spans of the same steps with DDP's gradient all-reduce and under
`no_sync()`, alternated (AB BA) on the same ranks, after the measured phase; its throughput never counts them.
"""

from __future__ import annotations

import os
import socket
import statistics
import time
from contextlib import nullcontext
from dataclasses import replace
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from ..basics.config import RunConfig

COMM_PAIRS = 6  # pairs of spans (all-reduce, no_sync) the communication share is the median of
COMM_SPAN_S = 0.25  # at most this much work per span (at least two windows' worth when windows are shorter)


class Ranks:
    """This process's place among the ranks (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK)."""

    def __init__(self, config: RunConfig, environ=None):
        env = os.environ if environ is None else environ
        self.rank, self.world = int(env["RANK"]), int(env["WORLD_SIZE"])
        self.local_rank, self.local_world = int(env.get("LOCAL_RANK", 0)), int(env.get("LOCAL_WORLD_SIZE", 1))
        self.node = int(env.get("GROUP_RANK", 0))
        self.config = config
        self.cuda = config.device.startswith("cuda")
        self.device = f"cuda:{self.local_rank}" if self.cuda else "cpu"
        self.stopped = False  # what the ranks agreed at the last window's end
        self.window_steps: list[int] = []  # where this rank's windows ended (every rank's are the same)
        self.window_s: list[float] = []  # this rank's own window seconds
        self.comm: dict | None = None
        self.group: Any = None  # (a ProcessGroup) the ranks' agreements go over gloo on the CPU: no GPU stream waits for them

    def start(self) -> None:
        """Join the process group (NCCL on GPUs, gloo on the CPU) with the config's timeout."""
        if self.cuda:
            torch.cuda.set_device(self.local_rank)
        timeout = timedelta(seconds=self.config.rank_timeout_s)
        if self.cuda:
            dist.init_process_group("nccl", timeout=timeout, device_id=torch.device(self.device))
        else:
            dist.init_process_group("gloo", timeout=timeout)
        if self.cuda:
            self.group = dist.new_group(backend="gloo")

    def close(self) -> None:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:
                pass

    def data_config(self) -> RunConfig:
        """The config this rank loads data with: synthetic data from a seed of its own, so every rank's samples
        differ (a dataset is split by `shard` instead)."""
        if str(self.config.dataset).lower() == "synthetic":
            return replace(self.config, seed=self.config.seed + self.rank, options=dict(self.config.options))
        return self.config

    def shard(self, data):
        """This rank's disjoint share of the training split: samples rank, rank + world, ... of an equal number
        per rank (DistributedSampler's split without its padding: no sample counts twice). Validation stays whole
        on every rank (the same forward passes on each: DDP's buffer broadcasts stay in step). Synthetic data is
        this rank's own already."""
        from ..data.datasets import TensorSamples

        if data.name == "synthetic":
            return data
        train = data.train
        per = len(train) // self.world
        if hasattr(train, "select"):  # a text dataset's rows (data/token_rows.py)
            part = train.select(range(self.rank, per * self.world, self.world))
        elif hasattr(train, "x") and hasattr(train, "y"):
            part = TensorSamples(train.x[self.rank::self.world][:per], train.y[self.rank::self.world][:per])
        else:
            part = torch.utils.data.Subset(train, list(range(self.rank, per * self.world, self.world)))
        return replace(data, train=part, notes=[*data.notes, f"each of the {self.world} ranks trains on its own "
                                                f"{per:,} of the {len(train):,} training samples"])

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model in DistributedDataParallel for training (its defaults, as a bare DDP loop has them);
        inference needs no gradient all-reduce and runs the model as it is."""
        if self.config.mode != "train":
            return model
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[self.local_rank] if self.cuda else None)

    def agree(self, seconds: float, step: int, stop: bool) -> float:
        """A window ended at `step` on this rank after `seconds`: the slowest rank's seconds (every rank's
        window), and Stop when any rank was asked (`self.stopped`)."""
        return self.agreed(self.agree_soon(seconds, step, stop))

    def agree_soon(self, seconds: float, step: int, stop: bool) -> tuple:
        """`agree` begun: the exchange runs in gloo's threads while this rank queues its next steps, and `agreed`
        takes its answer a window later. A rank that waited at every window's end for the others kept its GPU one
        step ahead at most, and a late host (a rank's own bookkeeping, the scheduler) stalled both GPUs: 2-GPU
        windows 10-30 ms long in 100 on the lent H200s where the bare DDP loop, which never waits, had none."""
        mine = torch.tensor([seconds, 1.0 if stop else 0.0], dtype=torch.float64)
        every = [torch.empty_like(mine) for _ in range(self.world)]
        return dist.all_gather(every, mine, group=self.group, async_op=True), every, step, seconds

    def agreed(self, begun: tuple) -> float:
        """The slowest rank's seconds of the window `agree_soon` began, and Stop as every rank asked it."""
        work, every, step, seconds = begun
        work.wait()
        values = torch.stack(every)
        self.stopped = bool(values[:, 1].max().item() > 0)
        self.window_steps.append(step)
        self.window_s.append(seconds)
        return float(values[:, 0].max().item())

    def communication(self, steps, step_fn, stream, synchronize, steps_per_s: float) -> None:
        """The share of a step the gradient all-reduce takes: COMM_PAIRS pairs of spans of the same steps with and
        without it (DDP's no_sync), alternated, each span timed as the slowest rank's (`self.comm`)."""
        model = steps.model
        if self.world < 2 or self.config.mode != "train" or self.config.accumulate > 1 or not hasattr(model, "no_sync"):
            return
        span_s = min(COMM_SPAN_S, 2 * self.config.window_s)
        n = max(2, round(span_s * steps_per_s)) if steps_per_s > 0 else 2
        n = min(n, 200)
        pairs = []
        for i in range(COMM_PAIRS):
            spans = {}
            for synced in ((True, False) if i % 2 == 0 else (False, True)):
                synchronize()
                start = time.perf_counter()
                with nullcontext() if synced else model.no_sync():
                    for _ in range(n):
                        step_fn(*next(stream))
                synchronize()
                spans[synced] = self.agree_seconds(time.perf_counter() - start)
            pairs.append(spans[False] / spans[True] if spans[True] > 0 else 1.0)
        ratios = sorted(pairs)
        self.comm = {"share": 1 - statistics.median(ratios), "low": 1 - ratios[-1], "high": 1 - ratios[0],
                     "pairs": len(ratios), "steps_per_span": n,
                     "method": f"median and range of {len(ratios)} alternated pairs of {n}-step spans with the "
                               "all-reduce and without it (DDP no_sync)"}

    def agree_seconds(self, seconds: float) -> float:
        mine = torch.tensor([seconds], dtype=torch.float64)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=self.group)
        return float(mine.item())

    def figures(self, peak_memory: int, device_name: str) -> list[dict] | None:
        """Every rank's own figures, gathered on rank 0 (None on the others): its node, host, device, peak memory,
        where its windows ended and their seconds."""
        mine = {"rank": self.rank, "local_rank": self.local_rank, "node": self.node, "host": socket.gethostname(),
                "device": device_name, "peak_memory": int(peak_memory), "window_steps": list(self.window_steps),
                "window_s": [round(s, 6) for s in self.window_s],
                "window_s_median": statistics.median(self.window_s) if self.window_s else None}
        every: list = [None] * self.world
        dist.all_gather_object(every, mine, group=self.group)
        return every if self.rank == 0 else None

    def describe(self) -> dict:
        """What the run's environment says of its ranks."""
        return {"world": self.world, "per_node": self.local_world, "nodes": max(1, self.world // self.local_world),
                "backend": "nccl" if self.cuda else "gloo", "timeout_s": self.config.rank_timeout_s,
                "launcher": "torchrun (torch.distributed.run)"}

    def note(self) -> str:
        """The sentence a run on several ranks starts with."""
        where = (f"{self.world} GPUs" if self.cuda else f"{self.world} CPU processes sharing this CPU's cores")
        nodes = self.world // max(1, self.local_world)
        return (f"{where}{f' on {nodes} machines' if nodes > 1 else ''}, the model in DistributedDataParallel: "
                f"batch {self.config.batch:,} per rank, {self.config.batch * self.world:,} in all; "
                f"throughput counts every rank's samples over the slowest rank's window; a rank waits at most "
                f"{self.config.rank_timeout_s:g} s for the others")


def summary_of(ranks: Ranks, result, windows, device) -> dict:
    """The summary fields of a run on several ranks: the ranks, the global batch, every rank's figures (gathered
    when every rank reached the end together: a finished or stopped run) and the all-reduce's share."""
    out: dict = {"ranks_world": ranks.world, "global_batch": ranks.config.batch * ranks.world,
           "ranks_nodes": max(1, ranks.world // max(1, ranks.local_world))}
    if result.status in ("finished", "cancelled") and dist.is_initialized():
        try:
            figures = ranks.figures(windows.peak_memory if windows else 0, getattr(device, "name", ranks.device))
        except Exception:  # another rank is gone: the run says so itself
            figures = None
        if figures:
            out["ranks"] = figures
    if ranks.comm:
        out["communication"] = ranks.comm
    return out
