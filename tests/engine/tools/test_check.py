"""The device check (`mpsstudio check`, tools/check/): every case against a float64 CPU reference in four states,
a wrong kernel found by the seam the product owns (MPSSTUDIO_CHECK_FAULT), never by weakening the reference."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from mpsstudio import cli
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.machine.devices import cpu_device
from mpsstudio.engine.tools.check import modes, suite, timing, words
from mpsstudio.engine.tools.check import since as check_since
from mpsstudio.engine.tools.records.check import CheckResult
from tests.support.paths import DATA

ALL = [(case, dtype) for case in suite.SUITE for dtype in case.dtypes]
CASES = [(case, dtype) for case, dtype in ALL if not case.gpu_only]  # what the CPU runs


def test_the_tolerance_is_derived_from_the_dtype_and_the_longest_sum():
    assert suite.tolerance("fp32", 1) == pytest.approx(8 * 2.0 ** -24)
    assert suite.tolerance("fp32", 32767) == pytest.approx(4 * 2.0 ** -24 * (math.sqrt(32767) + 1))
    assert suite.tolerance("bf16", 64) == pytest.approx(4 * 2.0 ** -8 * 9)
    # every case and dtype of the suite catches a result 25 % off, the known issues' scale (0.1 to 1 of scale)
    assert max(suite.tolerance(dtype, case.k) for case, dtype in ALL) < 0.25


@pytest.mark.parametrize("case, dtype", CASES, ids=[f"{c.id}-{d}" for c, d in CASES])
def test_each_case_passes_here_and_a_wrong_result_of_it_is_found(case, dtype):
    cpu = cpu_device()
    right = suite.check_case(case, dtype, cpu)
    assert right["status"] == "passed", right
    assert 0 <= right["error"] <= right["tolerance"] and right["repeat_error"] == 0.0  # the CPU repeats itself exactly
    wrong = suite.check_case(case, dtype, cpu, fault="scaled")
    assert wrong["status"] == "wrong" and wrong["error"] == pytest.approx(0.25, rel=0.05)
    assert "over the tolerance" in wrong["reason"]
    assert (case.issue in wrong["reason"]) == case.issue.startswith("pytorch#")  # a known issue is named


def test_check_on_the_cpu_passes_with_one_table_and_one_sentence_and_is_kept(capsys):
    assert cli.main(["check", "--devices", "cpu", "--processes", "0"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:5] == ["device", "operation", "shape", "dtype", "verdict"]
    assert f"cpu: all {len(CASES)} cases of the suite agree with a float64 CPU reference" in out
    [kept] = RunStore().tools()
    assert kept.kind == "check" and CheckResult.of(kept.result).devices == ["cpu"]


def test_a_fault_injected_for_one_case_exits_1_naming_the_operation_shape_and_dtype(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(suite.FAULT_ENV, "matmul-t:fp32")
    out_file = tmp_path / "check.json"
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--json", str(out_file)]) == 1
    sentence = capsys.readouterr().out.strip().splitlines()[-1]
    assert sentence.startswith("matrix product, transposed left (16x32767).T @ (32767x16) in fp32 on cpu is wrong: "
                               "off by 0.25 of its scale")
    assert "pytorch#193487" in sentence
    rows = json.loads(out_file.read_text())["rows"]
    assert [(r["case"], r["dtype"]) for r in rows if r["status"] not in ("passed", "skipped")] == [("matmul-t", "fp32")]


def test_a_device_not_here_is_said_and_nothing_checked_is_not_a_pass(capsys):
    assert cli.main(["check", "--devices", "mps", "--processes", "0", "--no-save"]) == 1
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


@pytest.mark.parametrize("processes", ["-1", "101"])
def test_a_count_of_processes_out_of_range_is_one_sentence(processes, capsys):
    assert cli.main(["check", "--devices", "cpu", "--processes", processes]) == 2
    assert capsys.readouterr().err == f"mpsstudio: --processes must be a whole number from 0 to 100, not {processes}.\n"


@pytest.mark.parametrize("values, counts", [
    ([5.0, 5.1, 4.9, 5.05, 12.0, 12.1, 11.8, 5.0, 4.95, 12.3], [6, 4]),  # pytorch#182815's shape: two modes
    ([5.0, 5.1, 4.9, 5.05, 5.0, 4.95, 5.1, 5.0, 5.02, 6.5], [10]),  # one slow process: a busy moment, one mode
    ([5.0, 5.5, 6.0, 6.6, 7.2, 7.9], [6]),  # spread, no gap
    ([5.0, 5.2, 11.0, 11.3], [2, 2]),
    ([5.0, 12.0], [2]),  # too few for two modes
])
def test_modes_are_told_by_a_gap_wider_than_either_side(values, counts):
    assert [len(m) for m in modes.split(values)] == counts


def test_the_sentences_of_one_mode_and_of_two():
    two = modes.distribution("mps", "2048x2048x2048 fp32", [5.0, 5.1, 4.9, 12.0, 12.2, 5.0])["sentence"]
    assert two == ("2048x2048x2048 fp32 on mps: two modes: 2 of 6 fresh processes ran it 2.4x slower (12.10 ms "
                   "[12.00-12.20] vs 5.00 ms [4.90-5.10]): a kernel chosen per process, pytorch#182815's shape.")
    one = modes.distribution("cpu", "1024x1024x1024 fp32", [5.0, 5.1, 4.9])["sentence"]
    assert one == "1024x1024x1024 fp32 on cpu: one mode over 3 fresh processes, 5.00 ms [4.90-5.10]."
    assert "too few" in modes.distribution("cpu", "x", [5.0, 5.1])["sentence"]


@pytest.mark.parametrize("text, seen", [("2.4@1,3", (2.4, {1, 3})), ("", (1.0, set())), ("x@1", (1.0, set())),
                                        ("0.5@2", (1.0, {2}))])
def test_the_slow_seam_reads_a_factor_and_processes(text, seen):
    assert timing.slow_processes(text) == seen


@pytest.mark.long
def test_a_slow_kernel_in_some_fresh_processes_is_two_modes_with_their_counts(monkeypatch, capsys, tmp_path):
    """Five real fresh processes (spawned, each importing torch), two of them made 5x slower by the seam: they are
    the two slowest of every shape, each shape's modes are what its own timings split into (analysis/repeat.split),
    and the sentence says them. Two modes, "2 of 5", where the machine let the other three agree: a busy machine
    can slow one of them 2-3x, and then one mode is the product's true answer (a busy moment is not a kernel),
    which CI met with another test beside it; the sentence of two modes is held exactly by the test of split above."""
    monkeypatch.setenv(timing.SLOW_ENV, "5@1,3")
    out_file = tmp_path / "check.json"
    assert cli.main(["check", "--devices", "cpu", "--processes", "5", "--no-save", "--json", str(out_file)]) == 0
    out = capsys.readouterr().out
    rows = json.loads(out_file.read_text())["timing"]
    assert sorted(r["shape"] for r in rows) == sorted(f"{m}x{m}x{m} fp32" for m in timing.SHAPES)
    for row in rows:
        ms = row["ms"]
        assert len(ms) == 5 and sorted(sorted(range(5), key=ms.__getitem__)[-2:]) == [1, 3], row
        assert row["modes"] == [modes.mode_record(m) for m in modes.split(ms)]
        assert row["sentence"] in out
        fast, slow = sorted(ms)[:3], sorted(ms)[3:]
        if fast[-1] / fast[0] < 1.5 and slow[-1] / slow[0] < 1.5:  # each side agrees: two modes, the seam's two slow
            assert f"{row['shape']} on cpu: two modes: 2 of 5 fresh processes ran it " in row["sentence"], row


def _check(rows=(), timing=(), torch="2.14.1", host="mac-1", chip="Apple M2 Pro") -> dict:
    return {"tool": "check", "suite": suite.SUITE_VERSION, "devices": ["mps"], "rows": list(rows), "sentence": "",
            "timing": list(timing), "env": {"chip": chip, "hostname": host, "torch": torch, "os": "macOS 26.2"}}


def _row(status="passed", case="linear", dtype="bf16") -> dict:
    return {"device": "mps", "case": case, "operation": "Linear(2, 192)", "shape": "(80x1x2)", "dtype": dtype,
            "tolerance": 0.04, "error": 0.001 if status == "passed" else 0.3, "status": status}


def _timed(median: float) -> dict:
    return {"device": "mps", "shape": "2048x2048x2048 fp32", "ms": [median * 0.98, *[median] * 3, median * 1.02],
            "sentence": "",
            "modes": [{"count": 5, "median_ms": median, "low_ms": median * 0.98, "high_ms": median * 1.02}]}


def test_a_check_says_what_changed_since_the_last_check_of_the_same_machine():
    earlier = {**_check([_row()], [_timed(5.0)]), "created_at": "2026-12-01T09:00:00+00:00"}
    other_mac = {**_check([_row("wrong")], host="mac-2"), "created_at": "2026-12-02T09:00:00+00:00"}
    now = check_since.since(_check([_row("wrong")], [_timed(6.5)], torch="2.15.0"), [other_mac, earlier])
    said = words.check_sentence(now)
    assert "Since the check of " in said and "(torch 2.14.1 -> 2.15.0)" in said
    assert "Linear(2, 192) (80x1x2) in bf16 on mps passed, now wrong" in said
    assert "the 2048x2048x2048 fp32 product on mps 5.00 ms, now 6.50 ms (1.30x slower)" in said


def test_the_same_results_since_are_said_so_and_times_within_their_ranges_are_not_a_change():
    earlier = {**_check([_row()], [_timed(5.0)]), "created_at": "2026-12-01T09:00:00+00:00"}
    now = check_since.since(_check([_row()], [_timed(5.05)]), [earlier])
    assert now["since"]["changes"] == [] and now["since"]["compared"] == 2
    assert words.check_sentence(now).endswith("(the same versions): the same verdicts, and the products' times "
                                              "within their ranges.")


def test_a_check_of_another_machine_or_none_is_not_compared():
    assert "since" not in check_since.since(_check([_row()]), [{**_check([_row()], host="mac-2"), "created_at": "x"}])
    assert "since" not in check_since.since(_check([_row()]), [])


def test_a_second_check_on_this_machine_says_since_in_its_sentence(capsys):
    assert cli.main(["check", "--devices", "cpu", "--processes", "0"]) == 0
    capsys.readouterr()
    assert cli.main(["check", "--devices", "cpu", "--processes", "0"]) == 0
    said = capsys.readouterr().out.strip().splitlines()[-1]
    assert "Since the check of " in said and "on this machine (the same versions): the same verdicts" in said
    later = RunStore().tools()[-1]
    assert later.result["since"]["compared"] == len(ALL)  # kept with the result, said again on every read


OTHER = Path(__file__).resolve().parents[3] / ".venv-other" / "bin" / "python"


@pytest.mark.long
@pytest.mark.skipif(not OTHER.exists(), reason="no second torch: `make other-torch` makes .venv-other (CI does)")
def test_a_check_with_another_torch_says_what_changed_since_the_first(capsys):
    """The issue's case: a check, then one in another Python environment (.venv-other's torch 2.13), compared."""
    import torch

    assert cli.main(["check", "--devices", "cpu", "--processes", "0"]) == 0
    capsys.readouterr()
    assert cli.main(["check", "--devices", "cpu", "--processes", "3", "--python", str(OTHER)]) == 0
    said = capsys.readouterr().out.strip().splitlines()[-1]
    assert f"on this machine (torch {torch.__version__} -> 2.13." in said and "the same verdicts" in said


def test_an_environment_that_is_no_python_is_one_sentence(capsys, tmp_path):
    assert cli.main(["check", "--devices", "cpu", "--python", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mpsstudio: No Python at ") and len(err.splitlines()) == 1


def test_on_cuda_fp32_is_judged_as_the_tf32_the_settings_allow():
    import torch

    from mpsstudio.engine.machine.devices import Device

    gpu = Device(id="cuda:0", kind="cuda", available=True)
    conv, product = suite.BY_ID["conv2d"], suite.BY_ID["matmul-t"]
    before = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32  # (switches, not attributes)
    try:
        torch.backends.cudnn.allow_tf32 = True  # PyTorch's default: cuDNN may use TF32
        torch.backends.cuda.matmul.allow_tf32 = False  # its default for products
        assert suite.promised(conv, "fp32", gpu) == "tf32" and suite.promised(product, "fp32", gpu) == "fp32"
        torch.backends.cuda.matmul.allow_tf32 = True
        assert suite.promised(product, "fp32", gpu) == "tf32" and suite.promised(product, "bf16", gpu) == "bf16"
        assert suite.promised(conv, "fp32", cpu_device()) == "fp32"  # the CPU promises what it is given
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = before
    assert suite.tolerance("tf32", 144) == pytest.approx(4 * 2.0 ** -11 * 13)


def test_a_device_left_out_is_said_beside_what_was_checked(capsys):
    assert cli.main(["check", "--devices", "cpu,mps", "--processes", "0", "--no-save"]) == 0
    said = capsys.readouterr().out.strip().splitlines()[-1]
    assert "Not checked: mps: " in said and said.startswith("cpu: all ")


def _spread(median: float, low: float, high: float, n: int = 5, slow: dict | None = None) -> dict:
    """A product's timing over n processes (its fastest mode's median and range), and a slower mode of its own."""
    ms = ([low] + [median] * (n - 2) + [high] if n >= 2 else [median] * n)
    if slow:
        ms += [slow["low_ms"]] + [slow["median_ms"]] * (slow["count"] - 2) + [slow["high_ms"]]
    return {"device": "mps", "shape": "2048x2048x2048 fp32", "ms": ms, "sentence": "",
            "modes": [{"count": n, "median_ms": median, "low_ms": low, "high_ms": high}, *([slow] if slow else [])]}


@pytest.mark.parametrize("then, now, verdict, said", [
    ([_row()], [_row("wrong")], "a real change", "Linear(2, 192) (80x1x2) in bf16 on mps passed, now wrong"),
    ([_row("wrong")], [_row()], "no real change", "in bf16 on mps wrong, now passed"),  # better is not a failure
    ([_row()], [_row()], "no real change", "the same verdicts. Verdict"),  # no product timed: no word of times
    ([_row(case="other")], [_row()], "cannot tell", "nothing of the two checks is the same case"),
])
def test_a_baseline_s_verdicts_decide_a_real_change(then, now, verdict, said):
    base = {**_check(then), "created_at": "2026-12-01T09:00:00+00:00"}
    found = CheckResult.of(check_since.against(_check(now), base, "base.json")).baseline
    assert found is not None and found.verdict == verdict
    text = check_since.since_sentence(found, baseline=True)
    assert text.startswith("Against the baseline base.json (the check of ") and said in text, text
    assert text.endswith(f"Verdict: {verdict}.")


@pytest.mark.parametrize("then, now, verdict, said", [
    ((5.0, 4.9, 5.1), (6.0, 5.9, 6.1), "a real change", "5.00 ms, now 6.00 ms (1.20x slower)"),
    ((5.0, 4.9, 5.1), (5.2, 5.15, 5.25), "no real change", "1.04x slower"),  # apart, but within --fail-over
    ((5.0, 4.0, 6.5), (6.0, 5.0, 7.0), "cannot tell", "their processes' ranges overlap"),  # noise: never exit 1
    ((5.0, 4.9, 5.1), (4.0, 3.9, 4.1), "no real change", "1.25x faster"),
])
def test_a_baseline_s_times_are_a_real_change_only_beyond_the_noise_and_the_threshold(then, now, verdict, said):
    base = {**_check([_row()], [_spread(*then)]), "created_at": "2026-12-01T09:00:00+00:00"}
    found = CheckResult.of(check_since.against(_check([_row()], [_spread(*now)]), base, "b.json")).baseline
    assert found is not None and found.verdict == verdict, found
    assert said in check_since.since_sentence(found, baseline=True)


def test_a_slower_mode_that_appears_is_a_real_change_and_other_machines_times_cannot_tell():
    base = {**_check([_row()], [_spread(5.0, 4.9, 5.1, n=10)]), "created_at": "2026-12-01T09:00:00+00:00"}
    slow = {"count": 4, "median_ms": 12.0, "low_ms": 11.8, "high_ms": 12.3}
    now = _check([_row()], [_spread(5.0, 4.9, 5.1, n=10, slow=slow)])
    found = CheckResult.of(check_since.against(now, base, "b.json")).baseline
    assert found is not None and found.verdict == "a real change"
    assert "one mode, now two modes (4 of 14 processes slower)" in check_since.since_sentence(found, baseline=True)
    other = CheckResult.of(check_since.against(_check([_row()], [_spread(9.0, 8.9, 9.1)], chip="Apple M4"), base,
                                               "b.json")).baseline
    assert other is not None and other.verdict == "cannot tell" and not other.same_machine
    text = check_since.since_sentence(other, baseline=True)
    assert "(the check of " in text and ", of another machine, the same versions)" in text
    assert "was timed on another machine, so its times are not compared" in text
    few = CheckResult.of(check_since.against(_check([_row()], [_spread(9.0, 8.9, 9.1, n=2)]), base, "b.json"))
    assert few.baseline is not None and few.baseline.verdict == "cannot tell"


def test_check_baseline_exits_0_for_the_same_1_for_a_wrong_case_and_3_when_nothing_compares(
        capsys, tmp_path, monkeypatch):
    base = tmp_path / "base.json"
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--json", str(base), "--no-save"]) == 0
    capsys.readouterr()
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--baseline", str(base), "--no-save"]) == 0
    out = capsys.readouterr().out
    assert out.count("Against the baseline base.json") == 1 and "Since the check" not in out
    assert out.rstrip().endswith("Verdict: no real change.")
    monkeypatch.setenv(suite.FAULT_ENV, "linear:fp32")
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--baseline", str(base), "--no-save"]) == 1
    assert capsys.readouterr().out.rstrip().endswith("Verdict: a real change.")
    monkeypatch.delenv(suite.FAULT_ENV)
    doc = json.loads(base.read_text())
    for row in doc["rows"]:
        row["case"] = "renamed-" + row["case"]
    base.write_text(json.dumps(doc))
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--baseline", str(base), "--no-save"]) == 3
    assert "nothing of the two checks is the same case" in capsys.readouterr().out


@pytest.mark.parametrize("args, said", [
    (["--baseline", "nowhere.json"], "does not exist; choose a JSON file exported by MPS Studio."),
    (["--baseline", " "], "--baseline needs the JSON file of an earlier check (its --json)."),
    (["--fail-over", "5%"], "--fail-over is the threshold of a comparison with a baseline: give --baseline FILE too."),
    (["--baseline", "{sweep}", "--fail-over", "5%"], "holds a sweep result, not a check;"),
    (["--baseline", "{check}", "--fail-over", "lots"], "--fail-over must be a percentage above 0 and below 100"),
    (["--baseline", "{check}", "--json", "{check}"], "--json"),
])
def test_a_bad_baseline_is_one_sentence_before_anything_runs(capsys, tmp_path, monkeypatch, args, said):
    from mpsstudio.engine.tools import registry

    sweep = tmp_path / "sweep.json"
    sweep.write_text((DATA / "tool_results" / "sweep.json").read_text())
    check = tmp_path / "check.json"
    check.write_text((DATA / "tool_results" / "check.json").read_text())
    monkeypatch.setitem(registry.TOOLS, "check", replace(registry.TOOLS["check"], run="nowhere:never"))  # none runs
    args = [a.format(sweep=sweep, check=check) for a in args]
    assert cli.main(["check", "--devices", "cpu", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and said in err, err
    assert json.loads(check.read_text())  # never written over


def test_the_product_past_2_31_bytes_is_checked_whole_for_finite_values_and_by_rows_against_float64():
    """JuliaGPU/Metal.jl#381's shape: a NaN anywhere in the product, even in a row the float64 comparison does not
    sample, makes every checked value NaN (so the case is wrong); the rows' reference is exact in float64."""
    case = suite.BY_ID["matmul-2g"]
    assert (suite.BIG_M + 2 * suite.BIG_K) * suite.BIG_N * 4 > 2 ** 31
    product = torch.ones(suite.BIG_M, 16)
    assert torch.isfinite(suite._rows_if_finite(product)).all()
    product[1, 3] = math.nan  # row 1 is not among the rows compared
    assert 1 not in set(suite.ROWS_CHECKED.tolist()) and torch.isnan(suite._rows_if_finite(product)).all()
    a, b = torch.randn(suite.BIG_M, 8), torch.randn(8, 5000)  # two chunks of columns
    ref = suite._big_reference(a, b)
    assert ref.dtype == torch.float64 and torch.allclose(ref, (a.double() @ b.double())[suite.ROWS_CHECKED])
    assert case.id in suite.PRODUCTS  # judged as the TF32 CUDA's settings allow


