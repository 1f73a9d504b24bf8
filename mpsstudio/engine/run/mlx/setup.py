"""Everything an MLX run needs before its first step, in order (bad input is one sentence, nothing timed): MLX and
its device, the data (the run's own batches, as PyTorch's run takes them), the PyTorch model built with the run's seed
and its MLX twin given its weights, parity on the first batch (a twin that differs is refused), the precision, the
steps, the environment (with MLX's version) and the device's energy meter."""

from __future__ import annotations

from ...basics.config import RunConfig
from ...basics.errors import UserError
from ...machine import mlx as mlx_machine
from ...models import registry as models
from ...models.catalog import mlx_twin_reason
from ...models.user import user_function
from ..setup import batch_sources, load_data, run_environment
from . import parity as parities
from .loop import MlxPrepared
from .steps import HALF_NOTE, MlxSteps, converter


def prepare(cfg: RunConfig, data, progress, check_stop, noted: dict) -> MlxPrepared:
    import mlx.core as mx
    import torch

    from ...models import mlx_twins

    cfg.check_runs_here()
    mlx_machine.set_tf32(cfg.tf32)  # before MLX's first matrix product: it reads MLX_ENABLE_TF32 once a process
    dev = mlx_machine.resolve(cfg.device)
    arithmetic = mlx_machine.arithmetic(dev.kind, cfg.tf32)
    mx.set_default_device(dev.mx_device())
    info = models.get_model_info(cfg.model)
    if info.folder:  # a Hugging Face folder: its MLX side is mlx-lm's model of it
        from .lm_setup import prepare_folder

        return prepare_folder(cfg, data, progress, check_stop, noted, dev, arithmetic)
    why = mlx_twin_reason(cfg.model)
    if why:
        raise UserError(why + ".")
    if info.declared is not None and (info.declared.make_batch or info.declared.loss):
        raise UserError(f"{cfg.model} makes its own batches or loss (make_batch, loss): PyTorch code, which an MLX run "
                        "cannot call; run it in PyTorch alone (--framework torch).")
    data = data if data is not None else load_data(cfg, progress)
    if data.spec.kind not in info.input_kind:
        raise UserError(f"{cfg.model} takes {info.input_kind} input but {data.name} holds {data.spec.kind}; "
                        f"pick another model or dataset.")
    check_stop()
    noted["memory_base"] = dev.in_use(dev.memory()) if dev.kind == "cpu" else 0
    spec = models.input_spec_for(cfg.model, data.spec)
    torch.manual_seed(cfg.seed)
    reference = models.build_model(cfg.model, spec)
    twin = mlx_twins.build_twin(cfg.model, spec, user_function)
    mx.random.seed(cfg.seed)
    mlx_twins.transfer(reference, twin)
    noted["parameters"] = mlx_twins.parameter_count(twin)
    noted.update(train_size=data.train_count, dataset=data.summary())
    train, val = batch_sources(cfg, data, spec, torch.device("cpu"))
    if train.steps_per_epoch < 1:
        raise UserError(f"{data.name} has {data.train_count} training samples, fewer than one batch of "
                        f"{cfg.batch_size}; use a batch size of at most {data.train_count}.")
    convert = converter(mlx_twins.layout_of(twin), spec.kind == "image")
    check_stop()
    x, y = next(iter(train.epoch()))
    found = parities.check(cfg, reference, twin, x, y, convert, lambda c, dtype: MlxSteps(c, twin, dtype),
                           reduced=arithmetic.reduced)
    noted["parity"] = found.record()
    parities.refuse(found, cfg.model)
    del reference
    dtype = {"bf16": mx.bfloat16, "fp16": mx.float16}.get(cfg.precision or "fp32", mx.float32)
    twin.train(cfg.mode == "train")
    steps = MlxSteps(cfg, twin, dtype)  # half precision: fp32 master weights, the step in the half type
    env, meter = run_environment(cfg, dev, None)
    env.update(framework="mlx", mlx=mlx_machine.mlx_version(), mlx_device=str(mx.default_device()),
               mlx_arithmetic=arithmetic.record(), mlx_env=mlx_machine.mlx_variables())  # MLX_* change what it computes
    if cfg.steps is not None:
        warm, total = cfg.warmup_steps, cfg.warmup_steps + cfg.steps
    else:
        total = cfg.epochs * train.steps_per_epoch
        warm = min(cfg.warmup_steps, total - 1)
    notes = [f"MLX {env['mlx']} on its {'CPU' if dev.kind == 'cpu' else 'GPU'}: {found.words()}."]
    if dtype != mx.float32:
        notes.append(HALF_NOTE.format(p=cfg.precision))
    elif dev.kind != "cpu" or cfg.tf32:
        notes.append(f"MLX's fp32: {arithmetic.words}.")
    if dev.kind == "cpu":
        notes.append("MLX's CPU backend keeps its own threads: the CPU threads setting is PyTorch's.")
    return MlxPrepared(device=dev, steps=steps, parameters=noted["parameters"], train=train, val=val, convert=convert,
                       env=env, meter=meter, warm=warm, total=total, parity=found.record(), notes=notes)
