"""Hostile Hugging Face model folders (issue 57): each class refused from the command line before anything runs, with
exit 2 and one sentence, nothing stored, no traceback, nothing allocated beyond what the config check allows; the
window's reading of a folder never blocks (a pipe among its files) and never raises on lying headers."""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading

import pytest

pytest.importorskip("transformers")

from mpsstudio import cli
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.models import hf_folder
from tests.support import hf_folders


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return hf_folders.gpt_causal_lm(tmp_path_factory.mktemp("hostile") / "gpt")


def copy_of(gpt, tmp_path, name="folder"):
    target = tmp_path / name
    shutil.copytree(gpt, target)
    return target


def edit(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def bench(folder, capsys) -> tuple[int, str]:
    code = cli.main(["bench", "--model", str(folder), "--dataset", "synthetic", "--devices", "cpu", "--steps", "2",
                     "--warmup", "1", "--batch-size", "2"])
    captured = capsys.readouterr()
    return code, captured.err + captured.out


def refused(folder, capsys, words: str) -> str:
    before = len(RunStore().all())
    code, said = bench(folder, capsys)
    assert code == cli.EXIT_BAD_INPUT, said
    assert words in said and "Traceback" not in said
    assert len(RunStore().all()) == before  # nothing stored: checked before anything ran
    return said


def test_a_deeply_nested_config_is_one_sentence(gpt, tmp_path, capsys):
    folder = copy_of(gpt, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    refused(folder, capsys, "cannot be read (nested")


def test_a_config_that_implies_a_model_past_the_machine_s_memory_is_refused_before_building(gpt, tmp_path, capsys):
    folder = copy_of(gpt, tmp_path)
    edit(folder, n_layer=10**6)
    said = refused(folder, capsys, "more than this machine's")
    assert "parameters" in said
    with pytest.raises(UserError, match="more than this machine's 64.0 KiB"):  # a device's memory, given
        hf_folder.read_folder(str(gpt), memory_bytes=64 << 10)


def test_a_size_field_out_of_range_is_one_sentence(gpt, tmp_path, capsys):
    folder = copy_of(gpt, tmp_path)
    edit(folder, n_embd=10**12)
    refused(folder, capsys, "n_embd = 1000000000000, not a whole number")


def test_a_wide_config_with_empty_weights_is_refused_without_allocating(gpt, tmp_path, capsys):
    folder = copy_of(gpt, tmp_path)
    edit(folder, n_embd=4_096)  # ~400 M parameters: within the memory, so the weights decide
    (folder / "model.safetensors").write_bytes(b"")
    refused(folder, capsys, "weights cannot be read")


def test_weights_that_are_not_the_config_s_are_refused(gpt, tmp_path, capsys):
    folder = copy_of(gpt, tmp_path)
    edit(folder, n_embd=512, n_layer=8)  # the tiny GPT-2's 30,720 values for a config of ~25 M
    refused(folder, capsys, "are not this config's weights")


def test_a_model_type_that_contradicts_the_architectures_is_refused(gpt, tmp_path, capsys):
    folder = copy_of(gpt, tmp_path)
    edit(folder, model_type="bert")  # would build an 86 M-parameter BERT of random weights under the GPT-2's name
    refused(folder, capsys, "contradicts itself: its config's model_type 'bert'")


@pytest.mark.parametrize("model_type, architecture", [("gpt2", "GPT2LMHeadModel"), ("gpt_neox", "GPTNeoXForCausalLM"),
                                                       ("gemma3_text", "Gemma3ForCausalLM"), ("xlm-roberta",
                                                       "XLMRobertaForSequenceClassification"), ("vit",
                                                       "ViTForImageClassification"), ("qwen2", "Qwen2ForCausalLM")])
def test_real_model_types_agree_with_their_architectures(model_type, architecture):
    assert hf_folder._agrees(model_type, architecture)


def test_a_token_model_without_a_vocabulary_is_told_so(gpt, tmp_path, capsys):
    folder = copy_of(gpt, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    del config["vocab_size"]
    (folder / "config.json").write_text(json.dumps(config))
    said = refused(folder, capsys, "says no vocab_size")
    assert "make_batch" not in said


@pytest.mark.parametrize("kind", ["fifo", "link out"])
def test_weights_that_are_a_pipe_or_a_link_out_of_the_folder_are_refused(gpt, tmp_path, capsys, kind):
    folder = copy_of(gpt, tmp_path)
    weights = folder / "model.safetensors"
    weights.unlink()
    if kind == "fifo":
        os.mkfifo(weights)
    else:
        outside = tmp_path / "elsewhere.safetensors"
        shutil.copy(gpt / "model.safetensors", outside)
        weights.symlink_to(outside)
    refused(folder, capsys, "is not a regular file inside the folder")


def _header(tensors: dict) -> bytes:
    body = json.dumps(tensors).encode()
    return struct.pack("<Q", len(body)) + body


@pytest.mark.parametrize("index, shard", [
    ({"weight_map": {"a": "shard.safetensors"}}, "fifo"),
    ({"weight_map": ["not", "a", "map"]}, None),
    ({"weight_map": {"a": 7}}, None),
    ("[" * 50_000 + "]" * 50_000, None),
    ({"weight_map": {"a": "shard.safetensors"}}, _header({"w": {"shape": "lies"}, "v": {"shape": [2, -3]}})),
    ({"weight_map": {"a": "shard.safetensors"}}, struct.pack("<Q", 1 << 62)),
])
def test_the_window_s_reading_of_a_folder_never_blocks_or_raises(gpt, tmp_path, index, shard):
    """What the window's setup summary calls (read_folder, stored_parameters) on hostile index files and headers:
    0 or one sentence, in bounded time, even with a pipe among the shards (open() on it would block forever)."""
    folder = copy_of(gpt, tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors.index.json").write_text(index if isinstance(index, str) else json.dumps(index))
    if shard == "fifo":
        os.mkfifo(folder / "shard.safetensors")
    elif shard is not None:
        (folder / "shard.safetensors").write_bytes(shard)
    outcome: list = []

    def read():
        try:
            outcome.append(hf_folder.stored_parameters(hf_folder.HfFolder(
                folder, "GPT2LMHeadModel", "causal LM", "gpt2", 100, 64, 2, 224, 3, "model.safetensors")))
            hf_folder.read_folder(str(folder))
        except UserError as exc:
            outcome.append(str(exc))
        except BaseException as exc:  # - what the test is about
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(20)
    if shard == "fifo" and reader.is_alive():  # unblock the reader before failing
        with open(folder / "shard.safetensors", "wb"):
            pass
    assert not reader.is_alive(), "the folder's reading blocked"
    assert outcome[0] == 0 and all(isinstance(o, (int, str)) for o in outcome), outcome
    assert isinstance(outcome[-1], str) and "weights cannot be read" in outcome[-1]


def _real(kind: str, folder):
    """A tiny real folder of a family whose config once drew a false refusal (rotary positions, grouped-query
    attention, a long context)."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    small = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
    config = {"qwen2": lambda: tf.Qwen2Config(**small, num_key_value_heads=2),
              "llama-long": lambda: tf.LlamaConfig(**small, num_key_value_heads=4, max_position_embeddings=131072),
              "mistral": lambda: tf.MistralConfig(**small, num_key_value_heads=2)}[kind]()
    tf.AutoModelForCausalLM.from_config(config).save_pretrained(str(folder))
    return folder


@pytest.mark.parametrize("kind", ["qwen2", "llama-long", "mistral"])
def test_real_folders_of_rotary_and_grouped_query_models_are_accepted(tmp_path, kind):
    folder = hf_folder.read_folder(str(_real(kind, tmp_path / kind)))
    assert folder.task == "causal LM"


@pytest.mark.parametrize("change, words", [
    (dict(n_head=3), "3 attention heads for a width of 32"),
    (dict(model_type="gpt"), "contradicts itself: its config's model_type 'gpt'"),
    (dict(model_type=5), "model_type = 5, not a name"),
    (dict(hidden_size=64), "names two widths"),
    (dict(layer_norm_epsilon=-1), "norm epsilon of -1"),
    (dict(sampling_rate=16000), "is an audio model"),
])
def test_configs_that_would_fail_inside_the_run_are_refused_before_it(gpt, tmp_path, capsys, change, words):
    folder = copy_of(gpt, tmp_path)
    edit(folder, **change)
    refused(folder, capsys, words)


def test_truncated_weights_and_a_config_that_is_not_a_file_are_said_so(gpt, tmp_path, capsys):
    folder = copy_of(gpt, tmp_path)
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])  # the header whole, the tensors cut
    refused(folder, capsys, "weights cannot be read")
    other = copy_of(gpt, tmp_path, "piped")
    (other / "config.json").unlink()
    os.mkfifo(other / "config.json")
    refused(other, capsys, "is not a regular file inside the folder")
