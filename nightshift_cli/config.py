"""Where the CLI keeps the server's address and the token: a 0600 file, or the environment."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SERVER = "http://127.0.0.1:8000"


@dataclass(frozen=True)
class Settings:
    server: str
    token: str | None
    source: str  # where the token came from, to say so in errors


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "nightshift" / "config.json"


def _stored() -> dict:
    path = config_path()
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError):
        return {}
    except (OSError, ValueError) as exc:
        raise SystemExit(
            f"Error: cannot read {path}: {exc}. Run `nightshift login` again."
        ) from None
    return data if isinstance(data, dict) else {}


def load(server: str | None = None) -> Settings:
    """The server and token to use: a --server flag, then NIGHTSHIFT_URL/NIGHTSHIFT_TOKEN,
    then what `nightshift login` saved."""
    stored = _stored()
    chosen = server or os.environ.get("NIGHTSHIFT_URL") or stored.get("server") or DEFAULT_SERVER
    chosen = chosen.rstrip("/")
    if os.environ.get("NIGHTSHIFT_TOKEN"):
        return Settings(chosen, os.environ["NIGHTSHIFT_TOKEN"].strip(), "NIGHTSHIFT_TOKEN")
    token = stored.get("token") if stored.get("server", "").rstrip("/") == chosen else None
    return Settings(chosen, token, str(config_path()))


def save(server: str, token: str) -> Path:
    """Write the token readable by its owner only; the folder too."""
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump({"server": server.rstrip("/"), "token": token}, out)
    os.chmod(temporary, 0o600)  # an older file may have been created with wider rights
    os.replace(temporary, path)
    return path


def forget() -> bool:
    try:
        config_path().unlink()
    except FileNotFoundError:
        return False
    return True
