"""The run history: the SQLite store under the user's data folder (runs and tool results, upgrades, recovery), run
files (JSON export and validated import, CSV), and the columns every table shows.

Owns: store (the queries; keep_run / keep_tool), schema (tables, opening, upgrades), rows (a run as a row, the seal),
pending (what a locked history could not take, added at the next open), recovery, runfiles, columns. Uses: tools (tool results are checked as the tools define them), analysis, basics.
"""
