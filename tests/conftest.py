"""Shared fixtures: every test gets its own folders (history, settings, cache, logs), so nothing touches the
user's real files; `tests/scenarios/test_user_folders.py` checks the same for the suite's subprocesses."""

import os

import pytest

# Qt without a display aborts the interpreter; `make test` sets this too, a bare `pytest` needs it as well.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def pytest_sessionstart(session):
    """The session's own folders and run processes' memory cap in the environment (each test then gets folders of
    its own: _private_folders; pooled run processes keep the session's: tests/support/processes.py, WarmPool).

    Garbage is collected in the main thread only, after each test (see _collected_in_the_main_thread): the window
    does the same (gui/collector.py), because Qt objects freed by a collection in another thread (a run thread of
    InProcessRun, a QThread) deadlock PySide."""
    import gc
    import tempfile

    from mpsstudio.engine.process import MEMORY_LIMIT_VAR

    from tests.support import processes

    base = session.config.mpsstudio_base = tempfile.mkdtemp(prefix="mpsstudio-tests-")
    for name in ("DATA", "CONFIG", "CACHE", "LOG"):
        os.environ[f"MPSSTUDIO_{name}_DIR"] = os.path.join(base, name.lower())
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one of `make test`'s workers: a temp folder of its own, so what
        temp = os.path.join(base, "tmp")  # one worker's run processes make there is never another's leftover
        os.makedirs(temp)
        os.environ["TMPDIR"] = tempfile.tempdir = temp
    os.environ[MEMORY_LIMIT_VAR] = processes.MEMORY_CAP_MB
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:  # the workers share the cores: PyTorch's threads per
        # worker (and per run process it starts) their share of them, not every core each (oversubscribed, a
        # training step in one worker waits for threads another's took: the suite ran ~10 % longer)
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))
    processes.POOL = processes.WarmPool()
    processes.use_forkserver()

    gc.disable()
    import torch  # with the engine and Qt: frozen below, so full collections skip them

    import mpsstudio.engine.process
    import mpsstudio.engine.run.session
    try:
        import mpsstudio.gui.window  # noqa: F401
    except ImportError:  # no PySide6
        pass
    # the first optimizer imports torch._dynamo (and sympy: ~1M objects) and the built-in models import torchvision's:
    # loaded before the freeze, so no full collection (the engine's between max-batch probes among them) walks them
    torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    import torchvision.models  # noqa: F401
    gc.freeze()


_tests_since_full_collection = [0]


@pytest.fixture(autouse=True)
def _collected_in_the_main_thread():
    """What a test left is collected here, in the main thread (automatic collection is off: pytest_sessionstart),
    so everything a test made is still young: the young generations after every test (under a millisecond) free its
    garbage, and what survives is frozen, so a collection the code under test makes (max-batch's between probes:
    tools/memory.py) walks the test's own objects, as it does in a run process, not the whole session's. Every 100
    tests everything is unfrozen and collected (what became garbage later than its test: a cache's old entry)."""
    yield
    import gc
    import sys

    if "PySide6.QtWidgets" in sys.modules:  # widgets a test gave deleteLater go now, not when a later test's
        from PySide6.QtCore import QCoreApplication, QEvent  # event loop runs (hundreds at once: one test took 6 s)

        if QCoreApplication.instance() is not None:
            QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    _tests_since_full_collection[0] += 1
    full = _tests_since_full_collection[0] >= 100
    if full:
        _tests_since_full_collection[0] = 0
        gc.unfreeze()
    gc.collect(2 if full else 1)
    gc.freeze()


def pytest_collection_finish(session):
    """Start the slowest end-to-end test's subprocess (the window's --demo, ~10 s of it importing PyTorch) as
    soon as it is collected, so it runs beside the in-process tests; its test collects the result."""
    from tests.support.sandbox import DEMO_TEST, start_demo

    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects every test: the one that runs it starts it
        return
    if any(item.name == DEMO_TEST for item in session.items) and len(session.items) > 1:
        session.config.mpsstudio_demo = start_demo()


