"""MLX's arithmetic said and chosen (issue 56): half precision trained as MLX users train it (fp32 master weights),
TF32-class fp32 products recorded and given a tolerance derived from TF32's precision, every convolution layout
converted, MLX's own peak memory, and a warm worker that gives MLX's cache back (MLX's CPU backend, mlx[cpu])."""

from __future__ import annotations

import math

import numpy as np
import pytest

mx = pytest.importorskip("mlx.core")
import mlx.nn as mnn  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from mpsstudio.engine.basics.config import RunConfig  # noqa: E402
from mpsstudio.engine.basics.errors import UserError  # noqa: E402
from mpsstudio.engine.basics.spec import DataSpec  # noqa: E402
from mpsstudio.engine.machine import mlx as mlx_machine  # noqa: E402
from mpsstudio.engine.models import mlx_twins, registry  # noqa: E402
from mpsstudio.engine.process.warm import Warm  # noqa: E402
from mpsstudio.engine.run import trainer  # noqa: E402
from mpsstudio.engine.run.mlx import parity  # noqa: E402
from mpsstudio.engine.run.mlx import steps as mlx_steps  # noqa: E402
from mpsstudio.engine.run.windows import reading_peak  # noqa: E402
from mpsstudio.engine.tools.memory import free  # noqa: E402

QUICK = dict(model="mlp", dataset="synthetic", steps=6, warmup_steps=2, batch_size=32, epochs=None, framework="mlx")
SPEC = DataSpec(kind="image", channels=2, height=4, width=4, num_classes=3)


# ---------------------------------------------------------------- half precision


@pytest.mark.parametrize("precision, optimizer", [("fp16", "adam"), ("fp16", "adamw"),
                                                pytest.param("bf16", "adam", marks=pytest.mark.long)])
def test_half_precision_with_adam_trains_with_finite_losses(precision, optimizer):
    """fp16 + Adam turned to NaN at step 2 when the whole twin (and so Adam's state, whose eps is 0 in fp16) was cast;
    with fp32 master weights it trains, and parity checked the half step as the run takes it."""
    result = trainer.run(RunConfig(**{**QUICK, "precision": precision, "optimizer": optimizer, "lr": 1e-3}))
    assert result.status == "finished", result.error
    assert all(math.isfinite(v) for v in result.losses) and len(result.losses) == 8
    checks = result.summary.parity["checks"]
    assert {f"{precision} forward", f"{precision} step direction"} <= set(checks)
    assert 0 < checks[f"{precision} step direction"]["difference"] <= checks[f"{precision} step direction"]["tolerance"]


def test_a_half_step_keeps_fp32_master_weights_and_optimizer_state():
    config = RunConfig(**{**QUICK, "precision": "fp16", "optimizer": "adam", "lr": 1e-3})
    twin = mlx_twins.build_twin("mlp", SPEC, None)
    steps = mlx_steps.MlxSteps(config, twin, mx.float16)
    x, y = mx.random.normal((8, 2, 4, 4)).astype(mx.float16), mx.array(np.arange(8) % 3, dtype=mx.int32)
    for _ in range(3):
        loss = steps.step(x, y)
    assert math.isfinite(float(np.array(loss)))
    assert all(w.dtype == mx.float32 for _, w in mlx_twins.flat(steps.weights()))
    assert all(v.dtype == mx.float32 for _, v in mlx_twins.flat(steps.optimizer.state) if hasattr(v, "dtype")
               and mx.issubdtype(v.dtype, mx.floating))
    assert all(w.dtype == mx.float16 for _, w in mlx_twins.flat(twin.trainable_parameters()))  # the step's own copy


def test_a_half_loss_that_overflows_names_fp16_s_range():
    config = RunConfig(**{**QUICK, "precision": "fp16", "optimizer": "sgd", "lr": 1e-3})
    twin = mlx_twins.build_twin("mlp", SPEC, None)
    steps = mlx_steps.MlxSteps(config, twin, mx.float16)
    from mlx.utils import tree_map

    steps.master["weights"] = tree_map(lambda w: w * 300.0, steps.master["weights"])  # activations past 65,504
    x, y = mx.ones((4, 2, 4, 4), dtype=mx.float16), mx.array([0, 1, 2, 0], dtype=mx.int32)
    cause = steps.non_finite_cause(x, y)
    assert "fp16's range (largest value 65,504) overflowed" in cause and "bf16 keeps fp32's range" in cause
    steps.master["weights"] = tree_map(lambda w: w * math.inf, steps.master["weights"])
    assert "diverged" in steps.non_finite_cause(x, y)