def test_the_big_product_runs_only_where_the_device_has_room_and_never_on_the_cpu():
    from mpsstudio.engine.machine.devices import Device

    case = suite.BY_ID["matmul-2g"]
    cpu = cpu_device()
    row = suite.check_case(case, "fp32", cpu)
    assert row["status"] == "skipped" and row["reason"].startswith("not on the CPU: ")
    small = Device(id="mps", kind="mps", available=True, memory_total=8 << 30)
    unknown = Device(id="mps", kind="mps", available=True, memory_total=None)
    assert "this device has 8.0 GiB" in suite.not_here(case, small)
    assert "this device's memory is not known" in suite.not_here(case, unknown)
    assert suite.not_here(case, Device(id="cuda:0", kind="cuda", available=True, memory_total=140 << 30)) == ""
    assert suite.not_here(suite.BY_ID["linear"], cpu) == ""


def test_the_big_product_s_own_path_finds_a_wrong_or_nan_result_at_a_size_the_cpu_runs(monkeypatch):
    """The case's real operation, reference and row sampling, shrunk so the CPU runs it (its shape is a GPU's)."""
    monkeypatch.setattr(suite, "BIG_M", 512)
    monkeypatch.setattr(suite, "BIG_K", 256)
    monkeypatch.setattr(suite, "BIG_N", 4608)
    monkeypatch.setattr(suite, "ROWS_CHECKED", torch.linspace(0, 511, 64).round().long())
    case = replace(suite.BY_ID["matmul-2g"], gpu_only="", needs_bytes=0, k=256)
    cpu = cpu_device()
    assert suite.check_case(case, "fp32", cpu)["status"] == "passed"
    assert suite.check_case(case, "fp32", cpu, fault="scaled")["status"] == "wrong"
    real = torch.Tensor.__matmul__
    monkeypatch.setattr(torch.Tensor, "__matmul__", lambda a, b: real(a, b).index_fill_(0, torch.tensor([1]), math.nan)
                        if a.dtype == torch.float32 else real(a, b))  # a NaN in a row the rows compared leave out
    nan = suite.check_case(case, "fp32", cpu)
    assert nan["status"] == "wrong" and "not finite" in nan["reason"], nan


