"""What a run's evaluation (RunResult.evaluation: the confusion counts on the validation split) says per class."""

from __future__ import annotations

from dataclasses import dataclass

from ..basics.results import Evaluation


@dataclass
class ClassResult:
    name: str
    samples: int  # validation samples of this class
    correct: int  # of them predicted as this class
    accuracy: float | None  # correct / samples; None without samples
    confused_with: str  # the class most often predicted instead ("" when none)


def per_class(evaluation: Evaluation | None) -> list[ClassResult]:
    """One row per class, in the evaluation's class order; [] for a run without an evaluation."""
    if evaluation is None:
        return []
    classes, matrix = evaluation.classes, evaluation.matrix
    rows = []
    for i, name in enumerate(classes):
        counts = matrix[i] if i < len(matrix) else []
        samples = sum(counts)
        correct = counts[i] if i < len(counts) else 0
        wrong = [(c, j) for j, c in enumerate(counts) if j != i and c > 0]
        confused = classes[max(wrong)[1]] if wrong else ""
        rows.append(ClassResult(name, samples, correct, correct / samples if samples else None, confused))
    return rows


def overall(evaluation: Evaluation | None) -> float | None:
    """Accuracy over every class: the matrix's diagonal over its total; None without samples."""
    matrix = evaluation.matrix if evaluation is not None else []
    total = sum(sum(row) for row in matrix)
    return sum(matrix[i][i] for i in range(len(matrix))) / total if total else None
