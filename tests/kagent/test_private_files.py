"""Issue 39, finding 6: what K-Agent writes under var/ is private. Mail written to files (a reset or invitation link
in it is an account) goes into a 0700 folder, each file 0600 from its first byte; the development secret key is
created 0600. What another local account could read, it can't."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from django.core.mail import EmailMessage

from kagent.mail import PrivateFileBackend
from tests.conftest import ROOT


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_mail_written_to_files_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    folder = tmp_path / "mail"
    old = os.umask(0o022)  # a usual umask: files would be 0644 and folders 0755 without the backend's own modes
    try:
        backend = PrivateFileBackend(file_path=str(folder))
        sent = backend.send_messages([EmailMessage("Reset your password", "https://k.example/reset/abc", to=["a@x"])])
    finally:
        os.umask(old)

    assert sent == 1
    [written] = list(folder.iterdir())
    assert mode(folder) == 0o700 and mode(written) == 0o600
    assert "reset/abc" in written.read_text()


def test_the_development_secret_key_is_created_private(tmp_path: Path) -> None:
    var = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DEBUG")}
    env.update(DEBUG="true", KAGENT_VAR_DIR=str(var), DJANGO_SETTINGS_MODULE="kagent.settings")
    code = "import django; django.setup(); from django.conf import settings; print(len(settings.SECRET_KEY))"
    for _ in range(2):  # made once, then read back the same
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
    assert mode(var / "secret_key") == 0o600 and mode(var) == 0o700
