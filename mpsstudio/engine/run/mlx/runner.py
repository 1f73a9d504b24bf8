"""An MLX run to its end: trainer.run's contract (every outcome ends with an Ended event and a recorded result), its
set-up setup.py's, its measured loop loop.py's."""

from __future__ import annotations

from collections.abc import Callable

from ...basics.config import RunConfig
from ...basics.events import Event
from ...basics.results import RunResult
from ...data import datasets
from ..failures import MODEL_INTERRUPT, outcome, release_reserve
from .loop import MlxLoop
from .setup import prepare


def run(config: RunConfig, *, on_event: Callable[[Event], None] | None = None,
        should_stop: Callable[[], bool] | None = None, data: datasets.LoadedDataset | None = None,
        progress=None, position: tuple[int, int] = (1, 1), interrupt_is_user: bool = True, **_ignored) -> RunResult:
    """An MLX run to its end (trainer.run's contract: every outcome ends with an Ended event and a recorded result)."""
    result = RunResult(config=config)
    loop = MlxLoop(config, result, on_event or (lambda e: None), should_stop or (lambda: False), data, progress,
                   position, prepare)
    try:
        loop.execute()
        result.status = "finished"
    except KeyboardInterrupt:
        if interrupt_is_user:
            result.status = "cancelled"
            raise
        result.status, result.error = "failed", MODEL_INTERRUPT
    except BaseException as exc:
        if isinstance(exc, MemoryError):
            release_reserve()
        result.status, result.error = outcome(exc, config)
    finally:
        loop.end()
    return result
