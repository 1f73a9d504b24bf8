"""Did something else change the numbers? `history --compare`, and `bench --baseline` as a regression check for
scripts (exit 1 on a slower run beyond the threshold and the noise, 0 on a repeat)."""

from __future__ import annotations

import json

import pytest

from mpsstudio import cli
from mpsstudio.engine.analysis import regression
from tests.support.runs import noisy_rates, run_with

# A model whose steps are paced by a clock the environment sets (SLEEPY_S a step): slowed on purpose, and as steady
# on a busy machine as on a quiet one (a late wake-up is made up by the next step, so no window's rate wanders)
SLEEPY = '''
import os, time
from torch import nn

class Sleepy(nn.Module):
    def __init__(self, num_classes, features):
        super().__init__()
        self.head = nn.Linear(features, num_classes)
        self.due = None

    def forward(self, x):
        step = float(os.environ.get("SLEEPY_S", "0.005"))
        now = time.perf_counter()
        self.due = now if self.due is None or self.due < now - 10 * step else self.due
        self.due += step
        if self.due > now:
            time.sleep(self.due - now)
        return self.head(x.flatten(1))

def build_model(num_classes, input_shape):
    size = 1
    for n in input_shape:
        size *= n
    return Sleepy(num_classes, size)
'''


def bench_sleepy(path, *extra):
    return cli.main(["bench", "--model", str(path), "--dataset", "synthetic", "--devices", "cpu", "--batch-size", "8",
                     "--image-size", "8", "--steps", "50", "--warmup", "2", "--no-inspect", *extra])


def _noisy(out: str) -> bool:
    return any("noisy" in line.split()[2:6] for line in out.splitlines() if line.startswith("cpu "))


def test_bench_baseline_fails_a_slowed_run_and_passes_a_repeat(tmp_path, monkeypatch, capsys):
    """A repeat is not a regression and a step four times as long is one, on a quiet machine (the suite's other
    worker is not counted as load here: the busy machine is the next test's); where this machine still makes a run
    noisy, the check says it cannot tell (exit 3) unless the interval between processes clears the threshold."""
    from mpsstudio.engine.machine import host

    real_stop = host.LoadMeter.stop
    monkeypatch.setattr(host.LoadMeter, "stop", lambda self: {**(real_stop(self) or {}), "other_cpu_percent": 0.0})
    model = tmp_path / "sleepy.py"
    model.write_text(SLEEPY)
    base = tmp_path / "base.json"
    assert bench_sleepy(model, "--json", str(base)) == 0
    base_noisy = _noisy(capsys.readouterr().out)
    code = bench_sleepy(model, "--baseline", str(base), "--fail-over", "20%")  # a repeat: never 1
    out = capsys.readouterr().out
    if base_noisy or _noisy(out):
        assert code == cli.EXIT_CANNOT_TELL and "The check cannot tell" in out, out
    else:
        assert code == 0 and ("not a regression" in out or "not slower" in out), out
    monkeypatch.setenv("SLEEPY_S", "0.02")  # each step four times as long
    code = bench_sleepy(model, "--baseline", str(base), "--fail-over", "20%")
    out = capsys.readouterr().out
    if base_noisy or _noisy(out):  # noisy windows: a verdict only where the interval between processes clears 20 %
        assert (code == 1 and "a regression (though " in out) or (
            code == cli.EXIT_CANNOT_TELL and "The check cannot tell" in out), out
    else:
        assert code == 1 and "a regression." in out, out
        assert "x the baseline's throughput [" in out and "the runs differ in" not in out, out  # nothing differs
    # the history's run id works as a baseline too, and differences are named (threads)
    from mpsstudio.engine.history.store import RunStore

    first = RunStore().all()[0]
    monkeypatch.setenv("SLEEPY_S", "0.005")
    assert bench_sleepy(model, "--baseline", first.id[:8], "--threads", "1") in (0, 1, cli.EXIT_CANNOT_TELL)
    assert "the runs differ in 1 CPU thread" in capsys.readouterr().out


