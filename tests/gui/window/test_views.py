"""The state at a glance: the MPS banner with its fix and Check Again, devices a Mac lists, Run that becomes
Stop, step progress, and the throughput readout's rolling median (computed by the engine)."""

from __future__ import annotations

import sys

import pytest

from tests.support.fake_mps import fake_mac

pytest.importorskip("pytestqt")

from mpsstudio.engine.data import datasets
from mpsstudio.engine.machine import devices
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.machine.devices import Device
from mpsstudio.engine.basics.events import RECENT_WINDOWS, Started, Window
from mpsstudio.engine.history.store import RunStore
from mpsstudio.gui.window import MainWindow

ROSETTA = "this Python runs under Rosetta (x86_64); install an arm64 Python and PyTorch to use the Apple GPU"
MPS_OFF = Device(id="mps", kind="mps", available=False, reason=ROSETTA)
MPS_ON = Device(id="mps", kind="mps", available=True, name="Apple M2 (fake)")
CUDA_OFF = Device(id="cuda", kind="cuda", available=False, reason="this PyTorch was built without CUDA")


@pytest.mark.parametrize("reason, fix", [
    (ROSETTA, "install torch torchvision"),
    ("macOS 14.0 or newer is needed for the Apple GPU with PyTorch 2.14.1 (this Mac runs macOS 13.6)",
     "Update to macOS 14 Sonoma or later"),
    ("this PyTorch was built without MPS", "--force-reinstall torch"),
    ("available but not working: MPS backend out of memory (MPS allocated: 0 bytes)", "Check Again"),
    ("PyTorch reports MPS unavailable even though this is an Apple Silicon Mac on macOS 15.1 with MPS built in "
     "(a virtual machine, or a broken PyTorch install)", "virtual machine"),
    ("not an Apple Silicon Mac", ""),
])
def test_every_mps_reason_has_its_fix(reason, fix):
    got = devices.mps_fix(reason)
    assert (fix in got) if fix else got == ""


