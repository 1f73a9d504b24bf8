"""The built-in models' parameter counts, shipped with the package for the torchvision it is pinned to (so the first
`mpsstudio models` of a fresh install answers in a fraction of a second, without importing torch), else counted once
per install and read from the cache folder (catalog.py lists the models themselves)."""

from __future__ import annotations

from .catalog import BUILT_IN


PARAMETERS_FILE = "model-parameters.json"  # in the cache folder
# Counted by registry.parameter_count at each model's default input with torchvision SHIPPED_WITH (constraints.txt's
# pin); tests/engine/models/test_models.py counts them again and fails when a model or the pin changes them.
SHIPPED_WITH = "0.29"
SHIPPED = {"mlp": 1_708_298, "mnist_cnn": 831_626, "resnet18": 11_689_512, "resnet50": 25_557_032,
           "vgg16": 138_357_544, "alexnet": 61_100_840, "mobilenet_v3_small": 2_542_856, "efficientnet_b0": 5_288_548,
           "vit_b_16": 86_567_656, "vit_tiny": 2_693_578, "lstm": 3_086_850, "transformer": 11_072_258,
           "transformer_base": 109_187_330}


def parameter_counts() -> dict[str, int]:
    """Each built-in model's parameters at its default input, counted by the registry (on the meta device) once per
    install of MPS Studio, torch and torchvision, then read from the cache folder (so `mpsstudio models` answers
    without importing torch). A cache that cannot be read or written is only slower."""
    import json
    from importlib import metadata

    from ... import __version__
    from ..basics.files import write_atomic
    from ..basics.paths import cache_dir

    def version(package: str) -> str:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return "?"
    vision = version("torchvision")
    if (vision == SHIPPED_WITH or vision.startswith(SHIPPED_WITH + ".")) and all(m.name in SHIPPED for m in BUILT_IN):
        return {m.name: SHIPPED[m.name] for m in BUILT_IN}
    key = f"mpsstudio {__version__}, torch {version('torch')}, torchvision {vision}"
    path = cache_dir() / PARAMETERS_FILE
    try:
        kept = json.loads(path.read_text())
        counts = kept["counts"]
        if kept.get("key") == key and all(isinstance(counts.get(m.name), int) for m in BUILT_IN):
            return {m.name: counts[m.name] for m in BUILT_IN}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    from . import registry

    counts = {m.name: registry.parameter_count(m.name, m.default_spec) for m in BUILT_IN}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"key": key, "counts": counts}))
    except OSError:
        pass
    return counts