def test_a_repeat_on_a_busy_machine_is_never_called_a_regression(tmp_path, capsys, monkeypatch):
    """Other programs keep the CPU busy while the new runs are measured (the load meter reads 60 % of the machine
    used by others, as psutil reports a busy machine; a real CPU hog here would slow the suite's other worker too): the
    check says it cannot tell, naming the load, and exits 3 (never 1, never bad input), whatever the runs measured."""
    from mpsstudio.engine.machine import host

    model = tmp_path / "sleepy.py"
    model.write_text(SLEEPY)
    real_stop = host.LoadMeter.stop
    monkeypatch.setattr(host.LoadMeter, "stop", lambda self: {**(real_stop(self) or {}), "other_cpu_percent": 0.0})
    base = tmp_path / "base.json"
    assert bench_sleepy(model, "--json", str(base)) == 0
    capsys.readouterr()
    monkeypatch.setattr(host.LoadMeter, "stop", lambda self: {**(real_stop(self) or {}), "other_cpu_percent": 60.0})
    monkeypatch.setenv("SLEEPY_S", "0.01")  # and the new runs really are slower: still not a verdict
    code = bench_sleepy(model, "--baseline", str(base))
    out = capsys.readouterr().out
    assert code == cli.EXIT_CANNOT_TELL, out
    assert "The check cannot tell: the new run" in out and "other programs used 60 % of the CPU" in out


@pytest.mark.parametrize("args, words", [
    (["--baseline", "missing.json"], "no such file"),
    (["--baseline", "nope"], "No run with id nope"),
    (["--baseline", "BAD", "--fail-over", "five"], "--fail-over must be a percentage"),
    (["--fail-over", "5%"], "give --baseline RUN|FILE too"),
    (["--baseline", "BAD"], "BAD is not valid JSON"),
    (["--baseline", "OTHER"], "another setup"),
    (["--baseline", "OTHER", "--batch-size", "16", "--model", "mlp"], "ran on mps and this bench on cpu"),
])
def test_bench_baseline_bad_input_is_one_sentence_exit_2(tmp_path, monkeypatch, capsys, args, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "BAD").write_text("{not json")
    other = run_with("mps", noisy_rates(900, 0.02), batch_size=16, model="mlp", dataset="synthetic")
    from mpsstudio.engine.history.runfiles import export_json

    export_json([other], tmp_path / "OTHER")
    base = ["bench", "--model", "mnist_cnn", "--dataset", "synthetic", "--devices", "cpu", "--steps", "5"]
    code = cli.main(base + args)  # later flags win: --model mlp, --batch-size 16 in the last case
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _runs(center: float, day: int, spread: float = 0.02, processes: int = 3, wander: float = 0.01):
    """`processes` runs of one setup, each a process whose median wanders by `wander` from the next's."""
    return [run_with("cpu", noisy_rates(center * (1 + wander * (i - 1)), spread, seed=10 * day + i),
                     created=f"2026-11-0{day}T10:0{i}:00+00:00") for i in range(processes)]


def test_regression_rule():
    """The interval is between processes (each run counted once, by its median), and a noisy run never decides."""
    base = _runs(1000, 1)
    [r] = regression.regressions(base, _runs(900, 2), 0.05)
    assert r.regressed and "a regression" in r.sentence() and "3 new runs against 3 baseline runs" in r.sentence()
    [r] = regression.regressions(base, _runs(900, 2), 0.15)
    assert not r.regressed and "by less than 15 %" in r.sentence()
    [r] = regression.regressions(base, _runs(990, 3, wander=0.08), 0.05)
    assert not r.regressed and "within the noise" in r.sentence()  # processes that wander: no clear difference
    noisy = _runs(980, 4, spread=0.6)  # noisy windows, an interval that does not clear the threshold: no verdict
    [r] = regression.regressions(base, noisy, 0.05)
    assert not r.regressed and r.undecided and "The check cannot tell: the new runs" in r.sentence()
    [r] = regression.regressions(base, _runs(500, 4, spread=0.6), 0.05)  # twice as slow between processes: a verdict
    assert r.regressed and "a regression (though the new runs" in r.sentence()
    faster = _runs(1200, 5)
    assert regression.regressions(base, faster, 0.05)[0].sentence().endswith("not slower.")
    [r] = regression.regressions(base[:1], _runs(900, 6, processes=1), 0.05)  # one process a side: cannot tell
    assert r.undecided and not r.regressed and "from one run a side" in r.sentence()
    # a one-run baseline: the interval's spread is the new side's processes, said so, and a doubled step is a verdict
    [r] = regression.regressions(base[:1], _runs(500, 7), 0.05)
    assert r.regressed and "its spread measured between the new side's processes (the baseline has one run)" in r.sentence()
    # processes whose throughputs vary tenfold: an interval that says nothing is said so, never "no clear difference"
    wild = [run_with("cpu", noisy_rates(rate, 0.02, seed=80 + i), created=f"2026-11-08T10:0{i}:00+00:00")
            for i, rate in enumerate((300.0, 3000.0, 30000.0))]
    [r] = regression.regressions(base[:1], wild, 0.05)
    assert r.undecided and not r.regressed and "too wide to say anything" in r.sentence()
    # another kind of device or another batch is not this baseline's
    assert regression.regressions(base, [run_with("mps", noisy_rates(900, 0.02))], 0.05) == []
    assert regression.regressions(base, [run_with("cpu", noisy_rates(900, 0.02), batch_size=32)], 0.05) == []


