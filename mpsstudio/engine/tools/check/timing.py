"""The device check's timing across fresh processes: a few matrix products timed in N new interpreters, one after
another, because a kernel can be chosen per process (pytorch#182815: an MPSGraph GEMM 2-3x slower in ~40 % of fresh
processes, which a benchmark inside one process cannot see), and with `check --model` the user's model's training
step. modes.py reads the distribution.

Each process is started by multiprocessing's spawn (as run processes are, and as the frozen app can), imports torch,
times each shape REPEATS times after WARMUP calls, synchronized around each, and sends the medians (ms). A process
that fails or runs past PROCESS_TIMEOUT_S is said and left out.

A test seam the product owns: MPSSTUDIO_CHECK_SLOW="FACTOR@I,J" (in the run process's environment) makes the
products of processes I and J FACTOR times slower (the process waits the difference inside the timed call), a slow
kernel as the tests inject it.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import time

SHAPES = (1024, 2048)  # square products, n x n x n (pytorch#182815: M from 768 to 3072)
DTYPES = ("fp32",)
WARMUP, REPEATS = 3, 10
PROCESS_TIMEOUT_S = 120.0
SLOW_ENV = "MPSSTUDIO_CHECK_SLOW"


def slow_processes(text: str) -> tuple[float, set[int]]:
    """(factor, process indexes) of MPSSTUDIO_CHECK_SLOW ("2.4@1,4"); (1.0, set()) when unset or malformed."""
    factor, _, which = (text or "").partition("@")
    try:
        return max(1.0, float(factor)), {int(i) for i in which.split(",") if i.strip()}
    except ValueError:
        return 1.0, set()


def time_products(device: str, factor: float = 1.0) -> dict[str, float]:
    """The median ms of each shape's product on `device`, in this process."""
    import torch

    from ...machine import devices as machine

    dev = machine.resolve_device(device)
    tdev = torch.device(dev.torch_device or dev.id)
    gen = torch.Generator().manual_seed(0)
    out = {}
    for n in SHAPES:
        for dtype in DTYPES:
            a = torch.randn(n, n, generator=gen).to(tdev)
            b = torch.randn(n, n, generator=gen).to(tdev)
            for _ in range(WARMUP):
                a @ b
            dev.synchronize()
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                a @ b
                dev.synchronize()
                took = time.perf_counter() - start
                if factor > 1.0:
                    time.sleep(took * (factor - 1.0))
                times.append(time.perf_counter() - start)
            out[f"{n}x{n}x{n} {dtype}"] = 1000 * statistics.median(times)
    return out


MODEL_BATCH = 16  # the user's model's training step is timed at this batch


def time_model_step(device: str, config: dict, factor: float = 1.0) -> dict[str, float]:
    """The median ms of the user's model's training step (fp32, MODEL_BATCH samples of its data, SGD) on `device`,
    in this process: as a run builds it (tools/toolkit), WARMUP steps, then REPEATS, synchronized around each."""
    from ...basics.config import RunConfig
    from ...run import steps
    from .. import toolkit
    from ..opcheck import forward_backward

    cfg = RunConfig.from_dict(config)
    setup = toolkit.prepare(cfg.changed(device=device, precision="fp32", batch_size=MODEL_BATCH))
    model = toolkit.build(setup).to(setup.tdev)
    if setup.feed.made or setup.feed.own_loss:
        return {}
    opt = steps.make_optimizer(setup.config, model)
    x, y = toolkit.real_batch(setup, MODEL_BATCH, setup.tdev)
    times = []
    for i in range(WARMUP + REPEATS):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        forward_backward(model, x, y, None, setup.tdev.type)
        opt.step()
        setup.device.synchronize()
        took = time.perf_counter() - start
        if factor > 1.0:
            time.sleep(took * (factor - 1.0))
        if i >= WARMUP:
            times.append(time.perf_counter() - start)
    return {f"{cfg.model[:60]} training step, batch {MODEL_BATCH} fp32": 1000 * statistics.median(times)}


def _child(conn, device: str, factor: float, model: dict | None = None) -> None:
    try:
        found = time_products(device, factor)
        if model is not None:
            found.update(time_model_step(device, model, factor))
        conn.send(("ok", found))
    except BaseException as exc:  # said by the parent in one line
        conn.send(("error", f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"))
    finally:
        conn.close()


def across_processes(device: str, n: int, *, progress=None, should_stop=None,
                     model: dict | None = None) -> tuple[list[dict[str, float]], list[str]]:
    """Each shape's median ms in `n` fresh processes, one after another, and what went wrong in any; with `model`
    (a RunConfig's dict), its training step's too."""
    factor, slow = slow_processes(os.environ.get(SLOW_ENV, ""))
    ctx = multiprocessing.get_context("spawn")
    found: list[dict[str, float]] = []
    problems: list[str] = []
    for i in range(n):
        if should_stop is not None and should_stop():
            break
        if progress is not None:
            progress(f"{device}: timing matrix products in fresh process {i + 1} of {n}", i / max(1, n))
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, device, factor if i in slow else 1.0, model),
                           name="mpsstudio-timing")
        proc.start()
        child.close()
        answer: tuple = ("error", f"no answer within {PROCESS_TIMEOUT_S:.0f} s")
        if parent.poll(PROCESS_TIMEOUT_S):
            try:
                answer = parent.recv()
            except EOFError:  # it died before it answered (a crash in native code)
                proc.join(5.0)
                answer = ("error", f"it ended without an answer (exit code {proc.exitcode})")
        proc.join(5.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
        parent.close()
        if answer[0] == "ok" and isinstance(answer[1], dict):
            found.append(answer[1])
        else:
            problems.append(f"{device}: fresh process {i + 1} gave no timing ({answer[1]})")
    return found, problems
