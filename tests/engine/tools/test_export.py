"""`mpsstudio export` (issue 27): TorchScript, torch.export and Core ML exports made for real here, each checked
against PyTorch; the sentence for an operator Core ML cannot convert; atomic writes; saved weights; bad input."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import tempfile
import time
import types

import pytest
import torch

from mpsstudio import cli
from mpsstudio.engine.models import saved
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.tools.deploy import export

pytest.importorskip("coremltools")


def run(capsys, *args) -> tuple[int, str, str]:
    code = cli.main(["export", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("fmt, suffix, load", [
    ("torchscript", ".pt", lambda p: torch.jit.load(p)),
    ("exported-program", ".pt2", lambda p: torch.export.load(p).module()),
])
def test_torch_exports_load_back_and_agree_with_pytorch(tmp_path, capsys, fmt, suffix, load):
    out, doc = tmp_path / f"m{suffix}", tmp_path / "e.json"
    code, printed, err = run(capsys, "--model", "mnist_cnn", "--format", fmt, "--out", str(out), "--batch-size", "3",
                             "--json", str(doc))
    assert code == 0, err
    result = json.loads(doc.read_text())
    assert result["check"]["ok"] is True and result["check"]["top1_agreement"] == 1.0
    assert result["input"]["shape"] == [3, 1, 28, 28] and result["output"]["shape"] == [3, 10]
    assert "freshly built (random weights, seed 0)" in result["weights_note"] and len(result["classes"]) == 10
    assert printed.startswith(f"Exported mnist_cnn to {out} ({fmt}") and "it agrees with PyTorch" in printed
    torch.manual_seed(export.SEED)  # independently: the file against the model as a run builds it
    spec = models.input_spec_for("mnist_cnn", models.get_model_info("mnist_cnn").default_spec)
    model = models.build_model("mnist_cnn", spec).eval()
    x = export.example(spec, 3)
    with torch.no_grad():
        assert torch.allclose(load(str(out))(x), model(x), atol=1e-5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", out.name]  # nothing half-written beside it


@pytest.mark.parametrize("name", ["mlp", "transformer"])  # the attention model: MultiheadAttention's fast path
def test_core_ml_export_writes_a_package_and_says_running_it_needs_macos(tmp_path, capsys, name):
    ct = pytest.importorskip("coremltools")
    out, doc = tmp_path / "m.mlpackage", tmp_path / "e.json"
    code, printed, err = run(capsys, "--model", name, "--format", "coreml", "--out", str(out), "--json", str(doc),
                             "--precision", "fp16")
    assert code == 0, err
    result = json.loads(doc.read_text())
    assert result["check"]["ok"] is None and "only on macOS" in result["check"]["reason"]
    assert result["minimum_deployment_target"] == "macOS 14 / iOS 17 or later" and result["precision"] == "fp16"
    assert "not checked here: Core ML runs a package only on macOS" in printed
    spec = ct.utils.load_spec(str(out))
    assert [i.name for i in spec.description.input] == ["input"]
    assert [o.name for o in spec.description.output] == ["logits"]
    meta = spec.description.metadata.userDefined
    assert json.loads(meta["mpsstudio.classes"]) == result["classes"] and meta["mpsstudio.model"] == name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.json", "m.mlpackage"]


def test_one_core_ml_package_takes_every_batch_size_asked_for(tmp_path, capsys):
    """Enumerated shapes, not a range: the Neural Engine runs each enumerated shape (issue 27); --batch-size is the
    default shape; the input stays float32 at fp16 precision."""
    ct = pytest.importorskip("coremltools")
    out, doc = tmp_path / "m.mlpackage", tmp_path / "e.json"
    code, printed, err = run(capsys, "--model", "mlp", "--format", "coreml", "--out", str(out), "--json", str(doc),
                             "--precision", "fp16", "--batch-size", "8", "--batch-sizes", "32,1")
    assert code == 0, err
    assert json.loads(doc.read_text())["batch_sizes"] == [1, 8, 32] and "fp16, batch 1, 8, 32)" in printed
    [given] = ct.utils.load_spec(str(out)).description.input
    array = given.type.multiArrayType
    assert sorted(list(s.shape)[0] for s in array.enumeratedShapes.shapes) == [1, 8, 32] and list(array.shape)[0] == 8
    assert array.dataType == array.FLOAT32 and "N is one of 1, 8, 32" in given.shortDescription
    for args, says in ((["--format", "torchscript", "--out", str(tmp_path / "m.pt")], "--batch-sizes is for Core ML"),
                       (["--format", "coreml", "--out", str(out)], "--batch-sizes must be whole numbers")):
        code, _, err = run(capsys, "--model", "mlp", *args, "--batch-sizes", "1,0" if "coreml" in args else "1,8")
        assert code == 2 and says in err


TOKENS = '''import torch
class M(torch.nn.Module):  # attention over (batch, tokens, features), as in vit_tiny and the transformer
    def __init__(self, n, shape):
        super().__init__()
        self.embed = torch.nn.Linear(shape[2], 64)
        self.attention = torch.nn.MultiheadAttention(64, 2, batch_first=True)
        self.head = torch.nn.Linear(64, n)
    def forward(self, x):
        h = self.embed(x.flatten(1, 2))
        return self.head(self.attention(h, h, h, need_weights=False)[0].mean(1))
def build_model(num_classes, input_shape):
    return M(num_classes, input_shape)
'''


def test_a_flexible_batch_does_not_store_the_weights_once_per_token(tmp_path, capsys, monkeypatch):
    """torch.export's default decompositions turn a linear layer on tokens into a batched matmul whose weight
    coremltools expands per token when the batch is dynamic (vit_b_16: 7.9 GiB instead of 165 MiB); the empty
    table goes first there. A package that would still hold far more than the model's weights is refused."""
    from mpsstudio.engine.tools.deploy import coreml

    model = tmp_path / "tokens.py"
    model.write_text(TOKENS)
    out = tmp_path / "t.mlpackage"
    code, printed, err = run(capsys, "--model", str(model), "--format", "coreml", "--out", str(out), "--json",
                             str(tmp_path / "e.json"), "--batch-sizes", "1,8", "--precision", "fp16")
    assert code == 0, err
    params = 28 * 64 + 64 + 4 * (64 * 64 + 64) + 64 * 10 + 10  # the shapes dataset's 28 x 28: 28 tokens of 28
    assert json.loads((tmp_path / "e.json").read_text())["bytes"] < 2 * params + 60_000  # not 28 copies
    monkeypatch.setattr(coreml, "_weights_grown", lambda mlmodel, model: 12.0)
    code, printed, err = run(capsys, "--model", str(model), "--format", "coreml", "--out", str(out),
                             "--batch-sizes", "1,8")
    assert code == 1 and "with a flexible batch its constants come to 12x the model's weights" in err
    code, printed, err = run(capsys, "--model", str(model), "--format", "coreml", "--out", str(out))
    assert code == 0, err  # one batch size: no growth check (nothing is expanded per batch)


