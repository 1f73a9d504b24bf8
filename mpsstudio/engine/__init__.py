"""The Qt-free engine: devices, models, datasets, the trainer, results and comparisons.

Nothing under this package imports PySide6 or pyqtgraph; the GUI and the CLI both call it.
"""
