"""What a subcommand shows and keeps while runs go on: one progress line per run (live on a terminal), each run kept
in the history the moment it ends, --json written at the end, and the verdicts printed last."""

from __future__ import annotations

import shutil
import sys
import time

from ..engine.basics.config import TF32_NOTE
from ..engine.basics.errors import UserError
from ..engine.basics.events import UNBOUNDED_STEPS
from ..engine.basics.formatting import fmt_duration, printable


def print_verdicts(results, inspections=None) -> None:
    from ..engine.analysis.compare import compare
    from ..engine.analysis.contrast import by_framework, verdict
    from ..engine.analysis.verdict import headline, verdicts

    comparisons = compare(results)
    compared = {r.id for c in comparisons for r in c.all_runs}  # their verdicts name a noisy run themselves
    for r in results:
        if r.summary.stability == "noisy" and r.id not in compared:
            print(f"\nnoisy: the {r.config.where} run's number is not to be trusted: "
                  f"{printable(r.summary.stability_reason or '')}.")
    for c in comparisons:
        line = headline(c)  # the answer at a glance, then in full
        if line:
            print(f"\n{printable(line)}")
        for sentence in verdicts(c, inspections):
            print(f"\n{printable(sentence)}")
    for by, v in by_framework(results):  # PyTorch or MLX: the same setup in both, parity passed
        print(f"\n{printable(verdict(by, v))}")


def keep(progress: "Progress", results, json_path, inspections=None, keep_host: bool = True) -> bool:
    """Write the runs to --json (the history took each as it ended); False when the history did not keep them.
    `keep_host` False: the file names no host, user or absolute path (bench/run --json, a baseline to commit)."""
    from ..engine.history.runfiles import export_json

    if json_path:
        export_json(results, json_path, inspections, keep_host=keep_host)
    return progress.kept


def save_run(result) -> bool:
    """Keep one run in the history the moment it ends (a CLI killed later loses nothing that ended)."""
    from ..engine.history.store import keep_run

    try:
        note = keep_run(result)
        if note:
            print(f"mpsstudio: {printable(note)}", file=sys.stderr)
    except UserError as exc:
        print(f"mpsstudio: the run on {result.config.where} was not kept in the history: {printable(exc)}",
              file=sys.stderr)
        return False
    return True


def keep_interrupted_runs() -> None:
    """Keep the runs a killed window or command left in progress as interrupted (process/journal.py), and say so."""
    from ..engine.history.store import RunStore, keep_run
    from ..engine.process.journal import folder, keep_interrupted
    from ..engine.process.output import remove_old_temp_files

    remove_old_temp_files()  # what earlier versions left in the temp folder
    try:
        if not any(folder().glob("*.journal")):
            return
    except OSError:
        return
    try:
        store = RunStore()
    except UserError:
        return  # the history cannot be used now: they wait for the next start (the command says why)
    try:
        notes = [] if store.read_only else keep_interrupted(lambda r: keep_run(r, store),
                                                            lambda run_id: store.get(run_id) is not None)
        notes = [*store.pending_notices, *notes]
    finally:
        store.close()
    for note in notes:
        print(f"mpsstudio: {printable(note)}", file=sys.stderr)


def download_progress(message: str, fraction: float) -> None:
    if sys.stderr.isatty():
        print(f"\r{message} {fraction:5.0%}", end="" if fraction < 1 else "\n", file=sys.stderr, flush=True)


