"""The window's tools: the Tools tab (panel.py: every stored tool result, its view), their plots (plots.py), the
settings sheet each tool starts from (sheet.py) and the best-settings view (tune_view.py)."""
