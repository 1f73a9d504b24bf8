"""A run on several GPUs: the run's process (process/child.py) launches torchrun, PyTorch's own launcher
(`python -m torch.distributed.run --nproc-per-node N ... -m mpsstudio.engine.process.rank`), and stands between
its ranks and the front end:

- the ranks connect back over a socket in the run's temp folder with a key of this run (nothing else can);
- rank 0's events go on to the front end as a one-device run's do; every rank says how it ended;
- Stop goes to rank 0, and the ranks agree on it at a window's end (ranks.py);
- a rank that fails, dies or hangs (the others' collective times out after `rank_timeout_s`) fails the run with
  one sentence naming that rank; the rest are ended and nothing is left: the ranks are ended here (they run in
  sessions of their own, so their process group is not the run's) and torchrun with them.
- The environment passes to every rank whole (torchrun's workers inherit it): the NVLink multicast switches a
  shared host sets (NCCL_NVLS_ENABLE=0 and its kin) reach every rank, and nothing here turns multicast on.

torchrun's options for several machines (--nnodes, the rendezvous) are passed through (RunConfig.torchrun);
without them the launch is `--standalone` on this machine.
"""

from __future__ import annotations

import os
import queue
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, Listener

from ..basics.config import RunConfig
from ..basics.errors import UserError, present
from ..basics.events import STOP, Ended, Event, Stop
from ..basics.formatting import one_line, printable
from ..basics.results import RunResult
from . import rank_endings as endings

RANK_MODULE = "mpsstudio.engine.process.rank"
ADDRESS_VAR, KEY_VAR = "MPSSTUDIO_RANKS_ADDRESS", "MPSSTUDIO_RANKS_KEY"  # process/rank.py reads them
START_S = 600.0  # from launch to every local rank's hello (importing torch on N ranks at once, a rendezvous)
SETTLE_S = 5.0  # after a rank ended without a word: time torchrun has to say how (its failure report)
ENDING_S = 10.0  # after a rank's ending: time the others have to say theirs before they are ended
def run_ranks(config: RunConfig, on_event: Callable[[Event], None], should_stop: Callable[[], bool],
              prepared: Callable[[], None] | None = None) -> RunResult:
    """The run on its ranks, to its end: the result rank 0 measured, or rebuilt from its events when a rank
    failed (named). UserError before any rank's model ran (bad input: nothing recorded)."""
    check_launch(config)
    result = _Launch(config, on_event, should_stop, prepared).run()
    on_event(Ended(result))
    return result


def check_launch(config: RunConfig) -> None:
    """What must hold before torchrun starts: a Python that can start it, and the GPUs asked for."""
    if getattr(sys, "frozen", False):
        raise UserError("Runs on several GPUs start PyTorch's torchrun, which the MPS Studio app cannot run; install "
                        "MPS Studio with pip on the GPU machine (README, Install) and use `mpsstudio bench --gpus`.")
    import torch

    if not torch.distributed.is_available():
        raise UserError("This PyTorch was built without torch.distributed, so it cannot run on several GPUs.")
    if config.device.startswith("cuda"):
        have = torch.cuda.device_count()
        if have < config.gpus:
            raise UserError(f"This machine has {have} CUDA GPU{'s' if have != 1 else ''}; --gpus {config.gpus} "
                            f"needs {config.gpus}: ask for at most {have}.")


def command(config: RunConfig, python: str | None = None) -> list[str]:
    """The torchrun command of a run: its ranks on this machine, the options passed through (or --standalone),
    no restarts (a failed rank fails the run), and the rank's entry module."""
    passed = list(config.torchrun)
    rendezvous = any(a.split("=", 1)[0].replace("_", "-") in ("--rdzv-endpoint", "--nnodes", "--master-addr")
                     for a in passed)
    return [python or sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={config.gpus}",
            *([] if rendezvous else ["--standalone"]), *passed, "--max-restarts=0", "--monitor-interval=0.1",
            "-m", RANK_MODULE]


def rank_environment(address: str, key: str, environ: dict | None = None) -> dict:
    """Every rank's environment: this process's whole (never a fresh one: the NVLink multicast switches and the
    user's NCCL settings reach every rank), where to report, and this engine on the path."""
    env = dict(os.environ if environ is None else environ)
    env[ADDRESS_VAR], env[KEY_VAR] = address, key
    root = _engine_root()
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _engine_root() -> str:
    """The folder holding this engine's package (a ForeignProcess's link folder, or the source tree)."""
    import mpsstudio

    return os.path.dirname(os.path.dirname(os.path.abspath(mpsstudio.__file__)))