class Progress:
    """Prints one progress line per run: a live line on a terminal, a line every few seconds otherwise. A script's
    own output (`output`): every line with `show_output`, else its last line at the end of the live line."""

    def __init__(self, save: bool = False, show_output: bool = False):
        self.save, self.kept = save, True
        self.show_output = show_output
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.device = ""
        self.shown = ""  # the live line, without the output's tail
        self.tail = ""  # the script's last line of output
        self.ended: list = []  # every run that ended, also one interrupted by Ctrl-C

    def output(self, device: str, text: str) -> None:
        """What a run's process wrote (run_isolated's on_output)."""
        lines = [printable(line.rstrip().expandtabs(8)) for line in text.splitlines() if line.strip()]  # tabs as spaces
        if not lines:
            return
        if self.show_output:
            if self.tty:
                print("\r\033[K", end="", file=sys.stderr)
            for line in lines:
                print(f"{device} | {line}", file=sys.stderr)
            if self.tty and self.shown:
                print(self.shown, end="", file=sys.stderr, flush=True)
        elif self.tty:
            self.tail = lines[-1]
            self._line(self.shown, force=True)

    def __call__(self, event) -> None:
        from ..engine.basics.events import Ended, Notice, Started, Warmup, Window
        from ..engine.basics.frameworks import run_label

        if isinstance(event, Notice):
            self._line(f"{printable(event.device) or self.device}: {printable(event.text)}", force=True, keep=True)
        elif isinstance(event, Started):
            options: dict = event.config.get("options") or {}
            options = options if isinstance(options, dict) else {}
            self.device = run_label(str(event.config.get("framework", "torch")), str(event.config["device"]),
                                    quantize=options.get("quantize"))
            if event.run_index == 1:
                print(printable(f"{event.config['model']} on {event.dataset}"), file=sys.stderr)
            where = f" (run {event.run_index} of {event.run_count})" if event.run_count > 1 else ""
            for note in event.notes:  # what the run's setup found (a download, the preflight before an MPS run)
                if note != TF32_NOTE:  # said with the results
                    self._line(f"{self.device}: {printable(note)}", force=True)
            self._line(f"{self.device}{where}: warming up ({event.warmup_steps} steps)...", force=True)
        elif isinstance(event, Warmup):
            self._line(f"{self.device}: warm-up {fmt_duration(event.seconds)}", force=True)
        elif isinstance(event, Window):
            rate = f"{event.samples_per_s:,.0f} samples/s, loss {event.losses[-1]:.4f}"
            if event.total_steps >= UNBOUNDED_STEPS:  # a script that runs to its own end: how far, not a share of it
                self._line(f"{self.device}: step {event.steps_done:,} · {fmt_duration(event.elapsed_s)} · {rate}")
            else:
                done = event.steps_done / event.total_steps
                left = f", about {fmt_duration(event.eta_s)} left" if event.eta_s is not None else ""
                bar = "#" * int(done * 20)
                self._line(f"{self.device}: [{bar:<20}] {done:4.0%} {rate}{left}")
        elif isinstance(event, Ended):
            r = event.result
            self.ended.append(r)
            if self.save:
                from ..engine.process.ending import holding_signals

                with holding_signals():  # a signal now would cut the save short: it is raised once the run is kept
                    self.kept = save_run(r) and self.kept
            if self.tty:
                print("\r\033[K", end="", file=sys.stderr)
            self.shown = self.tail = ""
            print(f"{r.config.where}: {r.status}", file=sys.stderr, flush=True)  # a failure's sentence comes last

    def _line(self, text: str, force: bool = False, keep: bool = False) -> None:
        """The live line (a terminal) or a line every few seconds; `keep`: a sentence that stays on the screen."""
        now = time.perf_counter()
        if self.tty and keep:
            print(f"\r\033[K{text}", file=sys.stderr, flush=True)
            if self.shown:
                self._line(self.shown, force=True)
            return
        if self.tty:
            self.shown = text
            width = shutil.get_terminal_size((100, 24)).columns - 1
            tail = f"  │ {self.tail}" if self.tail and len(text) + 8 < width else ""
            print(f"\r\033[K{(text + tail)[:width]}", end="", file=sys.stderr, flush=True)
        elif force or keep or now - self.last >= 5:
            print(text, file=sys.stderr, flush=True)
        else:
            return
        self.last = now
