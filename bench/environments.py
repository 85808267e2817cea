"""Software environments: what a job's packages cost before its first line, four ways.

On the personal pool, on one workstation (the others' owners are at their desks), with the
heavy scientific set below (about 400 MB installed), resolved once into a lock:

- no requirements: the launcher starts the script at once (the floor);
- per job, as before: pip installs the lock into the job's own sandbox (no shared cache);
- cold: the first job on a workstation builds the environment into its cache;
- warm: a later job with the same lock reuses it.

For each it prints the time from the launcher starting to the script's first line, the
bytes the job downloaded (counted by a CONNECT proxy the job's pip and uv go through), and
the disk the job added: its own folder, and the workstation's cache. The last line is
`warm start overhead: X s; downloaded: N bytes`: the warm job against the floor.

Run with `make bench-environments` (as root: it starts the pool and plays the owners).
`--quick` (one small package instead of the scientific set) is the mode make test runs; its
figures mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from portal_setup import setup_django

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--quick", action="store_true", help="one small package")
QUICK = parser.parse_args().quick

REPO = setup_django(fake_bridge=False)

from django.conf import settings  # noqa: E402

from condor_bridge import FileMode, JobRequest  # noqa: E402
from condor_bridge.schedd import HTCondorBridge  # noqa: E402
from environments.locking import lock_resolve  # noqa: E402
from environments.requirements import requirements_check  # noqa: E402
from jobs.staging import HELPER_FILES  # noqa: E402

PACKAGES = "six\n" if QUICK else "numpy\nscipy\npandas\nscikit-learn\nmatplotlib\n"
WORKSTATION = "ws-volta"
WORKSTATIONS = ("ws-ampere", "ws-volta", "ws-fermi", "ws-office")
JOBS_DIR = Path(os.environ.get("NIGHTSHIFT_JOBS_DIR", REPO / "var" / "jobs"))
TOKEN_DIR = os.environ.get("CONDOR_TOKEN_DIR", str(REPO / "var" / "condor-tokens"))
POOL_ROOT = Path(os.environ.get("NIGHTSHIFT_POOL_ROOT", "/var/lib/nightshift/pool-root"))
OWNER_DIR = POOL_ROOT / "var/lib/nightshift-owner"
CACHE = POOL_ROOT / "var/lib/condor" / f"env-cache-{WORKSTATION}"
UID = int(os.environ.get("NIGHTSHIFT_JOB_DIR_UID", "2000"))
FIRST_LINE = """import os, time
print(f"first line after {time.time() - float(os.environ['NIGHTSHIFT_LAUNCHED_AT']):.3f} s",
      flush=True)
"""
IMPORTS = (
    'import six\nprint("imported", six.__version__, flush=True)\n'
    if QUICK
    else "import numpy, scipy, pandas, sklearn, matplotlib\n"
    'print("imported", numpy.__version__, pandas.__version__, sklearn.__version__, flush=True)\n'
)
SCRIPT = FIRST_LINE + IMPORTS


class CountingProxy:
    """An HTTP CONNECT proxy that counts the bytes servers send through it."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.received = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._tunnel_quietly, args=(client,), daemon=True).start()

    def _tunnel_quietly(self, client: socket.socket) -> None:
        # A side that resets the connection ends it; the bytes counted so far stand.
        with contextlib.suppress(OSError):
            self._tunnel(client)

    def _tunnel(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            target = head.split()[1].decode()
            host, _, port = target.rpartition(":")
            try:
                server = socket.create_connection((host, int(port)), timeout=30)
            except OSError:
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
                return
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            with server:
                sockets = [client, server]
                while True:
                    readable, _, _ = select.select(sockets, [], [], 60)
                    if not readable:
                        return
                    for source in readable:
                        data = source.recv(65536)
                        if not data:
                            return
                        (server if source is client else client).sendall(data)
                        if source is server:
                            with self.lock:
                                self.received += len(data)


def disk_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    done = subprocess.run(
        ["du", "-s", "--block-size=1", str(path)], capture_output=True, text=True, check=True
    )
    return int(done.stdout.split()[0])


def only_on(workstation: str) -> None:
    OWNER_DIR.mkdir(parents=True, exist_ok=True)
    for other in WORKSTATIONS:
        if other != workstation:
            (OWNER_DIR / other).write_text("active\n")
    time.sleep(12)  # two periods of the owner probe


def job_folder(lock: str | None) -> tuple[str, Path]:
    job_id = str(uuid.uuid4())
    folder = JOBS_DIR / f"bench-environments-{job_id}"
    helper = folder / ".nightshift"
    helper.mkdir(parents=True)
    (folder / "outputs").mkdir()
    (folder / "train.py").write_text(SCRIPT)
    # The helper folder the portal stages into every job, from the portal's own list.
    for module, name in HELPER_FILES:
        shutil.copy(module, helper / name)
    if lock is not None:
        (helper / "requirements.lock").write_text(lock)
        (helper / "environment.json").write_text(
            json.dumps({"reference": "bench-scientific@1", "python_version": "3.13"})
        )
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, UID, -1)
    return job_id, folder


