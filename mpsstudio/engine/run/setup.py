"""Everything a run needs before its first step, checked in order (bad input is one sentence, nothing recorded):
the device (and that it works), the precision, the data, the model on the device, its step functions, the batch
sources, the environment the result carries and the energy meter, and how many warm-up and measured steps run."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..models.hf_folder import is_model_folder
from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.formatting import printable
from ..basics.spec import DataSpec, is_text_dataset
from ..data import datasets
from ..data.batches import InputConverter, MadeBatches, make_batches
from ..data.token_rows import TextBatches, TextRows
from ..machine import devices, environment, footprint, host, precision, probe
from ..machine.energy import meter as energy
from ..models import registry as models
from .epochs import Epochs
from .feed import feed_for
from .steps import Steps

SYNTHETIC_SAMPLES = 1024  # synthetic data: samples made (an epoch's worth), unless they would not fit in ...
SYNTHETIC_BYTES = 256 * 1024**2  # ... this much memory

# Largest image folder the 'resident' option will decode into device memory.
RESIDENT_LIMIT_BYTES = 4 * 1024**3


def load_data(config: RunConfig, progress: Callable[[str, float], None] | None = None) -> datasets.LoadedDataset:
    """Load the config's dataset shaped for its model (synthetic data takes synthetic_input's shape)."""
    info = models.get_model_info(config.model)
    if info.folder and is_text_dataset(config.dataset):
        return load_text_for(config, progress)
    if info.folder and str(config.dataset).lower() != "synthetic":  # its batches are made for its task (feed.py)
        from ..models.hf_folder import SYNTHETIC_ONLY

        raise UserError(SYNTHETIC_ONLY)
    spec = synthetic_input(config)
    return datasets.load_dataset(config.dataset, model_spec=spec,
                                 image_size=config.image_size or info.preferred_image_size,
                                 seed=config.seed, progress=progress, synthetic_size=synthetic_size(spec, config))


def check_folder_data(config: RunConfig) -> None:
    """A model folder's data checked before anything runs: synthetic, or a text dataset for a causal LM whose files'
    first lines are examples and whose folder has a tokenizer (every line is read when the run tokenizes it)."""
    from ..models.hf_folder import SYNTHETIC_ONLY, read_folder

    if str(config.dataset).lower() == "synthetic":
        return
    if not is_text_dataset(config.dataset):
        raise UserError(SYNTHETIC_ONLY)
    from ..data import text, tokens
    from ..models.hf_model import TEXT_TASKS

    folder = read_folder(config.model)
    if folder.task not in TEXT_TASKS:
        raise UserError(f"{folder.architecture} is a {folder.task} model, and a text dataset trains a language "
                        "model (causal LM); use --dataset synthetic for it, or a causal LM folder.")
    text.check(config.dataset)
    tokens.check_tokenizer_files(folder.path)
    layout = config.options.get("text_layout")
    if layout is not None and layout not in tokens.LAYOUTS:
        raise UserError(f"Unknown text layout {printable(str(layout))[:40]!r}; choose packed or padded.")


def load_text_for(config: RunConfig, progress=None) -> datasets.LoadedDataset:
    """A text dataset for a language model folder, tokenized by its tokenizer at the run's sequence length (its
    default where the run gives none) in the layout its options name (text_layout; None: the data's default)."""
    from ..data.token_rows import load_text
    from ..models import hf_model

    shape = config.input_shape
    folder, spec = hf_model.spec_for(config.model, shape[0] if shape and len(shape) == 1 else None)
    check_folder_data(config)
    return load_text(config.dataset, folder.path, folder.vocab_size, spec.seq_len,
                     config.options.get("text_layout"), config.seed, progress)


def text_summary(name: str, model: str, seq_len: int | None = None, layout: str | None = None, seed: int = 0,
                 progress: Callable[[str, float], None] | None = None) -> dict:
    """What a text dataset holds for a model folder, as a front end shows it before anything runs: its examples
    and tokens by the folder's tokenizer, its sequences and split at the run's default length and layout (tokenized
    into the cache a run of the same setup then reuses), the first example's text, and one sentence."""
    from ..data import text
    from ..data.token_rows import load_text
    from ..models.hf_folder import read_folder

    folder = read_folder(model)
    if folder.task != "causal LM":
        raise UserError(f"'{printable(folder.path.name)}' is a {folder.task} model, and a text dataset trains a "
                        "language model (causal LM); choose a causal LM folder, or synthetic data.")
    length = seq_len or folder.default_seq_len()
    loaded = load_text(name, folder.path, folder.vocab_size, length, layout, seed, progress)
    info = loaded.text or {}
    val = len(loaded.val) if loaded.val is not None else 0
    examples = next((n for n in loaded.notes if "example" in n), "")
    sentence = (f"{loaded.name}: {info.get('training_tokens', 0):,} training tokens by "
                f"{printable(folder.path.name)}'s tokenizer, {info.get('layout')} in sequences of {length:,} "
                f"({len(loaded.train):,} training + {val:,} validation)")
    return {"name": loaded.name, "sentence": sentence, "preview": text.preview(text.find_files(name)),
            "seq_len": length, "layout": info.get("layout"), "training_tokens": info.get("training_tokens"),
            "train_rows": len(loaded.train), "val_rows": val, "vocab_size": folder.vocab_size,
            "notes": [examples, *loaded.notes[1:]] if examples else list(loaded.notes)}


def synthetic_size(spec, config: RunConfig) -> int:
    """How many synthetic samples to make: SYNTHETIC_SAMPLES, fewer where they would take more than SYNTHETIC_BYTES
    (large inputs: 1,024 images of 3x2048x2048 are 12 GiB), never fewer than two batches."""
    per_sample = math.prod(spec.sample_shape) * (1 if spec.kind == "image" else 8)  # uint8 pixels, int64 tokens
    return max(2 * config.batch, min(SYNTHETIC_SAMPLES, SYNTHETIC_BYTES // max(1, per_sample)))


def synthetic_input(config: RunConfig):
    """What one synthetic sample is for the config's model: the model's own input (a built-in's, or what a user's
    file declares: INPUT_SHAPE, NUM_CLASSES, VOCAB_SIZE), then --input-shape, --image-size (an image's height and
    width) and --num-classes over it. UserError where they do not fit the model."""
    from dataclasses import replace

    info = models.get_model_info(config.model)
    spec = info.default_spec
    synthetic = str(config.dataset).lower() == "synthetic"
    if info.declared is not None and info.declared.make_batch and not info.folder and (
            config.input_shape or config.num_classes or (config.image_size is not None and synthetic)):
        raise UserError(f"{_name(config.model)} makes its own batches (make_batch), so --input-shape, --image-size "
                        "and --num-classes do not reach it; drop them, or change what make_batch returns.")
    if config.input_shape:
        shape = tuple(config.input_shape)
        kind = "image" if len(shape) == 3 else "tokens"
        if kind not in info.input_kind:
            raise UserError(f"{_name(config.model)} takes {info.input_kind} input, not {'images' if kind == 'image' else 'tokens'}"
                            f" of shape {','.join(map(str, shape))}; give --input-shape as "
                            f"{'C,H,W' if 'image' in info.input_kind else 'L'}.")
        spec = models.spec_of(shape, spec.num_classes, spec.vocab_size or None)
    if config.image_size is not None and synthetic:
        if spec.kind != "image":
            raise UserError(f"--image-size sets the height and width of images, and {_name(config.model)} takes "
                            f"tokens here; give the sequence length with --input-shape L.")
        spec = replace(spec, height=config.image_size, width=config.image_size)
    if config.num_classes:
        spec = replace(spec, num_classes=config.num_classes)
    return spec


def _name(model: str) -> str:
    return model.replace("\\", "/").rsplit("/", 1)[-1]


@dataclass
class Prepared:
    """A run ready for its first step."""

    device: devices.Device
    data: datasets.LoadedDataset
    model_spec: DataSpec  # the input the model takes (models.input_spec_for)
    model: torch.nn.Module
    tdev: torch.device
    steps: Steps
    epochs: Epochs
    train: Any  # the training batch source (data/batches.py: its steps_per_epoch, its batches)
    memory_base: int  # CPU runs: the process's resident size before the model and batches
    env: dict
    meter: energy.Meter
    warm: int  # warm-up steps
    total: int  # all steps, warm-up included
    notes: list = field(default_factory=list)  # what the preflight before an MPS run found (preflight.py)

    @property
    def steps_per_epoch(self) -> int:
        return self.train.steps_per_epoch


def prepare(cfg: RunConfig, device: devices.Device | None, data: datasets.LoadedDataset | None,
            progress, check_stop: Callable[[], None], flush_denormal: bool, noted: dict, ranks=None) -> Prepared:
    """The run's device, data, model, steps, batches, environment and meter; UserError for bad input. `noted`
    gets the facts a failed run's summary still reports as soon as they are known (parameters, memory base,
    training-set size, dataset summary). `ranks`: a run on several GPUs (ranks.py): the model in DDP."""
    cfg.check_runs_here()
    dev = device or devices.resolve_device(cfg.device)
    probe.require(dev)  # "available but not working" now, not a misleading out-of-memory error later
    reason = precision.precision_unsupported_reason(dev, cfg.precision) if cfg.precision else None
    if reason:
        raise UserError(f"{cfg.precision} precision is not available on {dev.id}: {reason}.")
    info = models.get_model_info(cfg.model)
    data = data if data is not None else load_data(cfg, progress)
    if data.spec.kind not in info.input_kind:
        raise UserError(f"{cfg.model} takes {info.input_kind} input but {data.name} holds {data.spec.kind}; "
                        f"pick another model or dataset.")
    check_stop()
    memory_base = noted["memory_base"] = dev.in_use(dev.memory()) if dev.kind == "cpu" else 0
    model_spec = models.input_spec_for(cfg.model, data.spec)
    torch.manual_seed(cfg.seed)
    model = models.build_model(cfg.model, model_spec, cfg.options)
    noted["parameters"] = models.count_parameters(model)
    feed = feed_for(cfg)  # a model file's own make_batch and loss (its code runs here, in the run's process)
    check_stop()
    notes = []
    if dev.kind == "mps":  # before anything moves to the device: what it cannot hold, what it has no kernel for
        notes += _preflight(cfg, model, data, model_spec, noted, feed)
    tdev = torch.device(dev.torch_device or dev.id)
    model = model.to(tdev)
    if cfg.channels_last and data.spec.kind == "image":
        model = model.to(memory_format=torch.channels_last)
    if ranks is not None:
        model = ranks.wrap(model)
    steps = Steps(cfg, model, dev, tdev, model_spec.num_classes, feed)
    train, val = batch_sources(cfg, data, model_spec, tdev, feed)
    epochs = Epochs(cfg, model, steps.forward, steps.autocast, val, tdev, model_spec.num_classes, data)
    noted.update(train_size=data.train_count, dataset=data.summary() if not feed.made else
                 f"synthetic: batches made by make_batch in {feed.where}")
    if (cfg.early_stop_patience is not None or cfg.keep_best) and val is None:
        raise UserError(f"Early stopping and the best epoch watch the validation split, and {data.name} has "
                        "none; choose a dataset with one (a folder of images gets one) or turn them off.")
    if train.steps_per_epoch < 1:
        raise UserError(f"{data.name} has {data.train_count} training samples, fewer than one batch of "
                        f"{cfg.batch_size}; use a batch size of at most {data.train_count}.")
    env, meter = run_environment(cfg, dev, flush_denormal)
    if ranks is not None:
        env["ranks"] = ranks.describe()
    if cfg.steps is not None:
        warm, total = cfg.warmup_steps, cfg.warmup_steps + cfg.steps
    else:
        total = cfg.epochs * train.steps_per_epoch
        warm = min(cfg.warmup_steps, total - 1)
    if cfg.mode == "train" and cfg.accumulate > total:
        meter.close()
        raise UserError(f"Gradient accumulation over {cfg.accumulate} micro-batches needs at least that many "
                        f"steps, and this run has {total} (warm-up included); accumulate over fewer or run longer.")
    return Prepared(device=dev, data=data, model_spec=model_spec, model=model, tdev=tdev, steps=steps,
                    epochs=epochs, train=train, memory_base=memory_base, env=env, meter=meter, warm=warm,
                    total=total, notes=notes)


def _preflight(cfg: RunConfig, model, data, model_spec, noted: dict, feed) -> list[str]:
    """The notes of run/preflight.py for an MPS run (UserError for float64 the user did not choose to cast);
    the summary keeps them (`preflight`)."""
    from . import preflight
    from .steps import make_optimizer

    cast = preflight.check_dtypes(model, data, cfg.model, cfg.cast_float64)
    if feed.made or feed.own_loss:  # its own inputs and loss are not traced on the meta device
        ahead = {"no_mps_kernel": [], "traced": False, "note": None,
                 "reason": ("a Hugging Face folder's model" if is_model_folder(cfg.model) else
                            "a model fed by its file's make_batch or loss") + " is not traced before the run; the "
                           "inspection after it lists what fell back"}
    else:
        ahead = preflight.forecast(model, tuple(model_spec.sample_shape), model_spec.kind == "image",
                                   cfg.mode == "train", lambda m: make_optimizer(cfg, m), cfg.mps_fallback)
    noted["preflight"] = {"cast": cast, "no_mps_kernel": ahead["no_mps_kernel"], "traced": ahead["traced"],
                          "reason": ahead["reason"], "note": ahead["note"]}
    return [str(n) for n in (cast, ahead["note"]) if n]


def batch_sources(cfg: RunConfig, data, model_spec, tdev, feed=None):
    """(training batches, validation batches or None), uint8 samples normalised on the device; a model file's own
    make_batch gives them itself."""
    if feed is not None and feed.made:
        return MadeBatches(feed.make_batch, cfg.batch, tdev, cfg.seed, feed.where,
                           epoch_samples=len(data.train)), None
    if isinstance(data.train, TextRows):
        val = TextBatches(data.val, cfg.batch, tdev, shuffle=False, drop_last=False) if data.val else None
        return TextBatches(data.train, cfg.batch, tdev, seed=cfg.seed), val
    convert = InputConverter(data.spec, model_spec, data.mean, data.std, tdev, cfg.channels_last)
    if cfg.resident and not hasattr(data.train, "x"):
        need = len(data.train) * math.prod(data.spec.sample_shape)
        if need > RESIDENT_LIMIT_BYTES:
            raise UserError(f"{data.name} needs {need / 1024**3:.1f} GiB to keep on the device, more than the "
                            f"{RESIDENT_LIMIT_BYTES / 1024**3:.0f} GiB limit; turn off 'resident'.")
    train = make_batches(data.train, batch_size=cfg.batch, device=tdev, convert=convert, resident=cfg.resident,
                         workers=cfg.workers, synthetic=data.name == "synthetic", seed=cfg.seed)
    val = None
    if data.val is not None and len(data.val) > 0:
        val = make_batches(data.val, batch_size=cfg.batch, device=tdev, convert=convert, resident=cfg.resident,
                           workers=cfg.workers, train=False)
    return train, val


def run_environment(cfg: RunConfig, dev: devices.Device, flush_denormal: bool | None,
                    env: dict | None = None) -> tuple[dict, energy.Meter]:
    """What the result carries about where it ran, and the device's energy meter (described in env["energy"]).
    `env`: the machine's description read earlier (environment.environment()), else read now."""
    env = dict(env) if env else environment.environment()
    env["threads"] = torch.get_num_threads()
    env["tf32"] = cfg.tf32
    env["tf32_conv"] = cfg.tf32 or cfg.tf32_conv
    env["flush_denormal"] = flush_denormal
    env["device_name"] = dev.name
    env["memory_measure"] = dev.memory_measure()
    env["machine_label"] = environment.machine_label(env)
    env["host"] = host.conditions()
    env["process_memory"] = footprint.PROCESS_WORDS[footprint.process_memory()[1]]  # the memory plot's dotted line
    meter = energy.meter_for(dev.kind, dev.index, devices.cuda_uuid(dev))
    env["energy"] = meter.describe()
    return env, meter
