"""Datasets: what importing a large dataset costs, and what using it costs a job.

With one file of NIGHTSHIFT_BENCH_DATASET_GB (default 2) GiB, in a throw-away database:

- import throughput: the portal's import of an upload (the file checked, packed into its
  canonical archive and hashed, as the import task does), against a raw disk copy of the
  same file in the same run (the floor: any import reads and writes every byte once);
- upload throughput: the same file sent with a real tus client (tuspy, 8 MiB chunks) to the
  portal over HTTP on 127.0.0.1, until the portal holds every byte;
- time to a job's first line, through the real launcher against the portal's real HTTP
  delivery (a live server on 127.0.0.1), for a job with no dataset (the floor), the first job
  on a workstation (cold: fetched, checked, unpacked into its cache), and the next job there
  (warm: the cached copy checked and linked);
- the same, cold and warm, in spool mode: HTCondor's starter running the job's dataset plugin
  (as the starter calls it: -infile, -outfile, the machine ad) and then the launcher;
- the same, cold and warm, through the workstation's cache keeper (the kit's daemon, which
  alone writes the cache: the launcher asks it over its socket and holds what it answers);
- bytes moved for N jobs (default 8) spread over 2 workstations (two caches), from the
  portal's own delivery records, against N copies for a per-job transfer.

Run with `make bench-datasets` (PostgreSQL must be up; HTCondor and Redis are not needed).
The last line reads `warm start overhead: X s; bytes moved for N jobs: B`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from portal_setup import setup_django

REPO = setup_django(fake_bridge=True)

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.files.uploadedfile import UploadedFile  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.testcases import LiveServerThread  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from condor_bridge.submit import DATA_PLUGIN  # noqa: E402
from jobs.runtime.nightshift_data import PLUGIN_NAME  # noqa: E402

GIB = 1024**3
SIZE_GB = float(os.environ.get("NIGHTSHIFT_BENCH_DATASET_GB", "2"))
JOBS = int(os.environ.get("NIGHTSHIFT_BENCH_DATASET_JOBS", "8"))
REPEATS = 3
SCRIPT = "print('first line')\n"


def make_file(path: Path, size: int) -> None:
    block = os.urandom(1 << 20)
    with open(path, "wb") as out:
        for index in range(size >> 20):
            out.write(hashlib.sha256(block + index.to_bytes(4, "big")).digest() * (1 << 15))


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def drop_page_cache() -> None:
    """So that both the copy and the import read from the disk, not memory, where allowed."""
    subprocess.run(["sync"], check=False)
    with contextlib.suppress(OSError):
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


KEEPERS: dict[Path, tuple[subprocess.Popen, str]] = {}


def keeper_for(cache: Path) -> str:
    """The socket of a cache keeper over `cache` (the kit's daemon, started once per cache;
    it stays root here, where the benchmark runs as root)."""
    if cache not in KEEPERS:
        sock = str(cache) + ".sock"
        arguments = ["--socket", sock, "--data-cache", str(cache), "--env-cache", f"{cache}-env"]
        process = subprocess.Popen(
            [sys.executable, str(REPO / "jobs/runtime/cache_keeper_daemon.py"), *arguments]
            + ["--user", "root", "--log", f"{cache}.log"]
        )
        KEEPERS[cache] = (process, sock)
        for _ in range(300):
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as probe:
                probe.connect(sock)
                break
            time.sleep(0.05)
    return KEEPERS[cache][1]


def through_the_keeper(job, cache: Path) -> float:
    """As a kit with a cache keeper runs it: the launcher asks the keeper for the dataset."""
    return launch(job, cache, keeper=keeper_for(cache))


def launch(job, cache: Path | None, keeper: str | None = None) -> float:
    """Seconds from starting the launcher to the script's first line."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NIGHTSHIFT_")}
    environment.update(PYTHONPATH=".nightshift", NIGHTSHIFT_JOB_ID=str(job.public_id))
    if cache is not None:
        environment["NIGHTSHIFT_DATA_CACHE"] = str(cache)
    if keeper is not None:
        environment["NIGHTSHIFT_CACHE_KEEPER"] = keeper
    started = time.perf_counter()
    command = [sys.executable, ".nightshift/launch.py", job.request["script_name"]]
    process = subprocess.Popen(
        command,
        cwd=job.directory,
        env=environment,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    line = process.stdout.readline()
    elapsed = time.perf_counter() - started
    _, errors = process.communicate(timeout=600)
    if line.strip() != "first line" or process.returncode:
        raise SystemExit(f"the job failed: {line!r} {errors}")
    return elapsed


def through_the_plugin(job, cache: Path) -> float:
    """Spool mode: seconds from HTCondor's starter running the job's dataset plugin (its
    multi-file protocol, as the starter calls it) to the script's first line."""
    sandbox = job.directory
    shutil.copy(sandbox / DATA_PLUGIN, sandbox / PLUGIN_NAME)
    ad = sandbox.parent / f"{sandbox.name}.machine.ad"
    ad.write_text(f'Name = "slot1@bench"\nNightshiftDataCache = "{cache}"\n')
    infile = sandbox / ".plugin.in"
    infile.write_text(
        "".join(
            f'[ Url = "{url}"; LocalFileName = "{sandbox / url[-64:]}" ]\n'
            for url in job.request["dataset_urls"]
        )
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith("NIGHTSHIFT_")}
    environment["_CONDOR_MACHINE_AD"] = str(ad)
    started = time.perf_counter()
    subprocess.run(
        [f"./{PLUGIN_NAME}", "-infile", str(infile), "-outfile", str(infile) + ".out"],
        cwd=sandbox,
        env=environment,
        check=True,
        timeout=600,
    )
    return time.perf_counter() - started + launch(job, cache)


def resumable_upload(user, source: Path, portal: str, attempt: int) -> float:
    """Seconds to send the file with a real tus client until the portal holds every byte
    (the import it becomes is not run: its cost is measured above)."""
    from tusclient import client as tus

    from accounts.services import token_create
    from datasets import services

    secret = token_create(user=user, name=f"bench {attempt}").secret
    uploader = tus.TusClient(
        f"{portal}/api/v1/dataset-uploads/", headers={"Authorization": f"Bearer {secret}"}
    ).uploader(
        str(source),
        chunk_size=8 * 2**20,
        metadata={"name": f"tus{attempt}", "filename": "blob.bin"},
    )
    queue = services.dataset_enqueue_import
    services.dataset_enqueue_import = lambda pk: None
    try:
        drop_page_cache()
        return timed(uploader.upload)
    finally:
        services.dataset_enqueue_import = queue


def main() -> None:
    from datasets import services
    from datasets.models import DatasetDelivery, DatasetImport
    from jobs.specs import JobSpec
    from jobs.submission import job_submit

    work = Path(tempfile.mkdtemp(prefix="nightshift-bench-datasets-", dir=REPO / "var"))
    settings.DATASETS_DIR = work / "datasets"
    settings.JOBS_DIR = work / "jobs"
    settings.JOB_DIR_UID = None
    settings.CELERY_TASK_ALWAYS_EAGER = True
    from portal.celery import app

    app.conf.task_always_eager = True
    size = int(SIZE_GB * GIB)
    source = work / "blob.bin"
    make_file(source, size)
    print(f"dataset: one file of {size / GIB:.2f} GiB; {JOBS} jobs; median of {REPEATS} runs")

    copies = []
    for attempt in range(REPEATS):
        drop_page_cache()
        copy = work / f"copy-{attempt}"
        copies.append(timed(lambda copy=copy: shutil.copyfile(source, copy)))
        copy.unlink()
    user = get_user_model().objects.create_user("bench", password="a-long-bench-password")
    imports = []
    for attempt in range(REPEATS):
        drop_page_cache()

        def run_import(attempt=attempt) -> None:
            with open(source, "rb") as stream:
                imported = services.dataset_import_from_upload(
                    user=user,
                    name=f"blob{attempt}",
                    visibility="private",
                    lab=None,
                    description="",
                    upload=UploadedFile(stream, name="blob.bin", size=size),
                )
            imported = DatasetImport.objects.get(pk=imported.pk)
            if imported.state != DatasetImport.State.DONE:
                raise SystemExit(f"the import failed: {imported.message}")

        imports.append(timed(run_import))
    copy_s, import_s = statistics.median(copies), statistics.median(imports)
    print(f"raw disk copy:       {copy_s:7.2f} s  {size / 1e6 / copy_s:8.0f} MB/s (the floor)")
    print(
        f"import of an upload: {import_s:7.2f} s  {size / 1e6 / import_s:8.0f} MB/s "
        f"({import_s / copy_s:.1f}x the copy: saved, checked, packed and hashed)"
    )

    server = LiveServerThread("127.0.0.1", lambda handler: handler, connections_override={})
    server.daemon = True
    server.start()
    server.is_ready.wait()
    settings.PORTAL_URL = f"http://127.0.0.1:{server.port}"
    tus_s = statistics.median(
        resumable_upload(user, source, settings.PORTAL_URL, attempt) for attempt in range(REPEATS)
    )
    print(
        f"resumable upload (tus, 8 MiB chunks, HTTP on 127.0.0.1): {tus_s:7.2f} s  "
        f"{size / 1e6 / tus_s:8.0f} MB/s ({tus_s / copy_s:.1f}x the copy)"
    )

    def job(datasets: list[str]):
        upload = UploadedFile(open(work / "train.py", "rb"), name="train.py")  # noqa: SIM115
        return job_submit(
            user=user,
            spec=JobSpec(name="bench", gpus=0, datasets=datasets),
            script=upload,
            check_pool=False,
        )

    (work / "train.py").write_text(SCRIPT)
    floor = statistics.median(launch(job([]), None) for _ in range(REPEATS))

    def cold_and_warm(start, name: str) -> tuple[float, float]:
        """Medians of a first job on an empty cache and of the next job there."""
        colds, warms = [], []
        for attempt in range(REPEATS):
            cache = work / f"cache-{name}-{attempt}"
            colds.append(start(job(["blob0"]), cache))
            warms.append(start(job(["blob0"]), cache))
            shutil.rmtree(cache, ignore_errors=True)
        return statistics.median(colds), statistics.median(warms)

    cold, warm = cold_and_warm(launch, "cold")
    print(f"job with no dataset: {floor:7.2f} s to its first line (the floor)")
    print(
        f"cold (first job on a workstation): {cold:7.2f} s ({size / 1e6 / (cold - floor):.0f} "
        "MB/s fetched, checked and unpacked)"
    )
    print(f"warm (next job there):             {warm:7.2f} s")
    plugin_cold, plugin_warm = cold_and_warm(through_the_plugin, "plugin")
    print(
        f"spool mode, through HTCondor's plugin: cold {plugin_cold:7.2f} s,"
        f" warm {plugin_warm:7.2f} s"
    )

    keeper_cold, keeper_warm = cold_and_warm(through_the_keeper, "keeper")
    for process, _ in KEEPERS.values():
        process.terminate()
    print(
        f"through the workstation's cache keeper: cold {keeper_cold:7.2f} s,"
        f" warm {keeper_warm:7.2f} s"
    )

    last = DatasetDelivery.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    caches = [work / "cache-ws-a", work / "cache-ws-b"]
    for index in range(JOBS):
        launch(job(["blob0"]), caches[index % 2])
    moved = sum(DatasetDelivery.objects.filter(pk__gt=last).values_list("size_bytes", flat=True))
    print(
        f"bytes moved for {JOBS} jobs on 2 workstations: {moved:,} ({moved / size:.2f} copies; "
        f"a transfer per job: {JOBS * size:,})"
    )
    server.terminate()
    shutil.rmtree(work, ignore_errors=True)
    print(f"warm start overhead: {warm - floor:.2f} s; bytes moved for {JOBS} jobs: {moved}")


if __name__ == "__main__":
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        main()
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
