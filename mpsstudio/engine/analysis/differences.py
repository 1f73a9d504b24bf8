"""What differs between two runs: their settings, their device and their environment (what can change a run's
numbers besides its settings: torch, macOS and its build, the chip, the power source, the MPS variables, CUDA and
its driver, ...), each named as a person reads it. contrast.py compares runs by these. No torch here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..basics.config import SCRIPT_PER_DEVICE
from ..basics.formatting import one_line, printable
from ..basics.frameworks import framework_words, quantize_words
from ..basics.results import RunResult

SETTING_AXES = {"batch_size": "batch", "precision": "precision", "channels_last": "channels_last",
                "compile": "torch.compile", "workers": "workers", "threads": "CPU threads", "tf32": "TF32",
                "tf32_conv": "TF32 in convolutions", "accumulate": "accumulation", "resident": "data on the device",
                "framework": "framework"}
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


def _mlx_vars(env: dict):
    variables = env.get("mlx_env")
    if not isinstance(variables, dict):
        return None
    return ", ".join(f"{k}={v}" for k, v in sorted(variables.items())) or "none set"


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
    ("mlx", "MLX", _field("mlx")),  # an MLX run's (a PyTorch run records none: never a difference between the two)
    ("mlx_env", "MLX variables", _mlx_vars),  # alike: MLX_* as an MLX run's process had them
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
        if self.key == "framework":
            return framework_words(value)
        if self.key == "host":
            return f"host {value}" if value != "unknown" else "another machine"
        if self.key.startswith("arg "):  # a script's argument: "--batch_size 16", "--amp on", "--amp not given"
            return f"{self.label} {value}"
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


FINETUNE_OPTIONS = ("finetune", "lora_rank", "lora_alpha")  # a model folder's fine-tuning, one setting in words


def _finetune(options) -> str:
    return {"lora": "LoRA", "head": "head only"}.get(str(options.get("finetune")), "full")


def finetune_words(r: RunResult) -> str:
    """A model folder's fine-tuning as a setting's value: "full", "LoRA", "head only"."""
    return _finetune(r.config.options)


AXIS_LABELS = {"finetune": "fine-tuning"}  # setting axes beside SETTING_AXES (not RunConfig fields)


def without_finetune(key: tuple, r: RunResult) -> tuple:
    """A run's comparison key with its fine-tuning options left out (the fine-tuning axis's groups)."""
    rest = {k: v for k, v in r.config.options.items() if k not in FINETUNE_OPTIONS}
    return tuple(kv if kv[0] != "options" else ("options", repr(rest)) for kv in key)


def without_quantize(key: tuple, r: RunResult) -> tuple:
    """A run's comparison key with the MLX side's quantization left out (the framework axis's groups: a quantized
    MLX run is compared with the PyTorch run of its setup, its weights said as part of the framework's side)."""
    if "quantize" not in r.config.options:
        return key
    rest = {k: v for k, v in r.config.options.items() if k != "quantize"}
    return tuple(kv if kv[0] != "options" else ("options", repr(rest)) for kv in key)


def weights_words(options) -> str:
    """An MLX run's weights as a setting's value: "4-bit (mlx-lm)", or "as stored"."""
    bits = options.get("quantize") if isinstance(options, dict) else None
    return f"{bits}-bit (mlx-lm)" if bits is not None else "as stored"


def axis_value(r: RunResult, axis: str) -> object:
    """A run's value on a setting axis, as its groups tell runs apart: a quantized MLX side is its framework's own
    ("mlx with 4-bit weights"), a model folder's fine-tuning in its words."""
    if axis == "framework":
        return r.config.framework + quantize_words(r.config)
    return finetune_words(r) if axis == "finetune" else getattr(r.config, axis)


def _only_quantize(a, b) -> bool:
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return False
    return {k for k in {*a, *b} if a.get(k) != b.get(k)} == {"quantize"}


def _only_finetune(a, b) -> bool:
    """Two runs' options differ in a model folder's fine-tuning alone."""
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return False
    keys = {k for k in {*a, *b} if a.get(k) != b.get(k)}
    return bool(keys) and keys <= set(FINETUNE_OPTIONS) and _finetune(a) != _finetune(b)


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


def script_arguments(args) -> dict[str, str]:
    """A script's arguments as {name: value}: "--lr 0.1" and "--lr=0.1" as "--lr": "0.1", a flag alone as "on",
    a positional one as "argument N": {"--batch_size": "8", "--amp": "on", "argument 1": "data/"}."""
    out: dict[str, str] = {}
    items = [str(a) for a in args] if isinstance(args, list) else []
    i, position = 0, 0
    while i < len(items):
        item = items[i]
        if item.startswith("-") and len(item) > 1 and not _number_text(item):
            name, sep, value = item.partition("=")
            if not sep:
                following = items[i + 1] if i + 1 < len(items) else None
                if following is not None and (not following.startswith("-") or _number_text(following)):
                    value, i = following, i + 1
                else:
                    value = "on"
            out[name] = value
        else:
            position += 1
            out[f"argument {position}"] = item
        i += 1
    return out


def _file_name(model) -> str:
    """A model's name, or a model file's, script's or model folder's own name (the folders above it left out)."""
    text = str(model)
    pathlike = text.lower().endswith(".py") or "/" in text or "\\" in text  # a file, or a model folder
    return text.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] if pathlike else text


