"""PyTorch or MLX? in words: an MLX run against the PyTorch run of the same setup on the same device of one machine
(contrast.by_framework finds them: a contrast on the framework axis, the PyTorch run its baseline), MLX's throughput
over PyTorch's with the contrast's interval (a bootstrap over both runs' windows), said as one sentence with the
parity that let them be compared. An interval containing 1.0 is "no clear difference". No torch, no MLX here.
"""

from __future__ import annotations

from ..basics.formatting import printable
from ..basics.frameworks import framework_words
from ..basics.results import RunResult
from .compare import short_machine


def _device_words(r: RunResult) -> str:
    d = r.config.device.split(":")[0]
    if r.config.framework == "mlx":
        return "CPU" if d == "cpu" else "GPU"
    return {"cpu": "CPU", "mps": "MPS", "cuda": "CUDA"}.get(d, d)


def machine_words(r: RunResult) -> str:
    """"Apple M3 Max", the CPU's name, or the machine's label."""
    env = r.env if isinstance(r.env, dict) else {}
    if r.config.device.split(":")[0] == "cuda" and isinstance(env.get("gpus"), list) and env["gpus"]:
        return printable(str(env["gpus"][0]))
    return printable(str(env.get("chip") or env.get("cpu") or short_machine(r.machine)))


def parity_words(r: RunResult) -> str:
    """"parity passed", or what the MLX run recorded of it."""
    found = r.summary.get("parity")
    if not isinstance(found, dict):
        return "parity not recorded"
    return "parity passed" if found.get("passed") is True else "parity failed"


def sentence(base: RunResult, v) -> str:
    """"MLX (GPU) trains resnet18 1.31x [1.22-1.40] faster than PyTorch (MPS) on Apple M3 Max at batch 64, fp32;
    parity passed." or "No clear difference: ..."; how sure, the same ± rule as every comparison. `v`: the MLX run's
    contrast.Versus against the PyTorch run `base`."""
    c = base.config
    work = f"{printable(c.model)}"
    setup = f"at {c.batch_words}, {c.precision_words}" + (", compiled (torch.compile / mx.compile)" if c.compile else "")
    mlx = f"{framework_words('mlx')} ({_device_words(v.run)})"
    torch = f"{framework_words('torch')} ({_device_words(base)})"
    where = machine_words(base)
    trains = "trains" if c.mode == "train" else "runs inference of"
    noisy = " (a noisy run: treat it with care)" if v.noisy or base.summary.get("stability") == "noisy" else ""
    tail = f"; {parity_words(v.run)}{noisy}."
    if v.ratio is None:
        return f"{mlx} and {torch} are not compared for {work} on {where}: a run has no throughput{tail}"
    if v.low is None or v.high is None:
        return (f"{mlx} {trains} {work} at {times_text(v.ratio)}x the speed of {torch} on {where} {setup}, but how sure "
                f"cannot be told (too few measurement windows for an interval){tail}")
    if v.unclear():
        return (f"No clear difference: {mlx} {trains} {work} at {times_text(v.ratio)}x [{times_text(v.low)}-"
                f"{times_text(v.high)}] the speed of {torch} on {where} {setup}{tail}")
    if v.ratio >= 1:
        return (f"{mlx} {trains} {work} {times_text(v.ratio)}x [{times_text(v.low)}-{times_text(v.high)}] faster than "
                f"{torch} on {where} {setup}{tail}")
    return (f"{mlx} {trains} {work} {times_text(1 / v.ratio)}x [{times_text(1 / v.high)}-{times_text(1 / v.low)}] slower "
            f"than {torch} on {where} {setup}{tail}")


def times_text(v: float) -> str:
    """A ratio's digits: two decimals in the range a measurement gives, three significant digits beyond (an
    imported file's 1e-300 samples/s must not print 300 digits); contrast.py's too."""
    return f"{v:.2f}" if 0.1 <= abs(v) < 1e4 else f"{v:.3g}"
