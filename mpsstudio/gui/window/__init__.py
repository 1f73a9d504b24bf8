"""The main window (main_window.py) and its parts, one module each: layout, menus, catalogue, run control, the run in
progress, trained models, the launch benchmark, tools, folders, dialogs and the history."""

from .main_window import CLOSE_GRACE_S, MAX_OVERLAY, MainWindow, open_history

__all__ = ["CLOSE_GRACE_S", "MAX_OVERLAY", "MainWindow", "open_history"]
