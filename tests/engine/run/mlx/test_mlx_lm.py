"""A model folder in both frameworks (models/mlx_lm_folder.py, run/mlx/lm_parity.py): the folder's causal LM read by
mlx-lm as it reads Hugging Face folders, parity with transformers before anything is timed, an MLX model whose
weights were altered refused naming the first block that differs, an architecture mlx-lm lacks refused with why
(MLX's CPU backend, mlx-lm[cpu])."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("mlx_lm")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.data import token_rows
from mpsstudio.engine.models import hf_model, mlx_lm_folder
from mpsstudio.engine.run.mlx import lm_parity
from tests.support import hf_folders


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    root = tmp_path_factory.mktemp("both")
    (root / "pattern.txt").write_text(hf_folders.PATTERN_TEXT)
    return {"gpt": hf_folders.gpt_text_lm(root / "gpt"), "llama": hf_folders.llama_text_lm(root / "llama"),
            "txt": root / "pattern.txt"}


def _batch(lm, name, seq_len=32):
    data = token_rows.load_text(str(lm["txt"]), lm[name], 300, seq_len)
    made = data.train.batch(np.arange(4))
    return made["input_ids"], made["labels"]


def _torch_model(folder):
    hf, spec = hf_model.spec_for(str(folder), 32)
    return hf_model.build(hf, spec, {})


@pytest.mark.parametrize("name", ["gpt", "llama"])
def test_the_folder_in_mlx_lm_computes_what_transformers_computes(lm, name):
    loaded = mlx_lm_folder.load(lm[name])
    x, labels = _batch(lm, name)
    config = RunConfig(model=str(lm[name]), optimizer="adamw", lr=1e-3, framework="mlx")
    found = lm_parity.check(config, _torch_model(lm[name]), loaded, x, labels)
    assert found.passed, found.words()
    assert set(found.checks) == {"forward", "loss", "step"} and found.samples == 4
    assert found.checks["forward"]["difference"] < 1e-5 and found.checks["step"]["difference"] < 1e-3
    assert ("n_ctx" in " ".join(loaded.notes)) == (name == "gpt")  # transformers 5's GPT-2 config, said


@pytest.mark.parametrize("half", ["bf16", "fp16"])
def test_a_half_precision_run_checks_its_logits_in_that_type_and_leaves_the_weights_as_they_were(lm, half):
    """The run's own precision is checked too (tune's parity column reads it): the folder's weights rounded to the
    half type give logits within its rounding of float64's, and the model keeps its fp32 weights after."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    loaded = mlx_lm_folder.load(lm["llama"])
    before = {k: np.array(v) for k, v in tree_flatten(loaded.model.parameters())}
    x, labels = _batch(lm, "llama")
    config = RunConfig(model=str(lm["llama"]), optimizer="adamw", lr=1e-3, framework="mlx", precision=half)
    found = lm_parity.check(config, _torch_model(lm["llama"]), loaded, x, labels)
    check = found.checks[f"{half} forward"]
    assert found.passed and 1e-5 < check["difference"] <= check["tolerance"], found.words()
    after = dict(tree_flatten(loaded.model.parameters()))
    assert all(after[k].dtype == mx.float32 and np.array_equal(np.array(after[k]), v) for k, v in before.items())


def test_the_next_token_loss_leaves_out_the_labels_not_learnt(lm):
    import mlx.core as mx

    logits = np.random.default_rng(1).normal(size=(2, 5, 7)).astype(np.float32)
    labels = np.array([[-100, -100, 3, 4, 1], [-100, 2, 6, -100, -100]])
    ours = lm_parity.next_token_loss(mx.array(logits), mx.array(labels)).item()
    theirs = torch.nn.functional.cross_entropy(torch.tensor(logits)[:, :-1].reshape(-1, 7),
                                               torch.tensor(labels)[:, 1:].reshape(-1), ignore_index=-100).item()
    assert ours == pytest.approx(theirs, rel=1e-6)


