"""A Hugging Face model folder built for a run (in its process): transformers' Auto class for the folder's task,
loaded from the folder alone (`local_files_only`, safetensors, no remote code), fine-tuned in full, with LoRA
adapters (peft) or as its head only, gradient checkpointing where asked; and the batches it takes: token ids of the
run's sequence length with their attention mask and the task's labels, or pixel values at the config's image size.
transformers and peft are optional (`mpsstudio[hf]`): without them a folder is refused with the install line."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable

import torch

from ..basics.errors import UserError
from ..basics.formatting import error_line
from ..basics.spec import DataSpec
from .hf_folder import INSTALL_HF, HfFolder, finetune_of, read_folder

# LoRA's target modules: the attention's query and value projections (the LoRA paper's choice, peft's default for
# the models it knows), found by the names transformers gives them, in this order (said with the run)
LORA_CONVENTIONS = (("q_proj", "v_proj"), ("query", "value"), ("q_lin", "v_lin"), ("c_attn",), ("query_key_value",),
                    ("qkv",), ("Wqkv",))
MASKED_FRACTION = 0.15
TEXT_TASKS = ("causal LM",)  # the tasks a text dataset trains (data/token_rows.py: next-token labels)


def transformers_module():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded, whatever the folder's files say
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import transformers
    except ImportError:
        raise UserError(f"A model folder needs transformers, safetensors and peft; {INSTALL_HF}.") from None
    transformers.utils.logging.disable_progress_bar()  # its "Loading weights" bar is no output of the user's
    return transformers


AUTO = {"sequence classification": "AutoModelForSequenceClassification", "causal LM": "AutoModelForCausalLM",
        "masked LM": "AutoModelForMaskedLM", "image classification": "AutoModelForImageClassification"}


def build(folder: HfFolder, spec: DataSpec, options: dict) -> torch.nn.Module:
    """The folder's model for its task, its weights the folder's, with the run's fine-tuning applied."""
    transformers = transformers_module()
    mode, rank, alpha, checkpointing = finetune_of(options)
    auto = getattr(transformers, AUTO[folder.task])
    try:
        model = auto.from_pretrained(str(folder.path), local_files_only=True, trust_remote_code=False,
                                     use_safetensors=True, dtype=torch.float32)
    except (Exception, SystemExit) as exc:
        raise UserError(f"transformers could not load '{folder.path.name}' ({error_line(exc, 200)}); check that "
                        "save_pretrained wrote it.") from exc
    # from_pretrained returns the model in eval mode; a model is built as nn.Module makes one, in training mode (its
    # dropout on), like every built-in: a tool's training steps (max-batch's probes) then train as a run does. Left
    # in eval mode, max-batch's longest sequence of GPT-2 small under 4 GiB read 1,448 tokens against 1,416
    # trained with dropout on (the lent H200; docs/benchmarks.md).
    model.train()
    if folder.task == "sequence classification" and getattr(model.config, "pad_token_id", None) is None:
        model.config.pad_token_id = 0  # batches without padding: any id, so a classifier takes batches above 1
    if checkpointing:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise UserError(f"{folder.architecture} has no gradient checkpointing in transformers; turn it off.")
        # transformers 5.24 renamed it (the old name warns FutureWarning); older releases have only the old one
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable()
    if mode == "head":  # (a language model's head is often its input embedding too, tied: it trains both)
        for p in model.parameters():
            p.requires_grad = False
        modules = dict(model.named_modules())
        for name in _head_names(model):
            for p in modules[name].parameters():
                p.requires_grad = True
    elif mode == "lora":
        try:
            import peft
        except ImportError:
            raise UserError(f"LoRA needs peft; {INSTALL_HF}.") from None
        targets = lora_targets(model)
        if not targets:
            raise UserError(f"LoRA found no attention projections to adapt in {folder.architecture} (none of "
                            f"{', '.join('/'.join(c) for c in LORA_CONVENTIONS)}); fine-tune it in full or its head.")
        task = {"causal LM": "CAUSAL_LM", "sequence classification": "SEQ_CLS"}.get(folder.task)
        config = peft.LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, task_type=task,
                                 modules_to_save=_head_names(model) if folder.task.endswith("classification") else None)
        try:
            with warnings.catch_warnings():  # peft asks transformers' deprecated is_gradient_checkpointing (5.24)
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
                model = peft.get_peft_model(model, config)
        except ValueError as exc:
            raise UserError(f"LoRA could not find its target modules in {folder.architecture} "
                            f"({error_line(exc, 160)}).") from exc
    return model


def lora_targets(model) -> list[str]:
    """The first naming convention whose projections all exist in the model (its leaf modules' last names)."""
    names = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if not any(True for _ in
                                                                                          module.children())}
    return next((list(c) for c in LORA_CONVENTIONS if set(c) <= names), [])


def _head_names(model) -> list[str]:
    """The task head's module names (what 'head' trains and LoRA trains in full): the output embedding of a language
    model, else the classifier."""
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    for name, module in model.named_modules():
        if module is out and out is not None:
            return [name]
    names = [n for n in ("classifier", "score", "lm_head", "cls", "pooler") if hasattr(model, n)]
    return names or [list(dict(model.named_children()))[-1]]


def trainable(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def batch_maker(folder: HfFolder, spec: DataSpec) -> Callable:
    """make_batch(batch_size, generator) -> (inputs with their labels, labels): what the model's task takes."""
    seq_len = spec.seq_len

    def make(batch_size: int, generator: torch.Generator):
        if folder.vision:
            pixels = torch.randn((batch_size, folder.channels, folder.image_size, folder.image_size),
                                 generator=generator)
            labels = torch.randint(0, folder.num_labels, (batch_size,), generator=generator)
            return {"pixel_values": pixels, "labels": labels}, labels
        ids = torch.randint(0, folder.vocab_size, (batch_size, seq_len), generator=generator)
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if folder.task == "sequence classification":
            labels = torch.randint(0, folder.num_labels, (batch_size,), generator=generator)
        elif folder.task == "causal LM":
            labels = ids.clone()
        else:  # masked LM: a fraction of the positions predicted, the rest ignored (-100)
            hidden = torch.rand((batch_size, seq_len), generator=generator) < MASKED_FRACTION
            hidden[:, 0] |= ~hidden.any(dim=1)  # at least one position a sample
            labels = torch.where(hidden, ids, torch.full_like(ids, -100))
        inputs["labels"] = labels
        return inputs, labels

    return make


def model_loss(outputs, targets) -> torch.Tensor:
    """The loss transformers computed from the labels the batch carries."""
    loss = getattr(outputs, "loss", None)
    if loss is None:
        raise UserError("The model computed no loss from its labels; its task head must take labels.")
    return loss


def spec_for(name: str, seq_len: int | None) -> tuple[HfFolder, DataSpec]:
    """The folder and the input it takes: (C, H, W) images at its image size, or `seq_len` tokens (its default)."""
    folder = read_folder(name)
    if folder.vision:
        return folder, DataSpec("image", folder.num_labels, channels=folder.channels, height=folder.image_size,
                                width=folder.image_size)
    length = seq_len or folder.default_seq_len()
    if folder.max_positions and length > folder.max_positions:
        raise UserError(f"{folder.architecture} takes at most {folder.max_positions:,} positions, not {length:,}; "
                        "give a shorter sequence length (--seq-len).")
    return folder, DataSpec("tokens", folder.num_labels, seq_len=length, vocab_size=max(2, folder.vocab_size))