def test_history_compare_any_runs_and_groups(tmp_path, capsys):
    from mpsstudio.engine.history.store import RunStore

    env = {"machine_label": "box", "hostname": "box", "torch": "2.14.1", "python": "3.11.7"}
    a = run_with("cpu", noisy_rates(1000, 0.02), env=env, created="2026-11-01T10:00:00+00:00")
    b = run_with("cpu", noisy_rates(800, 0.02, seed=2), env={**env, "torch": "2.13.0"},
                 created="2026-11-02T10:00:00+00:00")
    c = run_with("cpu", noisy_rates(1500, 0.02, seed=3), env=env, created="2026-11-03T10:00:00+00:00", batch_size=128)
    store = RunStore()
    for r in (a, b, c):
        store.save(r)
    assert cli.main(["history", "--compare", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "environments compared" in out and "batch compared" in out
    assert "torch 2.13.0 is 20 % slower [" in out and "than 2.14.1" in out
    assert cli.main(["history", "--compare", b.id[:6], c.id, "--baseline", c.id, "--wide"]) == 0
    out = capsys.readouterr().out
    assert "differ in batch and torch: the cause cannot be told apart" in out
    for args, words in ((["--compare", a.id], "two or more different runs"), (["--compare", "abc"], "at least 4 characters"),
                        (["--baseline", "ffffffff"], "No run with id ffffffff")):
        assert cli.main(["history", *args]) == 2
        assert words in capsys.readouterr().err
    assert json.loads(json.dumps([a.to_dict()]))  # plain JSON, as stored


def test_no_interval_is_undecided_and_a_failed_run_is_not_compared():
    from mpsstudio.engine.analysis import contrast

    base = run_with("cpu", [1000.0], created="2026-11-01T10:00:00+00:00")  # one window: no interval
    new = run_with("cpu", noisy_rates(500, 0.02), created="2026-11-02T10:00:00+00:00")
    [r] = regression.regressions([base], [new], 0.05)
    assert r.undecided and not r.regressed and "cannot tell" in r.sentence()
    failed = run_with("cpu", noisy_rates(900, 0.02), created="2026-11-03T10:00:00+00:00")
    failed.status = "failed"
    c = contrast.of_runs([new, failed])
    assert "has no throughput to compare (failed)" in c.sentences()[0]


def test_history_takes_short_ids_and_refuses_a_failed_baseline(capsys):
    from mpsstudio.engine.history.store import RunStore

    ok = run_with("cpu", noisy_rates(1000, 0.02), created="2026-11-01T10:00:00+00:00")
    bad = run_with("cpu", noisy_rates(900, 0.02), created="2026-11-02T10:00:00+00:00")
    bad.status = "failed"
    store = RunStore()
    store.save(ok)
    store.save(bad)
    assert cli.main(["history", "--note", ok.id[:8].upper(), "after the update"]) == 0
    assert store.get(ok.id).note == "after the update"
    assert cli.main(["history", "--compare", ok.id[:8], "--baseline", bad.id[:8]]) == 2
    assert "has no throughput to compare with (failed)" in capsys.readouterr().err
    assert cli.main(["history", "--compare", ""]) == 2
    assert "not an empty text" in capsys.readouterr().err


def test_a_regression_check_whose_new_runs_fell_in_two_modes_says_so():
    base = _runs(1000, 1, processes=5)
    new = [run_with("cpu", noisy_rates(rate, 0.01, seed=90 + i), created=f"2026-11-09T10:0{i}:00+00:00")
           for i, rate in enumerate((1000.0, 600.0, 1005.0, 610.0, 995.0))]
    [r] = regression.regressions(base, new, 0.05)
    said = r.sentence()
    assert "The 5 new runs on cpu fell in two modes: 2 of 5 at 0.61x the others' samples/s" in said, said
    assert "baseline runs on cpu fell" not in said
    [r] = regression.regressions(base, _runs(900, 2, processes=5), 0.05)
    assert "two modes" not in r.sentence()
