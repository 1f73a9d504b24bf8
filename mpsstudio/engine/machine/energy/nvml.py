"""NVIDIA GPUs through NVML (`nvidia-ml-py`): the board's total-energy counter (mJ, Volta and newer) and the GPU
busy share (utilisation samples inside the window). NVML reads the whole board, idle power included; the GPU is
found by its UUID, whatever CUDA_VISIBLE_DEVICES renumbers."""

from __future__ import annotations

import os
import time

from .base import Busy, Counter, Unreadable, error_phrase as _error, percent as _percent


def load_nvml():
    """The pynvml module (nvidia-ml-py), imported late; tests replace this function."""
    import pynvml

    return pynvml


class NvmlCounter(Counter):
    """The GPU board's total-energy counter (mJ since the driver loaded)."""

    name = "NVML total-energy counter"
    scope = "the whole GPU board, idle power included"

    def __init__(self, nvml, handle, label: str):
        self.nvml, self.handle = nvml, handle
        self.name = f"NVML total-energy counter ({label})"
        self.read()  # Volta or newer has one: say so now, not in every window

    def read(self) -> dict[str, float]:
        return {"gpu": self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1000.0}


def _nvml_handle(nvml, index: int | None, uuid: str | None):
    """(handle, label) of the CUDA device: by its UUID (CUDA and NVML may number GPUs differently), else by index
    when CUDA_VISIBLE_DEVICES does not renumber them."""
    if uuid:
        name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        for key in (name, name.encode()):
            try:
                return nvml.nvmlDeviceGetHandleByUUID(key), name
            except Exception:
                continue
    if index is not None and os.environ.get("CUDA_VISIBLE_DEVICES") is None:
        return nvml.nvmlDeviceGetHandleByIndex(index), f"GPU {index}"
    raise Unreadable("NVML could not tell which GPU this CUDA device is (CUDA_VISIBLE_DEVICES renumbers them "
                     "and the GPU's UUID is unknown)")


def open_nvml(index: int | None, uuid: str | None):
    """(nvml module, handle, label); Unreadable with the phrase when NVML cannot be used."""
    try:
        nvml = load_nvml()
    except ImportError:
        raise Unreadable("nvidia-ml-py is not installed (pip install nvidia-ml-py)") from None
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise Unreadable(f"NVML could not start ({_error(exc)})") from None
    try:
        handle, label = _nvml_handle(nvml, index, uuid)
    except Unreadable:
        raise
    except Exception as exc:
        raise Unreadable(f"NVML could not find this GPU ({_error(exc)})") from None
    return nvml, handle, label



class NvmlBusy(Busy):
    """NVML's GPU utilisation: the share of time a kernel ran, from its samples inside the window (or its latest
    reading when the window is shorter than NVML's sampling period)."""

    measure = "gpu_busy"

    def __init__(self, nvml, handle):
        self.nvml, self.handle = nvml, handle
        self.nvml.nvmlDeviceGetUtilizationRates(handle)  # raises when the GPU does not report it
        self._since = 0

    def begin(self) -> None:
        self._since = int(time.time() * 1e6)  # NVML sample timestamps are microseconds of the host's clock

    def end(self) -> float | None:
        try:
            _kind, samples = self.nvml.nvmlDeviceGetSamples(self.handle, self.nvml.NVML_GPU_UTILIZATION_SAMPLES,
                                                            self._since)
            values = [float(s.sampleValue.uiVal) for s in samples if s.timeStamp >= self._since]
        except Exception:
            values = []
        if values:
            return _percent(sum(values) / len(values))
        try:
            return _percent(float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu))
        except Exception:
            return None
