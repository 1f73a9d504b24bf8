"""Tests for the model registry: every model builds and runs, sizes adapt, user files fail clearly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from mpsstudio.engine.models import registry as models
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.models.registry import ModelInfo, build_model, count_parameters, get_model_info, input_spec_for, list_models, parameter_count, user_model_warning
from mpsstudio.engine.basics.spec import DataSpec

ALL_NAMES = [
    "mlp", "mnist_cnn", "resnet18", "resnet50", "vgg16", "alexnet", "mobilenet_v3_small",
    "efficientnet_b0", "vit_b_16", "vit_tiny", "lstm", "transformer", "transformer_base",
]
MNIST_LIKE = DataSpec("image", 10, channels=1, height=28, width=28)


@pytest.fixture(autouse=True, scope="module")
def _one_cpu_thread():
    """One intra-op thread: on a shared 2-core machine, OpenMP waits make tiny passes 50x slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _small_variant(info: ModelInfo) -> DataSpec:
    """The model's default spec shrunk to the cheapest size that still runs it, with 5 classes."""
    default = info.default_spec
    if default.kind == "tokens":
        return replace(default, num_classes=5, seq_len=12, vocab_size=50)
    return input_spec_for(info.name, replace(default, num_classes=5, height=8, width=8))


def _batch(spec: DataSpec, n: int = 2) -> torch.Tensor:
    if spec.kind == "tokens":
        return torch.randint(0, spec.vocab_size, (n, spec.seq_len))
    return torch.randn(n, *spec.sample_shape)


def _run_once(name: str, spec: DataSpec) -> torch.Tensor:
    model = build_model(name, spec)
    model.train()  # training mode, as the trainer runs it (BatchNorm needs batch 2 here)
    with torch.no_grad():
        return model(_batch(spec))


def test_list_models_has_every_model_in_order() -> None:
    infos = list_models()
    assert [info.name for info in infos] == ALL_NAMES
    for info in infos:
        assert info.input_kind in ("image", "tokens", "image or tokens")
        assert info.default_spec.kind in info.input_kind
        assert info.description and "\n" not in info.description


def test_default_specs_match_the_brief() -> None:
    assert get_model_info("resnet50").default_spec == DataSpec("image", 1000, channels=3, height=224, width=224)
    assert get_model_info("mlp").default_spec == DataSpec("image", 10, channels=1, height=32, width=32)
    assert get_model_info("mnist_cnn").default_spec == MNIST_LIKE
    assert get_model_info("transformer").default_spec == DataSpec("tokens", 2, seq_len=128, vocab_size=30522)
    assert get_model_info("lstm").default_spec == DataSpec("tokens", 2, seq_len=128, vocab_size=10000)
    assert get_model_info("vit_b_16").image_size_multiple == 16
    assert get_model_info("mlp").preferred_image_size == 32
    assert get_model_info("vgg16").preferred_image_size == 224


def _meta_forward(name: str, spec: DataSpec) -> torch.Tensor:
    """Build and run the model on the meta device: every shape checked, nothing initialised or computed."""
    with torch.device("meta"):
        return build_model(name, spec)(_batch(spec).to("meta"))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_model_runs_on_small_default_variant(name: str) -> None:
    spec = _small_variant(get_model_info(name))
    if name == "vgg16":  # 134 M parameters take seconds to initialise; its layers are torchvision's own
        assert _meta_forward(name, spec).shape == (2, 5)
        return
    out = _run_once(name, spec)
    assert out.shape == (2, 5)
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", ALL_NAMES)
def test_model_adapts_to_one_channel_28px_images(name: str) -> None:
    """The adaptation to small grayscale images is a matter of shapes: checked on the meta device (nothing is
    initialised or computed; the test above runs real forward passes)."""
    spec = input_spec_for(name, MNIST_LIKE)
    assert _meta_forward(name, spec).shape == (2, 10)


def test_mlp_parameter_count_matches_hand_count() -> None:
    expected = (1024 * 1024 + 1024) + (1024 * 512 + 512) + (512 * 256 + 256) + (256 * 10 + 10)
    spec = DataSpec("image", 10, channels=1, height=32, width=32)
    assert parameter_count("mlp", spec) == expected == 1_708_298
    assert count_parameters(build_model("mlp", spec)) == expected


def test_mnist_cnn_parameter_count_matches_hand_count() -> None:
    expected = (1 * 64 * 9 + 64) + (64 * 512 * 9 + 512) + (512 * 1024 + 1024) + (1024 * 10 + 10)
    assert parameter_count("mnist_cnn", MNIST_LIKE) == expected


def test_parameter_count_of_torchvision_models_at_imagenet_size() -> None:
    # Published torchvision figures for 1000 classes, 3 channels.
    assert parameter_count("resnet50", get_model_info("resnet50").default_spec) == 25_557_032
    assert parameter_count("vgg16", get_model_info("vgg16").default_spec) == 138_357_544
    assert parameter_count("vit_b_16", get_model_info("vit_b_16").default_spec) == 86_567_656


