"""Linux CPUs: the RAPL counters under /sys/class/powercap (whole packages, every program's share and idle
included; DRAM domains kept as a part). Counters wrap at max_energy_range_uj and are unwrapped as they are read."""

from __future__ import annotations

import glob
import os

from .base import Counter, Unreadable

POWERCAP = "/sys/class/powercap"


def _rapl_domains(root: str) -> list[tuple[str, str]]:
    """(part, folder) of every RAPL domain to add: the packages ("cpu") and their DRAM domains ("dram")."""
    out = []
    for folder in sorted(glob.glob(os.path.join(root, "intel-rapl:*"))):
        try:
            with open(os.path.join(folder, "name"), encoding="ascii", errors="replace") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("package"):
            out.append(("cpu", folder))
        elif name == "dram":
            out.append(("dram", folder))
    return out


def _is_virtual_machine() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and " hypervisor" in line for line in f)
    except OSError:
        return False


def _cpu_vendor() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


class RaplCounter(Counter):
    """Linux RAPL: the CPU packages' (and DRAM's) energy counters in microjoules, wrapping at their range."""

    name = "RAPL energy counters"
    scope = "the whole CPU package, other programs and idle power included"

    def __init__(self, root: str | None = None):
        root = root or POWERCAP
        if not os.path.isdir(root):
            where = "this Linux VM" if _is_virtual_machine() else "this Linux machine"
            raise Unreadable(f"no energy counter readable on {where} ({root} is missing)")
        domains = _rapl_domains(root)
        if not domains:
            if _cpu_vendor() == "AuthenticAMD":
                raise Unreadable("no RAPL counter for this AMD CPU (the kernel's RAPL powercap driver is not loaded)")
            where = "this Linux VM" if _is_virtual_machine() else "this Linux machine"
            raise Unreadable(f"no energy counter readable on {where} (no RAPL domain in {root})")
        self.domains = domains
        self._range: dict[str, float | None] = {}
        for part, folder in domains:
            try:
                with open(os.path.join(folder, "max_energy_range_uj"), encoding="ascii") as f:
                    self._range[folder] = int(f.read().strip()) / 1e6
            except (OSError, ValueError):
                self._range[folder] = None
        self._last: dict[str, float] = {}
        self._total: dict[str, float] = {}
        self.read()

    def read(self) -> dict[str, float]:
        """Per-part joules, unwrapped per domain here (each domain wraps on its own), so the sums never wrap."""
        out: dict[str, float] = {}
        for part, folder in self.domains:
            path = os.path.join(folder, "energy_uj")
            try:
                with open(path, encoding="ascii") as f:
                    value = int(f.read().strip()) / 1e6
            except PermissionError:
                raise Unreadable(f"the RAPL energy counters are readable by root only ({path})") from None
            except (OSError, ValueError) as exc:
                raise Unreadable(f"a RAPL energy counter could not be read ({path}: {type(exc).__name__})") from None
            last = self._last.get(folder)
            total = self._total.get(folder, 0.0)
            if last is not None:
                step = value - last
                if step < 0:
                    span = self._range.get(folder)
                    if not span:
                        raise Unreadable(f"a RAPL energy counter went backwards ({path})")
                    step += span
                total += step
            self._last[folder], self._total[folder] = value, total
            out[part] = out.get(part, 0.0) + total
        return out
