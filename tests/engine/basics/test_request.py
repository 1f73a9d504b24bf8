"""RunRequest: what the user chose, immutable, planned by run/session.plan_request the same for both front ends."""

from __future__ import annotations

import pytest

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.request import RunRequest
from mpsstudio.engine.machine.devices import Device, cpu_device
from mpsstudio.engine.run import session

QUICK = dict(model="mlp", dataset="synthetic", batch_size=4, steps=2, epochs=None, warmup_steps=0)
GPU = Device(id="cuda:0", kind="cuda", available=True, name="a fake GPU")
MPS = Device(id="mps", kind="mps", available=True, name="Apple M3 (fake)")


def test_a_request_is_immutable_and_its_changes_copy_the_settings():
    base = RunConfig(**QUICK, options={"finetune": "lora"})
    request = RunRequest.of(base, devices=["cpu", "mps"], lr=0.5)
    assert request.devices == ("cpu", "mps") and request.settings.lr == 0.5 and base.lr == 0.01
    assert request.settings.options == base.options and request.settings.options is not base.options
    assert request == RunRequest.of(base, devices=("cpu", "mps"), lr=0.5)  # lists and tuples alike
    with pytest.raises(TypeError, match="no field 'colour'"):
        request.changed(colour="red")
    with pytest.raises(AttributeError):
        request.devices = ("cuda",)  # type: ignore[misc]


def test_environments_expand_pytorch_runs_and_mlx_runs_in_its_own():
    here = session.Here(known=(cpu_device(), MPS), mlx={"cpu": "", "mps": ""})
    request = RunRequest.of(RunConfig(**QUICK), devices=("cpu", "mps"), frameworks=("torch", "mlx"),
                            pythons=(None, "/opt/other/bin/python"))
    configs = session.plan_request(request, here).configs
    assert [(c.framework, c.device, c.python) for c in configs] == [
        ("torch", "cpu", None), ("torch", "cpu", "/opt/other/bin/python"),
        ("torch", "mps", None), ("torch", "mps", "/opt/other/bin/python"),
        ("mlx", "cpu", None), ("mlx", "mps", None)]


def test_several_gpus_with_several_frameworks_is_refused_the_same_way_for_both_front_ends():
    here = session.Here(known=(cpu_device(), GPU, Device(id="cuda:1", kind="cuda", available=True, name="b")),
                        mlx={"cpu": ""})
    request = RunRequest.of(RunConfig(**QUICK), devices=("cuda",), frameworks=("torch", "mlx"), gpus=(2,))
    with pytest.raises(UserError, match="compare frameworks on one device at a time"):
        session.plan_request(request, here)
    ranked = session.plan_request(request.changed(frameworks=("torch",)), here).configs
    assert [(c.device, c.gpus) for c in ranked] == [("cuda", 2)]
    assert session.plan_request(request.changed(frameworks=("torch",), gpus=(2, 4)), here).skipped == [
        "skipping 4 GPUs: this machine has 2."]
    scaled = session.plan_request(request.changed(devices=("cpu", "cuda:0", "cuda:1"), frameworks=(), gpus=(1, 2)),
                                  here).configs  # the CUDA devices named are one CUDA setup, run on 1 and on 2
    assert [(c.device, c.gpus) for c in scaled] == [("cpu", 1), ("cuda", 1), ("cuda", 2)]


def test_the_known_devices_answer_as_the_probe_would():
    here = session.Here(known=(cpu_device(), Device(id="mps", kind="mps", available=False, reason="no Apple GPU")))
    plan = session.plan_request(RunRequest.of(RunConfig(**QUICK), devices=("cpu", "mps", "tpu")), here)
    assert [c.device for c in plan.configs] == ["cpu"]
    assert plan.skipped == ["skipping mps: mps is not available: no Apple GPU.",
                            "skipping tpu: Unknown device 'tpu'; use cpu, mps or cuda (cuda:N for a specific GPU)."]
