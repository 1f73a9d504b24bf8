"""A tool's work in run processes, the same for every front end: a sweep's points and a tune's candidates (each a
run: run_point), a tune's parity checks and first wrong layer (run_tool), an export that lands only when it was not
stopped, any other tool in one run process; and the words of their progress. The CLI and the window call these;
they only say what comes (a terminal line, the status bar) and catch what is theirs (Ctrl-C)."""

from __future__ import annotations

from collections.abc import Callable

from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.results import RunResult
from .warm import Warm

ANALYSIS = "MPS Studio's analysis of the runs"  # where a sweep's or a tune's result comes from, for its check


def run_point(config: RunConfig, **kwargs) -> RunResult:
    """The package's run_point, looked up when called (its face: what the front ends call, and tests replace)."""
    from .. import process

    return process.run_point(config, **kwargs)


def run_tool(name: str, payload: dict, **kwargs) -> dict:
    """The package's run_tool, looked up when called."""
    from .. import process

    return process.run_tool(name, payload, **kwargs)


def sweep_point_words(result: RunResult, done: int, total: int) -> str:
    """"cpu batch 64: 1,234 samples/s  (3 of up to 6)"."""
    sps = result.summary.samples_per_s
    shown = f"{sps:,.0f} samples/s" if sps and result.status == "finished" else result.status
    return f"{result.config.device} batch {result.config.batch_size}: {shown}  ({done} of up to {total})"


def tune_point_words(cand, result: RunResult, rnd: int) -> str:
    """"round 2: cuda fp32 + TF32 off, batch 64: 1,234 samples/s"."""
    sps = result.summary.samples_per_s
    shown = f"{sps:,.0f} samples/s" if sps and result.status == "finished" else result.status
    return f"round {rnd}: {cand.device} {cand.label()}: {shown}"


def sweep(config: RunConfig, devices: list[str], sizes: list[int] | None, *, steps: int, warmup: int,
          point: Callable[[RunConfig], RunResult | None], should_stop: Callable[[], bool],
          say: Callable[[str], None]) -> dict:
    """A batch-size sweep: each point a run (`point`: run_point with the front end's keywords), then its analysis,
    checked as every tool result is before a front end reads it (UserError naming the field where it cannot be)."""
    from ..tools import sweep as sweeps
    from ..tools.registry import checked

    runs = sweeps.run(config, devices, sizes, steps=steps, warmup=warmup, run_point=point, should_stop=should_stop,
                      on_point=lambda result, done, total: say(sweep_point_words(result, done, total)))
    return checked("sweep", sweeps.analyse(runs, config, steps), where=ANALYSIS)