def test_transformer_base_is_bert_base_size() -> None:
    count = parameter_count("transformer_base", get_model_info("transformer_base").default_spec)
    assert 105_000_000 < count < 112_000_000  # BERT-base: ~110M


def test_first_conv_takes_the_spec_channels() -> None:
    spec = DataSpec("image", 7, channels=1, height=32, width=32)
    with torch.device("meta"):
        resnet = build_model("resnet18", spec)
        vit = build_model("vit_tiny", spec)
    assert (resnet.conv1.in_channels, resnet.conv1.kernel_size, resnet.conv1.stride) == (1, (7, 7), (2, 2))
    assert resnet.conv1.padding == (3, 3) and resnet.conv1.bias is None
    assert resnet.fc.out_features == 7
    assert (vit.conv_proj.in_channels, vit.conv_proj.kernel_size) == (1, (4, 4))


@pytest.mark.parametrize(
    ("name", "size", "expected"),
    [("vgg16", 28, 32), ("vit_b_16", 28, 32), ("vit_tiny", 30, 32), ("alexnet", 28, 63),
     ("resnet18", 28, 32), ("mnist_cnn", 2, 4), ("mlp", 28, 28), ("vit_b_16", 224, 224), ("vgg16", 100, 100)],
)
def test_input_spec_for_raises_and_rounds_sizes(name: str, size: int, expected: int) -> None:
    spec = DataSpec("image", 3, channels=2, height=size, width=size)
    assert input_spec_for(name, spec) == replace(spec, height=expected, width=expected)


def test_input_spec_for_non_square_images() -> None:
    spec = DataSpec("image", 3, channels=3, height=20, width=40)
    assert input_spec_for("resnet18", spec) == replace(spec, height=32, width=40)
    assert input_spec_for("vit_tiny", replace(spec, height=30, width=21)) == replace(spec, height=32, width=32)


def test_input_spec_for_tokens_is_unchanged_and_image_models_refuse_tokens() -> None:
    tokens = DataSpec("tokens", 2, seq_len=20, vocab_size=100)
    assert input_spec_for("lstm", tokens) == tokens
    with pytest.raises(UserError, match="resnet18.*lstm, transformer, transformer_base"):
        input_spec_for("resnet18", tokens)


@pytest.mark.parametrize("name", ["lstm", "transformer"])
def test_sequence_models_read_tokens_and_image_rows(name: str) -> None:
    tokens = DataSpec("tokens", 3, seq_len=10, vocab_size=40)
    images = DataSpec("image", 4, channels=2, height=12, width=6)
    assert _run_once(name, tokens).shape == (2, 3)
    assert _run_once(name, images).shape == (2, 4)
    model = build_model(name, images)
    assert model.embed.proj.in_features == 2 * 6  # one row of C*W values per step
    assert isinstance(build_model(name, tokens).embed, nn.Embedding)


def test_transformer_positions_follow_sequence_length() -> None:
    assert build_model("transformer", DataSpec("tokens", 2, seq_len=10, vocab_size=40)).position.num_embeddings == 10
    image_model = build_model("transformer", DataSpec("image", 2, channels=1, height=9, width=5))
    assert image_model.position.num_embeddings == 9


def test_lstm_classifies_from_last_hidden_state() -> None:
    model = build_model("lstm", DataSpec("tokens", 3, seq_len=7, vocab_size=30)).eval()
    x = torch.randint(0, 30, (2, 7))
    with torch.no_grad():
        outputs, _ = model.lstm(model.embed(x))
        assert torch.allclose(model(x), model.head(outputs[:, -1]))


def test_unknown_model_lists_choices() -> None:
    with pytest.raises(UserError) as caught:
        build_model("xyz", MNIST_LIKE)
    message = str(caught.value)
    assert message.startswith("Unknown model 'xyz'; choose one of: mlp, mnist_cnn, resnet18,")
    assert message.endswith("or give the path to a .py file that defines build_model(num_classes, input_shape).")
    assert all(name in message for name in ALL_NAMES)
    with pytest.raises(UserError, match="Unknown model 'xyz'"):
        get_model_info("xyz")


def test_names_are_case_insensitive() -> None:
    assert get_model_info("ResNet18").name == "resnet18"


# ----------------------------------------------------------------------------- user model files

GOOD_FILE = """
from dataclasses import dataclass
import torch
from torch import nn

@dataclass
class Seen:
    num_classes: int
    input_shape: tuple

def build_model(num_classes, input_shape):
    c, h, w = input_shape
    model = nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, num_classes))
    model.seen = Seen(num_classes, input_shape)
    return model
"""


