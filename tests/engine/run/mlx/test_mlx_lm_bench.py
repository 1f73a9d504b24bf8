"""`bench --framework torch,mlx --model FOLDER` (run/mlx/lm_setup.py): the same folder, text, sequence length, LoRA
and optimizer in PyTorch (+ peft) and in mlx-lm, parity before timing, two finished runs compared by an interval;
what mlx-lm cannot run left out of the plan with why (MLX's CPU backend, mlx-lm[cpu])."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("mlx_lm")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.models import mlx_lm_folder
from mpsstudio.engine.run import session, trainer
from tests.support import hf_folders


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench_both")
    (root / "pattern.txt").write_text(hf_folders.PATTERN_TEXT)
    return {"gpt": hf_folders.gpt_text_lm(root / "gpt"), "llama": hf_folders.llama_text_lm(root / "llama"),
            "txt": root / "pattern.txt"}


def _bench(lm, name, finetune, tmp_path, capsys):
    from mpsstudio.launcher import main

    out = tmp_path / "both.json"
    code = main(["bench", "--model", str(lm[name]), "--dataset", str(lm["txt"]), "--devices", "cpu", "--framework",
                 "torch,mlx", "--steps", "8", "--warmup", "2", "--batch-size", "4", "--seq-len", "32", "--optimizer",
                 "adamw", "--lr", "1e-3", "--finetune", finetune, "--no-save", "--json", str(out)])
    said = capsys.readouterr()
    return code, said.out + said.err, json.loads(out.read_text())


@pytest.mark.parametrize("name, finetune", [
    ("llama", "lora"), ("gpt", "full"),
    ("llama", "full"), ("gpt", "lora"),
])
def test_a_folder_is_benched_in_pytorch_and_mlx_lm_with_parity_and_an_interval(lm, name, finetune, tmp_path, capsys):
    code, stdout, doc = _bench(lm, name, finetune, tmp_path, capsys)
    assert code == 0, stdout
    runs = doc["runs"]
    assert [(r["config"]["framework"], r["status"]) for r in runs] == [("torch", "finished"), ("mlx", "finished")]
    torch_run, mlx_run = (r["summary"] for r in runs)
    assert mlx_run["parity"]["passed"] is True and set(mlx_run["parity"]["checks"]) == {"forward", "loss", "step"}
    # the same model, the same parameters trained, the same tokens a step
    assert mlx_run["parameters"] == torch_run["parameters"]
    assert mlx_run["trainable_parameters"] == torch_run["trainable_parameters"]
    assert (mlx_run["trainable_parameters"] < mlx_run["parameters"]) == (finetune == "lora")
    assert mlx_run["tokens_per_s"] > 0 and mlx_run["val_perplexity"] > 1
    assert runs[1]["env"]["mlx_lm"] == mlx_lm_folder.mlx_lm_version()
    verdict = next(line for line in stdout.splitlines() if f"trains {lm[name]}" in line)
    assert "MLX (CPU)" in verdict and "PyTorch (CPU)" in verdict and "[" in verdict and "parity passed" in verdict
    assert "MLX \u00b7 cpu: mlx-lm " in stdout and ("LoRA in mlx-lm's tuner" in stdout) == (finetune == "lora")
    assert ("has no dropout" in stdout) == (name == "gpt")  # GPT-2's config gives PyTorch's dropout; said
    assert "wrote" not in stdout and "Loading weights" not in stdout  # transformers' bar is not the run's output


def test_an_architecture_mlx_lm_lacks_is_left_out_of_the_plan_with_why(tmp_path):
    from transformers import OPTConfig, OPTForCausalLM

    folder = tmp_path / "opt"
    OPTForCausalLM(OPTConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, ffn_dim=32, num_attention_heads=2,
                             word_embed_proj_dim=16, max_position_embeddings=64)).save_pretrained(folder)
    found = session.plan(RunConfig(model=str(folder), dataset="synthetic", steps=4), ["cpu"],
                         frameworks=["torch", "mlx"])
    assert [c.framework for c in found.configs] == ["torch"]
    assert len(found.skipped) == 1 and "MLX" in found.skipped[0] and "no opt architecture" in found.skipped[0]


@pytest.mark.parametrize("options, said", [
    ({"finetune": "head"}, "head"),
    ({"checkpointing": True}, "checkpointing"),
])
def test_what_mlx_lm_does_not_do_for_a_folder_is_left_out_with_why(lm, options, said):
    found = session.plan(RunConfig(model=str(lm["llama"]), dataset="synthetic", steps=4, options=options), ["cpu"],
                         frameworks=["torch", "mlx"])
    assert [c.framework for c in found.configs] == ["torch"] and said in found.skipped[0], found.skipped


def test_mlx_lm_weights_that_differ_are_refused_through_the_run_naming_the_block(lm, monkeypatch):
    """The run path itself (not the parity check alone): an MLX model whose second block is 5 % off is refused before
    anything is timed, the first block that differs named."""
    import mlx.core as mx

    real = mlx_lm_folder.load

    def altered(folder):
        loaded = real(folder)
        down = mlx_lm_folder.blocks(loaded.model)[1].mlp.down_proj
        down.weight = down.weight * 1.05
        mx.eval(down.weight)
        return loaded

    monkeypatch.setattr(mlx_lm_folder, "load", altered)
    result = trainer.run(RunConfig(model=str(lm["llama"]), dataset=str(lm["txt"]), steps=4, warmup_steps=1,
                                   batch_size=4, input_shape=(32,), framework="mlx", optimizer="adamw", lr=1e-3))
    assert result.status == "failed" and "block 1" in result.error and "\n" not in result.error, result.error
    assert result.summary is None or not result.summary.measured_steps


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A Llama 64 wide: mlx-lm quantizes in groups of 64, so every projection and the embedding can be quantized."""
    root = tmp_path_factory.mktemp("bench_quantized")
    (root / "pattern.txt").write_text(hf_folders.PATTERN_TEXT)
    return {"llama": hf_folders.llama_text_lm(root / "llama", hidden=64), "txt": root / "pattern.txt"}