# ---------------------------------------------------------------- MLX's TF32-class products


@pytest.mark.parametrize("value, read", [(None, 1), ("0", 0), ("1", 1), (" 7x", 7), ("false", 0), ("yes", 0),
                                          ("", 0), ("-1", -1)])
def test_mlx_variables_read_as_mlx_reads_them_with_atoi(value, read):
    assert mlx_machine.env_flag(value, 1) == read


@pytest.mark.parametrize("arch, macos, path", [("applegpu_g17s", "26.2", True), ("applegpu_g17s", "26.1", False),
                                               ("applegpu_g16s", "26.3", False), ("applegpu_g17p", "26.2", False),
                                               ("applegpu_g18p", "26.2", True), ("applegpu_g15d", "27.0", False)])
def test_the_tf32_class_path_is_the_nax_gpus_on_macos_26_2(monkeypatch, arch, macos, path):
    """mlx device.cpp is_nax_available: macOS 26.2+, architecture generation 17+ (18+ for a phone's 'p')."""
    import platform

    monkeypatch.setattr(platform, "mac_ver", lambda *a: (macos, ("", "", ""), "arm64"))
    assert mlx_machine.tf32_class_path("mps", arch) is path
    assert mlx_machine.tf32_class_path("cpu", arch) is False


def test_an_mlx_run_records_its_mlx_variables_and_its_fp32_arithmetic(monkeypatch):
    monkeypatch.setenv("MLX_MAX_OPS_PER_BUFFER", "10")
    result = trainer.run(RunConfig(**QUICK))
    assert result.status == "finished", result.error
    assert result.env["mlx_env"]["MLX_ENABLE_TF32"] == "0"  # full fp32 unless chosen: like with like with PyTorch's
    assert result.env["mlx_env"]["MLX_MAX_OPS_PER_BUFFER"] == "10"
    assert result.env["mlx_arithmetic"] == {"tf32": False, "tf32_class_path": False, "reduced": False,
                                            "words": "full fp32 matrix products (this device has no TF32-class path)"}
    chosen = trainer.run(RunConfig(**{**QUICK, "tf32": True}))
    assert chosen.status == "finished", chosen.error
    assert chosen.env["mlx_env"]["MLX_ENABLE_TF32"] == "1" and chosen.env["mlx_arithmetic"]["tf32"] is True
    assert chosen.env["mlx_arithmetic"]["reduced"] is False  # MLX's CPU has no TF32-class path


def _tf32(a):
    """An fp32 array rounded to TF32's 10-bit mantissa (round to nearest), as a NAX product reads its operands."""
    bits = a.astype(mx.float32).view(mx.uint32)
    return ((bits + 0x1000) & 0xFFFFE000).view(mx.float32)


class Tf32Linear(mnn.Linear):
    """A Linear whose product reads TF32-rounded operands (the gradient passes straight through)."""

    def __call__(self, x):
        xs = x + mx.stop_gradient(_tf32(x) - x)
        w = self.weight + mx.stop_gradient(_tf32(self.weight) - self.weight)
        y = xs @ w.T
        return y + self.bias if "bias" in self else y


def _parity(torch_model, twin, x, y, *, precision="fp32", optimizer="sgd", reduced=False, image=True):
    config = RunConfig(**{**QUICK, "precision": precision, "optimizer": optimizer, "lr": 0.01})
    mlx_twins.transfer(torch_model, twin)
    convert = mlx_steps.converter(mlx_twins.layout_of(twin), image)
    return parity.check(config, torch_model, twin, x, y, convert, lambda c, d: mlx_steps.MlxSteps(c, twin, d),
                        reduced=reduced)


def _mlp_pair(tf32: bool):
    torch.manual_seed(0)
    reference = registry.build_model("mlp", SPEC)
    twin = mlx_twins.build_twin("mlp", SPEC, None)
    if tf32:
        for _, module in twin.named_modules():
            if type(module) is mnn.Linear:
                module.__class__ = Tf32Linear
    x, y = torch.randn(16, 2, 4, 4, generator=torch.Generator().manual_seed(1)), torch.arange(16) % 3
    return reference, twin, x, y


def test_the_tf32_tolerance_is_derived_from_tf32_s_precision_and_the_model_s_products():
    _, twin, _, _ = _mlp_pair(False)
    assert parity.products(twin) == 4  # the mlp's four Linear layers
    assert parity.tf32_tolerance(twin, "forward") == pytest.approx(2 * 2 ** -11 * 4)
    assert parity.tf32_tolerance(twin, "step") == pytest.approx(3 * 2 * 2 ** -11 * 4)


