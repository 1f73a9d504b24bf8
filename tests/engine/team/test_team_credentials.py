"""The team server's credentials (engine/team/credentials.py): MLflow's own sources in its client's order, else the
keychain's item (keyring's real macOS backend over a faked Security API, tests/support/fake_keychain.py, as
conftest gives every test); `history --login/--logout`; a keychain that refuses or is missing: one sentence; the
secret in no file MPS Studio writes."""

from __future__ import annotations

import base64
import io
import sys

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.team import credentials, push
from mpsstudio.engine.team.server import Server
from tests.support.fake_keychain import mac_keychain
from tests.support.fake_mlflow import FakeServer
from tests.support.runs import noisy_rates, run_with

URL = "http://mlflow.team:5000"


def _basic(user, password):
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_mlflows_own_sources_come_first_in_its_clients_order(monkeypatch, tmp_path):
    keychain, api = mac_keychain(monkeypatch)
    api.items[(credentials.SERVICE, URL)] = "from-the-keychain"
    env = {"MLFLOW_TRACKING_TOKEN": "tok", "MLFLOW_TRACKING_USERNAME": "ann", "MLFLOW_TRACKING_PASSWORD": "pw"}
    found, _ = credentials.find(URL, env, keychain)
    assert found.header == _basic("ann", "pw") and "MLFLOW_TRACKING_USERNAME" in found.source  # basic beats a token
    assert "pw" not in repr(found) and "tok" not in repr(found)
    found, _ = credentials.find(URL, {"MLFLOW_TRACKING_TOKEN": "tok"}, keychain)
    assert found.header == "Bearer tok" and found.source == "MLFLOW_TRACKING_TOKEN"
    file = tmp_path / "credentials"
    file.write_text("[mlflow]\nmlflow_tracking_username = bob\nmlflow_tracking_password = s%cret\n")
    monkeypatch.setattr(credentials, "CREDENTIALS_FILE", str(file))
    found, _ = credentials.find(URL, {"MLFLOW_TRACKING_TOKEN": "tok"}, keychain)
    assert found.header == _basic("bob", "s%cret") and found.source == credentials.CREDENTIALS_FILE
    file.write_text("[mlflow\nnot an ini file")
    found, _ = credentials.find(URL, {}, keychain)  # an unreadable file is MLflow's no file: the keychain answers
    assert found.header == "Bearer from-the-keychain" and found.source == "the keychain"
    assert credentials.find("http://other:5000", {}, keychain) == (None, "")


def test_login_keeps_the_token_in_the_keychain_and_a_push_sends_it_stored_nowhere_else(tmp_path, monkeypatch, capsys):
    secret = "kc-token-9f8e7d"
    monkeypatch.setattr(sys, "stdin", io.StringIO(secret + "\n"))
    (tmp_path / "data").mkdir()
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path / "data"))
    store = RunStore(tmp_path / "data" / "runs.sqlite3")
    run = run_with("mps", noisy_rates(100.0, 0.02, n=8))
    store.save(run)
    store.close()
    seen = []

    def respond(request):
        seen.append(request.headers.get("Authorization"))
        request.answer(401, b"You are not authenticated.")

    with FakeServer(respond) as fake:
        assert cli.main(["history", "--login", fake.url + "/"]) == 0
        assert f"Kept the token for {fake.url} in the keychain" in capsys.readouterr().err
        assert credentials.kept(fake.url) is True
        assert cli.main(["history", "--push", fake.url]) == 2
        err = capsys.readouterr().err
    assert seen and seen[0] == f"Bearer {secret}"
    assert "refused the credentials from the keychain (401); keep a token it accepts with" in err
    assert f"--login {fake.url}" in err
    assert "Traceback" not in err and secret not in err
    assert cli.main(["history", "--json", str(tmp_path / "export.json")]) == 0  # what a user shares
    assert cli.main(["report", "latest", "--format", "html", "--out", str(tmp_path / "report.html")]) == 0
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_user_and_password_in_the_keychain_are_basic_auth_and_logout_removes_them(monkeypatch):
    keychain, api = mac_keychain(monkeypatch)
    assert "ann's password" in credentials.remember(URL, "pw 1", "ann", keychain)
    found, _ = credentials.find(URL, {}, keychain)
    assert found.header == _basic("ann", "pw 1")
    assert credentials.forget(URL, keychain) == f"Removed what the keychain kept for {URL}."
    assert not api.items
    # the macOS backend raises PasswordDeleteError for a missing item: asked first, it is a sentence, not a failure
    assert credentials.forget(URL, keychain) == f"The keychain keeps nothing for {URL}."


