"""The MLX twins of the built-ins: the same model as PyTorch's, name for name and layout for layout (MLX's CPU
backend: mlx[cpu], a test dependency)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

mx = pytest.importorskip("mlx.core")

from mpsstudio.engine.basics.errors import UserError  # noqa: E402
from mpsstudio.engine.models import mlx_twins, registry  # noqa: E402
from mpsstudio.engine.models.catalog import MLX_TWINS, mlx_twin_reason  # noqa: E402


def small_spec(name):
    spec = registry.input_spec_for(name, registry.get_model_info(name).default_spec)
    if spec.kind == "image":
        return replace(spec, height=32, width=32, num_classes=10)
    return replace(spec, seq_len=16, num_classes=3)


def batch(spec, n=4):
    torch.manual_seed(1)
    if spec.kind == "image":
        return torch.randn(n, *spec.sample_shape)
    return torch.randint(0, spec.vocab_size, (n, *spec.sample_shape))


@pytest.mark.parametrize("name", MLX_TWINS)
def test_each_twin_takes_pytorchs_weights_and_computes_the_same_logits(name):
    spec = small_spec(name)
    torch.manual_seed(0)
    model = registry.build_model(name, spec).eval()
    twin = mlx_twins.build_twin(name, spec, None)
    copied = mlx_twins.transfer(model, twin)
    twin.eval()
    assert copied == sum(v.numel() for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked"))
    assert mlx_twins.parameter_count(twin) == registry.count_parameters(model)
    x = batch(spec)
    with torch.no_grad():
        expected = model(x).numpy()
    array = x.numpy()
    if spec.kind == "image" and mlx_twins.layout_of(twin) == "nhwc":
        array = array.transpose(0, 2, 3, 1)
    got = np.array(twin(mx.array(array)))
    assert np.linalg.norm(expected - got) / np.linalg.norm(expected) < 1e-5


def test_a_convolution_moves_from_oihw_to_ohwi():
    weight = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    moved = mlx_twins.to_mlx_layout("conv.weight", weight, mlx_twins.weight_layouts(torch.nn.ModuleDict(
        {"conv": torch.nn.Conv2d(3, 2, (4, 5))})))
    assert moved.shape == (2, 4, 5, 3) and moved[1, 2, 3, 0] == weight[1, 0, 2, 3]


def test_mlx_names_of_sequential_layers_are_pytorchs():
    assert mlx_twins.torch_name("pooler.layers.0.weight", ["pooler"]) == "pooler.0.weight"
    assert mlx_twins.torch_name("layers.3.bias", [""]) == "3.bias"
    assert mlx_twins.torch_name("encoder.layers.0.linear1.weight", []) == "encoder.layers.0.linear1.weight"


def test_a_twin_with_another_layer_is_refused_naming_it():
    spec = small_spec("mlp")
    model = registry.build_model("mlp", spec)
    twin = mlx_twins.build_twin("mnist_cnn", small_spec("mnist_cnn"), None)
    with pytest.raises(UserError, match="not the same model: PyTorch's 1.weight"):
        mlx_twins.transfer(model, twin)


def test_a_layer_of_another_shape_is_refused_with_both_shapes():
    spec = small_spec("mlp")
    model = registry.build_model("mlp", spec)
    twin = mlx_twins.build_twin("mlp", replace(spec, num_classes=7), None)
    with pytest.raises(UserError, match=r"7.weight is \(10, 256\) in PyTorch and \(7, 256\) in MLX"):
        mlx_twins.transfer(model, twin)


def test_a_built_in_without_a_twin_says_which_have_one():
    assert "resnet18" in mlx_twin_reason("vgg16") and mlx_twin_reason("resnet18") == ""
    with pytest.raises(UserError, match="vgg16 has no MLX twin"):
        mlx_twins.build_twin("vgg16", small_spec("mlp"), None)
