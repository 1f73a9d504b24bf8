"""Apple platform facts the app depends on, kept in one torch-free place: the device check (devices.py), the setup
window, the .app's Info.plist (packaging/info_plist.py) and README all take them from here.

The minimum macOS for the Apple GPU follows the torch that is loaded (`mps_min_macos`): each torch's library refuses
older systems with "The MPS backend is supported on macOS N+" (aten/src/ATen/mps/EmptyTensor.cpp,
MPS_ERROR_RUNTIME_TOO_LOW), and its macOS wheels carry a tag that says from which macOS pip installs them at all.
`MPS_MACOS_BY_TORCH` holds both per torch release; benchmarks/apple_ledger.py checks every row against that release's
macOS arm64 wheel (docs/architecture.md, "Apple API ledger"). The app's own bundle carries the torch constraints.txt
pins (2.14.1: macOS 14.0).
"""

from __future__ import annotations

# (first torch release of the row, the macOS its MPS backend needs, the macOS of its wheels' tag); a release takes the
# last row at or below it. From the macOS arm64 wheels of each release (cp311), checked by benchmarks/apple_ledger.py.
MPS_MACOS_BY_TORCH = (
    ((2, 6), (13, 0), (11, 0)),   # 2.6.0-2.8.0: "supported on MacOS 13.0+", wheels macosx_11_0_arm64
    ((2, 9), (14, 0), (11, 0)),   # 2.9.1-2.11.0: "MacOS 14.0+", still macosx_11_0 (pip on macOS 13 takes 2.11)
    ((2, 12), (14, 0), (14, 0)),  # 2.12.1-2.14.1: "macOS 14.0+", macosx_14_0_arm64
    ((2, 15), (15, 0), (14, 0)),  # 2.15.0: "macOS 15.0+" though its wheel installs on macOS 14
)
MACOS_NAMES = {11: "Big Sur", 12: "Monterey", 13: "Ventura", 14: "Sonoma", 15: "Sequoia", 26: "Tahoe"}


