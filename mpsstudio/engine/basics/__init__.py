"""The shared basics: what a run is (RunConfig, DataSpec) and what the user asks for (RunRequest), what it yields (events, RunResult), one-sentence errors,
formatting of numbers and messages, atomic file writes and the app's folders.

Owns: config, request, spec, events, results, errors, formatting, files, paths. Uses: nothing of the engine, and no torch
(import-linter contracts check both), so the front ends can read and show runs without loading PyTorch.
"""
