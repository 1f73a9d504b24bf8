"""The one run path of both front ends: a list of configs (one per device) over one loaded dataset.

Rules, the same for the CLI and the window:
- Everything that can be checked before a run starts is checked first (configs, model, devices, the dataset
  and whether one batch fits in it); a problem there raises UserError: one sentence, nothing recorded.
- Then each config runs in turn, never two devices at once. A run that fails or is stopped ends as a failed or
  cancelled RunResult (an Ended event) and the next device still runs, unless the user asked to stop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..data import datasets
from ..machine import devices, precision
from ..models import registry as models
from . import trainer
from .setup import check_folder_data, load_data
from ..machine.apple import MPS_COMPILE_NOTE
from ..basics.config import DEVICE_PATTERN, RunConfig, precision_note
from ..basics.spec import is_text_dataset
from ..basics.errors import UserError
from ..basics.events import Event
from ..basics.formatting import error_line, fmt_bytes, printable
from ..basics.request import RunRequest
from ..basics.results import RunResult
from ..basics.spec import DataSpec

Progress = Callable[[str, float], None]
MLX_TF32_NOTE = ("MLX's default on this GPU runs fp32 matrix products in TF32-class precision (MLX_ENABLE_TF32=1): MLX "
                 "runs twice on it, in full fp32 (like with like with PyTorch's fp32) and with its default, each "
                 "labelled.")


@dataclass
class Plan:
    """Configs that can run here (one per device, in order) and the devices left out, each with its reason."""

    configs: list[RunConfig]
    skipped: list[str] = field(default_factory=list)  # one sentence per device that cannot run this
    notes: list[str] = field(default_factory=list)  # what a user should know about the runs that will run


@dataclass(frozen=True)
class Here:
    """What a front end already found of this machine, so that planning does not probe it again (the window's
    catalogue): its devices, and MLX's reason per kind of device ("" where MLX runs). None: probed by the plan."""

    known: tuple[devices.Device, ...]
    mlx: Mapping[str, str] = field(default_factory=dict)

    def device(self, name: str) -> devices.Device:
        """The named device as resolve_device finds it (the same sentences), among those known."""
        text = name.strip().lower()
        if not DEVICE_PATTERN.fullmatch(text):
            return devices.resolve_device(text)  # its sentence for a name no machine has
        found = next((d for d in self.known if d.id == text or (text == "cuda" and d.kind == "cuda")), None)
        if found is None:
            raise UserError(f"{text} is not available: it is not among this machine's devices.")
        if not found.available:
            raise UserError(f"{found.id} is not available: {found.reason}.")
        return found

    def mlx_status(self, kind: str) -> str:
        return self.mlx.get(kind, "MLX was not checked on this device")

    def cuda_count(self) -> int:
        return sum(1 for d in self.known if d.kind == "cuda" and d.available)


def plan_request(request: RunRequest, here: Here | None = None) -> Plan:
    """The request's runs: plan() over its settings, devices, GPU counts and frameworks, and PyTorch's runs once
    per Python environment where it names several. UserError as plan() raises it."""
    out = plan(request.settings, request.devices, request.gpus, request.frameworks or None, here=here)
    if request.pythons:  # MLX runs in MPS Studio's own environment
        out.configs = [one for c in out.configs
                       for one in ([c.changed(python=p) for p in request.pythons] if c.framework == "torch"
                                   else [c.changed(python=None)])]
    return out


def plan(config: RunConfig, device_names: Sequence[str], gpus: Sequence[int] | None = (),
         frameworks: Sequence[str] | None = None, here: Here | None = None) -> Plan:
    """One config per named device that exists here and supports the config's precision; `gpus` (--gpus): the CUDA
    config once per number of GPUs (or, where no CUDA device is named, the CPU's once per number of processes).
    `frameworks` (--framework torch,mlx): each device's config once per framework, PyTorch's first (default: the
    config's own); a framework that cannot run on a device here is left out with the reason, like a device.

    Raises UserError when the config is invalid, the model unknown, or no named device can run it.
    """
    config.check_runs_here()
    info = models.get_model_info(config.model)  # an unknown model is bad input before anything runs
    if info.folder:
        check_folder_data(config)
    elif is_text_dataset(config.dataset) and not config.is_script:
        from pathlib import Path

        raise UserError(f"'{printable(Path(str(config.dataset)).name)[:80]}' is text, which trains a Hugging Face "
                        f"language model folder (--model FOLDER: its config.json, weights and tokenizer); "
                        f"{printable(Path(str(config.model)).name)[:80]} has no tokenizer to read it with.")
    names = [n.strip() for n in device_names if n and n.strip()]
    if not names:
        raise UserError("No devices given; name at least one of cpu, mps, cuda.")
    chosen = check_frameworks(frameworks or [config.framework])
    if config.options.get("quantize") is not None:
        check_quantize(config, info.folder, chosen)
    if chosen != ["torch"]:
        return _by_framework(config, names, chosen, gpus, here)
    return _by_device(config.changed(framework="torch") if config.framework != "torch" else config, names, gpus,
                      here=here)