@pytest.mark.parametrize("name", ["gpt", "llama"])
def test_mlx_weights_altered_are_refused_naming_the_first_block_that_differs(lm, name):
    import mlx.core as mx

    loaded = mlx_lm_folder.load(lm[name])
    block = mlx_lm_folder.blocks(loaded.model)[1]
    mlp = block.mlp
    projection = mlp.down_proj if name == "llama" else mlp.c_proj
    projection.weight = projection.weight * 1.05  # 5 % off, in the second block only
    mx.eval(projection.weight)
    x, labels = _batch(lm, name)
    found = lm_parity.check(RunConfig(model=str(lm[name]), lr=1e-3), _torch_model(lm[name]), loaded, x, labels)
    assert not found.passed and "forward" in found.words()
    assert "block 1" in found.layer and "its input agrees" in found.layer, found.layer


def test_an_architecture_mlx_lm_lacks_is_refused_with_why(tmp_path):
    from transformers import OPTConfig, OPTForCausalLM

    folder = tmp_path / "opt"
    OPTForCausalLM(OPTConfig(vocab_size=100, hidden_size=16, num_hidden_layers=1, ffn_dim=32, num_attention_heads=2,
                             word_embed_proj_dim=16, max_position_embeddings=64)).save_pretrained(folder)
    assert "no opt architecture" in mlx_lm_folder.architecture_reason(folder)
    with pytest.raises(UserError, match=r"'opt' cannot be run in MLX: mlx-lm [\d.]+ has no opt architecture.*"
                                        r"--framework torch"):
        mlx_lm_folder.load(folder)


@pytest.mark.parametrize("missing, said", [
    ("mlx_lm", "The MLX side of a model folder needs mlx-lm; install mlx-lm"),
    ("resource", r"mlx-lm is installed but could not be imported \(.*resource.*\); reinstall it"),
])
def test_mlx_lm_missing_or_broken_is_one_sentence_naming_which(monkeypatch, missing, said):
    """mlx-lm absent, and mlx-lm present with a package it imports missing (a frozen app that did not carry it): each
    its own sentence, the second naming the import that failed."""
    import builtins
    import sys

    real = builtins.__import__

    def refuse(name, *args, **kwargs):
        if name == missing or name.startswith(missing + "."):
            raise ModuleNotFoundError(f"No module named '{missing}'", name=missing)
        return real(name, *args, **kwargs)

    for name in [n for n in sys.modules if n == "mlx_lm" or n.startswith("mlx_lm.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(builtins, "__import__", refuse)
    with pytest.raises(UserError, match=said):
        mlx_lm_folder.mlx_lm_module()


@pytest.mark.parametrize("change, said", [
    ({"model_file": "evil.py"}, "custom model file"),
    ({"model_type": "../../etc"}, "has no ../../etc architecture"),
    ({"model_type": None}, "names no model_type"),
])
def test_a_config_mlx_lm_must_not_follow_is_refused_before_anything_loads(lm, tmp_path, change, said):
    import shutil

    folder = tmp_path / "hostile"
    shutil.copytree(lm["llama"], folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(change)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "evil.py").write_text("raise SystemExit('ran')\n")
    assert said in mlx_lm_folder.architecture_reason(folder)
    with pytest.raises(UserError, match="cannot be run in MLX"):
        mlx_lm_folder.load(folder)


def test_a_folder_stored_in_bf16_is_read_in_fp32_on_both_sides_and_passes_parity(tmp_path, lm):
    """mlx-lm keeps the type a folder stores (bf16 for most of the hub's); PyTorch's side reads it in fp32. Read as
    stored, an fp32 run's MLX side computed in bf16 and parity refused the folder."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    folder = hf_folders.llama_text_lm(tmp_path / "llama_bf16", dtype="bfloat16")
    assert '"dtype": "bfloat16"' in (folder / "config.json").read_text()
    loaded = mlx_lm_folder.load(folder)
    assert {v.dtype for _, v in tree_flatten(loaded.model.parameters())} == {mx.float32}
    assert any("stored in bfloat16: read in float32" in n for n in loaded.notes), loaded.notes
    data = token_rows.load_text(str(lm["txt"]), folder, 300, 32)
    made = data.train.batch(np.arange(4))
    config = RunConfig(model=str(folder), optimizer="adamw", lr=1e-3, framework="mlx")
    found = lm_parity.check(config, _torch_model(folder), loaded, made["input_ids"], made["labels"])
    assert found.passed, found.words()
