"""RunConfig: everything that defines one run, and its validation."""

from __future__ import annotations

import functools
import os
import re
import sys
from dataclasses import asdict, dataclass, field, fields, replace

from .errors import UserError
from .formatting import is_finite, one_line
from .frameworks import FRAMEWORKS, check_mlx, run_label
from .spec import is_text_dataset
from .torchrun import TORCHRUN_OPTIONS, check_ranks  # noqa: F401 (TORCHRUN_OPTIONS: imported from here too)

PRECISIONS = ("fp32", "fp16", "bf16")
OPTIMIZERS = ("sgd", "adam", "adamw")
MODES = ("train", "inference")
MONITORS = ("val_accuracy", "val_loss")  # what early stopping watches
MAX_ACCUMULATE = 1024  # micro-batches per optimizer step

# Bounds of every number a config may hold (RunConfig.validate says them when a value is outside).
MAX_NAME = 4096  # characters of a model or dataset name or path
MAX_BATCH = 1 << 20
MAX_STEPS = 1_000_000_000
MAX_EPOCHS = 1_000_000
MAX_LR = 1000.0
MAX_WORKERS = 256
MAX_THREADS = 4096
MAX_SEED = 2**63 - 1
MIN_IMAGE_SIZE, MAX_IMAGE_SIZE = 8, 1024  # pixels per side when a folder's images are decoded
MAX_CHANNELS, MAX_SIDE, MAX_SEQ, MAX_CLASSES = 4096, 8192, 1_000_000, 1_000_000  # a synthetic sample's input
MIN_WINDOW_S, MAX_WINDOW_S = 0.001, 60.0
DEVICE_PATTERN = re.compile(r"cpu|mps|cuda(:\d{1,3})?")

SCRIPT = "script"  # the dataset of a user's own training script run as a run (its model field: the script's path)
DEFAULT_MODEL = "mlp"
DEFAULT_DATASET = "shapes"  # generated, offline, learns: see datasets.py


# Why the .app cannot compile (checked in the torch 2.14.1 wheel): inductor's Metal kernels #include
# <c10/metal/...> headers from torch's include/ folder (torch/_inductor/runtime/runtime_utils.py,
# compile_mps_shaders), which the bundle leaves out (packaging/mpsstudio.spec, DROP); on the CPU inductor also
# compiles C++ against Python's headers with a C++ compiler, neither of which a bundle carries.
FROZEN_COMPILE_REASON = ("torch.compile cannot run in the MPS Studio app: on the Apple GPU PyTorch builds Metal "
                         "kernels from its C++ headers (torch/include/c10/metal), which the app leaves out, and on "
                         "the CPU it also needs a C++ compiler (Xcode's command line tools) and Python's headers; "
                         "install MPS Studio with pip (README, Install) to use it.")

# PyTorch's defaults: torch.backends.cudnn.allow_tf32 = True (convolutions in TF32 on Ampere and newer),
# torch.backends.cuda.matmul.allow_tf32 = False. Runs keep both off unless asked (like with like: the CPU and MPS
# compute fp32 in full), which on an H100 made resnet18 at 224 px and batch 64 ~1.8x slower than PyTorch's default
# (docs/benchmarks.md). `tf32` turns both on, `tf32_conv` convolutions only (PyTorch's default).
TF32_NOTE = ("TF32 was off: PyTorch's default lets cuDNN run convolutions in TF32 on this GPU, so a script of yours "
             "on PyTorch's defaults can be much faster than this full-fp32 run. MPS Studio keeps full fp32 so that "
             "devices compare like with like; turn on TF32 (--tf32, or Advanced ▸ TF32) to measure with it, for "
             "convolutions as PyTorch's default does and for matrix products too.")


def parse_input_shape(text: str) -> list[int]:
    """"3,224,224", "3x224x224" or "3 × 224 × 224" -> [3, 224, 224]; "128" -> [128] (tokens). UserError otherwise
    (the sizes' limits are RunConfig.validate's)."""
    parts = [p.strip() for p in str(text).lower().replace("×", ",").replace("x", ",").split(",")]
    if len(parts) not in (1, 3) or not all(p.isdigit() and len(p) <= 9 for p in parts):
        raise UserError(f"Give the input as C,H,W for images (e.g. 3,224,224) or L for tokens (e.g. 128), not "
                        f"{str(text)[:40]!r}.")
    return [int(p) for p in parts]