def check_quantize(config: RunConfig, folder: bool, frameworks: list[str]) -> None:
    """--quantize is the MLX side's (mlx-lm's 4- or 8-bit weights of a model folder); UserError where it cannot be."""
    from ..models.mlx_lm_folder import quantize_of

    bits = quantize_of(config.options)
    if not folder:
        raise UserError(f"--quantize {bits} quantizes a Hugging Face model folder's weights in mlx-lm; "
                        f"{printable(str(config.model))[:80]} is not one: drop --quantize.")
    if "mlx" not in frameworks:
        raise UserError(f"--quantize {bits} quantizes the MLX side's weights (mlx-lm's); PyTorch has no such "
                        "training path here (bitsandbytes has no MPS build): add --framework torch,mlx or mlx.")


def quantize_note(config: RunConfig) -> str:
    """What a plan says where the MLX side is quantized and PyTorch's is not ("" where nothing is)."""
    bits = config.options.get("quantize")
    if bits is None:
        return ""
    return (f"MLX's side trains LoRA on {bits}-bit weights (mlx-lm's QLoRA); PyTorch's keeps {config.precision_words} "
            "weights: not the same arithmetic, compared as what each framework offers (parity is checked before "
            "quantizing).")


def check_frameworks(frameworks: Sequence[str]) -> list[str]:
    """--framework's names, checked ("pytorch" is torch), PyTorch first; UserError for an unknown one."""
    from ..basics.frameworks import FRAMEWORKS

    out = []
    for name in frameworks:
        key = str(name).strip().lower()
        key = "torch" if key == "pytorch" else key
        if key not in FRAMEWORKS:
            raise UserError(f"Unknown framework {printable(str(name))[:40]!r}; choose torch, mlx or both "
                            "(--framework torch,mlx).")
        if key not in out:
            out.append(key)
    if not out:
        raise UserError("No framework given; name torch, mlx or both (--framework torch,mlx).")
    return sorted(out, key=lambda k: k != "torch")


def _by_framework(config: RunConfig, names: list[str], frameworks: list[str], gpus, here: Here | None) -> Plan:
    """Each device once per framework: PyTorch's configs as _by_device makes them, MLX's where MLX runs there."""
    from ..basics.frameworks import run_label
    from ..machine import mlx as mlx_machine

    if gpus:
        raise UserError("Several GPUs at once (--gpus, or the window's CUDA GPUs) run PyTorch's DDP; compare "
                        "frameworks on one device at a time.")
    out = Plan(configs=[])
    for framework in frameworks:
        cfg = config.changed(framework=framework).check_runs_here()
        if framework == "torch":  # a quantized MLX side's PyTorch run keeps its weights as they are
            cfg = cfg.changed(options={k: v for k, v in cfg.options.items() if k != "quantize"})
            part = _by_device(cfg, names, gpus, strict=False, here=here)
            if quantize_note(config) and "torch" in frameworks and len(frameworks) > 1:
                part.notes.append(quantize_note(config))
        else:
            part = Plan(configs=[])
            from ..models.catalog import mlx_twin_reason

            why = mlx_twin_reason(config.model, config.options)
            for name in dict.fromkeys(n.lower() for n in names):
                kind = name.split(":")[0]
                label = run_label("mlx", kind)
                reason = why or (here.mlx_status(kind) if here is not None else mlx_machine.status(kind))
                if reason:
                    part.skipped.append(f"skipping {label}: {reason.rstrip('.')}.")
                elif kind not in (c.device.split(":")[0] for c in part.configs):
                    part.configs.append(cfg.with_device(kind))
                    if kind == "mps" and not cfg.tf32 and mlx_machine.tf32_class_path(kind):
                        # MLX's default here is TF32-class fp32 products: timed too, beside full fp32 (like PyTorch's)
                        part.configs.append(cfg.changed(device=kind, tf32=True))
                        part.notes.append(MLX_TF32_NOTE)
        out.configs += part.configs
        out.skipped += part.skipped
        out.notes += [n for n in part.notes if n not in out.notes]
    if not out.configs:
        why = "; ".join(line.removeprefix("skipping ").rstrip(".") for line in out.skipped)
        raise UserError(f"None of the devices can run this ({why}); see `mpsstudio devices` for what is available.")
    return out