def _write(tmp_path: Path, text: str, name: str = "user_model.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_user_model_builds_and_runs(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD_FILE)
    spec = DataSpec("image", 6, channels=1, height=8, width=8)
    model = build_model(path, spec)
    assert (model.seen.num_classes, model.seen.input_shape) == (6, (1, 8, 8))
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, 6)
    assert parameter_count(path, spec) == 64 * 6 + 6
    assert input_spec_for(path, spec) == spec


def test_user_model_info_and_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD_FILE)
    info = get_model_info(path)
    assert (info.name, info.input_kind) == (path, "image")
    assert info.default_spec == DataSpec("image", 10, channels=3, height=32, width=32)
    assert user_model_warning(path) == f"Loading {path} runs the Python code in it; only use files you trust."
    assert "{path}" in models.USER_MODEL_WARNING


BAD_FILES = {
    "raises on import": ("x = 1 / 0\n", "ZeroDivisionError: division by zero"),
    "syntax error": ("def build_model(:\n", "SyntaxError"),
    "exits on import": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "no build_model": ("def make_model(n, s):\n    return None\n", "has no build_model"),
    "build_model raises": (
        "def build_model(n, s):\n    raise ValueError('bad\\nshape')\n", "raised ValueError: bad shape;"),
    "wrong signature": ("def build_model():\n    pass\n", "raised TypeError"),
    "returns a non-module": ("def build_model(n, s):\n    return [1, 2]\n", "returned list, not a torch.nn.Module"),
}


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_bad_user_file_gives_one_sentence(tmp_path: Path, kind: str) -> None:
    text, expected = BAD_FILES[kind]
    path = _write(tmp_path, text)
    with pytest.raises(UserError) as caught:
        build_model(path, MNIST_LIKE)
    _assert_one_sentence(str(caught.value), expected)
    assert path in str(caught.value)


def test_missing_user_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.py")
    for call in (lambda: build_model(missing, MNIST_LIKE), lambda: get_model_info(missing)):
        with pytest.raises(UserError) as caught:
            call()
        _assert_one_sentence(str(caught.value), "was not found")


def test_user_file_that_is_not_python(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD_FILE, name="model.txt")
    with pytest.raises(UserError) as caught:
        build_model(path, MNIST_LIKE)
    _assert_one_sentence(str(caught.value), "is not a .py file")


def test_user_path_that_is_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "folder.py"
    folder.mkdir()
    with pytest.raises(UserError) as caught:
        build_model(str(folder), MNIST_LIKE)
    _assert_one_sentence(str(caught.value), "is not a file")


def _assert_one_sentence(message: str, expected: str) -> None:
    assert expected in message
    assert "\n" not in message
    assert message.endswith(".")
    assert "Traceback" not in message


def test_a_model_file_leaves_no_bytecode_in_the_user_s_folder(tmp_path, monkeypatch) -> None:
    """Python caches a module it imports in __pycache__ beside it unless told not to (PYTHONDONTWRITEBYTECODE is not
    a user's default): loading a model file must not write into the user's folder."""
    import sys

    from mpsstudio.engine.basics.spec import DataSpec
    from mpsstudio.engine.models import registry

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "mine.py"
    path.write_text("from torch import nn\ndef build_model(num_classes, input_shape):\n"
                    "    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes))\n")
    registry.build_model(str(path), DataSpec(kind="image", num_classes=3, channels=1, height=4, width=4))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.py"]
    assert sys.dont_write_bytecode is False  # put back as it was


def test_multiply_adds_are_counted_on_the_meta_device_for_built_ins_only(tmp_path):
    """Known answers: ResNet-18 at 224 px is 1.81 G multiply-adds a sample (its paper's 1.8 GFLOPs), a 256-unit LSTM
    over 128 tokens 4·256·512 a token; a user's file is never run to count."""
    spec = models.input_spec_for("resnet18", models.spec_of((3, 224, 224), 1000))
    assert models.macs_per_sample("resnet18", spec) == 1_814_073_344
    lstm = models.input_spec_for("lstm", models.spec_of((128,), 10))
    assert models.macs_per_sample("lstm", lstm) == 128 * 4 * 256 * 512 + 256 * 10
    path = tmp_path / "mine.py"
    path.write_text("raise SystemExit('never run')\n")
    assert models.macs_per_sample(str(path), spec) is None


def test_the_shipped_parameter_counts_are_the_registrys_own():
    """`mpsstudio models` answers from counts shipped with the package for the pinned torchvision: counted again
    here, so a changed model or pin fails the suite instead of showing a wrong count."""
    from importlib import metadata

    from mpsstudio.engine.models import counts
    from mpsstudio.engine.models.catalog import BUILT_IN

    assert metadata.version("torchvision").startswith(counts.SHIPPED_WITH + ".")
    assert set(counts.SHIPPED) == {m.name for m in BUILT_IN}
    for m in BUILT_IN:
        assert counts.SHIPPED[m.name] == parameter_count(m.name, m.default_spec), m.name
    assert counts.parameter_counts() == counts.SHIPPED