def tune(config: RunConfig, grid, *, budget_s: float, steps: int, warmup: int, max_rounds: int,
         should_stop: Callable[[], bool], say: Callable[[str], None], point_kwargs: dict | None = None,
         tool_kwargs: dict | None = None, on_check_failed: Callable[[RunConfig, str], None] | None = None,
         interrupted: Callable[[KeyboardInterrupt], None] | None = None) -> dict:
    """Best settings (tools/tune): the candidates as runs (on a GPU in one warm worker, ended before the checks), the
    parity checks as `inspect` and the first wrong layer as `diagnose --layers`, each in a run process.
    `point_kwargs`/`tool_kwargs`: the front end's keywords for run_point and run_tool (Stop, time limits, progress);
    `interrupted(exc)`: a Ctrl-C during a candidate or a check (the CLI's), which keeps what was measured;
    `on_check_failed(config, sentence)`: a check that could not run."""
    from ..basics.events import Ended
    from ..tools import tune as tunes

    limit = max(60.0, budget_s)  # no candidate outlasts the whole budget
    point_kwargs = {"timeout_s": limit, **(point_kwargs or {})}
    tool_kwargs = dict(tool_kwargs or {})

    def caught(exc: KeyboardInterrupt) -> None:
        if interrupted is None:
            raise exc
        interrupted(exc)

    with Warm() as warm:
        def point(c: RunConfig) -> RunResult | None:
            ended: list[RunResult] = []
            try:
                return run_point(c, warm=warm, **point_kwargs,
                                 on_event=lambda e: ended.append(e.result) if isinstance(e, Ended) else None)
            except KeyboardInterrupt as exc:  # kept as cancelled (its Ended event); the tune reports what it measured
                caught(exc)
                return ended[-1] if ended else None

        def check(c: RunConfig) -> dict | None:
            return _tool("inspect", {"config": c.to_dict()}, c)

        def layers(c: RunConfig) -> dict | None:
            return _tool("diagnose", {"config": c.to_dict(), "devices": [c.device], "layers": True}, c, quiet=True)

        def _tool(name: str, payload: dict, c: RunConfig, quiet: bool = False) -> dict | None:
            try:
                return run_tool(name, payload, mps_fallback=c.mps_fallback, **tool_kwargs)
            except UserError as exc:
                if on_check_failed is not None and not quiet:
                    on_check_failed(c, str(exc))
                return None
            except KeyboardInterrupt as exc:
                caught(exc)
                return None
        result = tunes.tune(config, grid, run_point=point, run_check=check, budget_s=budget_s, steps=steps,
                            warmup=warmup, should_stop=should_stop,
                            on_point=lambda cand, result, rnd: say(tune_point_words(cand, result, rnd)),
                            max_rounds=max_rounds, run_layers=layers, before_checks=warm.close)
    from ..tools.registry import checked

    return checked("tune", result, where=ANALYSIS)


def tool_result(kind: str, config: RunConfig, devices: list[str], payload: dict, *,
                batch_sizes: list[int] | None = None, should_stop: Callable[[], bool],
                say: Callable[[str], None]) -> dict:
    """The window's tools: a sweep or a tune (above), an export that lands only when it was not stopped, any other
    tool in one run process. UserError: one sentence."""
    import os

    if kind == "sweep":
        from ..tools import sweep as sweeps

        return sweep(config, devices, batch_sizes, steps=payload.get("steps", sweeps.DEFAULT_STEPS),
                     warmup=payload.get("warmup", sweeps.DEFAULT_WARMUP),
                     point=lambda c: run_point(c, should_stop=should_stop), should_stop=should_stop,
                     say=lambda line: say(f"Sweep: {line}"))
    if kind == "tune":
        from ..tools import tune as tunes

        p = payload
        grid = tunes.plan(config, devices, batch_sizes=p.get("batch_sizes"), precisions=p.get("precisions"),
                          channels_last=p.get("channels_last"), compile=p.get("compile"),
                          train_samples=p.get("train_samples"), cores=os.cpu_count(), tf32=p.get("tf32"))
        return tune(config, grid, budget_s=p.get("budget_s", tunes.DEFAULT_BUDGET_MIN * 60),
                    steps=p.get("steps", tunes.DEFAULT_STEPS), warmup=p.get("warmup", tunes.DEFAULT_WARMUP),
                    max_rounds=p.get("max_rounds", tunes.MAX_ROUNDS), should_stop=should_stop,
                    say=lambda line: say(f"Best settings, {line}"), point_kwargs={"should_stop": should_stop},
                    tool_kwargs={"should_stop": should_stop})
    progress = {"progress": lambda message, fraction: say(message)}
    if kind == "export":  # a stopped export must not land; what it left half-written goes
        from ..basics.files import clear_partials, land

        try:
            result = run_tool(kind, {"config": config.to_dict(), **payload, "staged": True},
                              should_stop=should_stop, stop_grace_s=0, mps_fallback=config.mps_fallback,
                              **progress)
            if should_stop():  # Stop came with the answer: it does not land
                raise UserError("The export was stopped; nothing was written.")
            land(result.pop("staged"), result["path"])
            return result
        finally:
            clear_partials(payload.get("out") or "")
    return run_tool(kind, {"config": config.to_dict(), **payload}, should_stop=should_stop,
                    mps_fallback=config.mps_fallback, **progress)