def _number_text(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _script_differences(base: RunResult, other: RunResult) -> list[Difference]:
    """Two runs of one script: each argument that differs, by its name ("--batch_size 8" against "--batch_size
    16"), instead of the whole argument list; the arguments given for one device alone too."""
    out = []
    for key, label in (("script_args", ""), ("device_args", "for this device: ")):
        if key == "script_args":
            a, b = script_arguments(base.config.options.get(key)), script_arguments(other.config.options.get(key))
        else:
            a = script_arguments(_for_device(base.config))
            b = script_arguments(_for_device(other.config))
        for name in dict.fromkeys([*a, *b]):
            if a.get(name) != b.get(name):
                word = f"{label}{name}"
                out.append(Difference(f"arg {word}", word, a.get(name, "not given"), b.get(name, "not given"),
                                      "setting"))
    rest = {k: v for k, v in base.config.options.items() if k not in ("script_args", "device_args")}
    others = {k: v for k, v in other.config.options.items() if k not in ("script_args", "device_args")}
    if rest != others:
        out.append(Difference("options", "options", shown(rest), shown(others), "setting"))
    return out


def _for_device(config) -> list:
    extra = config.options.get("device_args")
    if not isinstance(extra, dict):
        return []
    mine = extra.get(config.device, extra.get(config.device.split(":")[0], []))
    return mine if isinstance(mine, list) else []


def differences(base: RunResult, other: RunResult) -> list[Difference]:
    """What `other` does not share with `base`: settings first, then the device, then the environment. Two runs of
    one script name the arguments that differ; what a script reads from them (its batch, precision, ...) is then
    listed as following from them, not counted as a cause of its own."""
    out: list[Difference] = []
    scripts = base.config.is_script and other.config.is_script
    for name, label in {**SETTING_AXES, **OTHER_SETTINGS}.items():
        if scripts and name == "options":
            continue
        a, b = getattr(base.config, name, None), getattr(other.config, name, None)
        if name == "model" and _file_name(a) == _file_name(b):  # a file named by its path on one side, by its name
            continue                                            # on the other (a shared file keeps no paths)
        if a != b and name == "options" and _only_finetune(a, b):  # a model folder's fine-tuning, in its words
            out.append(Difference("finetune", "fine-tuning", _finetune(a), _finetune(b), "setting"))
        elif a != b and name == "options" and _only_quantize(a, b):  # mlx-lm's 4- or 8-bit weights
            out.append(Difference("quantize", "weights", weights_words(a), weights_words(b), "setting"))
        elif a != b:
            out.append(Difference(name, label, _setting(base, name), _setting(other, name), "setting"))
    if scripts:
        arguments = _script_differences(base, other)
        if any(d.key.startswith("arg ") for d in arguments):
            for d in out:
                d.cause = d.cause and d.key not in (*SCRIPT_PER_DEVICE, "batch_size")
        out.extend(arguments)
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
