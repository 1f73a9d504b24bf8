"""The commands a user types to look around answer without importing torch where they can: `--version`, and
`models` after its first call (each built-in's parameters are counted once per install, then read from the cache).
Their times against today's are in docs/benchmarks.md (benchmarks/fast_commands.py); here, what they import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

from mpsstudio.engine.models import catalog, counts, registry
from tests.support.paths import ROOT

PROBE = ("import sys; from mpsstudio import cli; code = cli.main({argv!r}); "
         "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', code)")


def _imports_torch(argv: list[str]) -> tuple[bool, str]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    last = done.stdout.strip().splitlines()[-1]
    return last.startswith("TORCH"), done.stdout + done.stderr


def test_version_says_the_versions_without_torch(capsys):
    from mpsstudio import __version__, cli

    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == (f"mpsstudio {__version__} (Python {sys.version.split()[0]}, torch "
                                               f"{metadata.version('torch')})")
    torch, out = _imports_torch(["--version"])
    assert not torch, out


def test_models_counts_once_then_reads_its_cache(monkeypatch):
    """With the pinned torchvision the shipped counts answer (nothing written, torch not imported); with another,
    they are counted once and cached."""
    from mpsstudio.engine.basics.paths import cache_dir

    path = cache_dir() / counts.PARAMETERS_FILE
    torch, out = _imports_torch(["models"])
    assert not torch and "11.7 M" in out and not path.exists(), out
    monkeypatch.setattr(counts, "SHIPPED_WITH", "0.0")  # another torchvision than the one the counts shipped for
    counted = counts.parameter_counts()  # counted by the registry
    assert counted == {m.name: registry.parameter_count(m.name, m.default_spec) for m in catalog.BUILT_IN}
    assert counted["resnet18"] == 11_689_512  # torchvision's ResNet-18 at 1,000 classes
    kept = json.loads(path.read_text())
    kept["counts"]["resnet18"] = 1  # a cache of another install (or damaged) is counted again, never believed
    kept["key"] = "mpsstudio 0.0.1, torch 1.0, torchvision 0.1"
    path.write_text(json.dumps(kept))
    assert counts.parameter_counts()["resnet18"] == 11_689_512
    path.write_text("{not json")
    assert counts.parameter_counts()["resnet18"] == 11_689_512


@pytest.mark.parametrize("name", [m.name for m in catalog.BUILT_IN])
def test_the_catalogue_is_the_registrys(name):
    assert registry.get_model_info(name) is next(m for m in catalog.BUILT_IN if m.name == name)