def pytest_sessionfinish(session):
    from tests.support import processes

    if processes.POOL is not None:
        processes.POOL.close()
    import shutil
    from multiprocessing import util

    base = getattr(session.config, "mpsstudio_base", "")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # a worker's multiprocessing keeps its own temp folder inside `base` (TMPDIR) and removes it at exit (an
        # exit finalizer of priority -100); removing `base` now made that one print a traceback: remove it after
        util.Finalize(None, shutil.rmtree, args=(base,), kwargs={"ignore_errors": True}, exitpriority=-200)
    else:
        shutil.rmtree(base, ignore_errors=True)


def pytest_unconfigure(config):
    started = getattr(config, "mpsstudio_demo", None)
    if started is not None and started[1].poll() is None:  # its test did not run (-x, a deselection)
        started[1].kill()
        started[1].wait()


def pytest_configure(config):
    config.addinivalue_line("markers", "processes: the test is about run processes themselves (crashes, hangs, signals, "
                                       "Stop, spares): its runs get real processes, not InProcessRun")
    config.addinivalue_line("markers", "long: a system test that starts whole programs (torchrun and its ranks, a second "
                                       "Python environment, the demo app, a script run by python itself, fresh "
                                       "interpreters that import torch), loads the machine, or trains the default to "
                                       "convergence: `make test-long` runs these (CI does), `make test` the rest")
    config.addinivalue_line("markers", "spawn: its run processes start as the app starts them (spawn: a fresh "
                                       "interpreter), not forked from the suite's forkserver with torch loaded")



@pytest.fixture(autouse=True)
def _short_idle_readings(monkeypatch):
    """A run with an energy counter reads its device's idle power for IDLE_S (1 s) before its measured phase; runs
    in tests read it for 10 ms (tests/engine/machine/energy/test_idle.py checks the reading itself at its real length)."""
    from mpsstudio.engine.machine.energy import meter

    monkeypatch.setattr(meter, "IDLE_S", 0.01)


@pytest.fixture(autouse=True)
def _runs_in_process(request, monkeypatch):
    """Runs, tools and device checks are served by a thread of the test process (engine.process.InProcessRun: the same
    pipe, messages and parent code, without ~3 s of `import torch` per process), except in tests about the
    processes themselves (marker `processes` or fixture `run_pids`): those take warm run processes from the pool."""
    from mpsstudio.engine import process
    from mpsstudio.engine.process import handles

    from tests.support import processes

    processes.POOL.refill()  # first, while the environment is the session's (see WarmPool)
    if request.node.get_closest_marker("spawn"):  # fresh interpreters, as the app starts them
        monkeypatch.setattr(handles, "START_METHOD", "spawn")
        monkeypatch.setattr(handles, "new_process", process.RunProcess)
    elif request.node.get_closest_marker("processes") or "run_pids" in request.fixturenames:
        monkeypatch.setattr(handles, "new_process", processes.POOL.take)
    else:
        monkeypatch.setattr(handles, "new_process", process.InProcessRun)


@pytest.fixture(autouse=True)
def _private_folders(tmp_path_factory, monkeypatch):
    """Each test's own data, config, cache and log folders, not made until the app makes them (as on a fresh
    machine, where platformdirs' folders do not exist yet): one folder per test, not four to make and remove."""
    home = tmp_path_factory.mktemp("home")
    for name in ("DATA", "CONFIG", "CACHE", "LOG"):
        monkeypatch.setenv(f"MPSSTUDIO_{name}_DIR", str(home / name.lower()))


