import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(probe: Callable[[], T], *, timeout: float = 120, interval: float = 0.5,
             what: str = "condition") -> T:  # fmt: skip
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def make_job_dir(jobs_dir: Path, script: str, *, uid: int | None) -> tuple[str, Path]:
    """A job folder inside the pool-visible jobs directory, owned by the pool's account."""
    job_id = str(uuid.uuid4())
    directory = Path(jobs_dir) / f"contract-{job_id}"
    (directory / "outputs").mkdir(parents=True)
    (directory / "train.py").write_text(script)
    if uid is not None:
        for path in (directory, directory / "outputs"):
            os.chown(path, uid, -1)
    return job_id, directory
