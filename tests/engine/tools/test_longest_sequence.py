"""max-batch --longest-sequence (tools/maxbatch.py's sequence axis): the longest sequence of a model folder that
trains at a given batch, up to the positions it takes, with the memory limit's boundary found; bad input in one
sentence."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.tools import maxbatch, maxbatch_answer, registry
from tests.support import hf_folders


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return hf_folders.gpt_text_lm(tmp_path_factory.mktemp("seq") / "gpt", positions=256)


def test_the_search_stops_at_the_positions_the_model_takes(gpt, tmp_path, capsys):
    from mpsstudio import cli

    out = tmp_path / "seq.json"
    code = cli.main(["max-batch", "--model", str(gpt), "--device", "cpu", "--longest-sequence", "--at-batch", "2",
                     "--json", str(out), "--no-save"])
    printed = capsys.readouterr().out
    assert code == 0
    result = registry.checked("max-batch", {k: v for k, v in json.loads(out.read_text()).items()
                                            if k not in ("kind", "id", "created_at")})
    assert result["axis"] == "seq_len" and result["at_batch"] == 2 and result["largest_batch"] == 256
    assert [p["batch_size"] for p in result["probes"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert "Longest sequence that trains on cpu at batch 2: 256 tokens" in result["sentence"]
    assert "the 256 positions the model takes" in result["sentence"] and result["sweep_sizes"] == []
    assert "tokens a sequence (batch 2)" in printed and "tokens/s (measured" in printed


def test_a_memory_limit_bounds_the_length(gpt):
    config = RunConfig(model=str(gpt), dataset="synthetic", device="cpu", optimizer="adamw", lr=1e-3)
    result = maxbatch.search(config, axis="seq_len", at=64, memory_limit=8 * 1024**2)
    longest, failed = result["largest_batch"], result["smallest_failed"]
    assert failed is not None and failed["why"] in ("over the limit", "predicted")
    assert longest is None or longest < failed["batch_size"] <= 256
    fits = [p for p in result["probes"] if p["fits"]]
    assert all(p["memory"] <= 8 * 1024**2 for p in fits)


def test_bad_input_is_one_sentence(gpt, tmp_path):
    with pytest.raises(UserError, match="--at-batch is the batch of the longest-sequence search"):
        maxbatch_answer.arguments({"memory_limit": None, "max_batch": None, "at_batch": 4})
    with pytest.raises(UserError, match="--at-batch must be a whole number"):
        maxbatch_answer.arguments({"memory_limit": None, "max_batch": None, "at_batch": 0,
                                   "longest_sequence": True})
    with pytest.raises(UserError, match="takes images; the longest-sequence search is for a model of tokens"):
        maxbatch.search(RunConfig(model="mlp", dataset="synthetic"), axis="seq_len")
    own = tmp_path / "own.py"
    own.write_text("import torch\nVOCAB_SIZE = 10\nINPUT_SHAPE = (8,)\n"
                   "def build_model(num_classes, input_shape):\n"
                   "    return torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Flatten(), "
                   "torch.nn.Linear(32, num_classes))\n"
                   "def make_batch(batch_size, generator):\n"
                   "    x = torch.randint(0, 10, (batch_size, 8), generator=generator)\n"
                   "    return x, torch.randint(0, 2, (batch_size,), generator=generator)\n")
    with pytest.raises(UserError, match="makes its own batches"):
        maxbatch.search(RunConfig(model=str(own), dataset="synthetic"), axis="seq_len")


def test_the_macs_three_ceilings_are_said_apart():
    from mpsstudio.engine.tools.memory import mps_ceiling

    gib = 1024**3
    said = mps_ceiling(int(21.3 * gib), None, "0", 32 * gib)
    assert said.startswith("Metal recommends at most 21.3 GiB for the GPU (torch.mps.recommended_max_memory(), of "
                           "this Mac's 32.0 GiB)")
    assert "refuses past 1.7x that, 36.2 GiB (the high watermark ratio, its default)" in said
    assert "macOS's wired limit for the GPU is its default (iogpu.wired_limit_mb = 0)" in said
    set_here = mps_ceiling(16 * gib, "1.2", "28672", 32 * gib)
    assert "1.2x that, 19.2 GiB (the high watermark ratio, PYTORCH_MPS_HIGH_WATERMARK_RATIO)" in set_here
    assert "macOS lets the GPU wire at most 28.0 GiB (iogpu.wired_limit_mb)" in set_here
    assert "no ceiling of its own" in mps_ceiling(16 * gib, "0", "", 32 * gib)
    assert "could not be read" in mps_ceiling(16 * gib, "0", "", 32 * gib)
    assert "its default" in mps_ceiling(16 * gib, "lots", "x", 32 * gib)  # a value torch would not take


def test_a_search_says_the_devices_ceiling(gpt):
    result = maxbatch.search(RunConfig(model=str(gpt), dataset="synthetic", device="cpu"), axis="seq_len", at=1,
                             cap=8)
    assert "This machine has" in result["ceiling"] and result["ceiling"] in result["sentence"]
