"""Does an accelerator that says it is available really work? A short functional check per device.

`torch.backends.mps.is_available()` is True on GitHub's macOS arm64 runners (virtual machines), where MPS then
fails with "MPS backend out of memory (MPS allocated: 0 bytes ...)" on tiny allocations, or returns wrong
values. So before a device is offered (the window, `mpsstudio devices`, `doctor`) and before a run uses it (in
the run's own process), it must pass this check: allocate, compute a small result known on the CPU, compare.

The check takes milliseconds and is done once per process per device (`check` caches; `forget` clears, for
"Check again"). It never raises: a device that cannot even be asked is "not working", with what failed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from ..basics.errors import UserError
from ..basics.formatting import error_line

PROBE_BYTES = 16 * 1024 * 1024  # one allocation of this size must succeed (a broken VM's MPS fails far smaller)
RELATIVE_TOLERANCE = 1e-2  # TF32 or a reduced-precision matmul stays far inside; a wrong result is far outside
NOT_WORKING = "available but not working"

_cache: dict[str, "Check"] = {}


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str  # what was checked and found, one phrase

    def to_dict(self) -> dict:
        return asdict(self)


def check(device_id: str, *, cached: bool = True) -> Check:
    """Run the functional check on one device ("cpu" always passes without work)."""
    if device_id == "cpu":
        return Check(True, "the CPU needs no check")
    if cached and device_id in _cache:
        return _cache[device_id]
    result = _run(device_id)
    _cache[device_id] = result
    return result


def forget() -> None:
    """Check every device again next time (the window's "Check again")."""
    _cache.clear()


def _block_sum(device_id: str) -> float:
    """Allocate PROBE_BYTES on the device, fill it with ones and sum it there (the exact answer is known)."""
    import torch

    block = torch.empty(PROBE_BYTES // 4, dtype=torch.float32, device=torch.device(device_id))
    block.fill_(1.0)
    return float(block.sum().item())


def _product(device_id: str, a):
    """(a @ a.T).sum(1) + a.mean(), computed on the device and brought back to the CPU."""
    on = a.to(device_id)
    return ((on @ on.T).sum(dim=1) + on.mean()).cpu()


def _run(device_id: str) -> Check:
    try:
        import torch

        total = _block_sum(device_id)
        if total != PROBE_BYTES // 4:
            return Check(False, f"a {PROBE_BYTES >> 20} MiB block filled with ones summed to {total:g}, "
                                f"not {PROBE_BYTES // 4:,}")
        a = (torch.arange(1, 32 * 32 + 1, dtype=torch.float64).reshape(32, 32) % 7) / 7.0
        expected = (a @ a.T).sum(dim=1) + a.mean()
        got = _product(device_id, a.float())
        if tuple(got.shape) != tuple(expected.shape):
            return Check(False, f"a 32x32 matrix product came back with shape {tuple(got.shape)}")
        error = float((got.double() - expected).abs().max()) / float(expected.abs().max())
        if not math.isfinite(error) or error > RELATIVE_TOLERANCE:
            shown = "not a number" if not math.isfinite(error) else f"{error:.1%}"
            return Check(False, f"a 32x32 matrix product differed from the CPU's by {shown}")
        return Check(True, f"allocated {PROBE_BYTES >> 20} MiB and matched the CPU on a 32x32 matrix product "
                           f"(relative error {error:.1e})")
    except Exception as exc:  # any failure here is the answer, not a crash
        return Check(False, f"a {PROBE_BYTES >> 20} MiB test allocation and a small matrix product failed "
                            f"({error_line(exc, 200)})")


def require(device) -> None:
    """Raise UserError when an accelerator fails the check (called in the run's process before any model code)."""
    if device.kind == "cpu":
        return
    result = check(device.torch_device or device.id)  # where the run's tensors will really go
    if not result.ok:
        raise UserError(f"{device.id} is {NOT_WORKING}: {result.detail}. PyTorch reports it available, but it "
                        f"cannot run anything here (this happens in virtual machines); use another device.")


def mark(devices_list: list, checks: dict[str, "Check"]) -> list:
    """The devices with each failed accelerator marked unavailable, its reason saying what failed."""
    from dataclasses import replace

    out = []
    for d in devices_list:
        found = checks.get(d.id)
        if d.available and found is not None and not found.ok:
            d = replace(d, available=False, reason=f"{NOT_WORKING}: {found.detail}")
        out.append(d)
    return out


def check_all(devices_list: list) -> dict[str, Check]:
    """The check of every available accelerator among `devices_list`, by device id (in this process)."""
    return {d.id: check(d.id) for d in devices_list if d.available and d.kind != "cpu"}
