"""The built-in models' parameter counts, counted once per install and then read from the cache folder, so that
`mpsstudio models` answers without importing torch (catalog.py lists the models themselves)."""

from __future__ import annotations

from .catalog import BUILT_IN


PARAMETERS_FILE = "model-parameters.json"  # in the cache folder


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
    key = f"mpsstudio {__version__}, torch {version('torch')}, torchvision {version('torchvision')}"
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
