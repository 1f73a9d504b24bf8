"""Generation in both frameworks (tools/generate/mlx_timing.py): `mpsstudio generate --frameworks torch,mlx` on tiny
Llama and GPT-2 folders, mlx-lm's generate_step beside transformers' generate on the same prompt (MLX's CPU backend,
mlx-lm[cpu]): the same greedy tokens, each figure a median with its interval; the MLX timing's arithmetic on a
generation of known speed; what MLX cannot measure said, what PyTorch measured kept."""

from __future__ import annotations

import json
import statistics
import time

import pytest

pytest.importorskip("mlx_lm")

from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.machine import mlx as mlx_machine
from mpsstudio.engine.models import mlx_lm_folder
from mpsstudio.engine.tools import registry
from mpsstudio.engine.tools.generate import mlx_timing, words
from tests.support import hf_folders


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    root = tmp_path_factory.mktemp("gen_both")
    return {"gpt": hf_folders.gpt_text_lm(root / "gpt", positions=64), "llama": hf_folders.llama_text_lm(root / "llama")}


def _generate(folder, tmp_path, capsys, *extra, contexts="16,30"):
    from mpsstudio import cli

    out = tmp_path / "gen.json"
    code = cli.main(["generate", "--model", str(folder), "--devices", "cpu", "--contexts", contexts, "--new-tokens",
                     "24", "--repeats", "3", "--no-save", "--json", str(out), *extra])
    printed = capsys.readouterr()
    return code, printed, json.loads(out.read_text())


@pytest.mark.parametrize("name", ["llama", "gpt"])
def test_both_frameworks_generate_the_same_greedy_tokens_with_intervals(lm, name, tmp_path, capsys):
    code, printed, result = _generate(lm[name], tmp_path, capsys, "--frameworks", "torch,mlx")
    assert code == 0, printed.err
    rows = result["rows"]
    assert [(r["framework"], r["context"]) for r in rows] == [("torch", 16), ("torch", 30), ("mlx", 16), ("mlx", 30)]
    for torch_row, mlx_row in zip(rows[:2], rows[2:]):
        assert len(mlx_row["first_tokens"]) == 16 and mlx_row["first_tokens"] == torch_row["first_tokens"]
    for row in rows[2:]:
        assert row["repeats"] == 3 and row["memory_measure"] == "rss_growth"
        for key in ("ttft_ms", "prefill_tps", "decode_tps"):
            median, low, high = row[key]
            assert 0 < low <= median <= high
        assert row["ttft_ms"][0] == pytest.approx(1000 * statistics.median(row["first_s"]))
        decode = sorted(23 / (w - f) for f, w in zip(row["first_s"], row["whole_s"]))
        assert row["decode_tps"] == pytest.approx([decode[1], decode[0], decode[2]])
    assert "MLX \u00b7 cpu fp32 generates the same 16 greedy tokens as cpu fp32" in result["sentence"]
    assert "MLX \u00b7 cpu fp32" in printed.out and "the same 16" in printed.out and "generate_step" in printed.out
    assert registry.checked("generate", result)["rows"][2]["framework"] == "mlx"  # what an import reads
    assert ("n_ctx" in " ".join(result["notes"])) == (name == "gpt")  # mlx-lm's GPT-2 read as adapted: said


def test_tokens_that_diverge_are_said_with_where():
    ref = {"framework": "torch", "device": "cpu", "precision": "fp32", "first_tokens": [1, 2, 3, 4]}
    other = {**ref, "framework": "mlx", "first_tokens": [1, 2, 9, 4]}
    assert words.frameworks_agree([ref, other]) == "; MLX \u00b7 cpu fp32's greedy tokens differ from token 3 of cpu fp32's"


class Known:
    """mlx-lm's generate_step of a known speed: `prefill` seconds before its first token, `step` before each other;
    like mlx-lm's, it yields (token, logprobs) and stops after max_tokens."""

    def __init__(self, prefill: float, step: float):
        self.prefill, self.step = prefill, step

    def __call__(self, prompt, model, stream=None, *, max_tokens=256, **_):
        time.sleep(self.prefill)
        for n in range(max_tokens):
            if n:
                time.sleep(self.step)
            yield n + 7, None