def _by_device(config: RunConfig, names: list[str], gpus, strict: bool = True, here: Here | None = None) -> Plan:
    out = Plan(configs=[])
    for name in dict.fromkeys(names):
        try:
            dev = here.device(name) if here is not None else devices.resolve_device(name)
        except UserError as exc:
            out.skipped.append(f"skipping {name}: {exc}")
            continue
        reason = precision.precision_unsupported_reason(dev, config.precision) if config.precision else ""
        if reason:  # (a script's precision is its own: None until read from it)
            out.skipped.append(f"skipping {dev.id}: {config.precision} is not available there: {reason}.")
            continue
        if dev.id not in (c.device for c in out.configs):
            out.configs.append(config.with_device(dev.id))
            if config.compile and dev.kind == "mps":
                out.notes.append(MPS_COMPILE_NOTE)
            for note in (precision_note(config.with_device(dev.id)), precision.precision_caveat(dev, config.precision)):
                if note and note not in out.notes:
                    out.notes.append(note if note.endswith(".") else note + ".")
    if gpus and out.configs:
        _on_gpus(out, list(gpus), here)
    if not out.configs and strict:
        why = "; ".join(line.removeprefix("skipping ").rstrip(".") for line in out.skipped)
        raise UserError(f"None of the devices can run this ({why}); "
                        f"see `mpsstudio devices` for what is available.")
    return out


def _on_gpus(out: Plan, counts: list[int], here: Here | None = None) -> None:
    """Each count of GPUs as a config of its own (in the order given: a scaling sweep interleaves them)."""
    target = next((c for c in out.configs if c.device.startswith("cuda")), None)
    if target is None:
        target = next((c for c in out.configs if c.device == "cpu"), None)
        if target is not None and any(n > 1 for n in counts):
            out.notes.append("--gpus without a CUDA device runs processes on this CPU, sharing its cores: to try the "
                             "distributed path, not to measure a speedup.")
    if target is None:
        out.skipped.append(f"skipping --gpus: it needs CUDA GPUs (or the CPU), and the devices here are "
                           f"{', '.join(c.device for c in out.configs)}.")
        return
    if target.device.startswith("cuda"):
        if here is not None:
            have = here.cuda_count()
        else:
            import torch

            have = torch.cuda.device_count()
        for n in [n for n in counts if n > have]:
            out.skipped.append(f"skipping {n} GPUs: this machine has {have}.")
        counts = [n for n in counts if n <= have]
    if target.device.startswith("cuda"):  # the CUDA devices named are the one CUDA setup, run on N GPUs at once
        out.configs = [c for c in out.configs if c is target or not c.device.startswith("cuda")]
    where = out.configs.index(target)
    out.configs[where:where + 1] = [replace(target, gpus=n, device="cuda" if target.device.startswith("cuda")
                                            else target.device, options=dict(target.options)).validate()
                                    for n in counts]


def prepare_data(configs: Sequence[RunConfig], progress: Progress | None = None) -> datasets.LoadedDataset:
    """Check the configs and load their (shared) dataset once; UserError for anything that stops every run."""
    if not configs:
        raise UserError("Nothing to run: check at least one available device.")
    first = configs[0]
    if any(c.changed(framework=first.framework).comparison_key() != first.comparison_key() for c in configs):
        raise ValueError("configs run together must differ only by device and framework")
    for c in configs:
        c.check_runs_here()
    models.get_model_info(first.model)
    try:
        data = load_data(first, progress=progress)
    except UserError:
        raise
    except Exception as exc:  # an unreadable file deep in a dataset: still one sentence, nothing recorded
        raise UserError(f"The dataset {first.dataset} could not be loaded ({error_line(exc)}); "
                        "check its files.") from exc
    count = data.train_count
    if count < first.batch:
        raise UserError(f"{data.name} has {count:,} training samples, fewer than one batch of "
                        f"{first.batch:,}; use a batch size of at most {count:,}.")
    _check_batch_memory(first, data)
    return data


