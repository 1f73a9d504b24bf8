"""`mpsstudio diagnose` (issue 28): each bound classified right, on figures built to have it and on small real
cases here; the first wrong layer named (a faked MPS kernel that computes wrong); NaN in bf16 located; a float64
buffer named before an MPS run; the result kept, exported and imported like other tools' results. No timing
thresholds: the assertions are about which bound, never about how fast."""

from __future__ import annotations

import json
import math

import pytest

from mpsstudio import cli
from mpsstudio.engine.analysis import bottleneck
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.tools import registry
from mpsstudio.engine.tools.diagnose import anatomy
from mpsstudio.engine.tools.diagnose.view import anatomy_table, layers_table, read
from mpsstudio.engine.tools.records.diagnose import Layers


@pytest.fixture(autouse=True)
def short_passes(monkeypatch):
    """The fewest rounds the tool takes (5) of short groups: these tests ask which bound, not how fast."""
    monkeypatch.setattr(anatomy, "MAX_PASS_S", 0.2)
    monkeypatch.setattr(anatomy, "GROUP_S", 0.01)


def figures(**over) -> dict:
    """A device's anatomy as the tool measures it (ms per step), computing by default."""
    base = {"device": "cuda:0", "kind": "cuda", "step_ms": 10.0, "data_ms": 0.1, "copy_ms": 0.1, "forward_ms": 3.0,
            "backward_ms": 5.5, "optimizer_ms": 1.3, "host_ms": 1.0, "sync_wait_ms": 0.0, "device_ms": 9.5, "ops": 300,
            "sync_count": 0, "sync_ops": [], "launch_us": 3.3, "fallback_share": None, "fallback_ops": [],
            "workers": 0}
    return {**base, **over}


# ---------------------------------------------------------------- the classifier, on figures built to have a bound


def test_a_device_busy_computing_is_compute_bound():
    bound, shares = bottleneck.classify(figures())
    assert bound == "compute" and shares["launch"] == 0.0 and shares["sync"] == 0.0
    said = bottleneck.sentence(figures(), bound, shares)
    assert said.startswith("compute: cuda:0 spends the step computing (forward 31%, backward 56%, optimizer 13%")


def test_a_loader_that_keeps_the_device_waiting_is_data_bound():
    a = figures(data_ms=6.1, step_ms=10.0)
    bound, shares = bottleneck.classify(a)
    assert bound == "data" and shares["data"] == pytest.approx(0.61)
    said = bottleneck.sentence(a, bound, shares)
    assert "keeps cuda:0 waiting 61% of each step (6.10 ms of 10.0 ms)" in said and "--workers 4" in said
    assert "more workers" in bottleneck.sentence({**a, "workers": 2}, bound, shares)


def test_a_host_that_cannot_queue_fast_enough_is_launch_bound():
    a = figures(step_ms=15.1, host_ms=14.4, device_ms=0.7, ops=412, launch_us=35.0, forward_ms=5, backward_ms=8,
                optimizer_ms=2)
    bound, shares = bottleneck.classify(a)
    assert bound == "launch"
    said = bottleneck.sentence(a, bound, shares)
    # the device computes 0.7 ms of the step; the host's 14.4 ms exceed that by 13.7, in which the device idles
    assert "412 operations a step at ~35.0 µs each to launch" in said and "13.7 ms of a 15.1 ms step" in said
    assert "torch.compile" in said
    # a result without the device's own time takes what the host's work does not cover as the device's
    assert bottleneck.classify({k: v for k, v in a.items() if k != "device_ms"})[0] == "launch"


def test_on_the_cpu_launching_is_the_count_of_operations_times_an_empty_one():
    a = figures(device="cpu", kind="cpu", step_ms=0.9, host_ms=0.9, ops=300, launch_us=4.0)
    bound, shares = bottleneck.classify(a)
    assert bound == "launch" and "estimated" in bottleneck.sentence(a, bound, shares)
    assert bottleneck.classify({**a, "ops": 30})[0] == "compute"


def test_operations_on_the_cpu_fallback_make_a_fallback_bound():
    a = figures(device="mps", kind="mps", fallback_share=0.5, fallback_ops=[{"op": "aten::nonzero", "count": 3,
                                                                               "share": 0.5}])
    bound, shares = bottleneck.classify(a)
    assert bound == "fallback" and "aten::nonzero ran on the CPU" in bottleneck.sentence(a, bound, shares)


