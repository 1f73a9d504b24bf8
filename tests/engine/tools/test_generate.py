"""Generation speed (tools/generate/): `mpsstudio generate` on a tiny GPT-2 folder on the CPU here, two context
lengths, each figure a median with its interval; the timing's arithmetic on a fake model of known speed; the ± rule
between setups; bad arguments and folders, one sentence each."""

from __future__ import annotations

import json
import statistics
import time

import pytest

pytest.importorskip("transformers")

import torch

from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.machine import devices
from mpsstudio.engine.tools import registry
from mpsstudio.engine.tools.generate import timing, words
from tests.support import hf_folders


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    return hf_folders.gpt_text_lm(tmp_path_factory.mktemp("gen") / "gpt", positions=64)


def test_generate_on_the_cpu_says_prefill_decode_and_the_first_token_with_intervals(gpt, tmp_path, capsys):
    from mpsstudio import cli

    out = tmp_path / "gen.json"
    # 24 new tokens: their decode takes ~10x the first token's time, far beyond a busy machine's jitter
    code = cli.main(["generate", "--model", str(gpt), "--devices", "cpu", "--contexts", "16,38,60",
                     "--new-tokens", "24", "--repeats", "3", "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    result = json.loads(out.read_text())
    assert [r["context"] for r in result["rows"]] == [16, 38]  # 60 + 24 passes its 64 positions: said, left out
    assert any("context 60" in n and "64 positions" in n for n in result["notes"])
    for row in result["rows"]:
        assert row["repeats"] == 3 and len(row["first_s"]) == len(row["whole_s"]) == 3
        for key in ("ttft_ms", "prefill_tps", "decode_tps"):
            median, low, high = row[key]
            assert 0 < low <= median <= high
        # the figures are the repetitions' own: the median of each repetition's ratio (3: the middle one)
        assert row["ttft_ms"][0] == pytest.approx(1000 * statistics.median(row["first_s"]))
        assert row["prefill_tps"][0] == pytest.approx(row["context"] / statistics.median(row["first_s"]))
        decode = sorted(23 / (w - f) for f, w in zip(row["first_s"], row["whole_s"]))
        assert row["decode_tps"] == pytest.approx([decode[1], decode[0], decode[2]])
        assert len(row["first_tokens"]) == 16 and row["memory_measure"] == "rss_growth"
    assert "decode at contexts 17-39" in result["sentence"] and "range over 3 repetitions" in result["sentence"]
    assert "First token (ms)" in printed.out and "Decode tokens/s" in printed.out
    registry.checked("generate", result)  # what an import of it would read


class Known:
    """A model whose generate takes a known time: `prefill` seconds for the prompt and its first token, `step` for
    each token after it, returning the ids grown by what was asked."""

    def __init__(self, prefill: float, step: float):
        self.prefill, self.step = prefill, step

    def generate(self, input_ids, max_new_tokens, **_):
        time.sleep(self.prefill + self.step * (max_new_tokens - 1))
        return torch.cat([input_ids, torch.zeros((input_ids.shape[0], max_new_tokens), dtype=torch.long)], 1)


def test_the_timing_finds_a_known_prefill_and_decode():
    cpu = devices.cpu_device()
    row = timing.measure(Known(prefill=0.02, step=0.03), cpu, context=100, new_tokens=11, batch=2, repeats=3,
                         vocab=50)
    # sleeps are at least as long as asked, never shorter: one-sided bounds, whatever the machine's load
    assert row["ttft_ms"][1] >= 20.0 and min(row["whole_s"]) >= 0.32
    assert row["prefill_tps"][2] <= 2 * 100 / 0.02  # two sequences' prompts over the first call
    # the decode is the whole call less the first (10 more tokens a sequence in 300 ms beyond it): a first call that
    # overslept more than the whole one shortens it, so its bound allows for the first call's measured time
    assert 0 < row["decode_tps"][2] <= 2 * 10 / (0.32 - max(row["first_s"])) * 1.001
    decode = sorted(2 * 10 / (w - f) for f, w in zip(row["first_s"], row["whole_s"]))
    assert row["decode_tps"] == pytest.approx([decode[1], decode[0], decode[2]])  # each repetition's own ratio
    assert row["repeats"] == 3 and row["batch"] == 2


def test_a_model_that_stops_early_is_one_sentence():
    class Short(Known):
        def generate(self, input_ids, max_new_tokens, **_):
            return torch.cat([input_ids, torch.zeros((1, 1), dtype=torch.long)], 1)

    with pytest.raises(UserError, match="made 1 new tokens where 5 were asked"):
        timing.measure(Short(0, 0), devices.cpu_device(), context=4, new_tokens=5, batch=1, repeats=1, vocab=9)


def _row(device, decode, ttft=(5.0, 4.0, 6.0)):
    return {"device": device, "precision": "fp32", "context": 128, "new_tokens": 64, "batch": 1, "repeats": 7,
            "first_s": [0.005] * 7, "whole_s": [0.1] * 7, "first_tokens": [1, 2], "peak_memory": 1e6,
            "memory_measure": "peak_allocated", "ttft_ms": list(ttft), "prefill_tps": [100.0, 90.0, 110.0],
            "decode_tps": list(decode)}


def test_fastest_only_where_the_intervals_say_so():
    apart = [_row("cuda", (300, 290, 310)), _row("cpu", (100, 95, 105))]
    assert words.fastest(apart, "decode_tps") == "cuda fp32 is fastest, 3.00x cpu fp32"
    close = [_row("cuda", (300, 250, 310)), _row("mps", (280, 260, 330))]
    assert "apart by less than the noise" in words.fastest(close, "decode_tps")
    result = {"model": "m", "rows": close, "notes": []}
    assert "decoding, cuda fp32 and mps fp32 are apart by less than the noise" in words.sentence(result)


def test_an_imported_result_with_a_short_figure_is_read_without_a_crash():
    bad = _row("cpu", (100.0,))
    result = registry.checked("generate", {"model": "m", "rows": [bad], "notes": []})
    table = words.table(result)
    assert table.rows[0][5] == "-"


@pytest.mark.parametrize("values, message", [
    ({"contexts": "a,b"}, "--contexts must be whole numbers"),
    ({"contexts": "0"}, "--contexts must be whole numbers from 1"),
    ({"new_tokens": 1}, "--new-tokens must be from 2"),
    ({"repeats": 0}, "--repeats must be from 1"),
    ({"new_tokens": 0}, "--new-tokens must be from 2"),
    ({"batch_size": 0}, "--batch-size must be from 1"),
    ({"precisions": "fp8"}, "'fp8' is not one"),
    ({"devices": "gpu0"}, "'gpu0' is not a device"),
])
def test_bad_arguments_are_one_sentence(values, message):
    with pytest.raises(UserError, match=message):
        words.arguments({"devices": "cpu", **values} if "devices" not in values else values)


def test_a_folder_that_is_not_a_causal_lm_is_refused(tmp_path):
    from mpsstudio import cli

    bert = hf_folders.bert_classifier(tmp_path / "bert")
    code = cli.main(["generate", "--model", str(bert), "--devices", "cpu", "--contexts", "8", "--no-save"])
    assert code != 0
    with pytest.raises(UserError, match="generation speed is measured for a causal LM"):
        from mpsstudio.engine.models.hf_folder import read_folder

        timing.load(read_folder(str(bert)), torch.float32)


def test_no_context_that_fits_measures_nothing_and_exits_1(gpt, capsys):
    from mpsstudio import cli

    code = cli.main(["generate", "--model", str(gpt), "--devices", "cpu", "--contexts", "100", "--new-tokens", "8",
                     "--no-save"])
    out = capsys.readouterr().out
    assert code == 1 and "was not measured: context 100: with 8 new tokens it passes the 64 positions" in out
    assert "First token (ms)" not in out  # no empty table


def test_a_decode_within_the_first_tokens_noise_is_no_figure():
    class Jumpy(Known):
        """Its whole generation sometimes takes less than its first token (a busy machine's noise)."""

        calls = 0

        def generate(self, input_ids, max_new_tokens, **_):
            Jumpy.calls += 1
            time.sleep(0.02 if max_new_tokens == 1 else 0.005)
            return torch.cat([input_ids, torch.zeros((1, max_new_tokens), dtype=torch.long)], 1)

    row = timing.measure(Jumpy(0, 0), devices.cpu_device(), context=4, new_tokens=3, batch=1, repeats=3, vocab=9)
    assert row["decode_tps"] is None and "too short to tell" in row["decode_note"]
    assert row["ttft_ms"][1] >= 20.0
    said = words.sentence({"model": "m", "rows": [{"device": "cpu", "precision": "fp32", **row}], "notes": []})
    assert "decode is too short to tell" in said and "tokens/s" not in said.split("decode is")[1].split(",")[0]