def precision_note(config: "RunConfig") -> str:
    """What a run's precision means for its numbers: TF32_NOTE for a CUDA run of ours in full fp32 ("" otherwise: a
    script's TF32 is what the script left, said with its settings)."""
    return TF32_NOTE if (config.device.startswith("cuda") and config.precision == "fp32" and not config.tf32
                         and not config.tf32_conv and not config.is_script) else ""


# What differs by device in a script's runs, never part of what two runs of it must share to be compared: what the
# script decides for itself (a GPT script trains in bf16 autocast on CUDA and fp32 on the CPU; read from it:
# run/script/settings.py), and its window's length (at least 1 s on a GPU: run/script/tracker.py).
SCRIPT_PER_DEVICE = ("precision", "optimizer", "lr", "tf32", "tf32_conv", "compile", "channels_last", "window_s")
_FINETUNE_WORDS = {"full": "full", "lora": "LoRA", "head": "head only"}
OPTIMIZER_NAME = re.compile(r"[a-z0-9_.+-]{1,80}")
MAX_SCRIPT_LR = 1e6


@dataclass(frozen=True)
class RunConfig:
    """One run: a model on a dataset on one device. Comparisons group configs equal but for `device`. Frozen: a
    change makes a new config (`changed`, or dataclasses.replace), so a config once validated stays as it was."""

    model: str = DEFAULT_MODEL
    dataset: str = DEFAULT_DATASET
    device: str = "cpu"
    batch_size: int | None = 64  # None only for a script whose batch was not seen (nothing ran)
    steps: int | None = None  # measured steps after warm-up; None when `epochs` is used
    epochs: int | None = 2
    warmup_steps: int = 10
    # a script's (is_script): what it used, read from PyTorch; None where not seen (run/script/settings.py)
    optimizer: str | None = "sgd"
    lr: float | None = 0.01
    precision: str | None = "fp32"
    channels_last: bool = False
    compile: bool = False
    workers: int = 0
    resident: bool = False
    mode: str = "train"
    seed: int = 0
    threads: int | None = None  # CPU threads torch uses; None = torch's default, recorded either way
    tf32: bool = False  # TF32 on CUDA in convolutions and matrix products
    tf32_conv: bool = False  # TF32 on CUDA in convolutions only (PyTorch's default); `tf32` includes it
    image_size: int | None = None  # folder datasets: decode size; synthetic images: their size; None = the model's
    # synthetic data only: the shape of one sample ([C, H, W] images, [L] tokens) and the number of classes; None:
    # the model's own (a user's file may declare INPUT_SHAPE and NUM_CLASSES; models/user.py)
    input_shape: list | None = None
    num_classes: int | None = None
    window_s: float = 0.1  # target length of one measurement window
    # operations MPS lacks run on the CPU (PYTORCH_ENABLE_MPS_FALLBACK=1 in the run's own process) instead of
    # stopping the run; copies each way make them slow, so a run records whether it allowed them
    mps_fallback: bool = True
    # MPS has no float64 or complex128: a model holding them is refused before an MPS run, naming them, unless this
    # casts them (float32, complex64) for the run (run/preflight.py)
    cast_float64: bool = False
    # Training for real (epoch runs with a validation split): stop when `early_stop_monitor` has not improved for
    # `early_stop_patience` epochs (None: never), in `early_stop_mode` ("max"/"min"; None: max for accuracy, min
    # for loss); `keep_best` ends the run with the best epoch's weights (a best checkpoint, kept in memory).
    early_stop_patience: int | None = None
    early_stop_monitor: str = "val_accuracy"
    early_stop_mode: str | None = None
    keep_best: bool = False
    # Gradient accumulation: one optimizer step every `accumulate` micro-batches of `batch_size` (an effective
    # batch of accumulate x batch_size); steps and throughput count micro-batches and samples, as without it.
    accumulate: int = 1
    # The framework that trains: "torch", or "mlx" (the same built-in model written in MLX, its initial weights
    # PyTorch's, checked for parity before it is timed: run/mlx/). Part of the setup: a PyTorch run and an MLX run
    # are compared as runs differing in one setting (analysis/contrast.py), never as devices.
    framework: str = "torch"
    options: dict = field(default_factory=dict)
    # Another Python environment to run in (a venv's or conda env's python with its own torch; process/interpreter.py
    # checks it); None: MPS Studio's own. Not part of the setup: runs of one setup in two environments are compared
    # by their environments (analysis/contrast.py), whose records say which torch ran.
    python: str | None = None
    # Data-parallel training on several GPUs (process/rank.py): `gpus` ranks on this machine, launched by torchrun,
    # each with its own GPU and a disjoint share of the data, the model in DistributedDataParallel; `batch_size` is
    # per rank. `torchrun`: its options for several machines (TORCHRUN_OPTIONS: --nnodes, the rendezvous), passed
    # through. `rank_timeout_s`: how long a rank waits for the others at a collective before the run fails (a hung
    # rank ends the run then, not never); not part of the setup.
    gpus: int = 1
    torchrun: list = field(default_factory=list)
    rank_timeout_s: float = 120.0

    def __post_init__(self):
        if isinstance(self.input_shape, tuple):  # one form, so that equal configs compare equal
            object.__setattr__(self, "input_shape", list(self.input_shape))
        if isinstance(self.torchrun, tuple):
            object.__setattr__(self, "torchrun", list(self.torchrun))

    @property
    def distributed(self) -> bool:
        """Launched as ranks by torchrun (several GPUs, or several machines)."""
        return self.gpus != 1 or bool(self.torchrun)

    @property
    def is_script(self) -> bool:
        """A user's own training script measured as a run (mpsstudio run, Run Script…): `model` is its path,
        `options["script_args"]` its arguments, `steps` where it is ended (None: its own end)."""
        return self.dataset == SCRIPT

    @property
    def monitor_mode(self) -> str:
        """"max" or "min": the early-stopping direction, the monitor's natural one unless set."""
        return self.early_stop_mode or ("min" if self.early_stop_monitor == "val_loss" else "max")

    def validate(self) -> "RunConfig":
        """Raise UserError (one sentence naming the field) for values no run can use; return self for chaining.

        Types are checked strictly (a bool is not a number, 1e30 is not a batch size) and every number has a
        stated bound, so a config read from a file can never reach the engine with a value it cannot use.
        """
        _text(self.model, "The model", MAX_NAME)
        _text(self.dataset, "The dataset", MAX_NAME)
        if not isinstance(self.device, str) or not DEVICE_PATTERN.fullmatch(self.device):
            raise UserError(f"The device must be cpu, mps, cuda or cuda:N, not {_shown(self.device)}.")
        if not (self.is_script and self.batch_size is None):  # a script's batch: None until seen
            _whole(self.batch_size, "Batch size", 1, MAX_BATCH)
        if self.is_script:
            self._validate_script()
        elif self.steps is None and self.epochs is None:
            raise UserError("Give a number of steps or of epochs.")
        if self.steps is not None:
            _whole(self.steps, "Steps", 1, MAX_STEPS)
        if self.epochs is not None:
            _whole(self.epochs, "Epochs", 1, MAX_EPOCHS)
        _whole(self.warmup_steps, "Warm-up steps", 0, MAX_STEPS)
        if not self.is_script:
            _choice(self.precision, "precision", PRECISIONS)
            _choice(self.optimizer, "optimizer", OPTIMIZERS)
            if not is_finite(self.lr) or not (0 < self.lr <= MAX_LR):
                raise UserError(f"Learning rate must be a number above 0 and at most {MAX_LR:g}, not "
                                f"{_shown(self.lr)}.")
        _choice(self.mode, "mode", MODES)
        _whole(self.workers, "Data workers", 0, MAX_WORKERS)
        if self.threads is not None:
            _whole(self.threads, "CPU threads", 1, MAX_THREADS)
        _whole(self.seed, "The seed", 0, MAX_SEED)
        if self.image_size is not None:
            _whole(self.image_size, "The image size", MIN_IMAGE_SIZE, MAX_IMAGE_SIZE, unit=" pixels")
        if self.input_shape is not None:
            if not isinstance(self.input_shape, (list, tuple)) or len(self.input_shape) not in (1, 3):
                raise UserError(f"The input shape must be C,H,W for images or L for tokens, not "
                                f"{_shown(self.input_shape)}.")
            for v, (what, top) in zip(self.input_shape, ((("Channels", MAX_CHANNELS), ("Height", MAX_SIDE),
                                                          ("Width", MAX_SIDE)) if len(self.input_shape) == 3
                                                        else (("The sequence length", MAX_SEQ),))):
                _whole(v, what, 1, top)
        if self.num_classes is not None:
            _whole(self.num_classes, "The number of classes", 2, MAX_CLASSES)  # one class: nothing to classify
        text_length = (self.input_shape is not None and len(self.input_shape) == 1 and self.num_classes is None
                       and is_text_dataset(self.dataset))  # a text dataset's rows: the sequence length
        if (self.input_shape is not None or self.num_classes is not None) and str(self.dataset).lower() != "synthetic" \
                and not text_length:
            raise UserError("--input-shape and --num-classes shape synthetic data; a dataset's samples have their own "
                            "(a folder's images are decoded at --image-size), so drop them or use --dataset "
                            "synthetic.")
        if self.image_size is not None and self.input_shape is not None:
            raise UserError("Give the synthetic input's size once: --input-shape C,H,W, or --image-size for its "
                            "height and width.")
        if not is_finite(self.window_s) or not (MIN_WINDOW_S <= self.window_s <= MAX_WINDOW_S):
            raise UserError(f"The measurement window must be between {MIN_WINDOW_S:g} and {MAX_WINDOW_S:g} seconds, "
                            f"not {_shown(self.window_s)}.")
        if self.early_stop_patience is not None:
            _whole(self.early_stop_patience, "Early-stopping patience", 1, MAX_EPOCHS, unit=" epochs")
            if self.epochs is None or self.steps is not None:
                raise UserError("Early stopping watches the validation set after each epoch; give a number of "
                                "epochs, not of steps.")
        _choice(self.early_stop_monitor, "early-stopping monitor", MONITORS)
        if self.early_stop_mode is not None:
            _choice(self.early_stop_mode, "early-stopping mode", ("max", "min"))
        if self.keep_best and (self.epochs is None or self.steps is not None):
            raise UserError("Keeping the best epoch needs a number of epochs, not of steps.")
        if (self.early_stop_patience is not None or self.keep_best) and str(self.dataset).lower() == "synthetic":
            raise UserError("Early stopping and the best epoch watch the validation split, and synthetic has none; "
                            "choose shapes, MNIST or a folder of images, or turn them off.")
        _whole(self.accumulate, "Gradient accumulation", 1, MAX_ACCUMULATE, unit=" micro-batches")
        if (self.early_stop_patience is not None or self.keep_best or self.accumulate > 1) and self.mode != "train":
            raise UserError("Early stopping, the best epoch and gradient accumulation are for training; set the "
                            "mode to train.")
        for name in ("channels_last", "compile", "resident", "tf32", "tf32_conv", "mps_fallback", "keep_best",
                     "cast_float64"):
            if not isinstance(getattr(self, name), bool):
                raise UserError(f"'{name}' must be true or false, not {_shown(getattr(self, name))}.")
        if not isinstance(self.options, dict):
            raise UserError(f"'options' must be a JSON object, not {_shown(self.options)}.")
        if self.python is not None:
            _text(self.python, "The Python interpreter's path", MAX_NAME)
        check_ranks(self)
        _choice(self.framework, "framework", FRAMEWORKS)
        if self.framework == "mlx":
            check_mlx(self)
        return self

    def _validate_script(self) -> None:
        """A script run: a .py file, its arguments (and those for one device) as texts, and what was read from the
        script (None: not known)."""
        if not self.model.lower().endswith(".py"):
            raise UserError(f"A training script is a .py file, not {_shown(self.model)}.")
        args = self.options.get("script_args", [])
        if not _texts(args):
            raise UserError("A script's arguments must be a list of at most 1,000 texts.")
        per_device = self.options.get("device_args", {})
        if not isinstance(per_device, dict) or len(per_device) > 16 or not all(
                isinstance(k, str) and DEVICE_PATTERN.fullmatch(k) and _texts(v) for k, v in per_device.items()):
            raise UserError("A script's arguments for one device must map a device (cpu, mps, cuda, cuda:N) to a list "
                            "of texts.")
        if self.precision is not None:
            _choice(self.precision, "precision", PRECISIONS)
        if self.optimizer is not None and not (isinstance(self.optimizer, str)
                                               and OPTIMIZER_NAME.fullmatch(self.optimizer)):
            raise UserError(f"A script's optimizer is the name of its class, not {_shown(self.optimizer)}.")
        if self.lr is not None and (not is_finite(self.lr) or not 0 <= self.lr <= MAX_SCRIPT_LR):
            raise UserError(f"A script's learning rate is a number from 0 to {MAX_SCRIPT_LR:g}, not "
                            f"{_shown(self.lr)}.")

    def check_runs_here(self) -> "RunConfig":
        """validate(), plus what this installation can run (a config from another machine may be valid
        but not runnable here)."""
        self.validate()
        if self.compile and getattr(sys, "frozen", False):
            raise UserError(FROZEN_COMPILE_REASON)
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        """Build from a dict (an imported JSON run); unknown keys are kept in `options`."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        if extra:
            options = kwargs.get("options", {})
            kwargs["options"] = {**(options if isinstance(options, dict) else {}), **extra}
        return cls(**kwargs)

    @property
    def work_words(self) -> str:
        """"resnet18 on cifar10", or a script's file name ("train.py, your script"): what a sentence names."""
        if self.is_script:
            return f"{self.model.replace(chr(92), '/').rsplit('/', 1)[-1]} (your script)"
        return f"{self.model} on {self.dataset}"

    @property
    def model_label(self) -> str:
        """The Model column's text: the model's name, or a script's file name first and then its folder ("train.py
        — ~/projects/gpt"), so that two scripts' runs never look alike however the column elides."""
        if not self.is_script:
            finetune = self.options.get("finetune")  # a model folder's: full and LoRA runs never look alike
            return f"{self.model} · {_FINETUNE_WORDS.get(finetune, finetune)}" if isinstance(finetune, str) else \
                self.model
        folder, _, name = self.model.replace("\\", "/").rpartition("/")
        home = os.path.expanduser("~").replace("\\", "/")
        if folder and home not in ("", "/", "~") and (folder == home or folder.startswith(home + "/")):
            folder = "~" + folder[len(home):]
        return f"{name} — {folder}" if folder else name

    @property
    def batch_words(self) -> str:
        """"batch 64", or "batch not known" (a script run that ended before its model was called)."""
        return f"batch {self.batch_size:,}" if self.batch_size is not None else "batch not known"

    @property
    def precision_words(self) -> str:
        """"fp32", "bf16", ..., or "precision not known" (a script whose model's call was not seen)."""
        return self.precision or "precision not known"

    @property
    def batch(self) -> int:
        """The batch size of a run that has one: every run but a script's whose batch was never seen (validated as
        a whole number from 1 to MAX_BATCH; asking it of that script's config is a bug, said as one)."""
        if self.batch_size is None:
            raise ValueError("this run's batch size is not known (a script whose batch was never seen)")
        return self.batch_size

    @property
    def where(self) -> str:
        """Where a run ran, as a sentence names it: "mps", "cuda", or an MLX run's "MLX \u00b7 gpu" (with
        " \u00b7 MLX_ENABLE_TF32=1" where it allowed MLX's TF32-class fp32 products)."""
        tf32 = " \u00b7 MLX_ENABLE_TF32=1" if self.framework == "mlx" and self.tf32 else ""
        return run_label(self.framework, self.device, quantize=self.options.get("quantize")) + tf32

    def with_device(self, device: str) -> "RunConfig":
        return self.changed(device=device)

    def changed(self, **changes) -> "RunConfig":
        """A new config with these fields changed (its options and lists copied, never shared)."""
        changes.setdefault("options", dict(self.options))
        changes.setdefault("torchrun", list(self.torchrun))
        return replace(self, **changes)

    def comparison_key(self) -> tuple:
        """What must be equal for two runs to be compared: everything except the device (and the interpreter, whose
        torch is part of the run's environment, and how long ranks wait for each other); for a script, also except
        what differs by device (SCRIPT_PER_DEVICE: its runs are compared as the script trains on each)."""
        names = key_names()
        if self.is_script:
            names = tuple(n for n in names if n not in SCRIPT_PER_DEVICE)
        return tuple((name, repr(getattr(self, name))) for name in names)


