"""A sweep's and a tune's work for both front ends (process/series.py): what they hand over is checked as every tool
result is, so a view never meets a value it cannot read."""

from __future__ import annotations

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.process import series
from mpsstudio.engine.tools import sweep as sweeps


def test_a_sweep_is_handed_over_checked(monkeypatch):
    monkeypatch.setattr(sweeps, "run", lambda *a, **k: [])
    monkeypatch.setattr(sweeps, "analyse", lambda runs, config, steps: {
        "sentence": "s\u202e", "best": {}, "points": [{"device": "cpu", "batch_size": 8, "status": "finished"}]})
    result = series.sweep(RunConfig(), ["cpu"], [8], steps=2, warmup=1, point=lambda c: None,
                          should_stop=lambda: False, say=lambda line: None)
    assert result["sentence"] == "s?"  # read back as a stored one is: a right-to-left override shown as "?"


def test_a_sweep_whose_analysis_cannot_be_read_is_one_sentence(monkeypatch, capsys):
    monkeypatch.setattr(sweeps, "run", lambda *a, **k: [])
    monkeypatch.setattr(sweeps, "analyse", lambda runs, config, steps: {
        "sentence": "s", "best": {}, "points": [{"device": "cpu", "batch_size": 0}]})
    with pytest.raises(UserError, match=r"^MPS Studio's analysis of the runs holds a sweep result whose "
                                        r"points\[0\]\.batch_size is 0, below 1, so it was not kept\.$"):
        series.sweep(RunConfig(), ["cpu"], [8], steps=2, warmup=1, point=lambda c: None,
                     should_stop=lambda: False, say=lambda line: None)
    code = cli.main(["sweep", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--batch-sizes", "8"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT and "Traceback" not in err and "so it was not kept." in err
