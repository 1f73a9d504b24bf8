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


PATTERN_TEXT = ("the cat sat on the mat and the dog ran to the park. " * 3 + "\n"
                "one two three four five six seven eight nine ten.\n\n") * 60  # a pattern a tiny model learns


def tokenizer_for(folder: Path, text: str = PATTERN_TEXT, vocab: int = 200):
    """A byte-level BPE tokenizer trained here on `text` (in a second), with end, padding and a chat template,
    saved into the folder as save_pretrained writes it (tokenizer.json, tokenizer_config.json,
    chat_template.jinja)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, special_tokens=["<unk>", "<pad>", "<eos>", "<bos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([text], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>",
                                   bos_token="<bos>")
    fast.chat_template = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<eos>{% endfor %}"
                          "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    fast.save_pretrained(str(folder))
    return fast


def gpt_text_lm(folder: Path, positions: int = 128) -> Path:
    """A GPT-2 causal LM with its own tokenizer (vocabulary 300: the tokenizer's ids and room above them)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer_for(folder)
    config = GPT2Config(vocab_size=300, n_embd=32, n_layer=2, n_head=2, n_positions=positions, bos_token_id=3,
                        eos_token_id=2, pad_token_id=1)
    return _save(GPT2LMHeadModel(config), folder)


def llama_text_lm(folder: Path, positions: int = 128, hidden: int = 32, dtype: str = "float32") -> Path:
    """A Llama-style causal LM (rotary positions, grouped-query attention, SwiGLU) with its own tokenizer; `dtype`:
    the type its weights are saved in ("bfloat16", as most of the hub's are)."""
    import torch

    from transformers import LlamaConfig, LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer_for(folder)
    config = LlamaConfig(vocab_size=300, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions,
                         bos_token_id=3, eos_token_id=2, pad_token_id=1)
    return _save(LlamaForCausalLM(config).to(getattr(torch, dtype)), folder)
