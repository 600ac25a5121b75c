"""The key that signs the dashboard's session cookie: KERNELWATCH_SECRET_KEY, or one generated per home.

Generated once and kept in the home directory (mode 0600), so that a restart, or a second web process over the
same home (gunicorn workers), signs and reads the same cookies; a key made afresh per process would log everyone
out on every restart and fail half the requests behind several workers.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

FILE_NAME = "secret_key"


def home_secret_key(home: Path) -> str:
    """The key stored in ``home``, written now if there is none yet; the first of racing processes wins."""
    path = home / FILE_NAME
    if path.exists():
        return path.read_text().strip()
    home.mkdir(parents=True, exist_ok=True)
    # Written whole under a private name, then linked into place: link fails when the name exists, so a process
    # that loses the race reads the winner's complete key, never a half-written file.
    tmp = home / f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(48) + "\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text().strip()
