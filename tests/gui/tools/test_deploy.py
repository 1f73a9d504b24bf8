"""The window's way to shipping (issue 27): a trained model saved as Core ML through the export tool, and the deploy
benchmark from the Tools menu; both land in the Tools tab with what the engine computed."""

from __future__ import annotations

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("coremltools")

from mpsstudio.engine.basics.config import RunConfig
from tests.support.gui import open_window, run_and_wait


pytestmark = pytest.mark.usefixtures("no_leftovers")

TRAIN = RunConfig(model="mlp", dataset="shapes", device="cpu", batch_size=64, steps=12, epochs=None, warmup_steps=2)


def test_a_trained_model_is_saved_as_core_ml_and_its_export_shows_in_tools(qtbot, tmp_path):
    w = open_window(qtbot)
    try:
        run_and_wait(qtbot, w, TRAIN)
        [run] = w.state.run_ended
        w.results.select_ids([run.id])
        out = tmp_path / "digits.mlpackage"
        assert w.save_trained_model(str(out), fmt="coreml") == str(out)
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=120_000)
        record = w.tools.current()
        assert record.kind == "export" and record.result["path"] == str(out) and out.is_dir()
        assert record.result["weights_note"].startswith("trained weights from ")
        assert record.result["check"]["ok"] is None  # not run here: Core ML needs macOS, and says so
        assert "Export: mlp as coreml" in w.tools.headline.text()
    finally:
        w.close()


def test_the_deploy_benchmark_runs_the_setup_model_and_draws_its_rows(qtbot, monkeypatch):
    from mpsstudio.engine.tools.deploy import deploybench

    monkeypatch.setattr(deploybench, "MEASURE_S", 0.05)
    monkeypatch.setattr(deploybench, "WARMUP_S", 0.0)
    monkeypatch.setattr(deploybench, "DEFAULT_BATCHES", (1, 2))
    w = open_window(qtbot)
    try:
        w.setup.apply_config(TRAIN)
        w.start_tool("deploy-bench")
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=120_000)
        record = w.tools.current()
        assert record.kind == "deploy-bench" and record.result["models"] == ["mlp"]
        measured = [r for r in record.result["rows"] if r["latency_ms"]]
        assert [(r["where"], r["batch_size"]) for r in measured] == [("cpu", 1), ("cpu", 2)]
        view = w.tools.detail.currentWidget()
        assert view.objectName() == "deploy"
    finally:
        w.close()


def test_a_tool_result_goes_out_as_json_and_png_and_comes_back_imported(qtbot, tmp_path):
    from PySide6.QtGui import QImage

    from mpsstudio.gui.tools.panel import ToolsPanel

    from tests.support.results import deploy_result

    source = tmp_path / "from-the-cuda-server.json"
    source.write_text(__import__("json").dumps({"kind": "deploy-bench", **deploy_result()}))
    from mpsstudio.engine.history.store import RunStore

    panel = ToolsPanel(RunStore())
    qtbot.addWidget(panel)
    panel.resize(1100, 640)
    panel.import_file(str(source))
    record = panel.current()
    assert record.kind == "deploy-bench" and "imported from from-the-cuda-server.json" in panel.headline.text()
    png = tmp_path / "deploy.png"
    panel.export_png(str(png))
    image = QImage(str(png))
    assert not image.isNull() and image.width() >= panel.detail.currentWidget().width()
    out = tmp_path / "again.json"
    panel.export_json(str(out))
    panel.delete_current()
    assert panel.current() is None
    panel.import_file(str(out))
    assert panel.current().id == record.id  # the same result, its id kept
    runs = tmp_path / "runs.json"
    runs.write_text('{"format": "mpsstudio.runs", "version": 1, "runs": []}')
    panel.import_file(str(runs))
    assert "runs.json is not a tool result (it holds runs: File → Import Runs… takes it)" in panel.headline.text()


def test_export_model_offers_the_selected_runs_trained_weights_first(qtbot, tmp_path, monkeypatch):
    from mpsstudio.gui.tools.sheet import ToolSheet

    w = open_window(qtbot)
    try:
        run_and_wait(qtbot, w, TRAIN)
        [run] = w.state.run_ended
        w.results.select_ids([run.id])
        trained = w.tool_control.selected_trained()
        assert trained is not None and trained[0] == "mlp on cpu (shapes)" and trained[2] == run.config
        sheet = ToolSheet("export", w.setup.configs()[0], ["cpu"], [], None, trained=trained)
        qtbot.addWidget(sheet)
        payload = sheet.chosen()["payload"]  # the defaults: the trained weights, Core ML, fp32 as the CLI's
        assert payload == {"format": "coreml", "precision": "fp32", "compress": None, "weights": trained[1]}
        source = sheet.fields["weights"]
        source.setCurrentIndex(source.findData("fresh"))
        assert sheet.chosen()["payload"]["weights"] is None and "Untrained" in sheet.plan.text()
        sheet.fields["format"].setCurrentIndex(sheet.fields["format"].findData("torchscript"))
        assert not sheet.fields["compress"].isEnabled() and sheet.chosen()["payload"]["compress"] is None

        out = tmp_path / "trained.pt"
        monkeypatch.setattr(w, "ask_tool_settings", lambda kind, config, devices, train, trained=None: {
            "config": trained[2], "batch_sizes": None,
            "payload": {"format": "torchscript", "precision": "fp32", "compress": None, "weights": trained[1]}})
        monkeypatch.setattr("PySide6.QtWidgets.QFileDialog.getSaveFileName", lambda *a, **k: (str(out), ""))
        w.export_model()
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=120_000)
        record = w.tools.current()
        assert record.kind == "export" and out.exists()
        assert record.result["weights_note"].startswith("trained weights from ")
    finally:
        w.close()
