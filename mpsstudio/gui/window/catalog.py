"""The catalogue: torch imported and the devices checked in the background; the MPS banner."""

from __future__ import annotations

from typing import TYPE_CHECKING

import json

from PySide6.QtCore import QObject, QTimer

from ...engine.basics.config import RunConfig
from ..jobs import catalog_job
from ..settings import settings
from ..style import keys

if TYPE_CHECKING:
    from ..jobs import Job
    from .main_window import MainWindow


class CatalogControl(QObject):
    """Loading PyTorch and the catalogue (models, datasets, devices and their checks) off the GUI thread, and what
    the window says about the devices it found."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)  # a QObject of the window: what the jobs send is handled in its thread
        self.w = w
        self.loader: Job | None = None  # the job loading it, while it does

    def start_loading(self) -> None:
        """Import torch and list models, datasets and devices off the GUI thread."""
        self.loader = catalog_job(self.w)
        self.loader.done.connect(self.on_catalog)
        self.loader.rejected.connect(self.on_failed)
        self.loader.start()

    def loading(self) -> bool:
        return self.loader is not None and self.loader.isRunning()

    def on_catalog(self, catalog: dict) -> None:
        w = self.w
        rechecked = w.state.rechecking
        if w.dialogs.setup_window is not None:
            w.dialogs.setup_window.show_rows(catalog.get("setup"))
        w.setup.set_catalog(catalog["models"], catalog["datasets"], catalog["devices"])
        w.setup.frameworks.set_mlx(catalog.get("mlx") or {})
        w.dialogs.refresh_environments()
        last = settings().value("run/last_config")
        if last and not w.demo:
            try:
                devices = json.loads(settings().value("run/last_devices") or "null")
                w.setup.apply_config(RunConfig.from_dict(json.loads(last)), devices)
            except (ValueError, TypeError):
                pass
        w.state.set_catalog(catalog)  # the commands come on
        if w.state.pending_folder:
            w.check_folder(w.state.pending_folder)
            w.state.pending_folder = None
        available = w.state.available_devices()
        w.say(f"Ready: {', '.join(available)} available. Press Run ({keys('Ctrl+R')}) to measure.")
        broken = [(d, c) for d, c in (catalog.get("checks") or {}).items() if not c.ok]
        mps_text = catalog.get("mps_banner") or ""
        if mps_text:  # on a Mac: why the Apple GPU cannot be used, the fix, and a way to look again
            w.banner.show_message(mps_text, warning=True, action=("Check Again", w.check_devices_again), kind="mps")
        elif rechecked:
            w.banner.clear("mps")
            if any(d.kind == "mps" and d.available for d in catalog["devices"]):
                w.say("The Apple GPU (MPS) works now.")
        if broken and not mps_text:
            device, check = broken[0]
            w.banner.show_message(f"{device} reports itself available but is not working: {check.detail}. "
                                  f"It is left out of runs; this happens in virtual machines.", warning=True)
        if w.keep_spare:
            QTimer.singleShot(0, w.runs.fill_spare)  # after the window is painted: imports torch in the background
        if w.demo:
            QTimer.singleShot(0, w.start_run)

    def check_again(self) -> None:
        """Look for the devices again (a fresh probe in a run process), e.g. after fixing what the banner said."""
        if self.loading():
            return
        self.w.state.rechecking = True
        self.w.say("Checking the devices again…")
        self.w.start_loading()

    def on_failed(self, message: str) -> None:
        w = self.w
        w.banner.show_message(message, warning=True)
        w.say(message)
        if w.demo:
            w.runs.finish_demo(1, message)