def test_the_mlx_timing_finds_a_known_prefill_and_decode(monkeypatch):
    import importlib

    import torch

    generation = importlib.import_module("mlx_lm.generate")  # (the package's `generate` is its function)
    monkeypatch.setattr(generation, "generate_step", Known(prefill=0.02, step=0.03))
    loaded = mlx_lm_folder.Loaded(model=object(), model_type="fake")
    row = mlx_timing.measure(loaded, mlx_machine.resolve("cpu"), torch.zeros((1, 100), dtype=torch.long), 100, 11,
                             repeats=3)
    assert row["ttft_ms"][1] >= 20.0  # sleeps are never shorter than asked: one-sided bounds
    assert row["prefill_tps"][2] <= 100 / 0.02
    assert 0 < row["decode_tps"][2] <= 10 / 0.3 * 1.01
    assert row["first_tokens"] == list(range(7, 18)) and row["framework"] == "mlx" and row["batch"] == 1


def test_what_mlx_cannot_measure_is_said_and_pytorchs_figures_kept(tmp_path, capsys):
    from transformers import OPTConfig, OPTForCausalLM

    opt = tmp_path / "opt"
    OPTForCausalLM(OPTConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, ffn_dim=32, num_attention_heads=2,
                             word_embed_proj_dim=16, max_position_embeddings=64)).save_pretrained(opt)
    code, printed, result = _generate(opt, tmp_path, capsys, "--frameworks", "torch,mlx", contexts="16")
    assert code == 0 and [r["framework"] for r in result["rows"]] == ["torch"]
    assert any(n.startswith("MLX \u00b7 cpu:") and "no opt architecture" in n for n in result["notes"])
    payload = words.arguments({"devices": "cpu", "frameworks": "torch,mlx", "batch_size": 2})
    rows, notes = mlx_timing.run_setups(None, "cpu", payload, [16], None, False, None, None, None)
    assert rows == [] and notes == ["MLX: mlx-lm's generate_step makes one sequence at a time (its batch_generate "
                                    "schedules requests, another measure); batch 2 not measured"]


def test_bad_frameworks_are_one_sentence(monkeypatch):
    import importlib.util

    with pytest.raises(UserError, match="'jax' is not one; choose torch, mlx or torch,mlx"):
        words.arguments({"devices": "cpu", "frameworks": "torch,jax"})
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlx_lm" else real(name, *a))
    with pytest.raises(UserError, match=r"needs MLX and mlx-lm; install them .* or generate with PyTorch alone"):
        words.arguments({"devices": "cpu", "frameworks": "mlx"})
    assert words.arguments({"devices": "cpu"})["frameworks"] == ["torch"]



def test_a_quantized_mlx_side_generates_labelled_not_the_same_arithmetic(tmp_path, capsys):
    """--quantize 4 with --frameworks torch,mlx: mlx-lm's weights in 4 bits (what it did said in the sentence), the
    rows labelled, the tokens compared and said not the same arithmetic; PyTorch's side as saved. A training setting
    given to generate is said to be unused; --quantize without MLX is one sentence before anything runs."""
    from mpsstudio import cli

    wide = hf_folders.llama_text_lm(tmp_path / "wide", hidden=64)  # 64 wide: mlx-lm's groups of 64 fit
    code, printed, result = _generate(wide, tmp_path, capsys, "--frameworks", "torch,mlx", "--quantize", "4",
                                      "--finetune", "lora", contexts="16")
    assert code == 0, printed.err
    torch_row, mlx_row = result["rows"]
    assert "quantize" not in torch_row and mlx_row["quantize"] == 4 and words.label(mlx_row) == "MLX \u00b7 cpu fp32 4-bit"
    assert len(mlx_row["first_tokens"]) == 16 and all(0 < mlx_row[k][1] for k in ("ttft_ms", "decode_tps"))
    said = result["sentence"]
    assert "(4-bit weights: not the same arithmetic)" in said and "4-bit weights as mlx-lm's convert -q" in said
    assert "--finetune is a training setting, not used here" in said
    assert "MLX \u00b7 cpu fp32 4-bit" in printed.out and "not PyTorch's arithmetic" in printed.out
    assert cli.main(["generate", "--model", str(wide), "--devices", "cpu", "--quantize", "8", "--no-save"]) != 0
    refused = capsys.readouterr()
    assert "--quantize 8 quantizes the MLX side's weights" in refused.err and "Traceback" not in refused.err
    assert "Setup" not in refused.out  # refused before a setup is measured
