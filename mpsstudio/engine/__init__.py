"""The Qt-free engine both front ends call: packages by responsibility, each a layer that uses only those below it
(docs/architecture.md, "The map"; import-linter contracts in pyproject.toml check it):

    process | history        run processes | the run history, run files and columns
    tools                    sweep, max-batch, inspection, the launch benchmark
    run                      the one run path (session) and the run loop that measures it (trainer)
    analysis                 what runs mean: summaries, stability, comparisons, verdicts, energy figures
    machine | data | models  devices and energy meters | datasets and batches | models
    basics                   configs, events, results, errors, formatting, files, folders (no torch)

Nothing under this package imports PySide6, pyqtgraph or a front end.
"""
