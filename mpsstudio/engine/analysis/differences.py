"""What differs between two runs: their settings, their device and their environment (what can change a run's
numbers besides its settings: torch, macOS and its build, the chip, the power source, the MPS variables, CUDA and
its driver, ...), each named as a person reads it. contrast.py compares runs by these. No torch here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..basics.formatting import one_line, printable
from ..basics.results import RunResult

SETTING_AXES = {"batch_size": "batch", "precision": "precision", "channels_last": "channels_last",
                "compile": "torch.compile", "workers": "workers", "threads": "CPU threads", "tf32": "TF32",
                "accumulate": "accumulation", "resident": "data on the device"}
MEASUREMENT = ("steps", "epochs", "warmup_steps", "window_s", "seed")
# Every other setting a difference is named for (a run's length, seed and window target change what is measured)
OTHER_SETTINGS = {"optimizer": "optimizer", "lr": "learning rate", "steps": "steps", "epochs": "epochs",
                  "warmup_steps": "warm-up steps", "seed": "seed", "window_s": "window length",
                  "mps_fallback": "MPS fallback", "cast_float64": "float64 cast", "image_size": "image size",
                  "input_shape": "input", "num_classes": "classes", "options": "options",
                  "early_stop_patience": "early stopping", "keep_best": "keep best", "mode": "mode",
                  "model": "model", "dataset": "dataset", "gpus": "GPUs (ranks)", "torchrun": "torchrun options"}

def _host(env: dict):
    host = env.get("host")
    return host if isinstance(host, dict) else {}


def _power(env: dict):
    battery = _host(env).get("on_battery")
    return None if battery is None else "battery" if battery else "power adapter"


def _low_power(env: dict):
    low = _host(env).get("low_power_mode")
    return None if low is None else "on" if low else "off"


def _mps_vars(env: dict):
    variables = env.get("env")
    if not isinstance(variables, dict):
        return None
    return ", ".join(f"{k}={v}" for k, v in sorted(variables.items()) if "MPS" in str(k)) or "none set"


def _other_vars(env: dict):
    variables = env.get("env")
    if not isinstance(variables, dict):
        return None
    return ", ".join(f"{k}={v}" for k, v in sorted(variables.items()) if "MPS" not in str(k)) or "none set"


def _field(key: str) -> Callable[[dict], object]:
    return lambda env: env.get(key)


def _gpus(env: dict):
    gpus = env.get("gpus")
    return ", ".join(str(g) for g in gpus) if isinstance(gpus, list) and gpus else None


# (key, the word a sentence uses, how to read it from env): what can change a run's numbers besides its settings.
# Read only when recorded: an older run without a field differs in nothing there.
ENVIRONMENT: tuple[tuple[str, str, Callable[[dict], object]], ...] = (
    ("torch", "torch", _field("torch")),
    ("torch_git", "torch build", _field("torch_git")),
    ("torchvision", "torchvision", _field("torchvision")),
    ("python", "Python", _field("python")),
    ("python_env", "Python environment", _field("python_env")),
    ("os", "OS", _field("os")),
    ("macos_build", "macOS build", _field("macos_build")),
    ("chip", "chip", _field("chip")),
    ("cpu", "CPU", _field("cpu")),
    ("gpus", "GPU", _gpus),
    ("cuda", "CUDA", _field("cuda")),
    ("cuda_driver", "NVIDIA driver", _field("cuda_driver")),
    ("cudnn", "cuDNN", _field("cudnn")),
    ("threads", "CPU threads", _field("threads")),
    ("power", "power source", _power),
    ("low_power_mode", "Low Power Mode", _low_power),
    ("mps_env", "MPS variables", _mps_vars),
    ("other_env", "thread, CUDA and NCCL variables", _other_vars),
    ("mpsstudio", "MPS Studio", _field("mpsstudio")),
    ("host", "machine", _field("hostname")),
)
_ENV_LABELS = {key: label for key, label, _ in ENVIRONMENT}


@dataclass
class Difference:
    """One thing two runs do not share: `kind` "setting", "device" or "environment"; values as a person reads them.
    `cause`: False for what follows from another difference (the Python environment's folder, when its torch or
    Python differs too): listed, never counted among the candidate causes."""

    key: str
    label: str
    base: str
    other: str
    kind: str
    cause: bool = True

    def words(self, side: str = "other") -> str:
        """"torch 2.15.0", "batch 128", "bf16", "channels_last on"."""
        value = self.other if side == "other" else self.base
        if self.key == "precision" or self.kind == "device":
            return value
        if self.key == "host":
            return f"host {value}" if value != "unknown" else "another machine"
        if self.key == "threads":
            if value[:1].isdigit():
                return f"{value} CPU thread" + ("" if value == "1" else "s")
            return value.replace(" (", " CPU threads (")
        return f"{self.label} {value}"


def shown(value) -> str:
    if value is None or value == "":
        return "unknown"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return "x".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "none"
    return one_line(printable(str(value)), 60)


_UNSET = {"threads": "torch's default", "image_size": "the model's", "input_shape": "the model's",
          "num_classes": "the model's", "steps": "by epochs", "epochs": "by steps", "early_stop_patience": "off"}


def _setting(r: RunResult, name: str) -> str:
    """A setting's value as a person reads it; unset ones say what they mean ("torch's default (8)")."""
    value = getattr(r.config, name, None)
    if value is None:
        unset = _UNSET.get(name, "unknown")
        threads = r.env.get("threads")
        return f"{unset} ({threads})" if name == "threads" and isinstance(threads, int) else unset
    return shown(value)


def environment_items(env: dict) -> list[tuple[str, str]]:
    """(the word, the value) of every recorded environment field, for Details and reports (no host name, no path)."""
    out = []
    for key, label, read in ENVIRONMENT:
        value = read(env) if isinstance(env, dict) else None
        if key == "host" or value in (None, "", "none set"):
            continue
        out.append((label, shown(value)))
    return out


def differences(base: RunResult, other: RunResult) -> list[Difference]:
    """What `other` does not share with `base`: settings first, then the device, then the environment."""
    out: list[Difference] = []
    for name, label in {**SETTING_AXES, **OTHER_SETTINGS}.items():
        a, b = getattr(base.config, name, None), getattr(other.config, name, None)
        if a != b:
            out.append(Difference(name, label, _setting(base, name), _setting(other, name), "setting"))
    if base.config.device != other.config.device:
        out.append(Difference("device", "device", base.config.device, other.config.device, "device"))
    same_torch = base.env.get("torch") == other.env.get("torch")
    for key, label, read in ENVIRONMENT:
        a, b = read(base.env), read(other.env)
        if a in (None, "") or b in (None, "") or a == b:
            continue  # not recorded on one side (an older run): not a difference anyone can name
        if key == "torch_git" and not same_torch:
            continue  # another version has another build: the version says it
        if key == "threads" and base.config.threads != other.config.threads:
            continue  # the setting says it
        out.append(Difference(key, label, shown(a), shown(b), "environment"))
    for d in out:  # how long a run measured, its seed: they change how sure a figure is, not what it measures
        if d.key in MEASUREMENT:
            d.cause = False
    if any(d.key == "gpus" for d in out):  # torchrun sets OMP_NUM_THREADS=1 for its ranks: a consequence, not a cause
        for d in out:
            d.cause = d.cause and d.key not in ("threads", "other_env")
    if any(d.key == "python_env" for d in out) and any(d.kind == "environment" and d.key != "python_env" for d in out):
        for d in out:
            d.cause = d.cause and d.key != "python_env"  # another venv is how another torch came: not a cause
    return out