class _Launch:
    """One launch: torchrun, its ranks' connections, their messages in one queue, and the run's ending."""

    def __init__(self, config: RunConfig, on_event, should_stop, prepared):
        from ..analysis.summary import Recorder

        self.config, self.on_event, self.should_stop, self.prepared = config, on_event, should_stop, prepared
        self.recorder = Recorder(config)
        self.messages: queue.Queue = queue.Queue()
        self.conns: dict[int, Connection] = {}  # rank -> its connection
        self.pids: dict[int, int] = {}
        self.said: dict[int, tuple] = {}  # rank -> (status, error): how it said it ended
        self.lost: list[int] = []  # ranks whose connection closed without a word, in that order
        self.failed_first: list[int] = []  # ranks in the order they said they failed
        self.order: list[tuple] = []  # ("failed" | "lost", rank) as they came: what came first is the cause
        self.ended: Ended | None = None  # rank 0's
        self.output: list[str] = []  # torchrun's last lines (its own and the ranks')
        self.world = config.gpus
        self.stop_sent = False
        self.proc: subprocess.Popen | None = None

    def run(self) -> RunResult:
        folder = tempfile.mkdtemp(prefix="ranks-")
        if len(folder) > 90:  # a Unix socket's path holds 104-108 bytes: a deep temp folder gets a short one instead
            os.rmdir(folder)
            folder = tempfile.mkdtemp(prefix="mpsstudio-ranks-", dir="/tmp" if os.path.isdir("/tmp") else None)
        address, key = os.path.join(folder, "s"), secrets.token_hex(16)
        listener = Listener(address, family="AF_UNIX", authkey=bytes.fromhex(key))
        try:
            self.proc = subprocess.Popen(command(self.config), env=rank_environment(address, key),
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as exc:
            listener.close()
            raise UserError(f"torchrun could not be started ({printable(exc.strerror or exc)}).") from None
        threading.Thread(target=self._accept, args=(listener,), daemon=True, name="ranks-accept").start()
        output = threading.Thread(target=self._read_output, daemon=True, name="ranks-output")
        output.start()
        try:
            self._follow()
            if self.lost:  # torchrun's report says how a rank ended: read it once torchrun has ended
                try:
                    self.proc.wait(SETTLE_S)
                except subprocess.TimeoutExpired:
                    pass
                output.join(1.0)
            return self._result()
        finally:
            self._end_all()
            listener.close()
            try:
                os.unlink(address)
                os.rmdir(folder)
            except OSError:
                pass

    # ---------------------------------------------------------------------------------------- the threads

    def _accept(self, listener: Listener) -> None:
        while True:
            try:
                conn = listener.accept()
            except Exception:  # closed at the end, or a connection without the key (AuthenticationError)
                if getattr(listener, "_listener", None) is None:  # (closed: the launch is over)
                    return
                continue
            threading.Thread(target=self._read, args=(conn,), daemon=True, name="ranks-read").start()

    def _read(self, conn) -> None:
        rank = None
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                self.messages.put(("lost", rank))
                return
            except Exception as exc:  # not one of our messages
                self.messages.put(("garbled", rank, one_line(str(exc), 120)))
                return
            if not isinstance(message, tuple) or not message:
                continue
            if message[0] == "hello" and rank is None and len(message) == 5:
                try:
                    rank, world, pid = int(message[1]), int(message[3]), int(message[4])
                    conn.send(("config", self.config.to_dict()))
                except (TypeError, ValueError, OSError):
                    continue
                self.conns[rank], self.pids[rank], self.world = conn, pid, world
            self.messages.put(message if message[0] != "hello" else ("hello", rank))

    def _read_output(self) -> None:
        """torchrun's output (its own and its ranks'), passed on to the run's output and its last lines kept."""
        stdout = self.launcher.stdout
        if stdout is None:
            return
        for raw in iter(stdout.readline, b""):
            line = raw.decode("utf-8", "replace")
            try:
                sys.stdout.write(line)
            except (OSError, ValueError):
                pass
            self.output.append(line.rstrip("\n"))
            del self.output[:-200]

    # ---------------------------------------------------------------------------------------- following

    def _follow(self) -> None:
        """Pass on rank 0's events and Stop until every rank of this machine has said how it ended (or is gone),
        torchrun has ended, or the others had ENDING_S to say theirs after a rank's ending."""
        started = time.monotonic()
        ending_at: float | None = None
        while True:
            try:
                self._handle(self.messages.get(timeout=0.05))
                continue  # every message waiting is read before anything is decided
            except queue.Empty:
                pass
            if self.should_stop() and not self.stop_sent and 0 in self.conns:
                self.stop_sent = True
                self._send(0, STOP)
            accounted = len(self.said) + len(self.lost)
            if accounted >= self.config.gpus:
                break
            if self.launcher.poll() is not None:  # torchrun ended: what its ranks sent is read, then the end
                time.sleep(0.1)
                if self.messages.empty():
                    break
                continue
            if ending_at is None and (self.failed_first or self.lost or self.ended is not None):
                ending_at = time.monotonic() + ENDING_S
            if ending_at is not None and time.monotonic() > ending_at:
                break
            if not self.conns and time.monotonic() - started > START_S:
                break

    def _handle(self, message: tuple) -> None:
        kind = message[0]
        if kind == "event" and len(message) == 2:
            self.recorder.add(message[1])
            self.on_event(message[1])
        elif kind == "progress" and len(message) == 3:
            pass  # loading data on rank 0: the run's own progress is its events
        elif kind == "prepared" and self.prepared is not None:
            self.prepared()
            self.prepared = None
        elif kind == "rejected" and len(message) == 3:
            self._end_all()
            raise UserError(str(message[2]))
        elif kind == "bye" and len(message) == 5:
            rank, status, error, ended = message[1:]
            self.said[rank] = (str(status), str(error or ""))
            if status == "failed":
                self.failed_first.append(rank)
                self.order.append(("failed", rank))
            if rank == 0 and isinstance(ended, Ended):
                self.ended = ended
        elif kind == "lost":
            rank = message[1]
            if rank is not None and rank not in self.said and rank not in self.lost:
                self.lost.append(rank)
                self.order.append(("lost", rank))
        elif kind == "garbled" and message[1] is not None and message[1] not in self.lost:
            self.lost.append(message[1])
            self.order.append(("lost", message[1]))

    def _send(self, rank: int, message: Stop) -> None:
        try:
            self.conns[rank].send(message)
        except (OSError, ValueError, KeyError):
            pass

    # ---------------------------------------------------------------------------------------- the ending

    def _result(self) -> RunResult:
        why = self._why()
        if self.conns and 0 not in self.conns and not why:  # another machine of a run on several: rank 0's keeps it
            here = sorted(self.conns)
            raise UserError(f"This machine ran rank{'s' if len(here) > 1 else ''} {', '.join(map(str, here))} of "
                            f"{self.world}; the run is kept on the machine of rank 0, with every rank's figures.")
        if self.ended is not None and not why:
            return self.ended.result
        result = self.ended.result if self.ended is not None else None
        if result is None:
            if self.recorder.result.env == {} and not self.recorder.result.windows and not why:
                why = self._launch_failed()
            stopped = self.stop_sent and not self.failed_first and not self.lost
            if not why and not stopped:  # torchrun itself ended mid-run (killed): the ranks went with it
                why = self._launcher_ended()
            result = self.recorder.finish("cancelled" if stopped else "failed", "" if stopped else why)
        else:
            result.status, result.error = "failed", why
        return result

    def _why(self) -> str:
        """One sentence naming the rank the run failed by, "" when none failed (run/rank_endings.py)."""
        return endings.first_cause(self.world, self.said, self.lost, self.failed_first, self.order, self.conns,
                                   self.config.rank_timeout_s, self.output)

    @property
    def launcher(self) -> subprocess.Popen:
        """torchrun's process (started by `start`)."""
        return present(self.proc, "torchrun was not started")

    def _launcher_ended(self) -> str:
        return endings.launcher_ended(self.launcher.poll(), self.world)

    def _launch_failed(self) -> str:
        return endings.launch_failed(self.output)

    def _end_all(self) -> None:
        """torchrun, then every rank still running (their own sessions: signalled one by one)."""
        import psutil

        procs = []
        for pid in self.pids.values():
            try:
                procs.append(psutil.Process(pid))
            except psutil.Error:
                pass
        if self.proc is not None and self.proc.poll() is None and len(self.said) >= self.config.gpus:
            try:  # every rank said goodbye: torchrun is ending by itself
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if self.proc is not None and self.proc.poll() is None:
            try:
                procs += psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.Error:
                pass
            self.proc.terminate()
            try:
                self.proc.wait(3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            alive = []
            for p in procs:
                try:
                    if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                        p.send_signal(sig)
                        alive.append(p)
                except psutil.Error:
                    pass
            if not alive:
                break
            psutil.wait_procs(alive, timeout=1.0)
        for conn in list(self.conns.values()):
            try:
                conn.close()
            except OSError:
                pass