@functools.cache
def key_names() -> tuple[str, ...]:
    """RunConfig's field names but the device and the interpreter, sorted (once: a history of 10,000 runs asks
    10,000 times)."""
    return tuple(sorted(f.name for f in fields(RunConfig) if f.name not in ("device", "python", "rank_timeout_s")))


def _texts(v) -> bool:
    return isinstance(v, list) and len(v) <= 1000 and all(isinstance(a, str) and len(a) <= MAX_NAME for a in v)


def _shown(v) -> str:
    """A value for a message: repr, cut short (a 400-digit number must not fill the terminal)."""
    return one_line(repr(v), 40)


def _whole(v, what: str, low: int, high: int, unit: str = "") -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not (low <= v <= high):
        raise UserError(f"{what} must be a whole number from {low:,} to {high:,}{unit}, not {_shown(v)}.")


def _choice(v, what: str, choices: tuple[str, ...]) -> None:
    if v not in choices or not isinstance(v, str):
        raise UserError(f"Unknown {what} {_shown(v)}; choose one of: {', '.join(choices)}.")


def _text(v, what: str, limit: int) -> None:
    if not isinstance(v, str) or not v.strip() or len(v) > limit:
        raise UserError(f"{what} must be a name or path of 1 to {limit:,} characters, not {_shown(v)}.")