def test_the_app_under_rosetta_is_told_to_untick_rosetta_not_to_pip_install(monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert "Open using Rosetta" in devices.mps_fix(ROSETTA) and "pip" not in devices.mps_fix(ROSETTA)


def test_the_banner_and_the_device_list_are_for_a_mac_only(monkeypatch):
    found = [devices.cpu_device(), MPS_OFF, CUDA_OFF]
    monkeypatch.setattr(sys, "platform", "linux")
    assert devices.mps_banner(found) == "" and devices.worth_showing(found) == found
    fake_mac(monkeypatch)
    text = devices.mps_banner(found)
    assert text.startswith("The Apple GPU (MPS) cannot be used: this Python runs under Rosetta") and "arm64" in text
    assert [d.id for d in devices.worth_showing(found)] == ["cpu", "mps"]  # a Mac lists CUDA only where it is
    assert devices.mps_banner([devices.cpu_device(), MPS_ON]) == ""


def catalog(device_list, banner=""):
    return {"models": models.list_models(), "datasets": datasets.list_datasets(), "devices": device_list,
            "checks": {}, "doctor": [], "mps_banner": banner}


def test_the_mps_banner_says_why_and_check_again_looks_again(qtbot, tmp_path, monkeypatch):
    w = MainWindow(store=RunStore(tmp_path / "runs.sqlite3"), keep_spare=False)
    qtbot.addWidget(w)
    w.show()
    text = "The Apple GPU (MPS) cannot be used: this Python runs under Rosetta (x86_64). Install an arm64 Python."
    w.catalog_control.on_catalog(catalog([devices.cpu_device(), MPS_OFF], text))
    assert w.banner.text() == text and w.banner.action.text() == "Check Again"
    looked = []
    monkeypatch.setattr(w, "start_loading", lambda: looked.append(True))
    w.banner.action.click()
    assert looked == [True] and w.state.rechecking and "Checking the devices again" in w.statusBar().currentMessage()
    w.catalog_control.on_catalog(catalog([devices.cpu_device(), MPS_ON]))  # fixed meanwhile
    assert w.banner.text() == "" and "works now" in w.statusBar().currentMessage()
    w.close()


def test_run_becomes_stop_with_step_progress_and_a_rolling_median(qtbot, tmp_path):
    w = MainWindow(store=RunStore(tmp_path / "runs.sqlite3"), keep_spare=False)
    qtbot.addWidget(w)
    w.show()
    w.catalog_control.on_catalog(catalog([devices.cpu_device()]))
    class Job:  # a Run in progress, as the window's state holds it
        def stop(self, grace_s=None):
            pass
    w.state.start_run(Job())
    assert w.setup.footer.run_button.text() == "Stop" and w.setup.footer.run_button.isEnabled()
    stopped = []
    w.setup.stop_requested.connect(lambda: stopped.append(True))
    w.setup.footer.run_button.click()
    assert stopped == [True]
    w.live.on_event(Started(run_id="r", config={"device": "cpu", "steps": 188, "epochs": None}, env={}, device={},
                        dataset="shapes", parameters=1, total_steps=188, warmup_steps=4, notes=[], run_index=1,
                        run_count=1, train_size=100))
    w.live.on_event(Window(index=3, first_step=80, losses=[1.0] * 5, seconds=0.1, samples=320, samples_per_s=9_999.0,
                       data_wait_s=0.0, memory=0, memory_detail={}, steps_done=84, total_steps=188, elapsed_s=2.0,
                       eta_s=2.5, recent_samples_per_s=3_200.0))
    assert w.progress.text() == "step 84 / 188 \u00b7 45 %"
    assert w.rate_label.text().startswith("3,200 samples/s") and "left (estimated)" in w.rate_label.text()
    assert f"median of the last {RECENT_WINDOWS}" in w.rate_label.toolTip()
    w.state.end_run()
    assert w.setup.footer.run_button.text().startswith("Run")
    w.close()


def test_the_mac_facts_that_change_results_get_a_mark_and_a_fix(monkeypatch):
    from mpsstudio.engine.machine import environment

    monkeypatch.setattr(devices, "apple_chip_name", lambda: "Apple M2 Pro")
    monkeypatch.setattr(devices, "apple_gpu_cores", lambda: 19)
    rows = {r.name: r for r in environment._mac_rows({"on_battery": True, "low_power_mode": True,
                                                       "thermal": "throttled (CPU speed limit 70 %)"})}
    assert rows["Chip"].value == "Apple M2 Pro · 19-core GPU" and "GiB, shared by CPU and GPU" in rows["Unified memory"].value
    assert (rows["Power source"].ok, rows["Low Power Mode"].ok, rows["Thermal state"].ok) == (False, False, False)
    assert "power adapter" in rows["Power source"].fix and "System Settings" in rows["Low Power Mode"].fix
    calm = {r.name: r for r in environment._mac_rows({"on_battery": False, "low_power_mode": False,
                                                       "thermal": "nominal"})}
    assert all(calm[k].ok and not calm[k].fix for k in ("Power source", "Low Power Mode", "Thermal state"))
    unknown = {r.name: r for r in environment._mac_rows({"on_battery": None, "low_power_mode": None, "thermal": None})}
    assert unknown["Thermal state"].ok is None and unknown["Thermal state"].value == "unknown"


def test_setup_rows_on_a_mac_under_rosetta(monkeypatch):
    from mpsstudio.engine.machine import environment, host

    fake_mac(monkeypatch, machine="x86_64", sysctls={"sysctl.proc_translated": "1"})  # an x86_64 Python, translated
    monkeypatch.setattr(devices, "cuda_unavailable_reason", lambda: "this PyTorch was built without CUDA")
    monkeypatch.setattr(host, "conditions", lambda: {"on_battery": False, "low_power_mode": False,
                                                     "thermal": "nominal"})
    rows = {r.name: r for r in environment.setup_rows({})}
    assert rows["Python"].ok is False and "arm64" in rows["Python"].fix
    assert rows["Apple GPU (MPS)"].ok is False and "install torch torchvision" in rows["Apple GPU (MPS)"].fix
    assert "CUDA" not in rows and rows["Power source"].ok
    report = environment.setup_report(list(rows.values()))
    assert "\u2715 Apple GPU (MPS): not available: this Python runs under Rosetta" in report and "    fix: " in report


def test_the_setup_window_shows_marks_fixes_copies_and_checks_again(qtbot, tmp_path):
    from PySide6.QtGui import QGuiApplication

    from mpsstudio.engine.machine.environment import SetupRow

    w = MainWindow(store=RunStore(tmp_path / "runs.sqlite3"), keep_spare=False)
    qtbot.addWidget(w)
    w.show_doctor()
    win = w.dialogs.setup_window
    assert "Loading PyTorch" in win.headline.text() and not win.copy_button.isEnabled()
    rows = [SetupRow("PyTorch", "2.9.0"), SetupRow("Apple GPU (MPS)", "available", True),
            SetupRow("Low Power Mode", "on", False, "Turn Low Power Mode off (System Settings → Battery).")]
    w.catalog_control.on_catalog({**catalog([devices.cpu_device()]), "setup": rows})
    assert "1 part needs attention" in win.headline.text()
    assert [win.table.item(i, 0).text() for i in range(3)] == ["\u2022", "\u2713", "\u2715"]
    assert win.table.item(2, 3).text().startswith("Turn Low Power Mode off")
    win.copy_report()
    assert QGuiApplication.clipboard().text().startswith("MPS Studio · PyTorch setup\n\u2022 PyTorch: 2.9.0")
    looked = []
    w.start_loading = lambda: looked.append(True)
    win.again_button.click()
    assert looked == [True] and "Loading PyTorch" in win.headline.text()
    win.close()
    w.close()


def test_a_folder_summary_gives_counts_split_thumbnails_and_the_models_real_size(qtbot, tmp_path):
    from PIL import Image

    from mpsstudio.engine.data import folder
    from mpsstudio.gui.setup.folder_summary import FolderSummary

    root = tmp_path / "flowers"
    for c, n in (("daisy", 12), ("rose", 8), ("tulip", 3)):
        (root / c).mkdir(parents=True)
        for i in range(n):
            Image.new("RGB", (40, 30), (10 * i, 80, 160)).save(root / c / f"{i}.jpg")
    (root / "rose" / "broken.jpg").write_bytes(b"not an image at all")  # skipped, never a thumbnail
    report = folder.inspect_folder(str(root))
    p = folder.plan(report, seed=3)
    labels = [label for _, label in report.files]
    train, val = folder.split_indices(labels, folder.FOLDER_VAL_FRACTION, 3)  # what the loader will use
    assert (p.train, p.val) == (len(train), len(val)) and sum(r[3] for r in p.classes) == len(val)
    assert [r[:2] for r in p.classes] == [("daisy", 12), ("rose", 8), ("tulip", 3)]
    size = models.input_size_for_folder("resnet18", report)
    assert size == (224, 224)  # decoded at resnet18's preferred size, not the folder's 40x30
    assert models.input_size_for_folder("mlp", report) == (32, 32)
    w = FolderSummary(report, "resnet18", size, seed=3)
    qtbot.addWidget(w)
    text = w.text.text()
    assert "3 classes, 23 images" in text and f"{p.train} training + {p.val} validation" in text
    assert "Most images are 40×30; <b>resnet18 gets every image as 224×224 RGB</b>" in text
    assert w.thumbs_shown == 4 + 4 + 3 and w.table.item(1, 1).text() == "8"


def test_tab_goes_from_run_to_the_filter_and_the_table_and_cmd_w_closes(qtbot, tmp_path):
    from PySide6.QtGui import QKeySequence

    w = MainWindow(store=RunStore(tmp_path / "runs.sqlite3"), keep_spare=False)
    qtbot.addWidget(w)
    assert w.setup.footer.run_button.nextInFocusChain() is w.results.filter
    assert w.results.filter.nextInFocusChain() is w.results.table
    assert QKeySequence("Ctrl+W") in w.menus.close_action.shortcuts()  # ⌘W on a Mac
    menus = [a.text() for a in w.menuBar().actions()]
    assert menus == ["MPS Studio", "File", "Edit", "Run", "Tools", "Window", "Help"]
    w.show()
    w.menus.close_action.trigger()
    assert not w.isVisible()


def test_every_shortcut_named_in_a_text_is_written_as_the_menus_write_it(qtbot, tmp_path):
    """⌘R on a Mac, Ctrl+R elsewhere: the status bar, the plots' hint and the tooltips say what the Run menu says."""
    from PySide6.QtGui import QKeySequence

    w = MainWindow(store=RunStore(tmp_path / "runs.sqlite3"), keep_spare=False)
    qtbot.addWidget(w)
    w.start_loading()
    qtbot.waitUntil(lambda: w.state.catalog is not None, timeout=120_000)
    run = w.menus.run_action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
    assert run and f"Press Run ({run}) to measure." in w.statusBar().currentMessage()
    from mpsstudio.gui.setup.footer import RUN_TIP

    assert RUN_TIP.endswith(f"({run}).")
    assert f"Press Run ({run}) to start" in w.plots._empty_label.text()
    undo = QKeySequence("Ctrl+Z").toString(QKeySequence.SequenceFormat.NativeText)
    assert f"({undo})" in w.results.undo_bar.button.toolTip()
    if "⌘" not in run:  # this machine is not a Mac: no Mac key anywhere a text names one
        assert "⌘" not in w.statusBar().currentMessage() + w.results.filter.toolTip() + w.plots._empty_label.text()


def test_no_two_menu_commands_share_a_shortcut(qtbot, tmp_path):
    """Every menu command's keys are its own (a second one silently never fires)."""
    w = MainWindow(store=RunStore(tmp_path / "runs.sqlite3"), keep_spare=False)
    qtbot.addWidget(w)
    seen: dict[str, str] = {}

    def walk(menu):
        for action in menu.actions():
            if action.menu() is not None:
                walk(action.menu())
                continue
            for keys in action.shortcuts():
                text = keys.toString()
                assert text not in seen, f"{action.text()!r} and {seen[text]!r} both take {text}"
                seen[text] = action.text()
    for top in w.menuBar().actions():
        walk(top.menu())
    assert seen["Ctrl+Alt+E"] == "Export Report…" and seen["Ctrl+Shift+C"] == "Copy as Markdown"