@pytest.mark.parametrize("status, said", [
    (-128, "did not let MPS Studio read it (access denied"),
    (-25293, "could not be read (Can't get password from keychain: (-25293, 'Security Auth Failure"),
])
def test_a_keychain_that_refuses_is_said_when_the_server_asks_for_credentials(monkeypatch, status, said):
    keychain, api = mac_keychain(monkeypatch)
    api.items[(credentials.SERVICE, URL)] = "tok"
    api.status = status
    found, why = credentials.find(URL, {}, keychain)
    assert found is None and said in why
    with FakeServer(lambda r: r.answer(401, b"You are not authenticated.")) as fake:
        with pytest.raises(UserError, match="asks for credentials \\(401\\) and none were found") as caught:
            Server(fake.url, keychain=keychain).call("GET", "experiments/search")
    assert "--login" in str(caught.value)
    with pytest.raises(UserError, match="Nothing was kept: the keychain"):
        credentials.remember(URL, "tok", keychain=keychain)


def test_no_keychain_and_bad_secrets_are_one_sentence(monkeypatch, capsys, tmp_path):
    def none():
        return None, "no system keychain answers here (no Secret Service or Windows Credential Locker)"

    with pytest.raises(UserError, match="Nothing can be kept: no system keychain answers here.*MLFLOW_TRACKING_TOKEN"):
        credentials.remember(URL, "tok", keychain=none)
    with pytest.raises(UserError, match="Nothing was removed: no system keychain"):
        credentials.forget(URL, keychain=none)
    assert credentials.kept(URL, keychain=none) is None
    for bad in ("", "a\nb", "x" * 20_000):
        with pytest.raises(UserError, match="one line"):
            credentials.remember(URL, bad)
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n"))
    assert cli.main(["history", "--login", URL]) == 2
    assert "No token was given" in capsys.readouterr().err
    assert cli.main(["history", "--login", "http://ann:pw@mlflow.team:5000"]) == 2
    assert "must not carry a user" in capsys.readouterr().err
    assert cli.main(["history", "--user", "ann"]) == 2
    assert "--user names the user of --login" in capsys.readouterr().err


def test_a_token_kept_by_macos_security_tool_is_a_bearer_token(monkeypatch):
    """`security add-generic-password -s "MPS Studio team server" -a URL -w TOKEN` keeps the bare token."""
    keychain, api = mac_keychain(monkeypatch)
    api.items[(credentials.SERVICE, URL)] = '{"not": "a user"}'
    assert credentials.find(URL, {}, keychain)[0].header == 'Bearer {"not": "a user"}'


def test_the_push_queue_keeps_no_credentials_of_a_push_that_waits(tmp_path, monkeypatch):
    secret = "queued-token-123"
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", secret)
    store = RunStore(tmp_path / "runs.sqlite3")
    store.save(run_with("mps", noisy_rates(100.0, 0.02, n=8)))
    with FakeServer(lambda r: r.answer(503, {"message": f"down (you sent {r.headers.get('Authorization')})"})) as fake:
        done = push.push(store, fake.url, push.everything(store))
    assert done.waiting
    store.close()
    data = (tmp_path / "runs.sqlite3").read_bytes()
    assert secret.encode() not in data  # the server echoed it in its 503; the reason kept has it hidden
    assert "you sent Bearer ***" in done.waiting[0][1]


def test_half_of_a_user_and_password_is_said_and_login_without_a_keychain_asks_for_nothing(monkeypatch, capsys,
                                                                                          tmp_path):
    monkeypatch.setattr(credentials, "system_keychain", lambda: (None, "no system keychain answers here"))
    found, why = credentials.find(URL, {"MLFLOW_TRACKING_USERNAME": "ann"})
    assert found is None and why == "MLFLOW_TRACKING_USERNAME is set without MLFLOW_TRACKING_PASSWORD"
    with FakeServer(lambda r: r.answer(401, b"You are not authenticated.")) as fake:
        with pytest.raises(UserError) as caught:
            Server(fake.url, env={"MLFLOW_TRACKING_USERNAME": "ann"}).call("GET", "experiments/search")
    said = str(caught.value)
    assert "(MLFLOW_TRACKING_USERNAME is set without MLFLOW_TRACKING_PASSWORD)" in said
    assert "keychain" not in said.split("; ", 1)[1]  # no keychain here: the advice is the environment's alone
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # nothing to read: it must not be asked for
    assert cli.main(["history", "--login", URL]) == 2
    err = capsys.readouterr().err
    assert "Nothing can be kept: no system keychain answers here; set MLFLOW_TRACKING_TOKEN" in err
    assert err.strip().count("\n") == 0 and "Traceback" not in err
