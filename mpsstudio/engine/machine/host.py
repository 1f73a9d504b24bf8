"""What else the machine was doing while a run was measured, and the host conditions that slow a run down.

Read in the run's own process, twice per run (at the end of warm-up and at the end of the measured phase),
never per step. No torch here.

- Other programs' CPU use: the system's busy CPU time (psutil.cpu_times) minus the run process's own and its
  children's (data-loader workers), as a share of every core over the measured wall time.
- On a Mac: the thermal state and Low Power Mode, and whether it ran on battery (psutil.sensors_battery, where the
  OS reports one). The thermal state on Apple silicon is NSProcessInfo's (`thermalState`: nominal, fair, serious,
  critical), read through the Objective-C runtime: `pmset -g therm`'s CPU_Speed_Limit is an Intel Mac's only, and
  on Apple silicon it says nothing, which must read "unknown", not "nominal". On an Intel Mac, pmset as before.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import psutil

PMSET_TIMEOUT_S = 2.0


def _busy_s(times) -> float:
    """Busy CPU seconds of psutil.cpu_times(): everything but idle and I/O wait (guest time is inside user)."""
    idle = getattr(times, "idle", 0.0) + getattr(times, "iowait", 0.0)
    total = sum(getattr(times, name) for name in times._fields if name not in ("guest", "guest_nice"))
    return total - idle


def _own_s(process: psutil.Process) -> float:
    """CPU seconds of this process, its waited-for children and its live children (data-loader workers)."""
    t = process.cpu_times()
    total = t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    try:
        children = process.children(recursive=True)
    except psutil.Error:
        children = []
    for child in children:
        try:
            c = child.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system
    return total


class LoadMeter:
    """Other programs' CPU use between start() and stop(); stop() returns the env["host_load"] record."""

    def __init__(self, pid: int | None = None):
        """`pid`: whose tree is "own" (default this process; a rank's: torchrun's, so the other ranks on this
        machine are the run's own work, not other programs)."""
        self._start: tuple[float, float, float] | None = None
        try:
            self._process = psutil.Process(pid)
        except Exception:
            self._process = None

    def _sample(self) -> tuple[float, float, float] | None:
        if self._process is None:
            return None
        try:
            return time.perf_counter(), _busy_s(psutil.cpu_times()), _own_s(self._process)
        except Exception:  # any reader failing makes the figure unknown, never the run's end
            return None

    def start(self) -> None:
        self._start = self._sample()

    def stop(self) -> dict | None:
        """{"other_cpu_percent", "own_cpu_percent", "cores", "seconds"} over the interval; None when unknown."""
        end = self._sample()
        if self._start is None or end is None:
            return None
        wall = end[0] - self._start[0]
        cores = psutil.cpu_count() or os.cpu_count() or 1
        if wall <= 0:
            return None
        busy = max(0.0, end[1] - self._start[1])
        own = max(0.0, end[2] - self._start[2])
        capacity = wall * cores
        return {
            "other_cpu_percent": round(100.0 * min(1.0, max(0.0, busy - own) / capacity), 1),
            "own_cpu_percent": round(100.0 * min(1.0, own / capacity), 1),
            "cores": int(cores),
            "seconds": round(wall, 3),
        }


def _pmset(*args: str) -> str:
    """`pmset` output; "" when it cannot be run or read (its bytes are decoded leniently: never an exception)."""
    try:
        done = subprocess.run(["pmset", *args], capture_output=True, timeout=PMSET_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError, ValueError):
        return ""
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 and done.stdout else ""


def thermal_state(therm: str) -> str | None:
    """'nominal' or 'throttled (CPU speed limit 70 %)' from `pmset -g therm` output; None when it says nothing."""
    if not therm.strip():
        return None
    limit = re.search(r"CPU_Speed_Limit\s*=\s*(\d+)", therm)
    if limit and int(limit.group(1)) < 100:
        return f"throttled (CPU speed limit {int(limit.group(1))} %)"
    level = re.search(r"(thermal|performance) warning level\s*(?:set to|=|:)\s*(\d+)", therm, re.IGNORECASE)
    if level and int(level.group(2)) > 0:
        return f"{level.group(1).lower()} warning level {int(level.group(2))}"
    return "nominal"


THERMAL_STATES = {0: "nominal", 1: "thermal state fair", 2: "thermal state serious", 3: "thermal state critical"}


def process_thermal_state() -> str | None:
    """macOS's thermal state as apps are told it: `[[NSProcessInfo processInfo] thermalState]` (Foundation; the
    NSProcessInfoThermalState values 0-3, checked against pyobjc-framework-Cocoa's Foundation metadata by
    benchmarks/apple_ledger.py), through the Objective-C runtime with ctypes. Raises when it cannot be read."""
    import ctypes

    objc = ctypes.CDLL("/usr/lib/libobjc.A.dylib")
    ctypes.CDLL("/System/Library/Frameworks/Foundation.framework/Foundation")  # registers NSProcessInfo
    objc.objc_getClass.restype, objc.objc_getClass.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    objc.sel_registerName.restype, objc.sel_registerName.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
    send = ctypes.cast(objc.objc_msgSend, ctypes.c_void_p).value  # one prototype per return type (arm64 ABI)
    if send is None:
        raise OSError("objc_msgSend not found")
    send_id = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(send)
    send_long = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p)(send)
    cls = objc.objc_getClass(b"NSProcessInfo")
    info = send_id(cls, objc.sel_registerName(b"processInfo")) if cls else None
    if not info:
        raise OSError("NSProcessInfo is not available")
    state = int(send_long(info, objc.sel_registerName(b"thermalState")))
    if state not in THERMAL_STATES:
        raise ValueError(f"an unknown thermal state {state}")
    return THERMAL_STATES[state]


def low_power_mode(settings: str) -> bool | None:
    """Whether `pmset -g` output says Low Power Mode is on; None when it does not say."""
    match = re.search(r"^\s*(?:lowpowermode|powermode)\s+(\d+)", settings, re.MULTILINE)
    return None if match is None else int(match.group(1)) == 1


def on_battery() -> bool | None:
    """Whether the machine runs on battery; None where the OS reports no battery. A reading that fails raises
    (conditions() names it)."""
    try:
        battery = psutil.sensors_battery()
    except (AttributeError, NotImplementedError):  # psutil has no battery reader on this OS
        return None
    if battery is None or battery.power_plugged is None:
        return None
    return not battery.power_plugged


def thermal_reader() -> tuple:
    """(key, the source's name, its reader) of the thermal state on this Mac (see the module docstring)."""
    import platform

    if platform.machine() == "arm64":
        return ("thermal", "NSProcessInfo.thermalState", process_thermal_state)
    return ("thermal", "pmset -g therm", lambda: thermal_state(_pmset("-g", "therm")))


def conditions() -> dict:
    """Host conditions at the start of a run, for env["host"]: keys with None are not known here. Never raises: a
    reader that fails leaves its key None and names itself in "unreadable" (the run goes on measuring)."""
    out: dict = {"on_battery": None, "thermal": None, "low_power_mode": None}
    failed: list[str] = []
    readers = [("on_battery", "the battery state", on_battery)]
    if sys.platform == "darwin":
        readers += [thermal_reader(), ("low_power_mode", "pmset -g", lambda: low_power_mode(_pmset("-g")))]
    for key, name, read in readers:
        try:
            out[key] = read()
        except Exception as exc:
            failed.append(f"{name} ({type(exc).__name__})")
    if failed:
        out["unreadable"] = ", ".join(failed)
    return out