POOL = '''import torch
class M(torch.nn.Module):  # coremltools converts adaptive pooling only with the whole input shape known
    def __init__(self, n, shape):
        super().__init__()
        self.conv = torch.nn.Conv2d(shape[0], 4, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d((2, 2))
        self.fc = torch.nn.Linear(16, n)
    def forward(self, x):
        return self.fc(self.pool(self.conv(x)).flatten(1))
def build_model(num_classes, input_shape):
    return M(num_classes, input_shape)
'''


def test_a_model_that_takes_one_batch_size_only_is_said_so_or_gets_a_package_per_size(tmp_path, capsys, monkeypatch):
    from mpsstudio.engine.tools.deploy import deploybench

    model = tmp_path / "pool.py"
    model.write_text(POOL)
    out = tmp_path / "out" / "m.mlpackage"
    out.parent.mkdir()
    code, printed, err = run(capsys, "--model", str(model), "--format", "coreml", "--out", str(out),
                             "--batch-sizes", "1,4")
    assert code == 1 and printed == "" and "Traceback" not in err and list(out.parent.iterdir()) == []
    assert err.splitlines()[-1].startswith("mpsstudio: This model does not convert with several batch sizes in one "
                                           "Core ML package (ValueError: Adaptive pooling")
    monkeypatch.setattr(deploybench, "MEASURE_S", 0.02)
    monkeypatch.setattr(deploybench, "WARMUP_S", 0.0)
    result = deploybench.bench([str(model)], batch_sizes=[1, 4], devices=["cpu"])
    core = [r for r in result["rows"] if r["runtime"] == "coreml"]
    assert [r["batch_size"] for r in core] == [1, 4] and all(r["convert_s"] > 0 for r in core)
    assert all("converted here (6" in r["reason"] for r in core)  # a package each: "(6.1 KiB, 0.4 s)"
    assert any("one Core ML package per batch size; it does not convert with several in one (ValueError: Adaptive "
               "pooling" in n for n in result["notes"])


I0 = '''import math, torch
class Act(torch.nn.Module):
    def forward(self, x):
        return torch.special.i0(x)
class Head(torch.nn.Module):
    def __init__(self, n, k):
        super().__init__()
        self.fc = torch.nn.Linear(k, n)
        self.act = Act()
    def forward(self, x):
        return self.act(self.fc(x))
class M(torch.nn.Module):
    def __init__(self, n, shape):
        super().__init__()
        self.head = Head(n, math.prod(shape))
    def forward(self, x):
        return self.head(x.flatten(1))
def build_model(num_classes, input_shape):
    return M(num_classes, input_shape)
'''


