"""The run history: the SQLite store under the user's data folder (runs and tool results, upgrades, recovery), run
files (JSON export and validated import, CSV), and the columns every table shows.

Owns: store (the queries), schema (tables, opening, upgrades), rows (a run as a row, the seal), recovery,
runfiles, columns. Uses: tools (tool results are checked as the tools define them), analysis, basics.
"""
