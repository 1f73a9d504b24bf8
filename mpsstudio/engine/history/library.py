"""The history as a front end reads and changes it: the runs as summaries (whole where asked), notes, delete and put
back, imports, and the tool findings a comparison's verdict names.

The window's results panel holds a RunLibrary, not the store: what it shows is what this module read, in the words
it said. Every call raises UserError (one sentence) where the history cannot do it now; `notices` are the sentences
of the last read (runs that could not be read, skipped, never a crash)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..basics.errors import UserError
from ..basics.formatting import plural, runs_and_results
from ..basics.results import RunResult
from . import runfiles
from .store import RunStore


@dataclass(frozen=True)
class Findings:
    """The stored `inspect` results (CPU fallbacks, parity) and `diagnose` results a verdict names."""

    inspections: tuple[dict, ...] = ()
    diagnoses: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Whole:
    """Runs read whole, in the order asked, and the sentence on those that could not be ('' when none)."""

    runs: list[RunResult]
    said: str = ""


@dataclass(frozen=True)
class Imported:
    """An import: the ids in the file, how many were added, how many were there already, every run now kept."""

    ids: list[str]
    added: int
    known: int
    runs: list[RunResult]


class RunLibrary:
    """One history (a RunStore) as the results panel uses it."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    @property
    def notices(self) -> list[str]:
        return list(self.store.notices)

    def summaries(self) -> list[RunResult]:
        """Every readable run without its steps, windows and epochs (`is_summary`), oldest first."""
        return self.store.summaries()

    def waiting_words(self, sends: str = "") -> str:
        """"3 runs wait for the team's server at URL (...)": what the history's queue holds, per server, with the
        last reason and what sends them (`sends`: the window's words for it; by default the command); "" where
        nothing waits."""
        found = self.store.queue.waiting()
        said = []
        for url in dict.fromkeys(w.url for w in found):
            here = [w for w in found if w.url == url]
            why = next((w.last_error for w in reversed(here) if w.last_error), "").rstrip(".")
            why = why[len(f"the server at {url} "):] if why.startswith(f"the server at {url} ") else why
            tools = sum(1 for w in here if self.store.tool_kind(w.run_id))
            said.append(f"{runs_and_results(len(here) - tools, tools)} wait{'s' if len(here) == 1 else ''} for the "
                        f"team's server at "
                        f"{url}" + (f": it {why}" if why.startswith(("did not", "answered")) else
                                    f" ({why})" if why else "")
                        + f". {sends or f'`mpsstudio history --push {url}`'} sends "
                        f"{'it' if len(here) == 1 else 'them'} when it answers"
                        + ("." if sends else f"; `mpsstudio history --drop-queue {url}` stops waiting."))
        return " ".join(said)

    def stop_waiting(self, url: str | None = None) -> str:
        """Nothing waits for that team's server any more (None: for any): the sentence said. The runs and tool
        results stay in the history."""
        found = self.store.queue.waiting(url)
        tools = sum(1 for w in found if self.store.tool_kind(w.run_id))
        self.store.queue.drop(url)
        if not found:
            return "Nothing waits for the team's server."
        return (f"{runs_and_results(len(found) - tools, tools)} no longer wait{'s' if len(found) == 1 else ''} for "
                f"the team's server; {'it stays' if len(found) == 1 else 'they stay'} in the history.")

    def whole(self, runs: list[RunResult]) -> Whole:
        """These runs with their steps, windows and epochs, read where the caller holds a summary (its note kept);
        a run no longer in the history is left out and named; where the history cannot be read now, the runs read
        so far and why."""
        out: list[RunResult] = []
        missing: list[str] = []
        for run in runs:
            if not run.is_summary:
                out.append(run)
                continue
            try:
                found = self.store.get(run.id)
            except UserError as exc:
                return Whole(out, str(exc))
            if found is None:
                missing.append(run.id[:12])
            else:
                found.note = run.note
                out.append(found)
        said = ""
        if missing:
            said = (f"{plural(len(missing), 'run')} could not be read from the history any more (first: "
                    f"{missing[0]}); {'it is' if len(missing) == 1 else 'they are'} left out.")
        return Whole(out, said)

    def findings(self) -> Findings:
        """The stored inspections and diagnoses without a problem."""
        return Findings(tuple(t.result for t in self.store.tools(kinds=("inspect",)) if not t.problem),
                        tuple(t.result for t in self.store.tools(kinds=("diagnose",)) if not t.problem))

    def set_note(self, run_id: str, text: str) -> None:
        """Keep the user's note on a run ("" removes it)."""
        self.store.set_note(run_id, text)

    def delete(self, run_ids: list[str]) -> int:
        return self.store.delete(run_ids)

    def restore(self, runs: list[RunResult]) -> None:
        """Runs deleted a moment ago put back as they were, with their notes."""
        self.store.restore(runs)

    def import_file(self, path: str, progress: Callable[[float], None] | None = None) -> Imported:
        """The runs of an MPS Studio JSON file, checked whole (all of them or none) and added; runs already kept stay
        as they are."""
        runs = runfiles.import_json(path, progress=progress)
        added, known = self.store.add_imported(runs)
        return Imported([r.id for r in runs], added, known, self.store.summaries())

    def export_steps_csv(self, run: RunResult, path: str) -> int:
        return runfiles.export_steps_csv(run, path)

    @staticmethod
    def export_csv(runs: list[RunResult], path: str, speedups: dict) -> None:
        runfiles.export_csv(runs, path, speedups=speedups)

    @staticmethod
    def export_json(runs: list[RunResult], path: str) -> None:
        runfiles.export_json(runs, path)

