"""A rank's process: what torchrun starts on every GPU of a run on several (`python -m torch.distributed.run ...
-m mpsstudio.engine.process.rank`, launch.py). It connects to the run's process over the local socket and key in
its environment, says who it is, takes the run's config, runs the engine's run loop as its rank (run/ranks.py) and
says how it ended. Rank 0 sends the run's events; every rank reports its own ending, so a failure names its rank.

Exit status: 0 when the run finished or was stopped, 1 when this rank failed (torchrun then ends the others)."""

from __future__ import annotations

import os
import sys
import threading

ADDRESS_VAR = "MPSSTUDIO_RANKS_ADDRESS"  # the run process's socket (launch.py)
KEY_VAR = "MPSSTUDIO_RANKS_KEY"  # its key, hex


def main() -> None:
    from multiprocessing.connection import Client

    try:
        conn = Client(os.environ[ADDRESS_VAR], family="AF_UNIX", authkey=bytes.fromhex(os.environ[KEY_VAR]))
    except (KeyError, ValueError, OSError) as exc:
        print(f"mpsstudio rank: no run process to report to ({exc}); started outside MPS Studio?", file=sys.stderr)
        os._exit(2)
    rank = int(os.environ.get("RANK", "0"))
    lock = threading.Lock()

    def send(message: tuple) -> None:
        with lock:
            conn.send(message)
    send(("hello", rank, int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")),
          os.getpid()))
    message = conn.recv()
    stop = threading.Event()
    threading.Thread(target=_listen, args=(conn, stop), daemon=True, name="rank-listen").start()
    code = _serve(message[1], rank, send, stop)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _listen(conn, stop: threading.Event) -> None:
    """Stop from the run's process; its end (the pipe closed) ends this rank."""
    from ..basics.events import Stop

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            os._exit(3)
        if isinstance(message, Stop):
            stop.set()


def _serve(config_dict: dict, rank: int, send, stop: threading.Event) -> int:
    from ..basics.config import RunConfig
    from ..basics.errors import UserError
    from ..basics.events import Ended
    from ..basics.formatting import error_line
    from ..machine import devices
    from ..run import session, trainer
    from ..run.ranks import Ranks
    from .child import freeze_imports

    freeze_imports()  # as a run's process does: no full collection walks torch inside a measured window
    config = RunConfig.from_dict(config_dict)
    ranks = Ranks(config)
    try:
        ranks.start()
        data = session.prepare_data([ranks.data_config()])
        data = ranks.shard(data)
        device = devices.resolve_device(ranks.device)
    except UserError as exc:
        send(("rejected", rank, str(exc)))
        ranks.close()
        return 1
    except BaseException as exc:
        send(("bye", rank, "failed", error_line(exc, 300), None))
        ranks.close()
        return 1
    if rank == 0:
        send(("prepared",))

    def emit(event) -> None:
        if rank == 0 and not isinstance(event, Ended):
            send(("event", event))
        elif isinstance(event, Ended):
            ended.append(event)
    ended: list = []
    result = trainer.run(config, data=data, device=device, on_event=emit, should_stop=stop.is_set,
                         interrupt_is_user=False, ranks=ranks,
                         progress=(lambda m, f: send(("progress", m, f))) if rank == 0 else None)
    ranks.close()
    send(("bye", rank, result.status, result.error, ended[0] if rank == 0 and ended else None))
    return 1 if result.status == "failed" else 0


if __name__ == "__main__":
    main()
