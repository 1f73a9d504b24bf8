"""Apple platform facts the app depends on, kept in one torch-free place: the device check (devices.py), the setup
window, the .app's Info.plist (packaging/info_plist.py) and README all take them from here.

The minimum macOS for the Apple GPU: the torch the app installs and bundles (2.11 to 2.14) runs MPS on macOS 14.0
and later. Its macOS wheels are tagged `macosx_14_0_arm64`; its library refuses older systems with "The MPS
backend is supported on MacOS 14.0+" (aten/src/ATen/mps/EmptyTensor.cpp, MPS_ERROR_RUNTIME_TOO_LOW); on macOS 13
pip resolves torch 2.11, whose library says the same. Checked in the torch 2.14.1 macOS wheel (docs/architecture.md,
"Apple API ledger").
"""

from __future__ import annotations

MPS_MIN_MACOS = (14, 0)
MPS_MIN_MACOS_TEXT = "14.0"
MPS_MIN_MACOS_NAME = "macOS 14 Sonoma"

# torch.compile on the Apple GPU: inductor's own MPS code generator opens with "Just an early prototype"
# (torch/_inductor/codegen/mps.py); said wherever compile is chosen with MPS (the window, bench, sweep).
MPS_COMPILE_NOTE = ("torch.compile on the Apple GPU is an early prototype in PyTorch (its inductor MPS backend says "
                    "so): it may fail, or run slower than without it.")

# ---------------------------------------------------------------- PYTORCH_ENABLE_MPS_FALLBACK before torch loads

FALLBACK_VAR = "PYTORCH_ENABLE_MPS_FALLBACK"
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


def correct_fallback_env(environ=None) -> str | None:
    """Make PYTORCH_ENABLE_MPS_FALLBACK readable before torch loads (a value std::stoi cannot read aborts `import
    torch` on a Mac). A readable value is kept as the user set it; true/yes/on become 1, false/no/off/empty 0, and
    anything else the app's default 1. Returns the one sentence saying what was changed, or None."""
    import os

    env = os.environ if environ is None else environ
    value = env.get(FALLBACK_VAR)
    if value is None or stoi_reads(value):
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
