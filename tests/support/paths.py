"""Where things are, wherever a test module sits in the tree."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
DATA = ROOT / "tests" / "data"  # files the tests read (tool results, the hostile corpus)
