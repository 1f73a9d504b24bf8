"""The catalogue: torch imported and the devices checked in the background; the MPS banner."""

from __future__ import annotations

import json

from PySide6.QtCore import QTimer, Slot

from ...engine.basics.config import RunConfig
from ..settings import settings
from ..worker import CatalogLoader
from ..style import keys


class CatalogMixin:
    """Loading PyTorch and the catalogue (models, datasets, devices and their checks) off the GUI thread, and what the window says about the devices it found."""

    @Slot()
    def start_loading(self) -> None:
        """Import torch and list models, datasets and devices off the GUI thread."""
        self.loader = CatalogLoader(self)
        self.loader.loaded.connect(self._on_catalog)
        self.loader.failed.connect(self._on_catalog_failed)
        self.loader.start()

    def _on_catalog(self, catalog: dict) -> None:
        self.catalog = catalog
        if self.setup_window is not None:
            self.setup_window.show_rows(catalog.get("setup"))
        self.setup.set_catalog(catalog["models"], catalog["datasets"], catalog["devices"])
        self.refresh_environments()
        last = settings().value("run/last_config")
        if last and not self.demo:
            try:
                devices = json.loads(settings().value("run/last_devices") or "null")
                self.setup.apply_config(RunConfig.from_dict(json.loads(last)), devices)
            except (ValueError, TypeError):
                pass
        self.run_action.setEnabled(True)
        self.launch_action.setEnabled(True)
        self.script_action.setEnabled(True)
        self.file_script_action.setEnabled(True)
        for a in self.tool_actions:
            a.setEnabled(True)
        if self._pending_folder:
            self.check_folder(self._pending_folder)
            self._pending_folder = None
        available = [d.id for d in catalog["devices"] if d.available]
        self.say(f"Ready: {', '.join(available)} available. Press Run ({keys('Ctrl+R')}) to measure.")
        broken = [(d, c) for d, c in (catalog.get("checks") or {}).items() if not c.ok]
        mps_text = catalog.get("mps_banner") or ""
        if mps_text:  # on a Mac: why the Apple GPU cannot be used, the fix, and a way to look again
            self.banner.show_message(mps_text, warning=True, action=("Check Again", self.check_devices_again),
                                     kind="mps")
        elif self._rechecking:
            self.banner.clear("mps")
            if any(d.kind == "mps" and d.available for d in catalog["devices"]):
                self.say("The Apple GPU (MPS) works now.")
        if broken and not mps_text:
            device, check = broken[0]
            self.banner.show_message(f"{device} reports itself available but is not working: {check.detail}. "
                                     f"It is left out of runs; this happens in virtual machines.", warning=True)
        self._rechecking = False
        if self.keep_spare:
            QTimer.singleShot(0, self._fill_spare)  # after the window is painted: imports torch in the background
        if self.demo:
            QTimer.singleShot(0, self.start_run)

    def check_devices_again(self) -> None:
        """Look for the devices again (a fresh probe in a run process), e.g. after fixing what the banner said."""
        if self.loader is not None and self.loader.isRunning():
            return
        self._rechecking = True
        self.say("Checking the devices again…")
        self.start_loading()

    def _on_catalog_failed(self, message: str) -> None:
        self.banner.show_message(message, warning=True)
        self.say(message)
        if self.demo:
            self._finish_demo(1, message)
