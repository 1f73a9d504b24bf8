"""A Mac's login keychain for the tests: keyring's real macOS backend (keyring/backends/macOS/__init__.py: its error
translation runs as on a Mac) over a fake of its `api` module (api.py's Security.framework calls), which keeps items
in a dict and fails with api.py's own statuses and classes: an item not found is NotFound (-25300: the backend's
get_password gives None, its delete_password PasswordDeleteError), a denied access KeychainDenied (-128: the
backend raises KeyringLocked), an unsigned executable SecAuthFailure (-25293: KeyringError). The ledger's
`keychain` row checks these against keyring's wheel."""

from __future__ import annotations

import contextlib


class FakeSecurityApi:
    """keyring.backends.macOS.api with the Security framework faked: `status` (0, or an OSStatus) is what the next
    calls fail with; `items` the keychain's generic passwords by (service, account)."""

    item_not_found, keychain_denied, sec_auth_failed = -25300, -128, -25293

    class Error(Exception):
        pass

    class NotFound(Error):
        pass

    class KeychainDenied(Error):
        pass

    class SecAuthFailure(Error):
        pass

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], str] = {}
        self.status = 0

    def _raise_for_status(self, status: int) -> None:  # api.Error.raise_for_status
        if status == 0:
            return
        if status == self.item_not_found:
            raise self.NotFound(status, "Item not found")
        if status == self.keychain_denied:
            raise self.KeychainDenied(status, "Keychain Access Denied")
        if status == self.sec_auth_failed:
            raise self.SecAuthFailure(status, "Security Auth Failure: make sure executable is signed with codesign "
                                              "util")
        raise self.Error(status, "Unknown Error")

    def find_generic_password(self, kc_name, service, username, not_found_ok=False):
        self._raise_for_status(self.status)
        if (service, username) not in self.items:
            if not_found_ok:
                return None
            self._raise_for_status(self.item_not_found)
        return self.items[(service, username)]

    def set_generic_password(self, name, service, username, password):
        with contextlib.suppress(self.NotFound):
            self.delete_generic_password(name, service, username)
        self._raise_for_status(self.status)
        self.items[(service, username)] = password

    def delete_generic_password(self, name, service, username):
        self._raise_for_status(self.status)
        if (service, username) not in self.items:
            self._raise_for_status(self.item_not_found)
        del self.items[(service, username)]


def mac_keychain(monkeypatch) -> tuple[object, FakeSecurityApi]:
    """(a `keychain` for engine/team/credentials: keyring's macOS backend over the fake api, the fake api)."""
    from keyring.backends import macOS

    api = FakeSecurityApi()
    monkeypatch.setattr(macOS, "api", api, raising=False)
    ring = macOS.Keyring()
    return (lambda: (ring, "")), api