def test_an_operator_core_ml_cannot_convert_is_named_with_its_module_and_nothing_is_written(tmp_path, capsys):
    model = tmp_path / "i0.py"
    model.write_text(I0)
    out = tmp_path / "out" / "m.mlpackage"
    out.parent.mkdir()
    code, printed, err = run(capsys, "--model", str(model), "--format", "coreml", "--out", str(out))
    assert code == 1 and printed == ""
    assert err.splitlines()[-1].startswith("mpsstudio: aten::i0 in `head.act` has no Core ML conversion (coremltools ")
    assert "Traceback" not in err and list(out.parent.iterdir()) == []
    code, printed, err = run(capsys, "--model", str(model), "--format", "torchscript", "--out", str(tmp_path / "m.pt"))
    assert code == 0 and "it agrees with PyTorch" in printed  # TorchScript takes it


def test_a_package_replaces_an_older_one_whole(tmp_path, capsys):
    out = tmp_path / "m.mlpackage"
    (out / "stale").mkdir(parents=True)
    (out / "stale" / "old.bin").write_bytes(b"old")
    (out / "Manifest.json").write_text("{}")  # an earlier package
    code, _, err = run(capsys, "--model", "mlp", "--format", "coreml", "--out", str(out))
    assert code == 0, err
    assert not (out / "stale").exists() and (out / "Manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.mlpackage"]


def test_saved_weights_are_exported_with_their_model_classes_and_normalisation(tmp_path, capsys):
    spec = models.input_spec_for("mlp", models.get_model_info("mlp").default_spec)
    trained = models.build_model("mlp", spec)
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(0.5)  # not what a fresh build holds
    weights = tmp_path / "trained.pt"
    saved.save(trained, weights, {"model": "mlp", "num_classes": spec.num_classes,
                                  "input": {"kind": "image", "channels": spec.channels, "height": spec.height,
                                            "width": spec.width},
                                  "classes": [f"class {i}" for i in range(spec.num_classes)],
                                  "normalization": {"mean": [0.5], "std": [0.25], "scale": "pixels / 255"},
                                  "dataset": "shapes"})
    out, doc = tmp_path / "m.pt", tmp_path / "e.json"
    code, printed, err = run(capsys, "--weights", str(weights), "--format", "torchscript", "--out", str(out),
                             "--json", str(doc))
    assert code == 0, err
    result = json.loads(doc.read_text())
    assert result["model"] == "mlp" and result["weights_note"] == "trained weights from trained.pt"
    assert result["classes"][0] == "class 0" and result["normalization"]["mean"] == [0.5]
    x = export.example(spec, 1)
    with torch.no_grad():
        assert torch.allclose(torch.jit.load(str(out))(x), trained.eval()(x), atol=1e-5)


def test_a_stored_runs_saved_weights_are_exported_by_its_id(tmp_path, capsys):
    """export --run ID: the weights the run saved (its summary's saved_model, the JSON naming the run); one sentence
    when it saved none, they are gone, or a later run saved over them (exit 2, before any work)."""
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.basics.results import RunResult
    from mpsstudio.engine.history.store import RunStore

    spec = models.input_spec_for("mlp", models.get_model_info("mlp").default_spec)
    weights = tmp_path / "digits.pt"
    meta = {"model": "mlp", "num_classes": spec.num_classes, "dataset": "shapes",
            "input": {"kind": "image", "channels": spec.channels, "height": spec.height, "width": spec.width}}

    def stored(summary, mode="train"):
        run = RunResult(config=RunConfig(model="mlp", dataset="shapes", device="cpu", mode=mode, steps=10,
                                         epochs=None), status="finished", env={},
                        summary={"samples_per_s": 1.0, "samples_per_s_iqr": 0.1, **summary}, losses=[1.0],
                        windows=[])
        store = RunStore()
        store.save(run)
        store.close()
        return run.id
    first = stored({"saved_model": str(weights)})
    saved.save(models.build_model("mlp", spec), weights, {**meta, "run_id": first})
    out = tmp_path / "m.pt2"
    code, printed, err = run(capsys, "--run", first, "--format", "exported-program", "--out", str(out))
    assert code == 0 and "Weights: trained weights from digits.pt." in printed, err
    assert f"the trained weights of run {first}: {weights}" in err
    second = stored({"saved_model": str(weights)})
    saved.save(models.build_model("mlp", spec), weights, {**meta, "run_id": second})  # saved over the first's
    none = stored({}, mode="inference")
    for args, code_is, says in (
            ([first], 2, f"digits.pt now holds the weights of run {second}, saved over run {first}'s"),
            ([none], 2, f"Run {none} kept no trained weights; train with bench --save-model FILE.pt"),
            (["no-such-run"], 2, "No run with id no-such-run in the history"),
            ([second, "--weights", str(weights)], 2, "Pass --run (a run's saved weights) or --weights")):
        code, printed, err = run(capsys, "--run", *args, "--format", "exported-program", "--out", str(out))
        assert (code, printed) == (code_is, "") and says in err and "Traceback" not in err
    weights.unlink()
    code, _, err = run(capsys, "--run", second, "--format", "exported-program", "--out", str(out))
    assert code == 2 and f"Run {second}'s trained weights are no longer at {weights}" in err


