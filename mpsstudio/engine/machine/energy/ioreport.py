"""Apple silicon: `zeus-apple-silicon` (IOReport "Energy Model" counters: CPU, GPU, DRAM, ANE, estimated by
macOS from activity, frequency and voltage, so labelled "estimated"), and the GPU busy share that Activity Monitor
shows: the IORegistry's "Device Utilization %", read with the `ioreg` command by a sampling thread."""

from __future__ import annotations

import re
import subprocess
import threading
import time

from .base import ESTIMATED, Busy, Counter, Unreadable, error_phrase as _error, percent as _percent

IOREG_INTERVAL_S = 0.5  # how often the Apple GPU's busy share is sampled while a run is measured
IOREG_TIMEOUT_S = 2.0


def _apple():
    """The zeus_apple_silicon module, imported late; tests replace this function."""
    import zeus_apple_silicon

    return zeus_apple_silicon


class AppleCounter(Counter):
    """Apple silicon's IOReport energy counters through zeus-apple-silicon (mJ, estimated by macOS)."""

    name = "IOReport energy model (zeus-apple-silicon)"
    measure = ESTIMATED
    scope = "the chip's GPU, CPU, DRAM and Neural Engine, as macOS estimates them"

    def __init__(self):
        try:
            module = _apple()
        except ImportError:
            raise Unreadable("zeus-apple-silicon is not installed (pip install zeus-apple-silicon)") from None
        try:
            self.monitor = module.AppleEnergyMonitor()
        except Exception as exc:
            raise Unreadable(f"macOS's energy counters could not be opened ({_error(exc)})") from None
        try:  # its C++ side raises RuntimeError / ValueError (std::runtime_error, std::invalid_argument)
            self.read()
        except Exception as exc:
            raise Unreadable(f"macOS's energy counters could not be read ({_error(exc)})") from None

    def read(self) -> dict[str, float]:
        m = self.monitor.get_cumulative_energy()
        out = {}
        gpu = [getattr(m, key, None) for key in ("gpu_mj", "gpu_sram_mj")]
        if gpu[0] is not None:
            out["gpu"] = sum(v for v in gpu if v is not None) / 1000.0
        for part, key in (("cpu", "cpu_total_mj"), ("dram", "dram_mj"), ("ane", "ane_mj")):
            value = getattr(m, key, None)
            if value is not None:
                out[part] = value / 1000.0
        return out



_IOREG_UTIL = re.compile(r'"Device Utilization %"\s*=\s*(\d+)')


def ioreg_utilization(text: str) -> float | None:
    """The GPU's "Device Utilization %" from `ioreg -r -d 1 -w 0 -c IOAccelerator` output; None when absent."""
    match = _IOREG_UTIL.search(text)
    return _percent(float(match.group(1))) if match else None


def _ioreg() -> str:
    done = subprocess.run(["ioreg", "-r", "-d", "1", "-w", "0", "-c", "IOAccelerator"], capture_output=True,
                          text=True, timeout=IOREG_TIMEOUT_S, check=False)
    return done.stdout


class IoregBusy(Busy):
    """The Apple GPU's "Device Utilization %", sampled every IOREG_INTERVAL_S by a thread of the run's process (the
    `ioreg` command: a snapshot, so a window's share is the mean of the samples taken inside it)."""

    measure = "gpu_busy"

    def __init__(self, read=None, interval_s: float = IOREG_INTERVAL_S):
        self._read = read or _ioreg
        first = ioreg_utilization(self._read())
        if first is None:
            raise Unreadable("the GPU does not report 'Device Utilization %' in the IORegistry")
        self.interval_s = interval_s
        self._samples: list[tuple[float, float]] = [(time.perf_counter(), first)]
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._since = 0.0
        self._thread = threading.Thread(target=self._loop, name="gpu-busy", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                value = ioreg_utilization(self._read())
            except Exception:  # a failed or undecodable `ioreg` is a missing sample, never the run's end
                value = None
            if value is not None:
                with self._lock:
                    self._samples.append((time.perf_counter(), value))
                    del self._samples[:-1000]

    def begin(self) -> None:
        self._since = time.perf_counter()

    def end(self) -> float | None:
        now = time.perf_counter()
        with self._lock:
            inside = [v for t, v in self._samples if self._since <= t <= now]
            latest = self._samples[-1] if self._samples else None
        if inside:
            return sum(inside) / len(inside)
        if latest is not None and now - latest[0] <= 2 * self.interval_s:
            return latest[1]
        return None

    def close(self) -> None:
        self._stop.set()
