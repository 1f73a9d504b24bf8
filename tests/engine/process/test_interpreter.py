"""Another Python environment for a run (`bench --python`, RunConfig.python): checked with one sentence for each way
it cannot run a run, then the run's process is that interpreter with this engine's code and *its* torch."""

from __future__ import annotations

import os

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.process import interpreter, run_isolated
from tests.support.environments import make_venv
from tests.support.paths import ROOT

OTHER = ROOT / ".venv-other" / "bin" / "python"  # `make other-torch`


@pytest.mark.parametrize("packages, words", [
    ({}, "has no PyTorch: install it there"),
    ({"torch": "__version__ = '2.3.0'\nclass version: git_version = None\n"}, "has PyTorch 2.3.0; MPS Studio runs on "
                                                                               "2.6 to 2.15"),
    ({"torch": "__version__ = '2.99.0'\n"}, "has PyTorch 2.99.0"),
    ({"torch": "raise OSError('libtorch_cpu.so: cannot open shared object file')\n"}, "PyTorch fails to load"),
    ({"torch": "__version__ = '2.14.0'\n"}, "lacks numpy, which MPS Studio's run process needs"),
])
def test_an_environment_that_cannot_run_is_one_sentence(tmp_path, packages, words):
    python = make_venv(tmp_path / "env", packages)
    with pytest.raises(UserError) as caught:
        interpreter.check(str(python))
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_not_a_python_or_not_there(tmp_path, capsys):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    with pytest.raises(UserError, match="exited with code 0 without answering MPS Studio's check \\(it said: hello\\): it is not a "
                                            "Python MPS Studio can use"):
        interpreter.check(str(fake))
    (tmp_path / "plain").write_text("x")
    with pytest.raises(UserError, match="is not executable"):
        interpreter.check(str(tmp_path / "plain"))
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu",
                     "--python", str(tmp_path / "nowhere" / "python")])
    err = capsys.readouterr().err
    assert code == 2 and "No Python at" in err and len(err.strip().splitlines()) == 1


@pytest.mark.long
def test_a_run_in_another_environment(tmp_path):
    python = make_venv(tmp_path / "other-env", share_ours=True)
    found = interpreter.check(str(python))
    assert found.name == "other-env" and found.torch == __import__("torch").__version__
    assert interpreter.check(str(python)) is found  # asked once per interpreter
    cfg = RunConfig(model="mlp", dataset="synthetic", device="cpu", steps=12, epochs=None, warmup_steps=2,
                    batch_size=16, python=found.path).validate()
    [run] = run_isolated([cfg])
    assert run.status == "finished", run.error
    assert run.env["python_env"] == "other-env" and run.env["python_executable"].startswith(str(tmp_path))
    assert cfg.comparison_key() == RunConfig(**{**cfg.to_dict(), "python": None}).comparison_key()


def test_a_run_in_another_environment_that_crashes_is_kept_as_failed(tmp_path, monkeypatch):
    python = make_venv(tmp_path / "env", share_ours=True)
    monkeypatch.setattr(interpreter, "why_not", lambda path: "")  # its check passes (tested above): the run dies
    cfg = RunConfig(model="mlp", dataset="synthetic", device="cpu", steps=5, epochs=None, warmup_steps=1,
                    batch_size=16, python=str(python)).validate()
    lib = next((tmp_path / "env" / "lib").glob("python3*")) / "site-packages"
    # the run's process dies at its start (its arguments: -c ROOT FD FD); the check before it passes
    (lib / "sitecustomize.py").write_text("import os, sys\nif os.environ.get('CRASH_HERE') and len(sys.argv) == 4 "
                                          "and sys.argv[2].isdigit():\n    os._exit(7)\n")
    os.environ["CRASH_HERE"] = "1"
    try:
        [run] = run_isolated([cfg])
    finally:
        del os.environ["CRASH_HERE"]
    assert run.status == "failed" and "exited with code 7" in run.error


@pytest.mark.long
@pytest.mark.skipif(not OTHER.exists(), reason="no second torch: `make other-torch` makes .venv-other (CI does)")
def test_two_torch_versions_compared_and_named(capsys, monkeypatch):
    """The issue's case: one setup with two torch versions (this suite's and .venv-other's 2.13)."""
    # this suite runs its own torch's run in-process (handles.new_process), where no run process sets the MPS
    # fallback variable as the app's do (and the other interpreter's does): set as both record it
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    found = interpreter.check(str(OTHER))
    ours = __import__("torch").__version__
    assert found.torch != ours
    args = ["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--steps", "40", "--warmup",
            "2", "--batch-size", "32", "--no-inspect"]
    assert cli.main(args) == 0
    assert cli.main([*args, "--python", str(OTHER)]) == 0
    capsys.readouterr()
    assert cli.main(["history", "--compare", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "environments compared" in out
    line = next((s for s in out.splitlines() if s.startswith(f"torch {found.torch}")), None)
    if line is None:  # a run this busy machine made noisy: no verdict, and it says why (the regression check's rule)
        line = next(s for s in out.splitlines() if "cannot tell whether torch changed the speed" in s)
        assert "was noisy (" in line
        return
    assert f"than {ours}" in line or f"against torch {ours}" in line
    assert "nothing else differs (Python environment: .venv-other" in line


def test_a_python_that_writes_bytes_or_hangs_is_one_sentence_and_leaves_nothing(tmp_path, monkeypatch):
    binary = tmp_path / "binary"
    binary.write_bytes(b"#!/bin/sh\nprintf '\\377\\376\\n'\nprintf '\\377' >&2\n")
    binary.chmod(0o755)
    with pytest.raises(UserError, match="is not a Python MPS Studio can use"):
        interpreter.check(str(binary))
    marker = tmp_path / "grandchild.pid"
    hang = tmp_path / "hang"
    hang.write_text(f"#!/bin/sh\nsleep 1000 &\necho $! > {marker}\nwait\n")
    hang.chmod(0o755)
    monkeypatch.setattr(interpreter, "CHECK_TIMEOUT_S", 0.5)
    with pytest.raises(UserError, match="did not answer within 0.5 s"):
        interpreter.check(str(hang))
    pid = int(marker.read_text())
    import time

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the check's grandchild outlived it")
