"""The team's server in Preferences: its address (kept in the preferences file) and a token or a user's password
(kept in the system keychain through the engine's team/credentials.py, never in a file)."""

from __future__ import annotations

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QGridLayout, QLabel, QLineEdit, QPushButton, QWidget

from ..engine.basics.errors import UserError


class ServerRow(QWidget):
    """Preferences' team server: its address (kept in the preferences) and a token or a user's password (kept in
    the keychain, never in a file; left empty, what the keychain keeps stays)."""

    def __init__(self, url: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.url = QLineEdit(url)
        self.url.setPlaceholderText("http://mlflow.team:5000")
        self.url.setToolTip("Your team's MLflow tracking server: Push to Team Server sends runs and tool results "
                            "there, Pull from Team Server… brings the team's in.")
        self.user = QLineEdit()
        self.user.setPlaceholderText("user (basic auth)")
        self.token = QLineEdit()
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("token (or a user's password)")
        self.token.setToolTip("Kept in your login keychain (service \"MPS Studio team server\"), never in MPS "
                              "Studio's files. MLflow's own MLFLOW_TRACKING_TOKEN (or _USERNAME and _PASSWORD) go "
                              "first where they are set.")
        self.forget = QPushButton("Forget")
        self.forget.setToolTip("Remove what the keychain keeps for this server")
        self.forget.clicked.connect(self._forget)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addWidget(self.url, 0, 0, 1, 3)
        grid.addWidget(self.token, 1, 0)
        grid.addWidget(self.user, 1, 1)
        grid.addWidget(self.forget, 1, 2)
        grid.addWidget(self.note, 2, 0, 1, 3)
        self.url.editingFinished.connect(self.show_kept)
        self.show_kept()

    def address(self) -> str:
        """The address as the engine keeps it ("" for none); UserError for one it refuses."""
        from ..engine.team.server import check_url

        text = self.url.text().strip()
        return check_url(text) if text else ""

    def keep(self) -> str:
        """The token typed kept in the keychain for the address (the sentence said; "" where none was typed);
        UserError where it cannot be."""
        from ..engine.team import credentials

        secret = self.token.text()
        if not secret.strip():
            return ""
        url = self.address()
        if not url:
            raise UserError("A token needs the team server's address; give it above the token.")
        said = credentials.remember(url, secret, self.user.text().strip())
        self.token.clear()
        return said

    def show_kept(self) -> None:
        from ..engine.team import credentials

        try:
            url = self.address()
        except UserError:
            url = ""
        kept = credentials.kept(url) if url else None
        self.forget.setEnabled(bool(kept))
        if not url:
            self.note.setText("The token is kept in your keychain, never in MPS Studio's files.")
        elif kept is None:
            _, why = credentials.system_keychain()
            self.note.setText(f"No keychain to keep a token in ({why or 'it would not answer'}): set "
                              "MLFLOW_TRACKING_TOKEN before starting MPS Studio.")
        else:
            self.note.setText("The keychain keeps a token for this server; type another to replace it." if kept
                              else "The keychain keeps no token for this server (none needed for an open one).")

    def _forget(self) -> None:
        from ..engine.team import credentials

        try:
            self.note.setText(credentials.forget(self.address()))
        except UserError as exc:
            self.note.setText(str(exc))
        self.forget.setEnabled(False)
