"""The results panel: every run kept in the history, its comparisons with speedups, a chart, details and exports.

panel.py is the widget and its parts share its table, selection and history (table_view, selection, deleting,
files); the table's model (run_table), its columns and cells (table_columns, cells) and its proxies; the details
tab (run_details), the speedup chart (speedup_chart) and the exported comparison picture (comparison_sheet).
Numbers come from the engine's summaries and comparisons; this package only formats them.
"""
