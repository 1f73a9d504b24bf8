"""The device check (`mpsstudio check`, tools/check/): every case against a float64 CPU reference in four states,
a wrong kernel found by the seam the product owns (MPSSTUDIO_CHECK_FAULT), never by weakening the reference."""

from __future__ import annotations

import json
import math

import pytest

from mpsstudio import cli
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.machine.devices import cpu_device
from mpsstudio.engine.tools.check import suite, words
from mpsstudio.engine.tools.records.check import CheckResult
from tests.support.paths import DATA

CASES = [(case, dtype) for case in suite.SUITE for dtype in case.dtypes]


def test_the_tolerance_is_derived_from_the_dtype_and_the_longest_sum():
    assert suite.tolerance("fp32", 1) == pytest.approx(8 * 2.0 ** -24)
    assert suite.tolerance("fp32", 32767) == pytest.approx(4 * 2.0 ** -24 * (math.sqrt(32767) + 1))
    assert suite.tolerance("bf16", 64) == pytest.approx(4 * 2.0 ** -8 * 9)
    # every case and dtype of the suite catches a result 25 % off, the known issues' scale (0.1 to 1 of scale)
    assert max(suite.tolerance(dtype, case.k) for case, dtype in CASES) < 0.25


@pytest.mark.parametrize("case, dtype", CASES, ids=[f"{c.id}-{d}" for c, d in CASES])
def test_each_case_passes_here_and_a_wrong_result_of_it_is_found(case, dtype):
    cpu = cpu_device()
    right = suite.check_case(case, dtype, cpu)
    assert right["status"] == "passed", right
    assert 0 <= right["error"] <= right["tolerance"] and right["repeat_error"] == 0.0  # the CPU repeats itself exactly
    wrong = suite.check_case(case, dtype, cpu, fault="scaled")
    assert wrong["status"] == "wrong" and wrong["error"] == pytest.approx(0.25, rel=0.05)
    assert case.issue in wrong["reason"] and "over the tolerance" in wrong["reason"]


def test_check_on_the_cpu_passes_with_one_table_and_one_sentence_and_is_kept(capsys):
    assert cli.main(["check", "--devices", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:5] == ["device", "operation", "shape", "dtype", "verdict"]
    assert f"cpu: all {len(CASES)} cases of the suite agree with a float64 CPU reference" in out
    [kept] = RunStore().tools()
    assert kept.kind == "check" and CheckResult.of(kept.result).devices == ["cpu"]


def test_a_fault_injected_for_one_case_exits_1_naming_the_operation_shape_and_dtype(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(suite.FAULT_ENV, "matmul-t:fp32")
    out_file = tmp_path / "check.json"
    assert cli.main(["check", "--devices", "cpu", "--json", str(out_file)]) == 1
    sentence = capsys.readouterr().out.strip().splitlines()[-1]
    assert sentence.startswith("matrix product, transposed left (16x32767).T @ (32767x16) in fp32 on cpu is wrong: "
                               "off by 0.25 of its scale")
    assert "pytorch#193487" in sentence
    rows = json.loads(out_file.read_text())["rows"]
    assert [(r["case"], r["dtype"]) for r in rows if r["status"] != "passed"] == [("matmul-t", "fp32")]


def test_a_device_not_here_is_said_and_nothing_checked_is_not_a_pass(capsys):
    assert cli.main(["check", "--devices", "mps", "--no-save"]) == 1
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("Nothing was checked (mps: ")


@pytest.mark.parametrize("devices", ["gpu", "cpu,mps!", "cuda:1234"])
def test_a_name_that_is_no_device_is_one_sentence(devices, capsys):
    assert cli.main(["check", "--devices", devices]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mpsstudio: --devices: ") and "is not a device" in err and len(err.splitlines()) == 1


def test_a_stored_check_reads_back_with_the_same_words():
    data = json.loads((DATA / "tool_results" / "check.json").read_text())
    assert words.check_sentence(data) == data["sentence"]
    assert not words.failed(data) and words.subject(data) == f"cpu (suite {data['suite']})"
