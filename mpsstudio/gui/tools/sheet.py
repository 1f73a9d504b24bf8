"""A tool's settings before it runs (a sheet on macOS): the command line's options for that tool, prefilled from
the setup, what it will do (the engine's count, and a time estimate where an earlier run allows one: toolview), and
Start. What the sheet gathers is checked by the engine (its parsers and the tool itself), never re-derived here.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox, QDialog, QDialogButtonBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QSpinBox, QVBoxLayout,
)

from ...engine.basics.config import MAX_BATCH, RunConfig
from ...engine.basics.errors import UserError

WHAT = {
    "sweep": "Throughput against batch size on each checked device, each point a short run with the run's rules, "
             "and where the accelerator starts to win.",
    "max-batch": "The largest batch that trains (full training steps) on the device, doubling then bisecting to "
                 "the exact boundary, under the memory limit.",
    "inspect": "Which operations fall back to the CPU on the device, and whether it computes the same as the CPU in "
               "float64 (a fixed parity batch of 8 samples).",
    "diagnose": "Why a training step takes what it takes on each checked device (data, launch, CPU fallback, syncs "
                "or compute), where its memory goes, and which layer computes wrong.",
    "deploy-bench": "Inference of the model on each checked device, at each batch size (and Core ML's compute "
                    "units on macOS).",
    "export": "The model as a file another program loads, loaded back and compared with PyTorch on a fixed batch.",
    "tune": "Which precision, memory layout, compile and batch size make the model fastest on each checked device, "
            "each candidate a short run in rounds, at what cost in memory and loss (against fp32) and one step's "
            "parity with the CPU in float64; the recommendation only where it beats your current settings beyond "
            "the noise.",
}
FORMAT_TITLES = {"coreml": "Core ML package (.mlpackage)", "torchscript": "TorchScript (.pt)",
                 "exported-program": "torch.export program (.pt2)"}


class ToolSheet(QDialog):
    """One tool's settings; `chosen()` gives what the window passes to start_tool once accepted."""

    def __init__(self, kind: str, config: RunConfig, devices: list[str], runs: list, train: int | None = None,
                 parent=None, trained: tuple[str, str, RunConfig] | None = None):
        super().__init__(parent)
        from ...engine.tools import toolview

        self.kind, self.config, self.devices, self.runs, self.train = kind, config, list(devices), runs, train
        self.trained = trained  # export: (words, weights file, the run's config) of the selected run's model
        self.setWindowTitle(toolview.TITLES[kind])
        self.setWindowModality(Qt.WindowModality.WindowModal)  # a sheet on macOS
        layout = QVBoxLayout(self)
        intro = QLabel(f"{WHAT.get(kind, '')}\n{config.model.replace(chr(92), '/').rsplit('/', 1)[-1]} on "
                       f"{config.dataset if len(config.dataset) < 40 else '…' + config.dataset[-38:]}, "
                       f"{', '.join(self.devices)}.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        layout.addLayout(self.form)
        getattr(self, f"_build_{kind.replace('-', '_')}")()
        self.plan = QLabel()
        self.plan.setWordWrap(True)
        self.plan.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        layout.addWidget(self.plan)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        layout.addWidget(self.problem)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.start_button = buttons.addButton("Start", QDialogButtonBox.ButtonRole.AcceptRole)
        self.start_button.setDefault(True)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.setMinimumWidth(460)
        self._update()

    # -- fields per tool ---------------------------------------------------------------------------------
    def _spin(self, low: int, high: int, value: int, tip: str) -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(low, high)
        spin.setValue(max(low, min(high, value)))
        spin.setGroupSeparatorShown(True)
        spin.setToolTip(tip)
        spin.valueChanged.connect(self._update)
        return spin

    def _line(self, text: str, tip: str, placeholder: str = "") -> QLineEdit:
        line = QLineEdit(text)
        line.setToolTip(tip)
        line.setPlaceholderText(placeholder)
        line.textChanged.connect(self._update)
        return line

    def _build_sweep(self) -> None:
        from ...engine.tools import sweep

        self.sizes = self._line(", ".join(str(b) for b in sweep.default_batch_sizes()),
                                "Batch sizes to measure, separated by commas (--batch-sizes).")
        self.steps = self._spin(1, 100_000, sweep.DEFAULT_STEPS, "Measured steps per point (--steps).")
        self.warmup = self._spin(0, 10_000, sweep.DEFAULT_WARMUP, "Warm-up steps per point, timed apart (--warmup).")
        self.form.addRow("Batch sizes:", self.sizes)
        self.form.addRow("Measured steps:", self.steps)
        self.form.addRow("Warm-up steps:", self.warmup)

    def _build_max_batch(self) -> None:
        from ...engine.tools import maxbatch

        self.limit = self._line("", "Memory a batch may use, e.g. 8G (--memory-limit).",
                                "the device's own limit")
        top = min(maxbatch.DEFAULT_CAP, self.train) if self.train else maxbatch.DEFAULT_CAP
        self.cap = self._spin(1, MAX_BATCH, top, "The largest batch to try (--max-batch).")
        self.form.addRow("Memory limit:", self.limit)
        self.form.addRow("Largest batch to try:", self.cap)
        if self.train and self.train < maxbatch.DEFAULT_CAP:
            note = QLabel(f"At most the {self.train:,} training samples: a run's batch is never larger.")
            note.setWordWrap(True)
            self.form.addRow("", note)

    def _build_inspect(self) -> None:
        self.batch = self._spin(1, MAX_BATCH, self.config.batch,
                                "The batch of the training step whose operations are recorded (--batch-size).")
        self.form.addRow("Batch of the recorded step:", self.batch)

    def _build_diagnose(self) -> None:
        self.layers = QCheckBox("Compare each layer with the CPU (finds the layer that computes wrong)")
        self.layers.setChecked(True)
        self.after = self._spin(0, 100_000, 0, "Train this many steps first, to diagnose the model as training "
                                               "has changed it (--after-steps).")
        self.form.addRow("", self.layers)
        self.form.addRow("After training steps:", self.after)

    def _build_deploy_bench(self) -> None:
        self.sizes = self._line("1, 8, 32", "Batch sizes of the inference (--batch-sizes).")
        self.form.addRow("Batch sizes:", self.sizes)
        self.compress = {name: QCheckBox(words) for name, words in (("int8", "int8 weights"),
                                                                    ("palettize4", "4-bit palettes"))}
        for box in self.compress.values():
            box.setToolTip("A Core ML package with compressed weights, as rows of its own (macOS; --compress).")
            self.form.addRow("" if box is not self.compress["int8"] else "Core ML compression:", box)

    def _build_export(self) -> None:
        from PySide6.QtWidgets import QComboBox

        self.source = QComboBox()
        if self.trained is not None:
            self.source.addItem(f"Trained weights of {self.trained[0]}", "trained")
        self.source.addItem("The model as freshly built (random weights)", "fresh")
        self.source.setToolTip("What is exported: a run's trained weights (select the run in Runs), or the model "
                               "as built, untrained.")
        self.format = QComboBox()
        for fmt, title in FORMAT_TITLES.items():
            self.format.addItem(title, fmt)
        self.precision = QComboBox()
        self.precision.addItem("fp32", "fp32")
        self.precision.addItem("fp16 (half the size; Core ML's Neural Engine computes in it)", "fp16")
        self.compression = QComboBox()
        for value, title in ((None, "none"), ("int8", "int8 weights"), ("palettize4", "4-bit palettes")):
            self.compression.addItem(title, value)
        self.compression.setToolTip("Core ML only: weights stored compressed (--compress).")
        for box in (self.source, self.format, self.precision, self.compression):
            box.currentIndexChanged.connect(self._update)
        self.form.addRow("Export:", self.source)
        self.form.addRow("Format:", self.format)
        self.form.addRow("Precision:", self.precision)
        self.form.addRow("Compression:", self.compression)

    def _build_tune(self) -> None:
        from PySide6.QtWidgets import QComboBox, QDoubleSpinBox

        from ...engine.tools import tune

        sizes = tune.default_batch_sizes(self.config.batch, self.train)
        self.sizes = self._line(", ".join(str(b) for b in sizes), "Batch sizes to try, separated by commas "
                                "(--batch-sizes; by default half, the setup's and double).")
        self.precisions = {p: QCheckBox(p) for p in ("fp32", "bf16", "fp16")}
        row = QHBoxLayout()
        for box in self.precisions.values():
            box.setChecked(True)
            box.setToolTip("Precisions to try (--precisions); one a device cannot run is listed with why.")
            box.toggled.connect(self._update)
            row.addWidget(box)
        row.addStretch(1)
        self.layouts = QComboBox()
        self.compiles = QComboBox()
        for combo, default in ((self.layouts, "both"), (self.compiles, "off")):
            for value, words in (("off", "no"), ("on", "yes"), ("both", "both, compared")):
                combo.addItem(words, value)
            combo.setCurrentIndex(combo.findData(default))
            combo.currentIndexChanged.connect(self._update)
        self.layouts.setToolTip("Try the channels_last memory layout (--channels-last); image input only.")
        self.compiles.setToolTip("Try torch.compile (--compile); its compile time is reported apart. On MPS PyTorch "
                                 "calls it a prototype.")
        self.budget = QDoubleSpinBox()
        self.budget.setRange(0.5, tune.MAX_BUDGET_MIN)
        self.budget.setDecimals(1)
        self.budget.setValue(tune.DEFAULT_BUDGET_MIN)
        self.budget.setSuffix(" min")
        self.budget.setToolTip("Time for the rounds (--budget); the parity checks come after, a few seconds each.")
        self.budget.valueChanged.connect(self._update)
        self.steps = self._spin(1, 100_000, tune.DEFAULT_STEPS, "Measured steps a candidate a round (--steps).")
        self.form.addRow("Batch sizes:", self.sizes)
        self.form.addRow("Precisions:", row)
        self.form.addRow("channels_last:", self.layouts)
        self.form.addRow("torch.compile:", self.compiles)
        self.form.addRow("Time budget:", self.budget)
        self.form.addRow("Measured steps:", self.steps)

    # -- what it will do ---------------------------------------------------------------------------------
    def _update(self, *_args) -> None:
        from ...engine.tools import toolview

        self.problem.setText("")
        try:
            chosen = self.chosen()
        except UserError as exc:
            self.plan.setText("")
            self.problem.setText(str(exc))
            self.start_button.setEnabled(False)
            return
        self.start_button.setEnabled(True)
        if self.kind == "sweep":
            self.plan.setText(toolview.sweep_line(self.config, self.devices, chosen["batch_sizes"],
                                                  chosen["payload"]["steps"], chosen["payload"]["warmup"], self.runs))
        elif self.kind == "max-batch":
            source = (f"the {self.train:,} training samples" if self.train and chosen["payload"]["cap"] >= self.train
                      else "")
            self.plan.setText(toolview.max_batch_line(chosen["payload"]["cap"], source))
        elif self.kind == "tune":
            p = chosen["payload"]
            per_device = (len(p["batch_sizes"]) * len(p["precisions"]) * (2 if p["channels_last"] == "both" else 1)
                          * (2 if p["compile"] == "both" else 1))
            self.plan.setText(f"Up to {per_device} candidates on each of {', '.join(self.devices)} (and your current "
                              f"settings), in rounds within {p['budget_s'] / 60:g} minutes; after three rounds each, the "
                              "clearly slower are dropped.")
        elif self.kind == "export":
            self.compression.setEnabled(chosen["payload"]["format"] == "coreml")
            self.plan.setText("Trained weights: the run's model as it ended training." if chosen["payload"]["weights"]
                              else "Untrained: random weights, for testing the conversion (said in the result).")
        else:
            self.plan.setText("")

    def chosen(self) -> dict:
        """{"config", "batch_sizes", "payload"} for start_tool; UserError for a field the engine refuses."""
        from ...engine.tools import sweep

        config, sizes = self.config, None
        payload: dict = {}
        if self.kind == "sweep":
            sizes = sweep.parse_batch_sizes(self.sizes.text()) or sweep.default_batch_sizes()
            payload = {"steps": self.steps.value(), "warmup": self.warmup.value()}
        elif self.kind == "max-batch":
            from ...engine.basics.formatting import parse_memory_size

            text = self.limit.text().strip()
            payload = {"memory_limit": parse_memory_size(text) if text else None, "cap": self.cap.value()}
        elif self.kind == "inspect":
            from ...engine.basics.request import RunRequest

            config = RunRequest.of(config, batch_size=self.batch.value()).settings
        elif self.kind == "diagnose":
            payload = {"layers": self.layers.isChecked(), "after_steps": self.after.value()}
        elif self.kind == "deploy-bench":
            payload = {"batch_sizes": sweep.parse_batch_sizes(self.sizes.text()) or [1, 8, 32],
                       "compress": [name for name, box in self.compress.items() if box.isChecked()]}
        elif self.kind == "tune":
            from ...engine.tools import tune

            precisions = [p for p, box in self.precisions.items() if box.isChecked()]
            if not precisions:
                raise UserError("Choose at least one precision to try.")
            payload = {"batch_sizes": sweep.parse_batch_sizes(self.sizes.text()) or
                       tune.default_batch_sizes(self.config.batch, self.train),
                       "precisions": precisions, "channels_last": self.layouts.currentData(),
                       "compile": self.compiles.currentData(), "budget_s": tune.parse_budget(self.budget.value()),
                       "steps": self.steps.value()}
        elif self.kind == "export":
            trained = self.trained if self.source.currentData() == "trained" else None
            fmt = self.format.currentData()
            payload = {"format": fmt, "precision": self.precision.currentData(),
                       "compress": self.compression.currentData() if fmt == "coreml" else None,
                       "weights": trained[1] if trained is not None else None}
            if trained is not None:
                config = trained[2]
        return {"config": config, "batch_sizes": sizes, "payload": payload}

    def accept(self) -> None:
        try:
            self.chosen()
        except UserError as exc:
            self.problem.setText(str(exc))
            return
        super().accept()