def _check_batch_memory(config: RunConfig, data: datasets.LoadedDataset) -> None:
    """Refuse, before anything is decoded, a batch that cannot fit in memory (a huge --image-size, say)."""
    import math

    import psutil

    spec = models.input_spec_for(config.model, data.spec)
    values = math.prod(spec.sample_shape) * config.batch
    need = values * (1 + 4 + 4)  # decoded uint8, the float32 input, and at least as much again for the model
    free = psutil.virtual_memory().available
    if need > free:
        what = "x".join(str(v) for v in spec.sample_shape)
        raise UserError(f"One batch of {config.batch_size:,} samples of {what} needs about {fmt_bytes(need)}, more "
                        f"than the {fmt_bytes(free)} of memory free; use a smaller batch size"
                        + (" or image size." if spec.kind == "image" else "."))


def run_configs(configs: Sequence[RunConfig], *, on_event: Callable[[Event], None] | None = None,
                should_stop: Callable[[], bool] | None = None, progress: Progress | None = None,
                data: datasets.LoadedDataset | None = None) -> list[RunResult]:
    """Run each config in turn over one dataset; returns the results of the runs that started.

    Raises UserError (before any run starts) for bad input: see the module docstring.
    """
    stop = should_stop or (lambda: False)
    if data is None:
        data = prepare_data(configs, progress)
    results = []
    for i, cfg in enumerate(configs, start=1):
        if stop():
            break
        results.append(trainer.run(cfg, data=data, on_event=on_event, should_stop=stop, progress=progress,
                                   position=(i, len(configs))))
    return results


def run_one(config: RunConfig, *, position: tuple[int, int] = (1, 1), on_event: Callable[[Event], None] | None = None,
            should_stop: Callable[[], bool] | None = None, progress: Progress | None = None,
            prepared: Callable[[], None] | None = None, save_model: str | None = None) -> RunResult:
    """One config, its data loaded here: what a run's process does (engine/process/). UserError as prepare_data;
    `prepared()` is called once the setup checks have passed, before any of the model's code runs. A
    KeyboardInterrupt inside the run is the model's (the process gets no Ctrl-C): a failed run."""
    if config.is_script:  # a user's own training script, measured from its steps (run/script.py)
        from .script.runner import run_script

        return run_script(config, on_event=on_event or (lambda event: None),
                          should_stop=should_stop or (lambda: False), prepared=prepared)
    if config.distributed:  # several GPUs: torchrun's ranks, each running this loop (run/distributed.py)
        from .distributed import run_ranks

        config.check_runs_here()
        models.get_model_info(config.model)
        return run_ranks(config, on_event or (lambda event: None), should_stop or (lambda: False), prepared)
    data = prepare_data([config], progress)
    if prepared is not None:
        prepared()
    return trainer.run(config, data=data, on_event=on_event, should_stop=should_stop, progress=progress,
                       position=position, interrupt_is_user=False, save_model=save_model)


@dataclass
class ModelProbe:
    """What checking a model found: its parameter count, and the shapes of one forward pass."""

    parameters: int
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]


def probe_model(model: str, data_spec: DataSpec) -> ModelProbe:
    """Build `model` for data shaped like `data_spec` on the CPU, count its parameters and check that one
    forward pass of two samples returns logits (2, num_classes). Runs a user's file: call it in a run process.
    """
    import torch

    spec = models.input_spec_for(model, data_spec)
    torch.manual_seed(0)
    built = models.build_model(model, spec)
    if spec.kind == "image":
        x = torch.zeros((2, *spec.sample_shape))
    else:
        x = torch.zeros((2, *spec.sample_shape), dtype=torch.long)
    built.eval()
    try:
        with torch.no_grad():
            out = built(x)
    except Exception as exc:
        raise UserError(f"{model} failed on a batch of two {spec.describe()} samples "
                        f"({error_line(exc, 200)}); fix its forward.") from exc
    parameters = models.count_parameters(built)  # after the forward pass: lazy layers have their shapes
    got = tuple(out.shape) if isinstance(out, torch.Tensor) else None
    if got != (2, spec.num_classes):
        raise UserError(f"{model} returned {got if got else type(out).__name__} for 2 samples; MPS Studio needs "
                        f"logits of shape (N, num_classes), here (2, {spec.num_classes}).")
    return ModelProbe(parameters=parameters, input_shape=tuple(x.shape), output_shape=got)
