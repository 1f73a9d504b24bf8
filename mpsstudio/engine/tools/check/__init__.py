"""The device check (`mpsstudio check`, Tools > Check Devices): is the device right today?

- suite.py  the versioned suite of operations with known failure shapes, each against a float64 CPU reference in
            four states of the device; the tool's run in a run process (torch)
- words.py  its table, sentence and report section, and its command line's options (no torch)
"""
