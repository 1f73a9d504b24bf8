"""Everything an MLX run of a model folder needs before its first step (setup.py's order, for a language model):
the folder read by mlx-lm (models/mlx_lm_folder.py), its PyTorch model built as a PyTorch run builds it (the run's
seed, peft's LoRA where asked) and mlx-lm's LoRA given peft's initial adapters, the run's own batches (its text, or
the batches made for its task: the same as PyTorch's, converted outside the timed step), parity on the first batch
(lm_parity.py: a folder whose two models differ is refused, naming where), then the precision and the steps.

What the two frameworks' models do not share is said with the run: mlx-lm's models have no dropout (the folder's
config may give PyTorch's some), and the attention mask is not passed to mlx-lm (the text's padding is at the end
of a row, after every learnt token, so a causal model's learnt positions never see it)."""

from __future__ import annotations

from typing import Any

from ...basics.config import RunConfig
from ...basics.errors import UserError
from ...machine import mlx as mlx_machine
from ...models import hf_model, mlx_lm_folder
from ...models.hf_folder import finetune_of
from ...models import registry as models
from ..feed import feed_for
from ..setup import batch_sources, load_data, run_environment
from . import parity as parities
from .lm_parity import check
from .loop import MlxPrepared
from .steps import HALF_NOTE, MlxSteps

# the config fields that turn dropout on in transformers' models (GPT-2's, Llama's, ...): said where any is above 0
DROPOUT_FIELDS = ("attn_pdrop", "resid_pdrop", "embd_pdrop", "attention_dropout", "hidden_dropout", "dropout",
                  "hidden_dropout_prob", "attention_probs_dropout_prob")


def token_converter():
    """(a batch's inputs: transformers' dict, or token ids; MLX dtype) -> the token ids as an MLX int32 array."""
    import mlx.core as mx

    def convert(x, dtype=None):
        ids = x["input_ids"] if isinstance(x, dict) else x
        return mx.array(ids.numpy().astype("int32"))

    return convert