def torch_release(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string such as "2.14.1" or "2.15.0+cpu" ((0, 0) when it has none)."""
    parts: list[int] = []
    for piece in str(version).split("+")[0].split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        parts.append(int(digits[:6]) if digits else 0)
    parts += [0, 0]
    return parts[0], parts[1]


def mps_min_macos(torch_version: str) -> tuple[int, int]:
    """The macOS the Apple GPU needs with this torch: its row of MPS_MACOS_BY_TORCH (the first row's for an older
    one, the last row's for one newer than the table, which asks at least as much)."""
    release = torch_release(torch_version)
    rows = [row for row in MPS_MACOS_BY_TORCH if row[0] <= release]
    return (rows[-1] if rows else MPS_MACOS_BY_TORCH[0])[1]


def torch_limit_for(macos: tuple[int, int]) -> str | None:
    """The first torch release whose Apple GPU needs a newer macOS than `macos` ("2.15": `torch<2.15` keeps MPS
    working there), or None when even the table's oldest needs more."""
    if macos < MPS_MACOS_BY_TORCH[0][1]:
        return None
    later = [row[0] for row in MPS_MACOS_BY_TORCH if row[1] > macos]
    return f"{later[0][0]}.{later[0][1]}" if later else None


def macos_text(version: tuple[int, int]) -> str:
    """(14, 0) -> "14.0"."""
    return f"{version[0]}.{version[1]}"


def macos_name(version: tuple[int, int]) -> str:
    """(14, 0) -> "macOS 14 Sonoma"."""
    name = MACOS_NAMES.get(version[0])
    return f"macOS {version[0]}" + (f" {name}" if name else "") + (f".{version[1]}" if version[1] else "")


def pinned_torch(constraints_text: str) -> str | None:
    """The torch version a constraints file pins ("torch==2.14.1"), or None."""
    for line in constraints_text.splitlines():
        line = line.split("#")[0].strip()
        if line.lower().startswith("torch=="):
            return line.split("==", 1)[1].strip()
    return None


# torch.compile on the Apple GPU: inductor's own MPS code generator opens with "Just an early prototype"
# (torch/_inductor/codegen/mps.py); said wherever compile is chosen with MPS (the window, bench, sweep).
MPS_COMPILE_NOTE = ("torch.compile on the Apple GPU is an early prototype in PyTorch (its inductor MPS backend says "
                    "so): it may fail, or run slower than without it.")

# ---------------------------------------------------------------- MPS timing events

# torch 2.15 rewrote MPSEvent (torch/include/ATen/mps/MPSEvent.h): an event's time is the GPU's completion time
# (`m_completion_time`, `waitForTiming`), and the one-shot CPU-sync flag that made `end.synchronize()` then
# `elapsed_time` wait forever (pytorch#162872) is gone. Before 2.15: the host's clock read in Metal's completion
# callbacks. Checked in both wheels (benchmarks/apple_ledger.py, the events row).
MPS_EVENTS_GPU_FROM = (2, 15)


def mps_events_gpu_times(torch_version: str) -> bool:
    """Whether this torch's MPS timing events are the GPU's completion times (2.15 and later)."""
    return torch_release(torch_version) >= MPS_EVENTS_GPU_FROM


def mps_event_words(torch_version: str) -> str:
    """What an MPS timing event's time is, for the sentence that says how operations were timed."""
    if mps_events_gpu_times(torch_version):
        return "the GPU's completion times"
    return "the host's clock in Metal's completion callbacks, not GPU timestamps"


def mps_event_hang_note(torch_version: str) -> str:
    """" (an MPS timing event can wait forever: pytorch#162872)" for a torch that has that hang, else ""."""
    return "" if mps_events_gpu_times(torch_version) else " (an MPS timing event can wait forever: pytorch#162872)"


# ---------------------------------------------------------------- PYTORCH_ENABLE_MPS_FALLBACK before torch loads

FALLBACK_VAR = "PYTORCH_ENABLE_MPS_FALLBACK"
# From torch 2.8 the MPS init compares the value with the one character "0": unset or "0" is off, any other value
# ("", "00", " 0", "false") on, and nothing aborts; before 2.8 it read it with std::stoi, and a value stoi cannot read
# aborted `import torch` (checked in the macOS wheels: benchmarks/apple_ledger.py, the fallback-variable row).
FALLBACK_STRING_FROM = (2, 8)
_ON = {"true", "yes", "on", "enable", "enabled", "y", "t"}
_OFF = {"", "false", "no", "off", "disable", "disabled", "n", "f"}
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def stoi_reads(text: str) -> bool:
    """Whether C++'s std::stoi reads `text` without throwing, as torch does with PYTORCH_ENABLE_MPS_FALLBACK while
    it loads (aten/src/ATen/mps/MPSFallback.mm): leading white space, an optional sign, at least one digit, a value
    that fits an int; what follows the digits is ignored. Anything else throws, and the throw aborts `import torch`."""
    i, n = 0, len(text)
    while i < n and text[i] in " \t\n\v\f\r":
        i += 1
    start = i
    if i < n and text[i] in "+-":
        i += 1
    digits = i
    while i < n and "0" <= text[i] <= "9":
        i += 1
    if i == digits:
        return False
    return _INT_MIN <= int(text[start:i]) <= _INT_MAX


def installed_torch() -> str:
    """The installed torch's version, read without importing it ("" when none is found)."""
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # no distribution metadata: a frozen app, a source build
        try:
            import sys

            return str(sys.modules["torch"].__version__) if "torch" in sys.modules else ""
        except Exception:
            return ""


def reads_as_string(torch_version: str | None = None) -> bool:
    """Whether this torch compares PYTORCH_ENABLE_MPS_FALLBACK with "0" (2.8 and later) rather than std::stoi."""
    version = installed_torch() if torch_version is None else torch_version
    return not version or torch_release(version) >= FALLBACK_STRING_FROM


def fallback_enabled(environ=None, torch_version: str | None = None) -> bool:
    """Whether torch, loaded with this environment, runs the operations MPS lacks on the CPU: MPSFallback.mm
    registers the boxed `mps_fallback` for every operation when PYTORCH_ENABLE_MPS_FALLBACK is on, else
    `mps_error_fallback`, which raises "... is not currently implemented for the MPS device". On: from torch 2.8 any
    value but "0"; before, a value std::stoi reads as a number other than 0. Read from the value a run process set
    before torch loaded (process/child.py); torch reads it once."""
    import os

    env = os.environ if environ is None else environ
    value = env.get(FALLBACK_VAR)
    if value is None:
        return False
    if reads_as_string(torch_version):
        return value != "0"
    if not stoi_reads(value):
        return False
    text = value.strip()
    digits = text[1:] if text[:1] in "+-" else text
    number = ""
    for ch in digits:
        if not "0" <= ch <= "9":
            break
        number += ch
    return int(number) != 0


def correct_fallback_env(environ=None, torch_version: str | None = None) -> str | None:
    """Make PYTORCH_ENABLE_MPS_FALLBACK readable before torch loads, for a torch before 2.8 (a value std::stoi cannot
    read aborts its `import torch` on a Mac; from 2.8 every value is read, and none is changed). A readable value is
    kept as the user set it; true/yes/on become 1, false/no/off/empty 0, and anything else the app's default 1.
    Returns the one sentence saying what was changed, or None."""
    import os

    env = os.environ if environ is None else environ
    value = env.get(FALLBACK_VAR)
    if value is None or stoi_reads(value) or reads_as_string(torch_version):
        return None
    word = value.strip().lower()
    new = "0" if word in _OFF else "1"
    env[FALLBACK_VAR] = new
    meaning = "on: ops MPS lacks run on the CPU" if new == "1" else "off"
    how = "which PyTorch cannot read as a whole number (it would abort while loading)"
    guess = "" if word in _ON or word in _OFF else " (the app's default)"
    shown = value if len(value) <= 40 else value[:40] + "…"
    return (f"{FALLBACK_VAR} was {shown!r}, {how}; using {new}{guess}, the fallback {meaning}. Set it to 1 or 0 "
            f"to choose.")