def test_a_4_bit_mlx_side_trains_lora_beside_pytorch_and_says_it_is_not_the_same_arithmetic(wide, tmp_path, capsys):
    from mpsstudio.launcher import main

    out = tmp_path / "q4.json"
    code = main(["bench", "--model", str(wide["llama"]), "--dataset", str(wide["txt"]), "--devices", "cpu",
                 "--framework", "torch,mlx", "--steps", "6", "--warmup", "2", "--batch-size", "4", "--seq-len", "32",
                 "--optimizer", "adamw", "--lr", "1e-3", "--finetune", "lora", "--quantize", "4", "--no-save",
                 "--json", str(out)])
    said = capsys.readouterr()
    text = said.out + said.err
    assert code == 0, text
    runs = json.loads(out.read_text())["runs"]
    assert [r["config"]["framework"] for r in runs] == ["torch", "mlx"]
    assert "quantize" not in runs[0]["config"]["options"] and runs[1]["config"]["options"]["quantize"] == 4
    q = runs[1]["summary"]["parity"]["quantized"]
    # every Linear (7 a block, 2 blocks), the embedding and the head: 4-bit weights take about a sixth of fp32's
    assert q["bits"] == 4 and q["group_size"] == 64 and q["layers"] == 16 and q["kept"] == 0
    assert q["bytes_after"] < 0.4 * q["bytes_before"]
    assert q["loss_before"] != q["loss_after"] and abs(q["loss_after"] / q["loss_before"] - 1) < 0.2
    assert runs[1]["summary"]["trainable_parameters"] == runs[0]["summary"]["trainable_parameters"]  # the adapters
    assert runs[1]["summary"]["val_perplexity"] > 1
    verdict = next(line for line in text.splitlines() if f"trains {wide['llama']}" in line)
    assert "MLX (CPU) with 4-bit weights" in verdict and "parity passed before quantizing to 4 bits" in verdict
    assert "peak memory" in verdict or "memory not compared" in verdict, verdict
    assert "not the same arithmetic" in text and "MLX \u00b7 cpu \u00b7 4-bit" in text
    assert "Quantized as mlx-lm's convert -q does: 4-bit weights" in text


@pytest.mark.parametrize("args, said", [
    (["--framework", "torch", "--finetune", "lora"], "add --framework torch,mlx"),
    (["--framework", "torch,mlx", "--finetune", "full"], "trains LoRA adapters on its frozen weights"),
])
def test_quantizing_what_mlx_lm_cannot_is_one_sentence_or_left_out(wide, args, said, capsys):
    from mpsstudio.launcher import main

    code = main(["bench", "--model", str(wide["llama"]), "--dataset", str(wide["txt"]), "--devices", "cpu",
                 "--steps", "2", "--batch-size", "4", "--seq-len", "32", "--quantize", "8", "--no-save", *args])
    text = capsys.readouterr()
    both = text.out + text.err
    assert said in both and "Traceback" not in both
    if "full" in args:  # PyTorch's run still runs; MLX's is left out with the reason
        assert code == 0 and "skipping MLX" in both
    else:
        assert code != 0


def test_quantize_on_a_built_in_model_or_a_bad_value_is_one_sentence():
    from mpsstudio.engine.basics.errors import UserError

    with pytest.raises(UserError, match="is not one: drop --quantize"):
        session.plan(RunConfig(model="mlp", dataset="synthetic", steps=2, options={"quantize": 4}), ["cpu"],
                     frameworks=["torch", "mlx"])
    with pytest.raises(UserError, match="takes 4 or 8 bits"):
        mlx_lm_folder.quantize_of({"quantize": 3})
    with pytest.raises(UserError, match="takes 4 or 8 bits"):
        mlx_lm_folder.quantize_of({"quantize": True})