@pytest.mark.parametrize("damage, says", [
    ("no json", "trained.json is missing beside trained.pt"),
    ("bad json", "trained.json beside trained.pt is not readable JSON"),
    ("not weights", "trained.pt cannot be loaded as weights"),
    ("other model", "trained.pt holds weights of mnist_cnn, not of mlp"),
    ("wrong shapes", "The weights in trained.pt do not fit this model"),
])
def test_weights_that_cannot_be_used_get_one_sentence(tmp_path, capsys, damage, says):
    spec = models.input_spec_for("mlp", models.get_model_info("mlp").default_spec)
    weights = tmp_path / "trained.pt"
    meta = {"model": "mlp", "num_classes": spec.num_classes, "input": {"kind": "image", "channels": spec.channels,
                                                                     "height": spec.height, "width": spec.width}}
    saved.save(models.build_model("mlp", spec), weights, meta)
    args = ["--weights", str(weights), "--format", "torchscript", "--out", str(tmp_path / "m.pt")]
    if damage == "no json":
        saved.meta_path(weights).unlink()
    elif damage == "bad json":
        saved.meta_path(weights).write_text("{not json")
    elif damage == "not weights":
        weights.write_bytes(b"\x80\x04not a pickle at all")
    elif damage == "other model":
        args += ["--model", "mlp"]
        doc = json.loads(saved.meta_path(weights).read_text())
        doc["model"] = "mnist_cnn"
        saved.meta_path(weights).write_text(json.dumps(doc))
    elif damage == "wrong shapes":
        doc = json.loads(saved.meta_path(weights).read_text())
        doc["num_classes"] = 3
        saved.meta_path(weights).write_text(json.dumps(doc))
    code, printed, err = run(capsys, *args)
    assert code == 1 and says in err and "Traceback" not in err, err
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize("out, fmt, says", [
    ("m.onnx", "torchscript", "A torchscript export is written to a .pt path"),
    ("missing/m.pt2", "exported-program", "does not exist"),
    ("file.mlpackage", "coreml", "exists and is not a Core ML package"),
])
def test_a_bad_destination_is_one_sentence_before_any_work(tmp_path, capsys, out, fmt, says):
    (tmp_path / "file.mlpackage").write_text("a file")
    code, printed, err = run(capsys, "--model", "mlp", "--format", fmt, "--out", str(tmp_path / out))
    assert code == 2 and says in err and err.count("\n") == 1, err


# -- the deploy benchmark ------------------------------------------------------------------------------------------

def test_deploy_bench_measures_the_pytorch_rows_and_says_why_core_ml_is_not_run_here(tmp_path, capsys, monkeypatch):
    from mpsstudio.engine.history.store import RunStore
    from mpsstudio.engine.tools.deploy import deploybench

    monkeypatch.setattr(deploybench, "MEASURE_S", 0.05)
    monkeypatch.setattr(deploybench, "WARMUP_S", 0.01)
    doc = tmp_path / "d.json"
    code = cli.main(["deploy-bench", "--models", "mlp,mnist_cnn", "--batch-sizes", "1,4", "--devices", "cpu",
                     "--json", str(doc)])
    out = capsys.readouterr().out
    assert code == 0
    result = json.loads(doc.read_text())
    torch_rows = [r for r in result["rows"] if r["runtime"] == "pytorch"]
    assert [(r["model"], r["batch_size"]) for r in torch_rows] == [("mlp", 1), ("mlp", 4), ("mnist_cnn", 1),
                                                                   ("mnist_cnn", 4)]
    for r in torch_rows:
        assert r["latency_ms"] > 0 and r["repetitions"] >= deploybench.MIN_REPS and r["agrees"] is True
        assert r["samples_per_s"] == pytest.approx(r["batch_size"] / (r["latency_ms"] / 1000))
        # this machine's energy counters, or why none: never a number without its measure
        assert (r["energy_mj_per_sample"] > 0 and r["energy_measure"] == "measured") if r["energy_measure"] else (
            r["energy_mj_per_sample"] is None and r["energy_reason"])
    core = [r for r in result["rows"] if r["runtime"] == "coreml"]
    assert len(core) == 4 and all(r["latency_ms"] is None and "only on macOS: converted here" in r["reason"]
                                  and r["energy_mj_per_sample"] is None and r["energy_reason"] == "not run"
                                  for r in core)
    assert "Core ML rows: converted here, run only on macOS." in out
    [record] = RunStore().tools()
    assert record.kind == "deploy-bench" and record.result["rows"] == result["rows"]


