"""The window and panels as tests open them."""

from __future__ import annotations

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.gui.results.panel import ResultsPanel
from mpsstudio.gui.window import MainWindow

SHORT = RunConfig(model="mlp", dataset="shapes", device="cpu", batch_size=64, steps=40, epochs=None, warmup_steps=5)



def open_window(qtbot, **kwargs) -> MainWindow:
    """A shown window whose catalogue (torch, models, devices) has loaded."""
    w = MainWindow(**kwargs)
    qtbot.addWidget(w)
    w.show()
    w.start_loading()
    qtbot.waitUntil(lambda: w.state.catalog is not None, timeout=120_000)
    return w


def run_and_wait(qtbot, w, config, timeout=120_000):
    w.setup.apply_config(config)
    w.start_run()
    assert w.state.run_job is not None
    qtbot.waitUntil(lambda: w.state.run_job is None, timeout=timeout)



def open_panel(qtbot, store, runs=()):
    for r in runs:
        store.save(r)
    panel = ResultsPanel(store)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    return panel

