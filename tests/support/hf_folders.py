"""Tiny Hugging Face model folders in the real format (`save_pretrained`: config.json + model.safetensors), made by
the tests with random weights: nothing is downloaded. Configs of 2 layers and 32-64 hidden units."""

from __future__ import annotations

import json
from pathlib import Path


def bert_classifier(folder: Path, labels: int = 3) -> Path:
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=labels)
    return _save(BertForSequenceClassification(config), folder)


def gpt_causal_lm(folder: Path) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64)
    return _save(GPT2LMHeadModel(config), folder)


def vit_classifier(folder: Path) -> Path:
    from transformers import ViTConfig, ViTForImageClassification

    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       image_size=16, patch_size=8, num_channels=3, num_labels=4)
    return _save(ViTForImageClassification(config), folder)


def _save(model, folder: Path) -> Path:
    import torch

    torch.manual_seed(0)
    model.save_pretrained(str(folder))
    return folder


def edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