def test_on_macos_each_compute_unit_is_a_row_checked_against_pytorch(monkeypatch):
    """Core ML faked where only macOS can run it: the predictor answers as MLModel.predict would (a dict of numpy
    arrays by output name, float16 precision), once per compute unit asked for."""
    import numpy as np

    from mpsstudio.engine.tools.deploy import coreml, deploybench

    monkeypatch.setattr(deploybench, "MEASURE_S", 0.02)
    monkeypatch.setattr(deploybench, "WARMUP_S", 0.0)
    monkeypatch.setattr(coreml, "runs_here", lambda: True)
    asked = []

    def fake_predictor(target, unit):
        ct = coreml.load_coremltools()
        assert getattr(ct.ComputeUnit, unit) in ct.ComputeUnit  # a real compute unit's name
        asked.append((unit, "int8" if "int8" in str(target) else "fp16"))
        spec = models.input_spec_for("mlp", models.get_model_info("mlp").default_spec)
        torch.manual_seed(export.SEED)
        model = models.build_model("mlp", spec).eval()
        array = ct.utils.load_spec(str(target)).description.input[0].type.multiArrayType
        shapes = [list(s.shape) for s in array.enumeratedShapes.shapes] or [list(array.shape)]

        def run(x):
            if list(x.shape) not in shapes:  # as Core ML refuses a shape its package does not enumerate
                raise RuntimeError(f"MultiArray shape {tuple(x.shape)} does not match the shapes the model takes")
            arr = x.numpy().astype(np.float32)
            with torch.no_grad():
                got = {coreml.OUTPUT: model(torch.from_numpy(arr)).numpy().astype(np.float16)}
            return torch.from_numpy(np.asarray(got[coreml.OUTPUT], dtype=np.float32))
        return run, 0.25
    monkeypatch.setattr(coreml, "predictor", fake_predictor)
    _fake_compute_plan(monkeypatch, [("linear", "ne", ["ne", "cpu"], 0.9), ("relu", "ne", ["ne", "cpu"], 0.1)])
    # Apple silicon's energy counters (zeus-apple-silicon's monitor, faked as tests/support/fake_mps.py does)
    from mpsstudio.engine.machine.energy import ioreport, meter

    from tests.support.fake_mps import FakeAppleMonitor

    monitor = FakeAppleMonitor(gpu_mw=2_000, cpu_mw=1_000, ane_mw=4_000)
    # one clock for the benchmark, the meter and the faked counters, a millisecond a reading: the power read back is
    # then the faked one on a loaded machine too (real time let a preemption between the meter's clock and the
    # counters' reading skew a 20 ms span by 70 %)
    ticks = itertools.count()
    monkeypatch.setattr(time, "perf_counter", lambda: next(ticks) * 0.001)
    monkeypatch.setattr(ioreport, "_apple", lambda: types.SimpleNamespace(AppleEnergyMonitor=lambda: monitor))
    monkeypatch.setattr(deploybench, "_meter", lambda kind, place=None: meter.Meter(
        part="gpu" if kind == "mps" else "cpu", counters=[ioreport.AppleCounter()]))
    result = deploybench.bench(["mlp"], batch_sizes=[1, 2], devices=["cpu"], compress=["int8"])
    assert result["placement"]["mlp"]["share_of_cost"]["neural_engine"] == 1.0
    assert "mlp: Core ML (ALL) plans 100% of the estimated cost on the Neural Engine" in result["sentence"]
    core = [r for r in result["rows"] if r["runtime"] == "coreml"]
    units = [unit for unit, _ in deploybench.COMPUTE_UNITS]
    # one fp16 package for both sizes (the export's own check first), then the int8 one with all units
    assert asked == [("CPU_ONLY", "fp16"), *[(u, "fp16") for u in units * 2], ("CPU_ONLY", "int8"),
                     ("ALL", "int8"), ("ALL", "int8")]
    labels = [label for _, label in deploybench.COMPUTE_UNITS]
    assert [(r["label"], r["batch_size"]) for r in core] == [
        *[(label, b) for b in (1, 2) for label in labels], *[("Core ML, weights int8, all units", b) for b in (1, 2)]]
    assert all(r["agrees"] is True and r["load_s"] == 0.25 and r["latency_ms"] > 0 for r in core)
    assert "Core ML rows" not in result["sentence"]
    # the fake's every place is as fast: "fastest" only where the middle halves separate (sweep.separated)
    assert result["sentence"].startswith(("mlp: fastest at batch 2 is ", "mlp: at batch 2, no clear fastest between "))
    for r in result["rows"]:  # per sample: the timed calls' energy over their samples, CPU + GPU + Neural Engine
        parts, samples = r["energy_parts_mj"], r["repetitions"] * r["batch_size"]
        assert r["energy_measure"] == "estimated" and set(parts) == {"cpu", "gpu", "ane", "dram"}
        assert r["energy_mj_per_sample"] == pytest.approx(parts["cpu"] + parts["gpu"] + parts["ane"])
        assert parts["ane"] * samples / r["energy_s"] == pytest.approx(4_000, rel=0.25)  # mW: mJ a second
    assert " mJ a sample (estimated))" in result["sentence"]
    from mpsstudio.engine.tools import toolview

    cells = [line[9] for line in toolview.deploy_table(result).rows]
    number = r"[0-9.e+-]+"
    assert all(re.fullmatch(rf"{number} estimated \(cpu {number}, gpu {number}, ane {number}, dram {number}\)", c)
               for c in cells), cells