def test_tf32_class_products_fail_the_fp32_tolerance_and_pass_their_own():
    """What every MLX run on an M5 met (mlx#3860, #3534): TF32-class arithmetic judged by fp32's tolerance is refused;
    judged by its own derived tolerance it passes."""
    found = _parity(*_mlp_pair(True))
    assert not found.passed and found.checks["forward"]["difference"] > 1e-4
    found = _parity(*_mlp_pair(True), reduced=True)
    assert found.passed, found.words()


def test_the_tf32_tolerance_still_refuses_a_twin_with_one_wrong_layer():
    """Full fp32 refuses a twin with one wrong layer, and so does the TF32-class tolerance, naming the same layer."""
    config = RunConfig(**{**QUICK, "optimizer": "sgd", "lr": 0.01})
    for reduced in (False, True):
        reference, twin, x, y = _mlp_pair(tf32=reduced)
        mlx_twins.transfer(reference, twin)
        twin.layers[5].weight = twin.layers[5].weight * 1.15  # one layer's weights off by 15 %
        convert = mlx_steps.converter(mlx_twins.layout_of(twin), True)
        found = parity.check(config, reference, twin, x, y, convert, lambda c, d: mlx_steps.MlxSteps(c, twin, d),
                             reduced=reduced)
        assert not found.passed and "the first layer whose output differs is 5" in found.layer


# ---------------------------------------------------------------- every convolution layout


class TorchConv1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv1d(2, 4, 3, padding=1), nn.Linear(64, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x.flatten(2))).flatten(1))


class MlxConv1d(mnn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = mnn.Conv1d(2, 4, 3, padding=1), mnn.Linear(64, 3)

    def __call__(self, x):  # NHWC -> (N, L, C)
        h = mnn.relu(self.conv(x.reshape(x.shape[0], -1, x.shape[-1])))
        return self.fc(h.transpose(0, 2, 1).reshape(h.shape[0], -1))


class TorchConv3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv3d(2, 4, (1, 3, 3), padding=(0, 1, 1)), nn.Linear(64, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x.unsqueeze(2))).flatten(1))


