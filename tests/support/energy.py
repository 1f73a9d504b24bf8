"""Energy windows as a run records them."""

from __future__ import annotations

from mpsstudio.engine.basics.results import WindowRow


def energy_windows(*energies, seconds=0.5, samples=64, utilization=50.0):
    """Windows that each close a one-window energy span."""
    return [{"first_step": i, "steps": 1, "seconds": seconds, "samples": samples, "samples_per_s": samples / seconds,
             "data_wait_s": 0.0, "memory": 0, "energy_j": e, "energy_s": seconds, "energy_windows": 1,
             "utilization": utilization, "energy_parts": None if e is None else {"gpu": e, "cpu": 1.0}}
            for i, e in enumerate(energies)]


def energy_rows(*energies, **how):
    """The same windows as a run keeps them (RunResult.windows)."""
    return [WindowRow(**w) for w in energy_windows(*energies, **how)]


ENV = {"energy": {"source": "NVML total-energy counter (GPU 0)", "part": "gpu", "measure": "measured",
                  "scope": "the whole GPU board, idle power included", "reason": None, "utilization": "gpu_busy"}}