def test_a_wait_for_the_device_inside_the_step_is_sync_bound_only_where_it_costs():
    """The host's work (4 ms) and the device's (5 ms) would overlap to 5 ms (and 0.1 ms of waiting for data); waits make
    them take turns: 9 ms."""
    sync = figures(step_ms=9.0, host_ms=4.5, sync_wait_ms=0.5, device_ms=5.0, sync_count=8,
                   sync_ops=[{"op": "aten::_local_scalar_dense", "count": 8}])
    bound, shares = bottleneck.classify(sync)
    assert bound == "sync" and shares["sync"] == pytest.approx(3.9 / 9.0)
    said = bottleneck.sentence(sync, bound, shares)
    assert "waits for cuda:0 8 times (aten::_local_scalar_dense (8))" in said and ".item()" in said
    assert "takes 3.90 ms of its 9.00 ms beyond" in said
    # a big model whose waits cost little next to its computing: compute-bound, the waits counted all the same
    big = figures(step_ms=100.0, host_ms=60.0, sync_wait_ms=59.0, device_ms=98.0, sync_count=1)
    assert bottleneck.classify(big)[0] == "compute"
    # the CPU never waits for itself
    assert bottleneck.classify({**sync, "kind": "cpu", "device": "cpu", "launch_us": 0.1})[0] != "sync"


def test_the_bound_is_re_derived_from_the_figures_on_every_read():
    forged = {"tool": "diagnose", "config": RunConfig().to_dict(), "sentence": "all is well",
              "devices": [{**figures(data_ms=7.0), "bound": "compute", "sentence": "compute: fine",
                           "batch_size": 64, "distinct_ops": 20, "launch_measure": "measured",
                           **{f"{k}_iqr_ms": 0.0 for k in ("step", "data", "copy", "forward", "backward",
                                                           "optimizer", "host")}}]}
    read = registry.checked("diagnose", forged)
    assert read["devices"][0]["bound"] == "data" and "data-bound" in read["sentence"]


@pytest.mark.parametrize("change, field", [
    (lambda d: d.update(step_ms=-1.0), "devices[0].step_ms is -1.0, below 1e-09"),
    (lambda d: d.update(ops="many"), "devices[0].ops is 'many', not a number"),
    (lambda d: d.update(kind="tpu"), "devices[0].kind is 'tpu', not one of 'cpu', 'mps', 'cuda'"),
    (lambda d: d.update(fallback_share=1.5), "devices[0].fallback_share is 1.5, above 1"),
    (lambda d: d.update(layers={"rows": [{"module": 3}], "tolerance": 0.01}), "devices[0].layers.rows[0].module is 3, not a text"),
    (lambda d: d.update(memory={"rss": -5}), "devices[0].memory.rss is -5, below 0"),
    (lambda d: d.update(step_ms=math.inf), "devices[0].step_ms is inf, not a finite number"),
    (lambda d: d.update(step_ms=1e308), "devices[0].step_ms is 1e+308, above 1e+09"),  # pyqtgraph's [0, inf] range
])
def test_a_malformed_diagnosis_is_refused_with_one_sentence_naming_the_field(change, field):
    d = {**figures(), "batch_size": 64, "distinct_ops": 20, **{f"{k}_iqr_ms": 0.0 for k in (
        "step", "data", "copy", "forward", "backward", "optimizer", "host")}}
    change(d)
    with pytest.raises(UserError) as err:
        registry.checked("diagnose", {"config": {}, "sentence": "", "devices": [d]})
    assert str(err.value) == f"The diagnose tool's process sent a diagnose result whose {field}, so it was not kept."


# ---------------------------------------------------------------- real cases on this CPU


def _diagnose(tmp_path, *args) -> dict:
    out = tmp_path / "d.json"
    code = cli.main(["diagnose", *args, "--json", str(out)])
    assert code in (cli.EXIT_OK, cli.EXIT_RUN_FAILED)
    return json.loads(out.read_text())


def test_the_mlp_on_synthetic_data_gets_its_phases_ops_and_bound(tmp_path, capsys):
    """The issue's first check: phases, operations per step and the bound in the JSON; kept in the history."""
    doc = _diagnose(tmp_path, "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu")
    stdout = capsys.readouterr().out
    [d] = doc["devices"]
    assert doc["kind"] == "diagnose" and d["bound"] in bottleneck.BOUNDS
    for phase in bottleneck.PHASES:
        assert d[f"{phase}_ms"] >= 0 and d[f"{phase}_iqr_ms"] >= 0
    assert d["step_ms"] > 0 and d["ops"] > 10 and d["distinct_ops"] > 3 and d["launch_measure"] == "estimated"
    assert d["phase_sum_ratio"] == pytest.approx(sum(d[f"{p}_ms"] for p in bottleneck.PHASES) / d["step_ms"])
    assert d["parity"]["ok"] and d["memory"]["process"] > 0
    assert f"cpu is {d['bound']}-bound" in stdout and "forward ms" in stdout
    [kept] = [t for t in RunStore().tools() if t.kind == "diagnose"]
    assert kept.result["devices"][0]["step_ms"] == d["step_ms"]


