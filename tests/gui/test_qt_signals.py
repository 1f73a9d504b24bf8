"""Regression: PySide6 6.12.0 aborts Python 3.11 on Signal.emit ("bool_dealloc"); the pin must keep it out.

The emits run in a child process so that an abort shows up as a failed test instead of killing pytest.
"""

import os
import subprocess
import sys
import textwrap

N = 100_000

SCRIPT = textwrap.dedent(f"""
    import sys
    from PySide6.QtCore import QCoreApplication, QObject, QThread, QTimer, Signal, Slot

    class Source(QObject):
        value = Signal(int)
        flag = Signal(bool)

    class Sink(QObject):
        def __init__(self):
            super().__init__()
            self.count = 0
            self.total = 0

        @Slot(int)
        def on_value(self, v):
            self.count += 1
            self.total += v
            if self.count == {N}:
                QCoreApplication.quit()

        @Slot(bool)
        def on_flag(self, b):
            pass

    class Worker(QThread):
        def __init__(self, source):
            super().__init__()
            self.source = source

        def run(self):
            for i in range({N}):
                self.source.value.emit(i)
                if i % 10 == 0:
                    self.source.flag.emit(i % 20 == 0)

    app = QCoreApplication(sys.argv)
    source, sink = Source(), Sink()
    source.value.connect(sink.on_value)
    source.flag.connect(sink.on_flag)
    worker = Worker(source)
    QTimer.singleShot(120_000, app.quit)
    worker.start()
    app.exec()
    worker.wait()
    print(sink.count, sink.total)
""")


def test_many_cross_thread_signals_do_not_crash():
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    count, total = map(int, done.stdout.split())
    assert count == N
    assert total == N * (N - 1) // 2


def test_the_installed_pyside6_is_not_the_crashing_one():
    import PySide6

    if sys.version_info < (3, 12):
        assert PySide6.__version__ != "6.12.0"
