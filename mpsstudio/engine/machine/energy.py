"""Energy and utilisation of the device that ran a run, read at the measurement windows' boundaries.

The run loop (trainer.py) calls Meter.begin() where a measured window's clock starts and Meter.end() where it
stops, both right after the device synchronize it already does there: no extra sync, nothing per step. Counters
are read only where an energy span (about a second of whole windows, see Meter) opens and closes; a span's energy
is the difference of cumulative counters, the run's the sum over its spans (warm-up and validation never inside).

Where the numbers come from (the field's own libraries; no private-API code here):
- NVIDIA GPUs: NVML through `nvidia-ml-py` (`pynvml`): the total-energy counter (mJ, Volta and newer) and the
  GPU busy share (utilisation samples). NVML reads the whole board, idle power included.
- Apple silicon: `zeus-apple-silicon` (IOReport "Energy Model" counters: CPU, GPU, DRAM, ANE), which macOS
  estimates from activity, frequency and voltage (so these are labelled "estimated"); the GPU busy share is the
  IORegistry's "Device Utilization %" that Activity Monitor shows, read with the `ioreg` command.
- Linux CPUs: the RAPL counters under /sys/class/powercap (whole packages: every program's share, idle included).
- CPU utilisation: the run process's CPU time over the window, as a share of all the machine's logical cores.

Counters wrap (RAPL at max_energy_range_uj): a window whose end reads below its start adds the range once. A
counter that goes backwards with no known range (a driver reset) makes that window's energy unknown, never
negative. Where no source works, every energy figure is None and `reason` says why in one phrase.
No torch here: the trainer passes what it knows about the device.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import psutil

from ..basics.formatting import DASH, error_line, is_finite, one_line, printable

PARTS = ("gpu", "cpu", "dram", "ane")  # the parts a source may give, in the order they are shown
POWERCAP = "/sys/class/powercap"
IOREG_INTERVAL_S = 0.5  # how often the Apple GPU's busy share is sampled while a run is measured
IOREG_TIMEOUT_S = 2.0
SPAN_S = 1.0  # shortest energy span: the counters are read about once a second, at window boundaries
MEASURED, ESTIMATED = "measured", "estimated"


class Unreadable(Exception):
    """A source that cannot be used here; the message is the phrase the run shows."""


@dataclass
class SpanEnergy:
    """One energy span: consecutive measurement windows read as one (at least SPAN_S long, or up to a break such
    as validation or the run's end). Joules of the device's part (None when its counter could not be read), every
    part's joules, the busy share (0-100), the span's seconds between the two readings and its window count."""

    seconds: float
    windows: int
    energy_j: float | None = None
    parts: dict[str, float] | None = None
    utilization: float | None = None

    @property
    def power_w(self) -> float | None:
        return self.energy_j / self.seconds if self.energy_j is not None and self.seconds > 0 else None


# ---------------------------------------------------------------- counters

class _Counter:
    """Cumulative energy counters of one source, in joules per part (a counter that wraps is unwrapped by its
    source, so these only grow; one that goes backwards anyway makes its window unknown)."""

    name = ""
    measure = MEASURED
    scope = ""

    def read(self) -> dict[str, float]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _nvml():
    """The pynvml module (nvidia-ml-py), imported late; tests replace this function."""
    import pynvml

    return pynvml


class NvmlCounter(_Counter):
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


def _open_nvml(index: int | None, uuid: str | None):
    """(nvml module, handle, label); Unreadable with the phrase when NVML cannot be used."""
    try:
        nvml = _nvml()
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


class RaplCounter(_Counter):
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


def _apple():
    """The zeus_apple_silicon module, imported late; tests replace this function."""
    import zeus_apple_silicon

    return zeus_apple_silicon


class AppleCounter(_Counter):
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


def _error(exc: BaseException) -> str:
    return error_line(exc, 120, with_type=False)


# ---------------------------------------------------------------- utilisation

class _Busy:
    """A busy share (0-100) over each window; `measure` names it."""

    measure = ""

    def begin(self) -> None:
        pass

    def end(self) -> float | None:
        return None

    def close(self) -> None:
        pass


class NvmlBusy(_Busy):
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


class CpuBusy(_Busy):
    """The run process's CPU time over the window as a share of all logical cores (data-loader workers apart)."""

    measure = "cpu_busy"

    def __init__(self):
        self.process = psutil.Process()
        self.cores = psutil.cpu_count() or os.cpu_count() or 1
        self._start: tuple[float, float] | None = None

    def _sample(self) -> tuple[float, float] | None:
        try:
            t = self.process.cpu_times()
        except Exception:
            return None
        return time.perf_counter(), t.user + t.system

    def begin(self) -> None:
        self._start = self._sample()

    def end(self) -> float | None:
        end = self._sample()
        if self._start is None or end is None or end[0] <= self._start[0]:
            return None
        return _percent(100.0 * (end[1] - self._start[1]) / ((end[0] - self._start[0]) * self.cores))


_IOREG_UTIL = re.compile(r'"Device Utilization %"\s*=\s*(\d+)')


def ioreg_utilization(text: str) -> float | None:
    """The GPU's "Device Utilization %" from `ioreg -r -d 1 -w 0 -c IOAccelerator` output; None when absent."""
    match = _IOREG_UTIL.search(text)
    return _percent(float(match.group(1))) if match else None


def _ioreg() -> str:
    done = subprocess.run(["ioreg", "-r", "-d", "1", "-w", "0", "-c", "IOAccelerator"], capture_output=True,
                          text=True, timeout=IOREG_TIMEOUT_S, check=False)
    return done.stdout


class IoregBusy(_Busy):
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


def _percent(v: float) -> float:
    return min(100.0, max(0.0, v))


# ---------------------------------------------------------------- the meter

@dataclass
class Meter:
    """What the run loop reads at window boundaries: energy of `part` (the device that ran the work) plus every
    part the sources give, and the device's busy share, over energy spans.

    A span opens where a measured window's clock starts (begin) and closes at the end of the first window that
    makes it at least `span_s` long, or at a break (end(close=True): validation, the run's end, a stop). Spans,
    not single windows, because reading NVML's energy counter costs ~4 ms on an H100 and the counter moves only
    every ~100 ms (docs/benchmarks.md): per 0.1 s window that would be 8 % of the run and mostly rounding. Spans
    follow each other with no gap between one's end reading and the next one's start reading, so the counter's
    rounding cancels out over a run except at its ends and its breaks.
    """

    part: str | None = None  # "gpu" or "cpu": the device's part; None when nothing measures energy here
    counters: list = field(default_factory=list)
    busy: _Busy | None = None
    reason: str | None = None  # why energy is not measured (None when it is)
    busy_reason: str | None = None
    span_s: float = SPAN_S
    failures: int = 0  # spans whose device counter could not be read
    _start: dict[str, float] | None = None
    _t0: float = 0.0
    _windows: int = 0
    _open: bool = False

    def describe(self) -> dict:
        """env["energy"]: what measured the run's energy and busy share, or why nothing did."""
        main = self.counters[0] if self.counters else None
        return {"source": ", ".join(c.name for c in self.counters) or None, "part": self.part,
                "measure": main.measure if main else None, "scope": main.scope if main else None,
                "reason": self.reason, "utilization": self.busy.measure if self.busy else None,
                "utilization_reason": self.busy_reason}

    def _read(self) -> dict[str, float]:
        """Every readable counter's parts; a source that fails now is left out of this reading (when it is the
        device's own, the span's energy is unknown)."""
        out: dict[str, float] = {}
        for counter in self.counters:
            try:
                values = counter.read()
            except Exception:
                continue
            for part, joules in values.items():
                out.setdefault(part, joules)  # the first source of a part is its best one
        return out

    def begin(self) -> None:
        """A measured window's clock is about to start (the device was just synchronized): open a span unless
        one is open."""
        if self._open:
            return
        self._open, self._windows = True, 0
        self._call_busy("begin")
        self._t0 = time.perf_counter()
        self._start = self._read() if self.counters else None

    def end(self, close: bool = False) -> SpanEnergy | None:
        """A measured window ended (the device was just synchronized): None while its span goes on, the span's
        reading when it closes (long enough, or `close` at a break)."""
        if not self._open:
            return None
        self._windows += 1
        if not close and time.perf_counter() - self._t0 < self.span_s:
            return None
        return self._close()

    def flush(self) -> SpanEnergy | None:
        """Close the open span at its last window's end (a stop after that window): None when no window of it
        ended."""
        if not self._open or self._windows == 0:
            self._open = False
            return None
        return self._close()

    def _close(self) -> SpanEnergy:
        now = time.perf_counter()
        self._open = False
        out = SpanEnergy(seconds=now - self._t0, windows=self._windows, utilization=self._call_busy("end"))
        if not self.counters:
            return out
        end = self._read()
        start, self._start = self._start or {}, None
        parts = {part: end[part] - start[part] for part in PARTS
                 if part in start and part in end and end[part] >= start[part]}  # backwards: unknown, never < 0
        if self.part not in parts:
            self.failures += 1
            return out
        out.energy_j, out.parts = parts[self.part], parts
        return out

    def close(self) -> None:
        for c in self.counters:
            try:
                c.close()
            except Exception:
                pass
        self._call_busy("close")

    def _call_busy(self, what: str) -> float | None:
        """The busy reader's begin/end/close; one that raises gives no figure for this span (never ends the run)."""
        if self.busy is None:
            return None
        try:
            value = getattr(self.busy, what)()
        except Exception:
            return None
        return value if is_finite(value) else None


def meter_for(kind: str, index: int | None = None, uuid: str | None = None) -> Meter:
    """The meter of a device ("cpu", "mps" or "cuda"); a source that cannot be used here gives its reason. Never
    raises: energy is optional, and a run must not fail because a meter did (docs/architecture.md, "Energy")."""
    try:
        return _meter_for(kind, index, uuid)
    except Exception as exc:  # a source's library raised something of its own while it was set up
        return Meter(span_s=SPAN_S, reason=f"the energy meter could not be set up ({_error(exc)})",
                     busy_reason=f"the utilisation meter could not be set up ({_error(exc)})")


def _meter_for(kind: str, index: int | None, uuid: str | None) -> Meter:
    meter = Meter(span_s=SPAN_S)
    try:
        if kind == "cuda":
            _cuda(meter, index, uuid)
        elif sys.platform == "darwin":
            _apple_silicon(meter, kind)
        elif kind == "cpu":
            meter.part = "cpu"
            if not sys.platform.startswith("linux"):
                raise Unreadable(f"no CPU energy counter this app can read on {_os_name()}")
            meter.counters.append(RaplCounter())
        else:
            raise Unreadable(f"no energy counter for {kind} here")
    except Unreadable as exc:
        meter.reason = str(exc)
    if not meter.counters:
        meter.part = None
        meter.reason = meter.reason or "no energy counter readable here"
    if kind == "cpu" and meter.busy is None:
        try:
            meter.busy = CpuBusy()
        except Exception as exc:
            meter.busy_reason = f"this process's CPU time could not be read ({_error(exc)})"
    if meter.busy is None and meter.busy_reason is None:
        meter.busy_reason = meter.reason or "no utilisation reading here"
    return meter


def _os_name() -> str:
    return {"win32": "Windows", "darwin": "an Intel Mac"}.get(sys.platform, sys.platform)


def _cuda(meter: Meter, index: int | None, uuid: str | None) -> None:
    meter.part = "gpu"
    nvml, handle, label = _open_nvml(index, uuid)
    try:
        meter.busy = NvmlBusy(nvml, handle)
    except Exception as exc:
        meter.busy_reason = f"NVML reports no GPU utilisation here ({_error(exc)})"
    try:
        meter.counters.append(NvmlCounter(nvml, handle, label))
    except Exception as exc:
        text = _error(exc)
        if "not supported" in text.lower():
            raise Unreadable("this GPU has no NVML total-energy counter (GPUs from Volta on have one)") from None
        raise Unreadable(f"NVML's total-energy counter could not be read ({text})") from None
    if sys.platform.startswith("linux"):
        try:
            meter.counters.append(RaplCounter())  # the host CPU's share, kept as a part when readable
        except Exception:
            pass


def _apple_silicon(meter: Meter, kind: str) -> None:
    import platform

    meter.part = "gpu" if kind == "mps" else "cpu"
    if kind == "mps":
        try:
            meter.busy = IoregBusy()
        except Exception as exc:
            meter.busy_reason = str(exc) if isinstance(exc, Unreadable) else \
                f"the IORegistry could not be read ({_error(exc)})"
    if platform.machine() != "arm64":
        raise Unreadable("no energy counter this app can read on an Intel Mac or under Rosetta")
    meter.counters.append(AppleCounter())


# ---------------------------------------------------------------- the run's figures

SUMMARY_KEYS = ("energy_j", "avg_power_w", "j_per_sample", "energy_parts", "energy_part", "energy_source",
                "energy_measure", "energy_scope", "energy_reason", "utilization", "utilization_measure",
                "utilization_reason")
BEFORE = "not measured (recorded before MPS Studio measured energy)"
MAX_TEXT = 300


def _text(value) -> str | None:
    """A description from env["energy"] (maybe from a file): one printable line, bounded; None when empty."""
    return one_line(printable(value), MAX_TEXT) if isinstance(value, str) and value.strip() else None


def summary_fields(windows: list[dict], env: dict | None) -> dict:
    """The run's energy and utilisation figures from its window rows and env["energy"], for its summary.

    A window that closed an energy span carries the span's `energy_j`, `energy_s`, `energy_windows` (how many
    windows, itself included, the span covers), `energy_parts` and `utilization`. Energy: the spans' joules summed,
    over their seconds (W) and over their windows' samples (J/sample); None with `energy_reason` when no source
    measured it or any span lacks its reading (a run's energy is all of its spans or nothing). Windows after the
    last span (a run that failed or was stopped mid-span) are not covered. Utilisation: the spans' busy shares,
    weighted by their seconds (percent). Also the figures of a file: re-derived from its windows here.
    """
    out: dict = dict.fromkeys(SUMMARY_KEYS)
    info = (env or {}).get("energy")
    if not isinstance(info, dict):
        out["energy_reason"] = out["utilization_reason"] = BEFORE
        return out
    spans, bad = _spans(windows)
    part = info.get("part") if info.get("part") in PARTS else None
    source = _text(info.get("source"))
    measure = info.get("measure") if info.get("measure") in (MEASURED, ESTIMATED) else None
    if part and source and measure:
        out.update(energy_part=part, energy_source=source, energy_measure=measure, energy_scope=_text(info.get("scope")))
        if bad:
            out["energy_reason"] = bad
        else:
            _energy(out, spans, part)
    else:
        out["energy_reason"] = _text(info.get("reason")) or "no energy counter readable here"
    busy = info.get("utilization") if info.get("utilization") in ("gpu_busy", "cpu_busy") else None
    weighted = [(w.get("utilization"), w.get("energy_s")) for w, _ in spans]
    weighted = [(u, t) for u, t in weighted if is_finite(u) and 0 <= u <= 100 and is_finite(t) and t > 0]
    if busy and weighted and not bad:
        out["utilization"] = _percent(sum(u * t for u, t in weighted) / sum(t for _, t in weighted))
        out["utilization_measure"] = busy
    elif busy:
        out["utilization_reason"] = bad or "no energy span finished with a utilisation reading"
    else:
        out["utilization_reason"] = _text(info.get("utilization_reason")) or "no utilisation reading here"
    return out


def _spans(windows: list[dict]) -> tuple[list[tuple[dict, float]], str | None]:
    """(closing window, samples of its span's windows) per span; a reason instead when the spans do not fit."""
    spans: list[tuple[dict, float]] = []
    pending: list[float] = []  # samples of the windows since the last span closed
    for w in windows:
        samples = w.get("samples")
        pending.append(samples if is_finite(samples) and samples >= 0 else 0)
        n = w.get("energy_windows")
        if n is None:
            continue
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(pending):
            return [], "its energy spans do not match its measurement windows"
        spans.append((w, sum(pending[-n:])))
        pending = []
    return spans, None


def _energy(out: dict, spans: list[tuple[dict, float]], part: str) -> None:
    if not spans:
        out["energy_reason"] = "no energy span finished (the measured phase ended before the first reading)"
        return
    missing = sum(1 for w, _ in spans if not (is_finite(w.get("energy_j")) and w["energy_j"] >= 0
                                              and is_finite(w.get("energy_s")) and w["energy_s"] > 0))
    if missing:
        out["energy_reason"] = f"the energy counter could not be read in {missing} of {len(spans)} energy spans"
        return
    joules = sum(w["energy_j"] for w, _ in spans)
    seconds = sum(w["energy_s"] for w, _ in spans)
    samples = sum(n for _, n in spans)
    out["energy_j"] = joules
    out["avg_power_w"] = joules / seconds
    out["j_per_sample"] = joules / samples if samples > 0 else None
    parts = {}
    for name in PARTS:
        values = [w["energy_parts"].get(name) if isinstance(w.get("energy_parts"), dict) else None for w, _ in spans]
        if all(is_finite(v) and v >= 0 for v in values):
            parts[name] = sum(values)
    parts[part] = joules
    out["energy_parts"] = {name: parts[name] for name in PARTS if name in parts}


def describe(summary: dict) -> str:
    """"0.130 J/sample · 559 W (GPU, measured)" or the reason energy is missing, for a tooltip or a report."""
    jps = summary.get("j_per_sample")
    if not is_finite(jps):
        return f"Energy: {summary.get('energy_reason') or 'not measured'}."
    watts = summary.get("avg_power_w")
    power = f" at {watts:,.1f} W" if is_finite(watts) else ""
    how = "estimated by macOS with" if summary.get("energy_measure") == ESTIMATED else "measured by"
    return (f"Energy: {fmt_joules(jps)} per sample{power}, {how} the {summary.get('energy_source')} "
            f"({summary.get('energy_scope') or 'the device'}).")


def fmt_joules(v) -> str:
    """"0.130 J", "12.4 mJ", "1.23 kJ": three significant figures."""
    if not is_finite(v):
        return DASH
    if v == 0:
        return "0 J"
    for scale, unit in ((1e3, "kJ"), (1.0, "J"), (1e-3, "mJ"), (1e-6, "\u00b5J")):
        if abs(v) >= scale:
            break
    x = v / scale
    digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
    return f"{x:,.{digits}f} {unit}"


def notes(runs) -> list[str]:
    """What the energy columns of these runs are, or why they are empty: one line per source or reason, naming the
    devices ("Energy of cpu: not measured (no energy counter readable on this Linux VM ...).")."""
    seen: dict[str, list[str]] = {}
    for r in runs:
        s = r.summary
        if is_finite(s.get("j_per_sample")):
            how = "estimated by macOS" if s.get("energy_measure") == ESTIMATED else "measured"
            text = f"{how} with the {s.get('energy_source')}: {s.get('energy_scope') or 'the device'}"
        else:
            text = f"not measured: {s.get('energy_reason') or 'no reading'}"
        seen.setdefault(text, []).append(str(r.config.device))
    return [f"Energy of {', '.join(dict.fromkeys(devices))}: {text}." for text, devices in seen.items()]