LAUNCH_MODEL = """import math
from torch import nn
def build_model(num_classes, input_shape):
    layers = [nn.Flatten(), nn.Linear(math.prod(input_shape), 8)]
    for _ in range(16):
        layers += [nn.Linear(8, 8), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(8, num_classes))
"""


def test_a_step_of_many_tiny_operations_is_launch_bound(tmp_path):
    model = tmp_path / "tiny.py"
    model.write_text(LAUNCH_MODEL)
    d = _diagnose(tmp_path, "--model", str(model), "--dataset", "synthetic", "--devices", "cpu", "--batch-size",
                  "1", "--image-size", "8")["devices"][0]
    assert d["bound"] == "launch", d["sentence"]
    assert d["ops"] > 200


def test_a_folder_of_large_images_with_no_workers_is_data_bound(tmp_path):
    """Large JPEGs decoded by the training process itself, for a model that computes next to nothing: data-bound
    however busy the machine is (each batch decodes 4 megapixels; the model sees 8x8 pixels)."""
    import numpy as np
    from PIL import Image

    ramp = np.linspace(0, 255, 1024, dtype=np.uint8)
    for c in ("a", "b"):
        (tmp_path / "big" / c).mkdir(parents=True)
        for i in range(4):
            pixels = np.stack([np.add.outer(ramp, ramp // (i + 2)), np.tile(ramp, (1024, 1)), np.full((1024, 1024), 40 * i)],
                              axis=-1).astype(np.uint8)
            Image.fromarray(pixels).save(tmp_path / "big" / c / f"{i}.jpg", quality=95)
    d = _diagnose(tmp_path, "--model", "mlp", "--dataset", str(tmp_path / "big"), "--devices", "cpu",
                  "--batch-size", "4", "--image-size", "8", "--threads", "1", "--no-save")["devices"][0]
    assert d["bound"] == "data", d["sentence"]
    assert "with 0 workers" in d["sentence"]


def test_bad_input_is_one_sentence_before_any_work(tmp_path, capsys):
    for args, said in ((["--devices", "tpu"], "--devices takes cpu, mps, cuda"),
                       (["--devices", "mps"], "mps cannot run here"),
                       (["--after-steps", "-3"], "--after-steps must be"),
                       (["--model", "nope"], "nope"),
                       (["--batch-size", "0"], "Batch size must be")):
        assert cli.main(["diagnose", *args, "--no-save"]) == cli.EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------- which layer is wrong


WRONG_LAYER_MODEL = """import math, torch
from torch import nn

class Mix(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(1, n, n) / n)
    def forward(self, x):
        return torch.bmm(x.unsqueeze(1), self.w.expand(x.shape[0], -1, -1)).squeeze(1)

def build_model(num_classes, input_shape):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 16), nn.ReLU(), Mix(16), nn.Tanh(),
                         nn.Linear(16, num_classes))
"""


def test_the_first_wrong_layer_is_named_on_a_device_whose_kernel_computes_wrong(fake_mps, tmp_path, capsys):
    fake_mps(wrong_ops={"aten::bmm": 0.3})
    model = tmp_path / "wrong.py"
    model.write_text(WRONG_LAYER_MODEL)
    code = cli.main(["diagnose", "--model", str(model), "--dataset", "synthetic", "--devices", "mps",
                     "--json", str(tmp_path / "d.json"), "--image-size", "8"])
    stdout = capsys.readouterr().out
    assert code == cli.EXIT_RUN_FAILED
    d = json.loads((tmp_path / "d.json").read_text())["devices"][0]
    assert not d["parity"]["ok"]  # the whole model differs; the layers say where
    first = d["layers"]["first_wrong"]
    assert (first["module"], first["type"]) == ("3", "Mix") and first["max_rel_err"] > 0.1
    before = [r for r in d["layers"]["rows"] if r["module"] in ("1", "2")]
    assert before and all(r["ok"] for r in before)
    assert "The first module beyond tolerance is `3` (Mix): relative error" in stdout
    t = layers_table(Layers.read(d["layers"]))
    rows = t.rows
    assert any(row[0] == "▶ 3" and row[4] == "NO" for row in rows)


NAN_MODEL = """import math, torch
from torch import nn

class Boom(nn.Module):
    def forward(self, x):
        return x.exp()

def build_model(num_classes, input_shape):
    first = nn.Linear(math.prod(input_shape), 8)
    nn.init.zeros_(first.weight)
    nn.init.constant_(first.bias, 150.0)  # exp(150) fits float64, not float32 or bfloat16
    return nn.Sequential(nn.Flatten(), first, Boom(), nn.Linear(8, num_classes))
"""


def test_in_bf16_the_first_module_whose_output_holds_inf_is_named(tmp_path):
    model = tmp_path / "boom.py"
    model.write_text(NAN_MODEL)
    result = registry.run("diagnose", {"config": RunConfig(model=str(model), dataset="synthetic", precision="bf16",
                                                           image_size=8, batch_size=8).to_dict(),
                                       "devices": ["cpu"], "layers": True})
    [d] = result["devices"]
    if "error" in d:  # a run that ends at the first step: inf logits make the loss NaN
        pytest.skip(d["error"])
    assert d["layers"]["first_nonfinite"]["module"] == "2"
    assert d["layers"]["first_nonfinite"]["type"] == "Boom"


def test_parity_is_checked_again_after_training_on_the_device(tmp_path):
    result = registry.run("diagnose", {"config": RunConfig(model="mlp", dataset="synthetic", batch_size=8).to_dict(),
                                       "devices": ["cpu"], "after_steps": 12})
    after = result["devices"][0]["after"]
    assert after["steps"] == 12 and after["ok"] and "After 12 training steps it still matches" in result["sentence"]


def test_a_stopped_diagnosis_keeps_the_devices_it_finished():
    asked = []

    def stop():
        asked.append(1)
        return len(asked) > 3
    result = registry.run("diagnose", {"config": RunConfig(model="mlp", dataset="synthetic").to_dict(),
                                       "devices": ["cpu", "cpu"]}, should_stop=stop)
    assert result["stopped"] and "Stopped before every device was diagnosed" in result["sentence"]


# ---------------------------------------------------------------- MPS: the preflight and the waits


FLOAT64_MODEL = """import math, torch
from torch import nn

class M(nn.Module):
    def __init__(self, n, shape):
        super().__init__()
        self.body = nn.Linear(math.prod(shape), n)
        self.register_buffer('scale', torch.ones(1, dtype=torch.float64))
    def forward(self, x):
        return self.body(x.flatten(1)) * self.scale.float()

def build_model(num_classes, input_shape):
    return M(num_classes, input_shape)
"""


def test_a_float64_buffer_is_named_before_an_mps_run_and_cast_only_when_asked(fake_mps, tmp_path, capsys):
    fake_mps(fallback_ops={"aten::addmm"})
    model = tmp_path / "f64.py"
    model.write_text(FLOAT64_MODEL)
    bench = ["bench", "--model", str(model), "--dataset", "synthetic", "--devices", "mps", "--steps", "4",
             "--warmup", "1", "--no-inspect", "--batch-size", "4"]
    assert cli.main(bench) == cli.EXIT_RUN_FAILED
    err = capsys.readouterr().err
    assert ("MPS has no float64 or complex128, and f64.py holds 1 tensor of them: buffer `scale` (float64); make "
            "them float32 in the model, or let MPS Studio cast them for this run (--cast-float64") in err
    [failed] = RunStore().all()
    assert failed.status == "failed" and failed.summary.warmup_steps == 0  # before any step
    assert cli.main([*bench, "--cast-float64"]) == cli.EXIT_OK
    err = capsys.readouterr().err
    assert "mps: Cast for MPS, as chosen: buffer `scale` (float64)" in err
    assert "mps: Before the run: 1 operation of this model has no MPS kernel (aten::addmm); each will run on the " \
           "CPU" in err
    pre = RunStore().all()[-1].summary.preflight
    assert pre["traced"] and pre["no_mps_kernel"] == [{"op": "aten::addmm", "calls": 1, "kind": "cpu_fallback"}]


def test_the_preflight_says_when_operations_cannot_be_listed_ahead(fake_mps, tmp_path, capsys):
    fake_mps()
    model = tmp_path / "item.py"
    model.write_text("import math, torch\nfrom torch import nn\n\nclass M(nn.Module):\n"
                     "    def __init__(self, n, shape):\n        super().__init__()\n"
                     "        self.body = nn.Linear(math.prod(shape), n)\n"
                     "    def forward(self, x):\n        if x.abs().max().item() > 1e9:\n            x = x * 0\n"
                     "        return self.body(x.flatten(1))\n\n"
                     "def build_model(num_classes, input_shape):\n    return M(num_classes, input_shape)\n")
    assert cli.main(["bench", "--model", str(model), "--dataset", "synthetic", "--devices", "mps", "--steps", "4",
                     "--warmup", "1", "--no-inspect", "--batch-size", "4"]) == cli.EXIT_OK
    pre = RunStore().all()[-1].summary.preflight
    assert not pre["traced"] and "could not be listed before the run" in pre["reason"]


def test_on_mps_the_waits_inside_a_step_are_counted(fake_mps, tmp_path):
    fake_mps()
    model = tmp_path / "item.py"
    model.write_text("import math\nfrom torch import nn\n\nclass M(nn.Module):\n"
                     "    def __init__(self, n, shape):\n        super().__init__()\n"
                     "        self.body = nn.Linear(math.prod(shape), n)\n        self.seen = 0.0\n"
                     "    def forward(self, x):\n        out = self.body(x.flatten(1))\n"
                     "        self.seen += out.abs().mean().item()  # a value read on the host every step\n"
                     "        return out\n\n"
                     "def build_model(num_classes, input_shape):\n    return M(num_classes, input_shape)\n")
    result = registry.run("diagnose", {"config": RunConfig(model=str(model), dataset="synthetic", image_size=8,
                                                           batch_size=8).to_dict(), "devices": ["mps"]})
    [d] = result["devices"]
    assert d["sync_count"] >= 1 and d["sync_ops"][0]["op"] == "aten::_local_scalar_dense"
    assert d["launch_measure"] == "measured" and d["kind"] == "mps"
    assert d["preflight"]["refused"] == []


# ---------------------------------------------------------------- kept, exported, imported, drawn


def test_an_exported_diagnosis_imports_elsewhere_and_the_window_draws_it(tmp_path, qtbot):
    from mpsstudio.gui.tools.panel import ToolsPanel

    doc = _diagnose(tmp_path, "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--no-save")
    doc["devices"][0]["device"] = "cuda:0"  # as if from a CUDA server
    doc["devices"][0]["kind"] = "cuda"
    path = tmp_path / "server.json"
    path.write_text(json.dumps(doc))
    assert cli.main(["history", "--import", str(path)]) == cli.EXIT_OK
    [kept] = [t for t in RunStore().tools() if t.kind == "diagnose"]
    assert kept.result["imported_from"] and kept.result["devices"][0]["device"] == "cuda:0"
    panel = ToolsPanel(RunStore())
    qtbot.addWidget(panel)
    panel.resize(1100, 700)
    view = panel.detail.currentWidget()
    assert view.objectName() == "diagnose"
    t = anatomy_table(read(kept.result))
    rows = t.rows
    assert rows[0][0] == "cuda:0" and rows[0][1] == kept.result["devices"][0]["bound"]
    out = panel.export_png(str(tmp_path / "diagnosis.png"))
    assert (tmp_path / "diagnosis.png").stat().st_size > 10_000 and out
    broken = dict(doc, devices="all")
    path.write_text(json.dumps(broken))
    assert cli.main(["history", "--import", str(path)]) == cli.EXIT_BAD_INPUT


# ---------------------------------------------------------------- what a fresh-eyes pass threw at it


MODEL_FILES = {
    "noparams": "from torch import nn\ndef build_model(num_classes, input_shape):\n    return nn.Flatten()\n",
    "raises": ("import math\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, n, s):\n"
               "        super().__init__(); self.l = nn.Linear(math.prod(s), n)\n"
               "    def forward(self, x):\n        raise ValueError('forward exploded')\n"
               "def build_model(num_classes, input_shape):\n    return M(num_classes, input_shape)\n"),
    "nan": ("import math, torch\nfrom torch import nn\nclass M(nn.Module):\n    def __init__(self, n, s):\n"
            "        super().__init__(); self.l = nn.Linear(math.prod(s), n)\n"
            "    def forward(self, x):\n        return self.l(x.flatten(1)) * float('nan')\n"
            "def build_model(num_classes, input_shape):\n    return M(num_classes, input_shape)\n"),
}


@pytest.mark.parametrize("name, said", [
    ("noparams", "noparams.py has no trainable parameters, so there is nothing to train"),
    ("raises", "forward exploded"),
])
def test_a_model_that_cannot_train_is_one_sentence_for_its_device(tmp_path, capsys, name, said):
    model = tmp_path / f"{name}.py"
    model.write_text(MODEL_FILES[name])
    code = cli.main(["diagnose", "--model", str(model), "--dataset", "synthetic", "--devices", "cpu", "--image-size",
                     "8", "--json", str(tmp_path / "d.json")])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_RUN_FAILED and "Traceback" not in out + err
    [d] = json.loads((tmp_path / "d.json").read_text())["devices"]
    assert said in d["error"] and said in out


def test_a_diagnosis_whose_errors_are_not_finite_round_trips_through_its_json(tmp_path, capsys):
    """JSON has no infinity: a parity error that was not finite is written as null and read back as such."""
    model = tmp_path / "nan.py"
    model.write_text(MODEL_FILES["nan"])
    path = tmp_path / "nan.json"
    code = cli.main(["diagnose", "--model", str(model), "--dataset", "synthetic", "--devices", "cpu", "--image-size",
                     "8", "--layers", "--no-save", "--json", str(path)])
    out = capsys.readouterr().out
    assert code == cli.EXIT_RUN_FAILED
    assert "It differs from the float64 CPU reference beyond tolerance: relative error not finite in the loss" in out
    assert "so the difference arises outside them" in out  # every leaf module agrees: the NaN is the model's own code
    assert cli.main(["history", "--import", str(path)]) == cli.EXIT_OK
    [kept] = RunStore().tools()
    assert kept.result["devices"][0]["parity"]["worst_rel_err"] is None


def test_bf16_on_the_cpu_is_judged_by_nan_and_inf_alone(tmp_path, capsys):
    """The CPU in bf16 differs from float64 by bf16's rounding (a gradient by 0.39 here), which is no fault."""
    code = cli.main(["diagnose", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--precision",
                     "bf16", "--batch-size", "32", "--layers", "--after-steps", "3", "--no-save"])
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK, out
    assert "In bf16 the CPU has no other arithmetic to be judged by" in out and "holds NaN or Inf" in out


def test_a_json_path_that_cannot_be_written_loses_no_result(tmp_path, capsys):
    code = cli.main(["diagnose", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--json",
                     "/proc/x.json"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_BAD_INPUT and "cannot be written" in err and "the result is kept in the history" in err
    assert [t.kind for t in RunStore().tools()] == ["diagnose"]


def test_the_cost_of_the_hosts_waits_is_what_removing_them_saved_and_the_sentence_names_them():
    """A model that reads 6 values back a step (blocks_item's .item() after each block): the step takes 12 ms as it
    is and 10 ms with its reads answered from a record, so the waits cost 2 ms (17 %), not the 0.3 ms the host spent
    inside them; the bound says so and names the line."""
    a = {**figures(), "step_ms": 12.0, "host_ms": 4.0, "sync_wait_ms": 0.3, "device_ms": 9.5, "sync_count": 6,
         "sync_ops": [{"op": "aten::_local_scalar_dense", "count": 6}], "nosync_step_ms": 10.0, "sync_cost_ms": 2.0,
         "sync_calls": [{"call": ".item() at blocks_item.py:15", "count": 6}]}
    bound, shares = bottleneck.classify(a)
    assert bound == "sync" and shares["sync"] == pytest.approx(2 / 12)
    said = bottleneck.sentence(a, bound, shares)
    assert said.startswith("sync: the host waits for cuda:0 6 times a step: .item() at blocks_item.py:15 (6); without "
                           "those waits the step takes 10.0 ms instead of 12.0 ms: they cost 17% of it")
    smaller = {**a, "sync_cost_ms": 0.8, "nosync_step_ms": 11.2}  # 7 %: compute-bound, and the waits still named
    bound, shares = bottleneck.classify(smaller)
    assert bound == "compute" and "The host's waits for cuda:0 (6 times a step: .item() at blocks_item.py:15 (6)) also " \
        "cost 7% of the step" in bottleneck.sentence(smaller, bound, shares)
    tiny = {**a, "sync_cost_ms": 0.1, "nosync_step_ms": 11.9}  # 1 %: not worth a sentence
    bound, shares = bottleneck.classify(tiny)
    assert "waits" not in bottleneck.sentence(tiny, bound, shares)