def run(
    bridge: HTCondorBridge,
    proxy: CountingProxy,
    name: str,
    lock: str | None,
    environment: dict[str, str],
) -> dict:
    job_id, folder = job_folder(lock)
    proxied = {
        "HTTPS_PROXY": f"http://127.0.0.1:{proxy.port}",
        "https_proxy": f"http://127.0.0.1:{proxy.port}",
        **environment,
    }
    request = JobRequest(
        job_id=job_id,
        job_dir=str(folder),
        script_name="train.py",
        install_requirements=True,
        memory_mb=1024,
        disk_mb=4096,
        environment=tuple(proxied.items()),
    )
    cache_before, received_before = disk_bytes(CACHE), proxy.received
    started = time.monotonic()
    result = bridge.submit(request, check_existing=False)
    while not bridge.finished_jobs([job_id]):
        if time.monotonic() - started > 1200:
            bridge.act("remove", result.cluster_id, result.proc_id, reason="bench timeout")
            raise SystemExit(f"{name}: did not finish within 20 minutes")
        time.sleep(1)
    stdout = (folder / "stdout.txt").read_text()
    if "imported" not in stdout:
        log = (folder / ".nightshift" / "install.log").read_text(errors="replace")[-3000:]
        raise SystemExit(f"{name} failed:\n{stdout}\n{(folder / 'stderr.txt').read_text()}\n{log}")
    first_line = float(stdout.split("first line after ")[1].split()[0])
    row = {
        "name": name,
        "first_line_s": first_line,
        "downloaded": proxy.received - received_before,
        "job_disk": disk_bytes(folder),
        "cache_growth": disk_bytes(CACHE) - cache_before,
        "wall_s": time.monotonic() - started,
    }
    shutil.rmtree(folder, ignore_errors=True)
    return row


def main() -> None:
    lock = lock_resolve(requirements_check(PACKAGES), python_version="3.13")
    print(
        f"packages: {PACKAGES.split()} -> {len(lock.packages)} locked: "
        + ", ".join(f"{n}=={v}" for n, v in lock.packages),
        flush=True,
    )
    bridge = HTCondorBridge(
        collector=settings.CONDOR_COLLECTOR,
        token_dir=TOKEN_DIR,
        mode=FileMode.SHARED,
        instance=f"bench-env-{uuid.uuid4().hex[:8]}",
    )
    proxy = CountingProxy()
    for part in ("envs", "locks", "uv"):
        shutil.rmtree(CACHE / part, ignore_errors=True)
    shutil.rmtree(POOL_ROOT / "home/portal/.cache", ignore_errors=True)  # pip's own cache
    rows = []
    try:
        only_on(WORKSTATION)
        rows.append(run_floor(bridge, proxy))
        variants = [
            ("per job (pip, sandbox)", {"NIGHTSHIFT_ENV_CACHE": "none", "NIGHTSHIFT_UV": "none"}),
            ("cold (first build)", {}),
            ("warm (reuse)", {}),
        ]
        for name, environment in variants:
            rows.append(run(bridge, proxy, name, lock.text, environment))
        for row in rows:
            print(
                f"  {row['name']}: first line after {row['first_line_s']:.2f} s "
                f"(job {row['wall_s']:.0f} s from submission)"
            )
    finally:
        for path in OWNER_DIR.glob("*"):
            path.unlink(missing_ok=True)
    print()
    print(
        f"{'variant':<24} {'to first line':>13} {'downloaded':>12} {'job disk':>10} "
        f"{'cache growth':>12}"
    )
    for row in rows:
        print(
            f"{row['name']:<24} {row['first_line_s']:>11.2f} s {row['downloaded'] / 1e6:>9.1f} MB"
            f" {row['job_disk'] / 1e6:>7.1f} MB {row['cache_growth'] / 1e6:>9.1f} MB"
        )
    floor, warm = rows[0], rows[-1]
    print(
        f"warm start overhead: {warm['first_line_s'] - floor['first_line_s']:.2f} s; "
        f"downloaded: {warm['downloaded']} bytes"
    )


def run_floor(bridge: HTCondorBridge, proxy: CountingProxy) -> dict:
    """The floor: the same launcher and first line, no packages (the imports are skipped)."""
    global SCRIPT
    full = SCRIPT
    SCRIPT = FIRST_LINE + 'print("imported nothing", flush=True)\n'
    try:
        return run(bridge, proxy, "no requirements", lock=None, environment={})
    finally:
        SCRIPT = full


if __name__ == "__main__":
    sys.exit(main())