@pytest.fixture(autouse=True)
def _private_keychain(tmp_path_factory, monkeypatch):
    """No test reads or writes the user's keychain or ~/.mlflow/credentials: an empty keychain of the test's own
    (keyring's macOS backend over a faked Security API, tests/support/fake_keychain.py) and a credentials file path
    that does not exist; a test that needs either sets its own."""
    from mpsstudio.engine.team import credentials

    from tests.support.fake_keychain import mac_keychain

    keychain, _ = mac_keychain(monkeypatch)
    monkeypatch.setattr(credentials, "system_keychain", keychain)
    nowhere = tmp_path_factory.getbasetemp() / "no-mlflow-credentials"  # never made
    monkeypatch.setattr(credentials, "CREDENTIALS_FILE", str(nowhere))
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_consent_dialog(monkeypatch):
    """A modal consent dialog would hang a test: one that needs an answer replaces ModelFileGuard.ask itself."""
    try:
        from mpsstudio.gui.setup.model_files import ModelFileGuard
    except ImportError:  # no PySide6
        return

    def refuse(self, path):
        raise AssertionError(f"a test showed the consent dialog for {path} without answering it")
    monkeypatch.setattr(ModelFileGuard, "ask", refuse)
    monkeypatch.setattr(ModelFileGuard, "ask_script", refuse)


@pytest.fixture
def no_leftovers(qapp):
    """Fails a GUI test that leaves one of our QThreads running or an active QTimer in a closed window."""
    yield
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from mpsstudio.gui.jobs import running_threads

    threads = running_threads()
    for t in threads:
        t.wait(5000)
    assert not threads, f"QThreads left running: {threads}"
    active = [t for w in QApplication.topLevelWidgets() if not w.isVisible()
              for t in w.findChildren(QTimer) if t.isActive() and t.interval() > 0 and not t.isSingleShot()]
    assert not active, f"active timers left in closed windows: {active}"

@pytest.fixture
def run_pids(monkeypatch):
    """Pids of every run process started during the test; after it, none of them (or their process groups) is
    left, and none is a zombie."""
    from mpsstudio.engine import process
    from mpsstudio.engine.process import handles

    from tests.support.processes import assert_gone

    pids: list[int] = []
    real, handing = process.RunProcess.__init__, handles.new_process  # the warm pool's take (_runs_in_process)

    def recording(self, *args, **kwargs):
        real(self, *args, **kwargs)
        pids.append(self.pid)

    def handed(**kwargs):
        proc = handing(**kwargs)
        if proc.pid not in pids:  # a pooled process (not one the pool had to start: recorded above)
            pids.append(proc.pid)
        return proc
    monkeypatch.setattr(process.RunProcess, "__init__", recording)
    monkeypatch.setattr(handles, "new_process", handed)
    yield pids
    assert_gone(pids)


@pytest.fixture
def fake_mps(monkeypatch):
    """`fake_mps(**kwargs)`: a faked Apple Silicon Mac whose GPU behaves like torch's MPS (tests/support/fake_mps.py), active
    for the rest of the test in this thread and in every run, tool and check, which then run in-process."""
    import contextlib
    import functools

    from mpsstudio.engine import process
    from mpsstudio.engine.machine import probe
    from mpsstudio.engine.process import handles

    from tests.support.fake_mps import FakeMPS

    with contextlib.ExitStack() as stack:
        stack.callback(probe.forget)  # a device check cached in this process must not outlive its faked Mac

        def make(**kwargs) -> FakeMPS:
            from mpsstudio.engine.tools import maxbatch

            probe.forget()
            # the faked GPU computes on this machine's shared CPU: a timing there says nothing about memory pressure
            # (on a loaded machine it called the allocator's own boundary "memory pressure"); tests/engine/tools/test_tools.py
            # tests that rule on its own
            monkeypatch.setattr(maxbatch, "COLLAPSE", 0.0)
            fake = FakeMPS(**kwargs).install(monkeypatch)
            stack.enter_context(fake.activate())
            monkeypatch.setattr(handles, "new_process", functools.partial(process.InProcessRun,
                                                                            context=fake.activate))
            return fake
        yield make


@pytest.fixture
def store(tmp_path):
    """A run history of its own, closed after the test."""
    from mpsstudio.engine.history.store import RunStore

    s = RunStore(tmp_path / "runs.sqlite3")
    yield s
    s.close()
