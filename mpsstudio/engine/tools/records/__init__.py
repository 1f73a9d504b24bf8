"""The declared shape of every tool result the history keeps (and of the device check's answer): what the tool's
process may send, what an imported file may hold, what a pending file or a stored row is read as, and what the views
(toolview.py, diagnose/view.py, the Tools tab, the CLI) may read. One declaration: registry.checked goes by it, and
a field a view reads is declared here, one module per tool (tests/engine/tools/test_shapes.py renders every view over mutations of real results).

Ranges are what a tool can produce: times, rates, bytes and counts are finite and not negative; shares 0 to 1;
parity errors finite or null (null: not finite, JSON has no infinity); lists no longer than a tool makes them.
No torch here.
"""

from __future__ import annotations

from .check import CHECK
from .common import BATCH, ToolResult
from .deploy import DEPLOY
from .diagnose import DIAGNOSE
from .export import EXPORT
from .generate import GENERATE
from .inspection import DEVICES, INSPECT
from .maxbatch import MAX_BATCH_RESULT, Failed, MaxBatchResult, Probe
from .sweep import SWEEP, Crossover, Ratio, SweepPoint, SweepResult
from .tune import TUNE

__all__ = ["BATCH", "MAX_STORED_BYTES", "SHAPES", "Crossover", "Failed", "MaxBatchResult", "Probe", "Ratio", "SweepPoint",
           "SweepResult", "ToolResult"]

SHAPES = {"sweep": SWEEP, "max-batch": MAX_BATCH_RESULT, "inspect": INSPECT, "devices": DEVICES, "export": EXPORT,
          "deploy-bench": DEPLOY, "diagnose": DIAGNOSE, "tune": TUNE, "check": CHECK,
          "generate": GENERATE}
MAX_STORED_BYTES = 8 * 1024 * 1024  # the JSON of one stored tool result (a 100-layer diagnosis is ~50 KB)