def _fake_compute_plan(monkeypatch, operations):
    """coremltools' MLComputePlan as macOS 14.4 answers it: the program structure of coremltools' own dataclasses,
    devices of its own classes (made without their macOS-only proxies), a usage and a cost per operation."""
    ct = pytest.importorskip("coremltools")
    from coremltools.models import compute_device, compute_plan

    def device(cls):
        return object.__new__(cls)  # their __init__ insists on the macOS proxy; isinstance is what is read
    ne, gpu, cpu = (device(c) for c in (compute_device.MLNeuralEngineComputeDevice, compute_device.MLGPUComputeDevice,
                                        compute_device.MLCPUComputeDevice))
    places = {"ne": ne, "gpu": gpu, "cpu": cpu}
    ops, usage, cost = [], {}, {}
    for name, preferred, supported, weight in operations:
        op = compute_plan.MLModelStructureProgramOperation(inputs={}, operator_name=name, outputs=[], blocks=[],
                                                           __proxy__=object())
        ops.append(op)
        usage[id(op)] = compute_plan.MLComputePlanDeviceUsage(
            preferred_compute_device=places[preferred], supported_compute_devices=[places[s] for s in supported])
        cost[id(op)] = compute_plan.MLComputePlanCost(weight=weight)
    block = compute_plan.MLModelStructureProgramBlock(inputs=[], operations=ops, output_names=["logits"])
    structure = compute_plan.MLModelStructure(
        neuralnetwork=None, pipeline=None, program=compute_plan.MLModelStructureProgram(
            functions={"main": compute_plan.MLModelStructureProgramFunction(inputs=[], block=block)}))

    class Plan:
        model_structure = structure

        def get_compute_device_usage_for_mlprogram_operation(self, operation):
            return usage.get(id(operation))

        def get_estimated_cost_for_mlprogram_operation(self, operation):
            return cost.get(id(operation))
    class Loaded(list):
        compiled: list

    loaded = Loaded()

    def load_from_path(path, compute_units=ct.ComputeUnit.ALL):
        assert str(path).endswith(".mlmodelc") and isinstance(compute_units, ct.ComputeUnit)
        loaded.append(compute_units)
        return Plan()
    monkeypatch.setattr(compute_plan.MLComputePlan, "load_from_path", staticmethod(load_from_path))
    compiled: list[str] = []

    def compile_model(model, destination_path=None):
        """coremltools 9.0 models/utils.compile_model: Core ML compiles into a folder of the temp folder
        (`_MLModelProxy.compileModel`), which is moved to `destination_path` when one is given, else left there."""
        if destination_path is not None and not destination_path.rstrip("/").endswith(".mlmodelc"):
            raise Exception('"destination_path" parameter must have ".mlmodelc" file extension.')
        made = os.path.join(tempfile.mkdtemp(), "model.mlmodelc")
        os.makedirs(made)
        if destination_path is None:
            compiled.append(made)
            return made
        shutil.move(made, destination_path)
        compiled.append(destination_path)
        return destination_path
    monkeypatch.setattr(ct.models.utils, "compile_model", compile_model)
    loaded.compiled = compiled
    return loaded


def test_where_core_ml_plans_each_operation_is_summed_by_unit(monkeypatch, tmp_path):
    from mpsstudio.engine.tools.deploy import coreml_plan

    loaded = _fake_compute_plan(monkeypatch, [
        ("const", "cpu", ["cpu"], 0.0),  # constants compute nothing: left out
        ("conv", "ne", ["ne", "gpu", "cpu"], 0.6),
        ("conv", "ne", ["ne", "gpu", "cpu"], 0.2),
        ("gelu", "gpu", ["gpu", "cpu"], 0.15),
        ("topk", "cpu", ["cpu"], 0.05),
    ])
    p = coreml_plan.placement(tmp_path / "m.mlpackage")
    assert len(loaded) == 1 and loaded[0].name == "ALL"
    assert len(loaded.compiled) == 1 and not os.path.exists(loaded.compiled[0])  # no .mlmodelc left behind
    assert p["operations"] == 4 and p["share_of_operations"]["neural_engine"] == 0.5
    assert p["share_of_cost"]["neural_engine"] == pytest.approx(0.8) and p["share_of_cost"]["cpu"] == pytest.approx(0.05)
    assert p["not_on_neural_engine"] == [{"op": "gelu", "count": 1}, {"op": "topk", "count": 1}]
    assert coreml_plan.placement_sentence(p) == ("Core ML (ALL) plans 80% of the estimated cost on the Neural Engine (2 of 4 "
                                            "operations); these operators cannot run there: gelu (1), topk (1).")