def prepare_folder(cfg: RunConfig, data, progress, check_stop, noted: dict, dev, arithmetic) -> MlxPrepared:
    import mlx.core as mx
    import torch

    why = mlx_lm_folder.plan_reason(cfg.model, cfg.options)
    if why:
        raise UserError(f"This folder cannot run in MLX: {why}; run it in PyTorch alone (--framework torch).")
    shape = cfg.input_shape
    folder, spec = hf_model.spec_for(cfg.model, shape[0] if shape and len(shape) == 1 else None)
    data = data if data is not None else load_data(cfg, progress)
    check_stop()
    noted["memory_base"] = dev.in_use(dev.memory()) if dev.kind == "cpu" else 0
    model_spec = models.input_spec_for(cfg.model, data.spec)
    torch.manual_seed(cfg.seed)
    reference = models.build_model(cfg.model, model_spec, cfg.options)  # as a PyTorch run builds it
    loaded = mlx_lm_folder.load(folder.path)
    mode, rank, alpha, _ = finetune_of(cfg.options)
    notes = [f"mlx-lm {mlx_lm_folder.mlx_lm_version()} reads {folder.architecture} ({loaded.model_type})"
             + (f"; {'; '.join(loaded.notes)}" if loaded.notes else "") + "."]
    if mode == "lora":
        peft_config: Any = getattr(reference, "peft_config")
        targets = sorted(peft_config["default"].target_modules)  # peft's, as hf_model.build chose them
        trainable = mlx_lm_folder.add_lora(loaded, reference, rank, alpha, targets)
        notes.append(f"LoRA in mlx-lm's tuner: rank {rank}, scale {alpha / rank:g} (alpha {alpha} / rank, as peft's), "
                     f"on {', '.join(targets)} of every block, no dropout; its adapters start as peft's.")
    else:
        trainable = _count(loaded.model.trainable_parameters())
    model = loaded.model
    noted["parameters"] = _count(model.parameters())
    noted.update(train_size=data.train_count, dataset=data.summary())
    feed = feed_for(cfg)
    train, val = batch_sources(cfg, data, model_spec, torch.device("cpu"), feed)
    if train.steps_per_epoch < 1:
        raise UserError(f"{data.name} has {data.train_count} training samples, fewer than one batch of "
                        f"{cfg.batch_size}; use a batch size of at most {data.train_count}.")
    convert = token_converter()
    check_stop()
    x, labels = next(iter(train.epoch()))
    found = check(cfg, reference, loaded, x["input_ids"], labels, reduced=arithmetic.reduced)
    parity = noted["parity"] = found.record()
    parities.refuse(found, cfg.model)
    bits = mlx_lm_folder.quantize_of(cfg.options)
    if bits:  # after parity: the check is of the folder's own weights, which quantizing changes on purpose
        quantized = quantize_after_parity(loaded, bits, convert(x), labels)
        parity = {**parity, "quantized": quantized}  # the run's record; a refusal's (noted) has none
        notes.append(quantized_words(quantized))
    dropout = sorted(k for k in DROPOUT_FIELDS if isinstance(getattr(reference.config, k, None), float)
                     and getattr(reference.config, k) > 0)
    del reference
    dtype = {"bf16": mx.bfloat16, "fp16": mx.float16}.get(cfg.precision or "fp32", mx.float32)
    model.train(cfg.mode == "train")
    steps = MlxSteps(cfg, model, dtype, lm=True)
    env, meter = run_environment(cfg, dev, None)
    env.update(framework="mlx", mlx=mlx_machine.mlx_version(), mlx_lm=mlx_lm_folder.mlx_lm_version(),
               mlx_device=str(mx.default_device()), mlx_arithmetic=arithmetic.record(),
               mlx_env=mlx_machine.mlx_variables())
    if cfg.steps is not None:
        warm, total = cfg.warmup_steps, cfg.warmup_steps + cfg.steps
    else:
        total = cfg.epochs * train.steps_per_epoch
        warm = min(cfg.warmup_steps, total - 1)
    notes.insert(0, f"MLX {env['mlx']} on its {'CPU' if dev.kind == 'cpu' else 'GPU'}: {found.words()}.")
    if dropout:
        notes.append(f"mlx-lm's {loaded.model_type} has no dropout; the folder's config gives PyTorch's "
                     f"({', '.join(dropout)}), so the PyTorch run of it computes dropout this one does not "
                     "(parity is checked with it off).")
    if dtype != mx.float32:
        notes.append(HALF_NOTE.format(p=cfg.precision))
    elif dev.kind != "cpu" or cfg.tf32:
        notes.append(f"MLX's fp32: {arithmetic.words}.")
    text = data.text
    per_sample = float(text["tokens_per_sample"]) if text is not None else float(spec.seq_len)
    return MlxPrepared(device=dev, steps=steps, parameters=noted["parameters"], train=train, val=val, convert=convert,
                       env=env, meter=meter, warm=warm, total=total, parity=parity, notes=notes,
                       tokens_per_sample=per_sample, seq_len=spec.seq_len, text=text, trainable=trainable)


def quantize_after_parity(loaded, bits: int, x, labels) -> dict:
    """The model quantized (mlx_lm_folder.quantize), with what it changed: its parameters' bytes, and the first
    batch's next-token loss before and after in fp32 (the quality quantizing costs on the user's text, beside the
    run's validation loss). x, labels: the first batch's ids as MLX and PyTorch arrays."""
    import mlx.core as mx

    from .steps import labels_of, next_token_loss

    model = loaded.model
    y = labels_of(labels)
    before = next_token_loss(model(x), y)
    mx.eval(before)
    facts = mlx_lm_folder.quantize(loaded, bits).record()
    after = next_token_loss(model(x), y)
    mx.eval(after)
    facts.update(loss_before=before.item(), loss_after=after.item())
    return facts


def quantized_words(q: dict) -> str:
    """The note of a quantized run: "Quantized as mlx-lm's convert -q does: 4-bit weights (affine, groups of 64) in
    16 layers, parameters 1.2 MiB -> 0.4 MiB; the first batch's loss 5.578 -> 5.590 (+0.2 %). Not PyTorch's
    arithmetic: ..."."""
    change = (q["loss_after"] / q["loss_before"] - 1) if q["loss_before"] else 0.0
    return (f"Quantized as mlx-lm's convert -q does: {q['bits']}-bit weights {mlx_lm_folder.quantized_words(q)}; "
            f"the first batch's loss {q['loss_before']:.4f} -> {q['loss_after']:.4f} ({change:+.1%}). Not PyTorch's "
            "arithmetic: parity was checked before quantizing, and the LoRA adapters train on the quantized weights "
            "(QLoRA).")


def _count(tree) -> int:
    from ...models.mlx_twins import flat

    return sum(v.size for _, v in flat(tree))
