"""A language model folder on the user's own text (data/text.py, tokens.py, token_rows.py): tiny GPT-2 and
Llama-style folders with a tokenizer trained here, a .txt and a chat .jsonl; trained in full and with LoRA under
the engine, validation loss and perplexity measured, tokens/s counting real tokens; each bad file one sentence."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.events import Started
from mpsstudio.engine.data import text, token_rows, tokens
from mpsstudio.engine.run import session, trainer
from tests.support import hf_folders

CHAT = [{"messages": [{"role": "user", "content": f"count to {n}"},
                      {"role": "assistant", "content": " ".join("one two three four five six".split()[:n])}]}
        for n in (2, 3, 4, 5, 6) for _ in range(30)]


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    root = tmp_path_factory.mktemp("lm")
    (root / "pattern.txt").write_text(hf_folders.PATTERN_TEXT)
    (root / "chat.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHAT))
    return {"gpt": hf_folders.gpt_text_lm(root / "gpt"), "llama": hf_folders.llama_text_lm(root / "llama"),
            "txt": root / "pattern.txt", "chat": root / "chat.jsonl", "root": root}


def run(model, dataset, on_event=None, **changes):
    config = dict(model=str(model), dataset=str(dataset), epochs=3, warmup_steps=2, batch_size=8,
                  optimizer="adamw", lr=3e-3, input_shape=[32])
    return trainer.run(RunConfig(**{**config, **changes}), on_event=on_event)


@pytest.mark.parametrize("name", ["gpt", "llama"])
def test_full_fine_tuning_learns_the_pattern_and_says_its_perplexity(lm, name):
    result = run(lm[name], lm["txt"])
    assert result.status == "finished", result.error
    losses = [e.val_loss for e in result.epochs]
    assert losses[-1] < 0.6 * losses[0], losses  # a known pattern: it is learnt
    for epoch in result.epochs:
        assert epoch.val_perplexity == pytest.approx(math.exp(epoch.val_loss))
    s = result.summary
    assert s.val_perplexity == pytest.approx(math.exp(s.val_loss)) and s.val_perplexity < 3
    assert s.text_layout == "packed" and s.seq_len == 32 and s.tokens_per_sample == 32
    assert s.tokens_per_s == pytest.approx(s.samples_per_s * 32)
    assert "every position" in s.tokens_measure and "next-token" in s.accuracy_measure
    assert "packed" in s.dataset and "validation" in s.dataset


@pytest.mark.parametrize("name", ["gpt", "llama"])
def test_lora_on_chat_counts_real_tokens_only(lm, name):
    events: list = []
    result = run(lm[name], lm["chat"], events.append, input_shape=[64], options={"finetune": "lora"}, epochs=2)
    assert result.status == "finished", result.error
    s = result.summary
    [started] = [e for e in events if isinstance(e, Started)]  # the loss plot's tokens axis, live and stored
    assert started.tokens_per_step == pytest.approx(8 * s.tokens_per_sample) == s.tokens_per_step
    assert s.trainable_parameters < s.parameters / 2 and s.text_layout == "padded"
    # the real tokens a sequence, counted here with the folder's tokenizer from the file itself
    tokenizer = tokens.load_tokenizer(lm[name], 300)
    lengths = [len(tokenizer(tokenizer.apply_chat_template(c["messages"], tokenize=False),
                             add_special_tokens=False)["input_ids"]) for c in CHAT]
    assert 0 < s.tokens_per_sample < 64
    assert s.tokens_per_sample == pytest.approx(np.mean(lengths), rel=0.1)  # (the training split's mean)
    assert s.tokens_per_s == pytest.approx(s.samples_per_s * s.tokens_per_sample)
    assert "padding not counted" in s.tokens_measure
    assert s.val_loss is not None and s.val_perplexity == pytest.approx(math.exp(s.val_loss))
    assert result.epochs[-1].val_loss <= result.epochs[0].val_loss + 1e-6


def test_chat_labels_mask_the_prompt_and_the_padding(lm):
    data = token_rows.load_text(str(lm["chat"]), lm["gpt"], 300, 64)
    tokenizer = tokens.load_tokenizer(lm["gpt"], 300)
    inputs, labels = data.train[0]
    ids, mask = inputs["input_ids"].tolist(), inputs["attention_mask"].tolist()
    length = sum(mask)
    text_of = tokenizer.decode(ids[:length])
    assert text_of.startswith("<|user|>count to") and text_of.endswith("<eos>")
    learnt = [i for i, v in enumerate(labels.tolist()) if v != tokens.IGNORE]
    answer = tokenizer.decode([ids[i] for i in learnt])
    assert answer.strip().startswith("one two") and "count to" not in answer  # the prompt is never learnt
    assert all(v == tokens.IGNORE for v in labels.tolist()[length:])  # nor the padding
    assert "labels masked on prompts" in " ".join(data.notes)


def test_prompt_completion_and_a_folder_with_its_own_validation_file(lm, tmp_path):
    rows = [{"prompt": f"Q{n}: what follows {n}?", "completion": f" {n + 1}"} for n in range(40)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:30]))
    (tmp_path / "valid.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[30:]))
    data = token_rows.load_text(str(tmp_path), lm["gpt"], 300, 32)
    assert len(data.train) == 30 and len(data.val) == 10
    assert "validation from its own files" in data.notes
    _, labels = data.train[0]
    assert (labels != tokens.IGNORE).sum() < 6  # the completion and its end only


def test_a_sequence_of_one_token_is_refused(lm):
    with pytest.raises(UserError, match="A sequence of 1 token has no next token to learn"):
        token_rows.load_text(str(lm["txt"]), lm["gpt"], 300, 1)


def test_the_tokenized_text_is_cached_by_content(lm, tmp_path):
    file = tmp_path / "a.txt"
    file.write_text(hf_folders.PATTERN_TEXT)
    first = token_rows.load_text(str(file), lm["gpt"], 300, 32)
    again = token_rows.load_text(str(file), lm["gpt"], 300, 32)
    assert "(now)" in first.notes[0] and "(from the cache)" in again.notes[0]
    assert first.text["cache"] == again.text["cache"]
    file.write_text(hf_folders.PATTERN_TEXT + "a new line\n")
    changed = token_rows.load_text(str(file), lm["gpt"], 300, 32)
    assert "(now)" in changed.notes[0] and changed.text["cache"] != first.text["cache"]
    other_length = token_rows.load_text(str(file), lm["gpt"], 300, 16)
    assert other_length.text["cache"] != changed.text["cache"] and len(other_length.train) > len(changed.train)


BAD_FILES = {
    "binary.txt": (b"\x00\x01\x02 binary", "is not text (it holds binary data)"),
    "latin1.txt": ("caf\xe9 au lait\n".encode("latin-1"), "is not UTF-8 text (line 1"),
    "list.jsonl": (b'{"text": "fine"}\n[1, 2]\n', "Line 2 of 'list.jsonl' is a list, not a JSON object"),
    "broken.jsonl": (b'{"text": "fine"}\n{"text": \n', "Line 2 of 'broken.jsonl' is not JSON"),
    "nofield.jsonl": (b'{"body": "no text field"}\n', "has no \"text\" field (nor messages, nor prompt and "
                      "completion; its fields: body)"),
    "number.jsonl": (b'{"text": 42}\n', "has \"text\" = a number, not a string"),
    "null.jsonl": (b'{"text": null}\n', "has \"text\" = null, not a string"),
    "utf16.txt": ("hello\n".encode("utf-16"), "is UTF-16 text; save it as UTF-8"),
    "mixed.jsonl": (b'{"text": "a"}\n{"prompt": "b", "completion": "c"}\n', "Line 2 of 'mixed.jsonl' holds prompt "
                    "where the lines before held text"),
    "half.jsonl": (b'{"prompt": "b"}\n', "has no \"completion\""),
    "badchat.jsonl": (b'{"messages": [{"role": "user"}]}\n', "message 1 is not an object with a \"role\" and a "
                      "\"content\""),
    "empty.txt": (b"", "is empty"),
    "blank.jsonl": (b"\n\n  \n", "is empty"),
    "table.csv": (b"a,b\n", "is not a text dataset MPS Studio reads"),
    "short.txt": (b"tiny\n", "fewer than one sequence of 32"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_each_bad_file_is_one_sentence(lm, tmp_path, name):
    content, words = BAD_FILES[name]
    file = tmp_path / name
    file.write_bytes(content)
    with pytest.raises(UserError) as err:
        token_rows.load_text(str(file), lm["gpt"], 300, 32)
    message = str(err.value)
    assert words in message and "\n" not in message and "Traceback" not in message
    assert name in message


def test_a_bad_line_deep_in_a_file_fails_the_run_with_its_number_and_nothing_half_cached(lm, tmp_path):
    file = tmp_path / "late.jsonl"
    file.write_text("".join(json.dumps({"text": f"line {i} of the text"}) + "\n" for i in range(500)) + "oops\n")
    text.check(str(file))  # the first lines are fine: the plan lets it run
    result = run(lm["gpt"], file)
    assert result.status == "failed" and "Line 501 of 'late.jsonl' is not JSON" in result.error
    cache = tokens.paths.cache_dir() / "text"
    assert not any(".part-" in p.name for p in cache.iterdir())


def test_the_plan_refuses_before_anything_runs(lm, tmp_path):
    bare = tmp_path / "bare"
    hf_folders.gpt_causal_lm(bare)  # no tokenizer saved beside it
    for model, dataset, words in (
            (bare, lm["txt"], "has no tokenizer (tokenizer.json)"),
            (lm["gpt"], tmp_path / "missing.jsonl", "was not found"),
            (lm["gpt"], "shapes", "or a causal LM on your text")):
        with pytest.raises(UserError, match=None) as err:
            session.plan(RunConfig(model=str(model), dataset=str(dataset), epochs=1), ["cpu"])
        assert words in str(err.value)
    with pytest.raises(UserError, match="'pattern.txt' is text, which trains a Hugging Face language model folder"):
        session.plan(RunConfig(model="mlp", dataset=str(lm["txt"]), epochs=1), ["cpu"])
    classifier = hf_folders.bert_classifier(tmp_path / "bert")
    with pytest.raises(UserError, match="a text dataset trains a language model"):
        session.plan(RunConfig(model=str(classifier), dataset=str(lm["txt"]), epochs=1), ["cpu"])
    with pytest.raises(UserError, match="Unknown text layout"):
        session.plan(RunConfig(model=str(lm["gpt"]), dataset=str(lm["txt"]), epochs=1,
                               options={"text_layout": "zigzag"}), ["cpu"])


def test_a_tokenizer_past_the_embedding_or_with_code_of_its_own_is_refused(lm, tmp_path):
    with pytest.raises(UserError, match="ids past the embedding would fail"):
        tokens.load_tokenizer(lm["gpt"], 100)
    folder = tmp_path / "remote"
    hf_folders.tokenizer_for(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["auto_map"] = {"AutoTokenizer": ["x.Tok", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(UserError, match="needs code of its own"):
        tokens.check_tokenizer_files(folder)


def test_chat_without_a_template_and_a_pipe_are_one_sentence(lm, tmp_path):
    folder = tmp_path / "plain"
    hf_folders.gpt_text_lm(folder)
    (folder / "chat_template.jinja").unlink()
    with pytest.raises(UserError, match="has no chat template"):
        token_rows.load_text(str(lm["chat"]), folder, 300, 64)
    if hasattr(os, "mkfifo"):
        pipe = tmp_path / "pipe.txt"
        os.mkfifo(pipe)
        with pytest.raises(UserError, match="is not a regular file"):
            text.check(str(pipe))


def test_a_long_line_is_refused_and_a_long_paragraph_streamed_in_pieces(tmp_path, monkeypatch):
    monkeypatch.setattr(text, "MAX_LINE_BYTES", 100)
    file = tmp_path / "long.jsonl"
    file.write_text(json.dumps({"text": "x" * 200}) + "\n")
    with pytest.raises(UserError, match="Line 1 of 'long.jsonl' is longer than"):
        list(text.read_examples(file))
    monkeypatch.setattr(text, "MAX_PARAGRAPH_CHARS", 50)
    para = tmp_path / "para.txt"
    para.write_text("a short line of text\n" * 10 + "\n\nnext paragraph\n")
    pieces = [e.text for e in text.read_examples(para)]
    assert len(pieces) > 3 and "".join(pieces) == "a short line of text\n" * 10 + "\n" + "next paragraph\n"


@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_the_fine_tuned_model_is_saved_as_save_pretrained_writes_it_and_loads(lm, tmp_path, finetune):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    weights = tmp_path / "tuned.pt"
    config = RunConfig(model=str(lm["gpt"]), dataset=str(lm["txt"]), epochs=1, warmup_steps=1, batch_size=8,
                       optimizer="adamw", lr=3e-3, input_shape=[32], options={"finetune": finetune})
    result = trainer.run(config, save_model=str(weights))
    assert result.status == "finished", result.error
    folder = tmp_path / "tuned.hf"
    meta = json.loads((tmp_path / "tuned.json").read_text())
    assert meta["pretrained"] == "tuned.hf" and (folder / "tokenizer.json").is_file()
    state = torch.load(weights, weights_only=True)
    if finetune == "lora":
        from peft import PeftModel

        assert (folder / "adapter_config.json").is_file() and not (folder / "model.safetensors").exists()
        base = AutoModelForCausalLM.from_pretrained(str(lm["gpt"]), local_files_only=True)
        loaded = PeftModel.from_pretrained(base, str(folder))
    else:
        loaded = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True)
    loaded_state = loaded.state_dict()
    trained = [k for k in state if "lora_" in k] if finetune == "lora" else list(state)
    assert trained and all(k in loaded_state and torch.equal(state[k], loaded_state[k]) for k in trained)
    ids = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)("the cat sat", return_tensors="pt")
    assert loaded(**ids).logits.shape[-1] == 300


def test_parquet_is_read_where_pyarrow_is_and_a_bad_one_is_one_sentence(lm, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [e["messages"] for e in CHAT]
    pq.write_table(pa.table({"messages": rows}), tmp_path / "chat.parquet")
    from_parquet = token_rows.load_text(str(tmp_path / "chat.parquet"), lm["gpt"], 300, 64)
    from_jsonl = token_rows.load_text(str(lm["chat"]), lm["gpt"], 300, 64)
    assert from_parquet.text["training_tokens"] == from_jsonl.text["training_tokens"] > 0
    pq.write_table(pa.table({"body": ["a", "b"]}), tmp_path / "nofield.parquet")
    with pytest.raises(UserError, match="'nofield.parquet' has no \"text\" column .*its columns: body"):
        token_rows.load_text(str(tmp_path / "nofield.parquet"), lm["gpt"], 300, 32)
    (tmp_path / "fake.parquet").write_text("not parquet at all")
    with pytest.raises(UserError, match="'fake.parquet' cannot be read as parquet"):
        token_rows.load_text(str(tmp_path / "fake.parquet"), lm["gpt"], 300, 32)


def test_early_stopping_and_the_best_epoch_watch_the_texts_validation(lm):
    result = run(lm["gpt"], lm["txt"], epochs=4, early_stop_patience=1, early_stop_monitor="val_loss",
                 keep_best=True)
    assert result.status == "finished", result.error
    s = result.summary
    assert s.monitor == "val_loss" and s.best_epoch is not None
    assert s.best_value == pytest.approx(min(e.val_loss for e in result.epochs))