class MlxConv3d(mnn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = mnn.Conv3d(2, 4, (1, 3, 3), padding=(0, 1, 1)), mnn.Linear(64, 3)

    def __call__(self, x):  # NHWC -> (N, 1, H, W, C)
        h = mnn.relu(self.conv(x[:, None]))
        return self.fc(h.transpose(0, 4, 1, 2, 3).reshape(h.shape[0], -1))


class TorchConvT2d(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.ConvTranspose2d(2, 4, 3, stride=2), nn.Linear(4 * 9 * 9, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


class MlxConvT2d(mnn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = mnn.ConvTranspose2d(2, 4, 3, stride=2), mnn.Linear(4 * 9 * 9, 3)

    def __call__(self, x):
        h = mnn.relu(self.conv(x))
        return self.fc(h.transpose(0, 3, 1, 2).reshape(h.shape[0], -1))


@pytest.mark.parametrize("pair", [(TorchConv1d, MlxConv1d), (TorchConv3d, MlxConv3d), (TorchConvT2d, MlxConvT2d)],
                         ids=["conv1d", "conv3d", "conv_transpose2d"])
def test_every_convolution_layout_moves_across_and_passes_parity(pair):
    torch.manual_seed(0)
    reference, twin = pair[0](), pair[1]()
    x, y = torch.randn(8, 2, 4, 4, generator=torch.Generator().manual_seed(2)), torch.arange(8) % 3
    found = _parity(reference, twin, x, y)
    assert found.passed and set(found.checks) == {"forward", "loss", "step"}, found.words()


@pytest.mark.parametrize("layer, mlx_shape", [(nn.ConvTranspose1d(2, 4, 3), (4, 3, 2)),
                                              (nn.ConvTranspose3d(2, 4, 3), (4, 3, 3, 3, 2)),
                                              (nn.Conv1d(2, 4, 3), (4, 3, 2)), (nn.Conv3d(2, 4, 3), (4, 3, 3, 3, 2))])
def test_each_layout_is_mlx_s_own_shape(layer, mlx_shape):
    layouts = mlx_twins.weight_layouts(nn.Sequential(layer))
    assert mlx_twins.to_mlx_layout("0.weight", layer.weight, layouts).shape == mlx_shape


def test_a_layer_with_no_mlx_layout_is_refused_naming_it():
    with pytest.raises(UserError, match=r"^0 \(ConvTranspose2d, groups=2\) has no MLX layout"):
        mlx_twins.weight_layouts(nn.Sequential(nn.ConvTranspose2d(4, 4, 3, groups=2)))

    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.table = nn.Parameter(torch.zeros(2, 3, 4))

    class MlxOdd(mnn.Module):
        def __init__(self):
            super().__init__()
            self.table = mx.zeros((2, 4, 3))

    with pytest.raises(UserError, match="no layout conversion is known for a Odd's 3-D table"):
        mlx_twins.transfer(Odd(), MlxOdd())


# ---------------------------------------------------------------- MLX's memory


def test_an_mlx_gpu_run_s_peak_is_mlx_s_own(fake_mps):
    fake_mps()
    device = mlx_machine.MlxDevice(id="mps", kind="mps", available=True, name="Apple M5")
    mx.reset_peak_memory()
    held = mx.ones((1 << 18,))
    mx.eval(held)
    reading = device.memory()
    assert reading["peak"] == reading["mlx_peak"] >= 1 << 20 and reading_peak(reading) == reading["peak"]
    assert device.memory_measure() == "mlx_peak"
    cpu = mlx_machine.MlxDevice(id="cpu", kind="cpu", available=True)
    assert "peak" not in cpu.memory() and cpu.memory_measure() == "rss_growth"  # the process's growth, as PyTorch's


def test_the_memory_a_warm_worker_gives_back_includes_mlx_s():
    blocks = [mx.ones((1 << 16,)) * i for i in range(8)]
    mx.eval(blocks)
    del blocks
    assert mx.get_cache_memory() > 0
    free("cpu")
    assert mx.get_cache_memory() == 0 and mx.get_peak_memory() <= mx.get_active_memory() + (1 << 20)


def test_a_warm_worker_is_never_shared_across_frameworks_or_mlx_s_tf32_switch():
    base = RunConfig(**{**QUICK, "device": "mps", "framework": "torch"})
    keys = {Warm._key_of(base), Warm._key_of(base.changed(framework="mlx")),
            Warm._key_of(base.changed(framework="mlx", tf32=True))}
    assert len(keys) == 3


def test_where_mlx_s_default_is_tf32_class_both_arithmetics_are_planned_and_labelled(monkeypatch):
    from mpsstudio.engine.run import session

    from mpsstudio.engine.machine.devices import Device, cpu_device

    monkeypatch.setattr(mlx_machine, "tf32_class_path", lambda kind, arch=None: kind == "mps")
    here = session.Here(known=(cpu_device(), Device(id="mps", kind="mps", available=True, name="Apple M5 (fake)")),
                        mlx={"cpu": "", "mps": ""})  # what the window's catalogue found: the plan probes nothing
    found = session.plan(RunConfig(**{**QUICK, "framework": "torch"}), ["cpu", "mps"], frameworks=["torch", "mlx"],
                         here=here)
    mlx = [(c.device, c.tf32, c.where) for c in found.configs if c.framework == "mlx"]
    assert mlx == [("cpu", False, "MLX \u00b7 cpu"), ("mps", False, "MLX \u00b7 gpu"),
                   ("mps", True, "MLX \u00b7 gpu \u00b7 MLX_ENABLE_TF32=1")]
    assert session.MLX_TF32_NOTE in found.notes
    chosen = session.plan(RunConfig(**{**QUICK, "tf32": True}), ["mps"], frameworks=["mlx"], here=here)
    assert [c.tf32 for c in chosen.configs] == [True]  # asked for: MLX's default only


def test_a_twin_that_differs_only_in_its_gradients_is_refused_naming_the_parameter():
    """The forward agrees, the backward does not (a gradient scaled inside the layer): parity names the parameter."""

    class ScaledGrad(mnn.Linear):
        def __call__(self, x):  # the same forward; the weight's gradient doubled
            w = 2 * self.weight - mx.stop_gradient(self.weight)
            return x @ w.T + self.bias

    reference, twin, x, y = _mlp_pair(False)
    twin.layers[3].__class__ = ScaledGrad
    found = _parity(reference, twin, x, y)
    assert not found.passed and found.checks["forward"]["difference"] <= found.checks["forward"]["tolerance"]
    assert "the parameter whose update differs most is 3.weight" in found.layer