# -- what a user can get wrong, and what a model can do (found by a fresh-eyes pass) -----------------------------

MODEL = '''import torch
class M(torch.nn.Module):
    def __init__(self, n, shape):
        super().__init__()
        self.l = torch.nn.Linear(shape[0] * shape[1] * shape[2], n)
    def forward(self, x):
        y = self.l(x.flatten(1))
{body}
def build_model(num_classes, input_shape):
    return M(num_classes, input_shape)
'''


@pytest.mark.parametrize("body, fmt, says", [
    ("        return y + torch.rand(x.shape[0], 1) * 100", "exported-program", "does not agree with PyTorch"),
    ("        return y if x.sum() > 0 else -y * 100", "torchscript", "on a second batch"),
    ("        return y, y", "torchscript", "returns tuple, not a tensor of logits"),
    ("        return y[:, :1]", "coreml", "not logits [1, 10]"),
])
def test_an_export_that_would_be_wrong_is_not_written_and_the_old_one_stays(tmp_path, capsys, body, fmt, says):
    model = tmp_path / "m.py"
    model.write_text(MODEL.format(body=body))
    out = tmp_path / f"m{export.FORMATS[fmt]}"
    if fmt == "coreml":
        (out / "Data").mkdir(parents=True)
        (out / "Manifest.json").write_text("{}")  # an earlier package
    else:
        out.write_bytes(b"an earlier export")
    code, printed, err = run(capsys, "--model", str(model), "--format", fmt, "--out", str(out))
    assert code == 1 and says in err and "Traceback" not in err, err
    assert (out / "Manifest.json").read_text() == "{}" if fmt == "coreml" else out.read_bytes() == b"an earlier export"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.py", out.name])  # nothing half-written beside


def test_json_that_would_overwrite_the_export_or_a_folder_that_is_not_a_package_is_refused(tmp_path, capsys):
    code, _, err = run(capsys, "--model", "mlp", "--format", "torchscript", "--out", str(tmp_path / "m.pt"),
                       "--json", str(tmp_path / "m.pt"))
    assert code == 2 and "would overwrite the export" in err
    (tmp_path / "p.mlpackage").mkdir()
    (tmp_path / "p.mlpackage" / "Manifest.json").write_text("{}")  # an earlier package
    code, _, err = run(capsys, "--model", "mlp", "--format", "coreml", "--out", str(tmp_path / "p.mlpackage"),
                       "--json", str(tmp_path / "p.mlpackage" / "Manifest.json"))
    assert code == 2 and "would overwrite the export" in err
    thesis = tmp_path / "notes.mlpackage" / "sub" / "thesis.txt"
    thesis.parent.mkdir(parents=True)
    thesis.write_text("precious")
    code, _, err = run(capsys, "--model", "mlp", "--format", "coreml", "--out", str(thesis.parent.parent))
    assert code == 2 and "is not a Core ML package" in err and thesis.read_text() == "precious"
    code, _, err = run(capsys, "--model", "mlp", "--format", "coreml", "--out", str(tmp_path / ("x" * 250 + ".mlpackage")))
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1, err


def test_what_a_stopped_writer_left_beside_the_export_is_removed(tmp_path, capsys):
    from mpsstudio.engine.basics.files import clear_partials

    out = tmp_path / "m.pt"
    (tmp_path / ".m.pt.abc123.part").write_bytes(b"half")  # a killed torch.jit.save
    (tmp_path / ".m.pt.def456.part.mlpackage" / "Data").mkdir(parents=True)
    (tmp_path / "m.pt.keep").write_text("not ours")
    (tmp_path / ".other.pt.abc.part").write_text("another export's")
    assert clear_partials(out) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.pt.abc.part", "m.pt.keep"]
    model = tmp_path / "bad.py"
    model.write_text("def build_model(num_classes, input_shape):\n    raise RuntimeError('nope')\n")
    (tmp_path / ".m.pt.zz.part").write_bytes(b"half")
    code, _, err = run(capsys, "--model", str(model), "--format", "torchscript", "--out", str(out))
    assert code == 1 and not (tmp_path / ".m.pt.zz.part").exists()  # the CLI clears them after every export