def test_check_model_adds_your_model_as_a_whole_and_a_wrong_forward_of_it_exits_1(capsys, monkeypatch):
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--model", "mnist_cnn", "--no-save"]) == 0
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "your model mnist_cnn" in ln]
    assert line.split()[-5] == "passed" and "batch 8, forward and backward" in line
    assert "Your model: inspect's parity" in out and f"all {len(CASES) + 1} cases" in out
    monkeypatch.setenv(suite.FAULT_ENV, "model:fp32")
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--model", "mnist_cnn", "--no-save"]) == 1
    said = capsys.readouterr().out.strip().splitlines()[-1]
    assert said.startswith("your model mnist_cnn batch 8, forward and backward in fp32 on cpu is wrong: one forward "
                           "and backward is off by 0.2"), said  # the logits 0.25 off, the loss and gradients with them


@pytest.mark.parametrize("args, said", [
    (["--model", "nonesuch"], "Unknown model 'nonesuch'"),
    (["--dataset", "cifar10"], "--dataset is the data of the model the check adds: give --model too."),
    (["--model", "mnist_cnn", "--dataset", "nonesuch"], "Unknown dataset 'nonesuch'; choose one of: "),
])
def test_a_bad_model_for_the_check_is_one_sentence_before_anything_runs(capsys, monkeypatch, args, said):
    from mpsstudio.engine.tools import registry

    monkeypatch.setitem(registry.TOOLS, "check", replace(registry.TOOLS["check"], run="nowhere:never"))
    assert cli.main(["check", "--devices", "cpu", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and said in err, err


def test_a_model_that_raises_on_the_device_is_a_failed_case_and_the_suite_goes_on(tmp_path):
    from mpsstudio.engine.basics.config import RunConfig

    path = tmp_path / "broken.py"
    path.write_text("import torch\n\nclass M(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
                    "        self.l = torch.nn.Linear(4, n)\n    def forward(self, x):\n"
                    "        raise RuntimeError('no kernel for this here')\n\n"
                    "def build_model(num_classes, input_shape):\n    return M(num_classes)\n")
    row = suite.check_model(RunConfig(model=str(path), dataset="synthetic", device="cpu"), cpu_device())
    assert row["status"] == "failed" and row["reason"].startswith("no kernel for this here in the model (M)"), row


def test_your_model_s_step_is_timed_as_a_run_builds_it():
    from mpsstudio.engine.basics.config import RunConfig

    found = timing.time_model_step("cpu", RunConfig(model="mnist_cnn", dataset="synthetic", device="cpu").to_dict())
    [(name, ms)] = found.items()
    assert name == f"mnist_cnn training step, batch {timing.MODEL_BATCH} fp32" and ms > 0


def test_what_a_baseline_comparison_cannot_say_it_does_not_say():
    """Found by a hostile pass: no times claimed where none were compared; a baseline whose timing contradicts itself,
    or whose env says nothing of a version, is not reasoned on; a speed-up within the noise is no question; another
    suite version is said."""
    base = {**_check([_row()], [_spread(5.0, 4.9, 5.1)]), "created_at": "2026-12-01T09:00:00+00:00"}
    untimed = CheckResult.of(check_since.against(_check([_row()]), base, "b.json")).baseline
    assert untimed is not None and untimed.verdict == "no real change"
    assert "times" not in check_since.since_sentence(untimed, baseline=True)
    bad = {**base, "timing": [_spread(1.0, 6.89, 7.16)]}  # a median of 1.0 ms in a range of 6.89-7.16
    found = CheckResult.of(check_since.against(_check([_row()], [_spread(6.4, 6.3, 6.5)]), bad, "b.json")).baseline
    assert found is not None and found.verdict == "cannot tell" and "does not fit its processes' times" in \
        check_since.since_sentence(found, baseline=True)
    faster = CheckResult.of(check_since.against(_check([_row()], [_spread(4.6, 4.4, 5.0)]),
                                                {**base, "timing": [_spread(5.0, 4.5, 5.4)]}, "b.json")).baseline
    assert faster is not None and faster.verdict == "no real change" and not faster.undecided
    blank = {**base, "env": {"chip": "Apple M2 Pro", "hostname": "mac-1"}, "suite": "1999-01-01.1"}
    versions = CheckResult.of(check_since.against(_check([_row()]), blank, "b.json")).baseline
    assert versions is not None and versions.versions == [f"suite 1999-01-01.1 -> {suite.SUITE_VERSION}"]
    assert words.arguments({"devices": "cpu,CPU, cpu"})["devices"] == ["cpu"]


def _model_file(tmp_path, body: str) -> str:
    path = tmp_path / "m.py"
    path.write_text("import torch\n\n" + body)
    return str(path)


def test_a_model_that_does_not_build_is_bad_input_before_the_suite_runs(capsys, tmp_path):
    model = _model_file(tmp_path, "def build_model(num_classes, input_shape):\n    return 42\n")
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--model", model, "--no-save"]) == 2
    captured = capsys.readouterr()
    assert "returned int, not a torch.nn.Module" in captured.err and "Traceback" not in captured.err
    assert "matrix product" not in captured.out  # the suite did not run


def test_a_model_whose_own_float64_output_is_nan_is_skipped_not_blamed_on_the_device(tmp_path):
    from mpsstudio.engine.basics.config import RunConfig

    model = _model_file(tmp_path, "class M(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
                                  "        self.l = torch.nn.Linear(3 * 32 * 32, n)\n"
                                  "    def forward(self, x):\n        return self.l(x.flatten(1)) * float('nan')\n\n"
                                  "def build_model(num_classes, input_shape):\n    return M(num_classes)\n")
    row = suite.check_model(RunConfig(model=model, dataset="synthetic", device="cpu"), cpu_device())
    assert row["status"] == "skipped" and "the model, not the device" in row["reason"], row


def test_a_wrong_case_against_a_baseline_says_why_it_exits_1(capsys, tmp_path, monkeypatch):
    base = tmp_path / "base.json"
    assert cli.main(["check", "--devices", "cpu", "--processes", "0", "--json", str(base), "--no-save"]) == 0
    monkeypatch.setenv(suite.FAULT_ENV, "model:fp32")  # a case the baseline has not: no change, yet wrong
    args = ["check", "--devices", "cpu", "--processes", "0", "--model", "mnist_cnn", "--baseline", str(base),
            "--no-save"]
    assert cli.main(args) == 1
    said = capsys.readouterr().out.strip().splitlines()[-1]
    assert said.endswith("Verdict: no real change. This check itself found a case wrong, so it exits 1 whatever the "
                         "baseline says."), said
