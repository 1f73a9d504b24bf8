"""A user's own training script measured as a run: `mpsstudio run SCRIPT` and the window's Run Script… (runner.py),
or `mpsstudio.track` in a script run by python (tracker.py): its steps counted from its own PyTorch calls
(counter.py), its settings read as it left them (settings.py), the machine shown to it as plain Python would show it
on the run's device (machine.py)."""