def test_deploy_bench_measures_the_models_it_can_and_says_why_not_the_others(tmp_path, capsys, monkeypatch):
    from mpsstudio.engine.tools.deploy import deploybench

    monkeypatch.setattr(deploybench, "MEASURE_S", 0.02)
    monkeypatch.setattr(deploybench, "WARMUP_S", 0.0)
    model = tmp_path / "b8.py"
    model.write_text(MODEL.format(body="        if x.shape[0] >= 8:\n            raise RuntimeError('not at 8')\n"
                                       "        return y"))
    doc = tmp_path / "d.json"
    code = cli.main(["deploy-bench", "--models", f"mlp,{model}", "--batch-sizes", "1,8", "--devices", "cpu",
                     "--json", str(doc), "--no-save"])
    capsys.readouterr()
    assert code == 0
    rows = json.loads(doc.read_text())["rows"]
    assert all(r["latency_ms"] for r in rows if r["model"] == "mlp" and r["runtime"] == "pytorch")
    failed = [r for r in rows if r["model"] == str(model)]
    assert failed and all("The model failed on a batch of 8" in r["reason"] for r in failed)
    for args, says in ((["--models", ",,"], "names no model"), (["--devices", "mps"], "mps cannot run here"),
                       (["--models", "mlp,mnist_cnn", "--weights", str(doc)], "are for one model")):
        assert cli.main(["deploy-bench", *args]) == 2 and says in capsys.readouterr().err


def _deploy_bench_stopped(capsys, monkeypatch):
    """deploy-bench of two models on the CPU, short, that a SIGTERM the test arranged stops: exit 143, the rows so
    far kept (said), and its stored record."""
    from mpsstudio.engine.history.store import RunStore
    from mpsstudio.engine.tools.deploy import deploybench

    monkeypatch.setattr(deploybench, "MEASURE_S", 0.02)
    monkeypatch.setattr(deploybench, "WARMUP_S", 0.0)
    code = cli.main(["deploy-bench", "--models", "mlp,mnist_cnn", "--batch-sizes", "1", "--devices", "cpu"])
    captured = capsys.readouterr()
    assert code == 143, captured.err
    assert "stopped by SIGTERM; what was measured so far is kept." in captured.err
    [record] = RunStore().tools()
    assert record.result["stopped"] is True
    return record


def test_sigterm_during_the_deploy_bench_keeps_the_rows_measured_so_far(tmp_path, capsys, monkeypatch):
    import os
    import signal

    from mpsstudio.engine.tools.deploy import deploybench

    real = deploybench._torch_rows

    def then_signalled(*args, **kwargs):
        rows = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # a job scheduler's SIGTERM once the first model's PyTorch rows are in
        return rows
    monkeypatch.setattr(deploybench, "_torch_rows", then_signalled)
    record = _deploy_bench_stopped(capsys, monkeypatch)
    assert "Stopped before the benchmark ended." in record.result["sentence"]
    kept = [(r["model"], r["runtime"]) for r in record.result["rows"]]
    # the first model's PyTorch row, perhaps its Core ML row (Stop reaches the tool while it converts), never the
    # second model
    assert kept[0] == ("mlp", "pytorch") and all(model == "mlp" for model, _ in kept)


def test_a_sigterm_the_benchmark_cannot_answer_in_time_still_keeps_its_rows(tmp_path, capsys, monkeypatch):
    """A busy machine: the benchmark, converting when the signal comes, answers after the grace. The rows it sent as its
    checkpoint stand (before, "stopped by SIGTERM." alone: the suite failed so on loaded machines)."""
    import os
    import signal

    from mpsstudio.engine.process import asks

    after_stop = asks._answer_after_stop
    monkeypatch.setattr(asks, "_answer_after_stop", lambda proc, kind, grace: after_stop(proc, kind, 0.0))  # no grace
    real, seen = asks._checkpoint, []

    def signalled_at_the_second_checkpoint(message, subject):  # the parent read the first one (the PyTorch rows)
        seen.append(message)
        if len(seen) == 2:  # raised here, in the parent, between two reads: no message is cut in half
            os.kill(os.getpid(), signal.SIGTERM)
        return real(message, subject)
    monkeypatch.setattr(asks, "_checkpoint", signalled_at_the_second_checkpoint)
    record = _deploy_bench_stopped(capsys, monkeypatch)
    assert [(r["model"], r["runtime"]) for r in record.result["rows"]][:1] == [("mlp", "pytorch")]


@pytest.mark.parametrize("how, at_most", [("int8", 0.3), ("palettize4", 0.16)])
def test_compressed_core_ml_weights_are_said_beside_the_uncompressed_size(tmp_path, capsys, how, at_most):
    doc = tmp_path / "e.json"
    code, printed, err = run(capsys, "--model", "mlp", "--format", "coreml", "--compress", how, "--out",
                             str(tmp_path / "m.mlpackage"), "--json", str(doc))
    assert code == 0, err
    packed = json.loads(doc.read_text())["compression"]
    assert packed["method"] == how and packed["bytes"] < at_most * packed["uncompressed_bytes"]  # of fp32 weights
    assert f"weights {how}: " in printed and " uncompressed" in printed
    code, _, err = run(capsys, "--model", "mlp", "--format", "torchscript", "--compress", how, "--out",
                       str(tmp_path / "m.pt"))
    assert code == 2 and "--compress is for Core ML packages" in err
