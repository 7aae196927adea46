"""Mail written to files (`bin/run`'s default: one file a message under var/mail/): the folder 0700 and each file
0600, created so — a reset or invitation link in a mail is an account, for whoever can read it."""

from __future__ import annotations

import os
from typing import Any

from django.core.mail.backends.filebased import EmailBackend as FileEmailBackend


class PrivateFileBackend(FileEmailBackend):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # makes the folder when it is missing
        os.chmod(self.file_path, 0o700)  # type: ignore[attr-defined]  # set by the file backend (no stubs)

    def open(self) -> bool:
        if self.stream is None:
            descriptor = os.open(self._get_filename(), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
            self.stream = os.fdopen(descriptor, "ab")
            return True
        return False
