"""`mpsstudio inspect`: does the device compute this model correctly, and which operations left it for the CPU?

Three checks of one config, in a run's own process (process.run_tool):

1. The device's functional probe (probe.py).
2. CPU fallback: one training step (forward, backward, optimizer) runs under a TorchDispatchMode that sees
   every ATen operation; each operation with a tensor on the device is classified by the dispatcher's own
   registrations (`kernel_kind`, see docs/architecture.md "Which operations fall back to the CPU"): a kernel of
   its own for the device's dispatch key, a composite kernel (made of other operations), or the boxed CPU
   fallback PyTorch registers for MPS (aten/src/ATen/mps/MPSFallback.mm). PyTorch itself warns only once per
   process (TORCH_WARN_ONCE), so warnings cannot list them. Each operation is also timed with the device
   synchronized around it, which gives the fallback operations' share of the time spent in operations.
3. Numerical parity: the same weights and the same batch, one forward and backward on the device (in the
   config's precision, TF32 as the config says) and on the CPU in float64 as the reference, both in evaluation
   mode (opcheck.for_parity says why). Reported: the relative error of the loss, of the logits and of every
   parameter's gradient, worst first, where the relative error of a tensor is max|device - reference| /
   max|reference| (relative to the tensor's scale, so values near zero do not blow it up), beside the CPU's own
   error in the same precision; each is judged against the precision's tolerance or that CPU error
   (opcheck.parity_of).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable

import torch

from ..machine import probe
from . import toolkit
from .opcheck import fallback_ops, forward_backward, parity_of
from .toolview import inspect_sentence
from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.formatting import error_line

PARITY_BATCH = 8  # samples in the parity batch (the float64 CPU reference is slow for large models)
NOT_FOR_OWN_FEED = toolkit.NOT_FOR_OWN_FEED


def parity(setup: toolkit.Setup, base: torch.nn.Module) -> dict:
    """The device against the float64 CPU reference on one fixed batch of real samples (see the docstring)."""
    x, y = toolkit.real_batch(setup, PARITY_BATCH, torch.device("cpu"))
    return parity_of(base, x, y, setup.tdev, setup.config.precision or "fp32", setup.config.tf32, setup.device.synchronize,
                     setup.device.kind)


def inspect(config: RunConfig, *, progress: Callable[[str, float], None] | None = None,
            should_stop: Callable[[], bool] | None = None,
            decide: Callable[[str, str], str] | None = None) -> dict:
    """Probe, fallback operations and parity of `config` on its device; UserError for bad input."""
    progress = progress or (lambda message, fraction: None)
    stop = should_stop or (lambda: False)
    check = probe.check(config.device, cached=False) if config.device != "cpu" else probe.check("cpu")
    setup = toolkit.prepare(config, progress)  # raises "available but not working" when the probe failed
    base = toolkit.build(setup)
    out: dict = {"tool": "inspect", "device": setup.device.id, "precision": config.precision, "tf32": config.tf32,
                 "probe": check.to_dict(), "env": setup.env, "config": setup.config.to_dict(), "stopped": False}
    try:
        progress("checking parity with the CPU (float64)", 0.1)
        if setup.feed.made or setup.feed.own_loss:
            out["notes"] = [toolkit.not_for_own_feed(config.model)]
        else:
            out["parity"] = parity(setup, base)
        if stop():
            raise toolkit.Stopped()
        progress("recording the operations of one training step", 0.6)
        out.update(_step_ops(setup, base, decide))
    except toolkit.Stopped:
        out["stopped"] = True
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"Inspecting {config.model} on {setup.device.id} failed ({error_line(exc, 200)}); "
                        f"check that it runs with `mpsstudio bench` first.") from exc
    out.setdefault("parity", None)
    out.setdefault("fallback_ops", [])
    out["fallback_applies"] = setup.device.kind == "mps"
    out["sentence"] = sentence(out)
    return out


def _step_ops(setup: toolkit.Setup, base: torch.nn.Module, decide) -> dict:
    from ..run import steps

    model = copy.deepcopy(base).to(setup.tdev)
    opt = steps.make_optimizer(setup.config, model)
    x, y = toolkit.real_batch(setup, max(2, min(setup.config.batch, 64)), setup.tdev)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(setup.config.precision or "fp32")

    def step():
        opt.zero_grad(set_to_none=True)
        if setup.feed.made or setup.feed.own_loss:  # the model file's own inputs and loss
            with torch.autocast(setup.tdev.type, dtype=dtype) if dtype else contextlib.nullcontext():
                loss = setup.feed.loss_of(model, x, y)
            loss.backward()
        else:
            forward_backward(model, x, y, dtype, setup.tdev.type)
        opt.step()
    step()  # warm-up: first-call set-up is not an operation of the step
    setup.device.synchronize()
    found = fallback_ops(step, setup.tdev.type, setup.device.synchronize, decide)
    found["ops_batch_size"] = int(x.shape[0]) if isinstance(x, torch.Tensor) else setup.config.batch_size
    return found


def sentence(result: dict) -> str:
    """What inspect found, in words (toolview.inspect_sentence: the same words on every read; the result read as
    its record has one, so it is read with the sentence this makes still empty)."""
    return inspect_sentence({**result, "sentence": ""})


def run_tool(config: RunConfig, payload: dict, *, progress=None, should_stop=None, checkpoint=None) -> dict:
    """The inspection as the tool table carries it out in a run process (tools/registry.py)."""
    return inspect(config, progress=progress, should_stop=should_stop)


def check_devices(_config, payload: dict, *, progress=None, should_stop=None, checkpoint=None) -> dict:
    """The functional check of every device (the `devices` tool): probe.check of each, as plain dicts."""
    from ..machine import devices

    return {"checks": {d: c.to_dict() for d, c in probe.check_all(devices.discover_devices()).items()}}
