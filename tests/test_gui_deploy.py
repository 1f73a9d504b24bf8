"""The window's way to shipping (issue 27): a trained model saved as Core ML through the export tool, and the deploy
benchmark from the Tools menu; both land in the Tools tab with what the engine computed."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("coremltools")

from mpsstudio.engine.basics.config import RunConfig  # noqa: E402

from .test_gui_app import open_window, run_and_wait  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_leftovers")

TRAIN = RunConfig(model="mlp", dataset="shapes", device="cpu", batch_size=64, steps=12, epochs=None, warmup_steps=2)


def test_a_trained_model_is_saved_as_core_ml_and_its_export_shows_in_tools(qtbot, tmp_path):
    w = open_window(qtbot)
    try:
        run_and_wait(qtbot, w, TRAIN)
        [run] = w.run_ended
        w.results.select_ids([run.id])
        out = tmp_path / "digits.mlpackage"
        assert w.save_trained_model(str(out), fmt="coreml") == str(out)
        qtbot.waitUntil(lambda: w.tool_worker is None, timeout=120_000)
        record = w.tools.current()
        assert record.kind == "export" and record.result["path"] == str(out) and out.is_dir()
        assert record.result["weights_note"].startswith("trained weights from ")
        assert record.result["check"]["ok"] is None  # not run here: Core ML needs macOS, and says so
        assert "Export: mlp as coreml" in w.tools.headline.text()
    finally:
        w.close()


def test_the_deploy_benchmark_runs_the_setup_model_and_draws_its_rows(qtbot, monkeypatch):
    from mpsstudio.engine.tools import deploybench

    monkeypatch.setattr(deploybench, "MEASURE_S", 0.05)
    monkeypatch.setattr(deploybench, "WARMUP_S", 0.0)
    monkeypatch.setattr(deploybench, "DEFAULT_BATCHES", (1, 2))
    w = open_window(qtbot)
    try:
        w.setup.apply_config(TRAIN)
        w.start_tool("deploy-bench")
        qtbot.waitUntil(lambda: w.tool_worker is None, timeout=120_000)
        record = w.tools.current()
        assert record.kind == "deploy-bench" and record.result["models"] == ["mlp"]
        measured = [r for r in record.result["rows"] if r["latency_ms"]]
        assert [(r["where"], r["batch_size"]) for r in measured] == [("cpu", 1), ("cpu", 2)]
        view = w.tools.detail.currentWidget()
        assert view.objectName() == "deploy"
    finally:
        w.close()
