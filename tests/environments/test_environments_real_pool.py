"""On the personal pool: a job's requirements are locked once on the portal, installed once
per workstation into the kit's shared cache and reused; four jobs starting together build
once; a build killed halfway (the cache keeper killed with it) is cleaned up; each
workstation keeps its own cache; a hostile job can change nothing in it that another
student's job then runs; a bad requirement is explained before any job runs, and an
environment for another Python when the job starts. Real uv, real packages from the
index."""

import json
import os
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from environments.models import EnvironmentVersion
from environments.services import environment_create
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.helpers import POOL_ROOT, OwnerAtDesk, owners_present, wait_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(600)]

WORKSTATIONS = ("ws-ampere", "ws-volta", "ws-fermi", "ws-office")
SCRIPT = "import tomli_w, six\nprint('first line', tomli_w.dumps({'six': six.__version__}))\n"


@pytest.fixture
def web(client, live_pipeline):
    user = get_user_model().objects.create_user("ada", password="a-long-test-password")
    client.force_login(user)
    return client


def only_on(desks: OwnerAtDesk, workstation: str) -> None:
    """Every other workstation's owner is at their desk, so jobs start on this one only."""
    desks.leaves(workstation)
    for other in WORKSTATIONS:
        if other != workstation:
            desks.returns_to(other)
    others = set(WORKSTATIONS) - {workstation}
    wait_for(lambda: owners_present() == others, timeout=60, what=f"only {workstation} free")


def cache(workstation: str) -> Path:
    return POOL_ROOT / "var/lib/condor" / f"env-cache-{workstation}"


def empty_cache(workstation: str) -> None:
    for part in ("envs", "locks", "uv"):
        shutil.rmtree(cache(workstation) / part, ignore_errors=True)


def submit(web, requirements: bytes, script: str = SCRIPT, **fields) -> Job:
    data = {
        "name": "env job",
        "gpus": 0,
        "cpus": 1,
        "memory_gb": 0.25,
        "arguments": "",
        "script": script_upload(script),
        "requirements": SimpleUploadedFile("requirements.txt", requirements),
        **fields,
    }
    response = web.post(reverse("jobs:new"), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    return Job.objects.latest("created_at")


def finished(job: Job) -> tuple[str, str]:
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED, JobState.HELD}, timeout=300)
    stdout = (job.directory / "stdout.txt").read_text()
    log = (job.directory / ".nightshift" / "install.log").read_text()
    assert job.state == JobState.COMPLETED, (job.status_detail, stdout, log)
    return stdout, log


def test_the_same_requirements_install_once_per_workstation_and_are_reused(web, desks):
    requirements = b"tomli-w==1.2.0\nsix==1.17.0\n"
    for workstation in ("ws-volta", "ws-fermi"):
        empty_cache(workstation)
    only_on(desks, "ws-volta")
    first = submit(web, requirements)
    stdout, log = finished(first)
    assert "first line six = " in stdout
    assert "@ws-volta@" in log and "building environment requirements-" in log
    assert "+ tomli-w==1.2.0" in log and "+ six==1.17.0" in log

    second = submit(web, requirements)
    stdout, log = finished(second)
    reference = first.source["environment"]["reference"]
    # The portal reused the private version (the same lock), the workstation its install.
    assert second.source["environment"]["reference"] == reference
    assert f"reusing environment {reference}" in log and "from this workstation's cache" in log
    assert "uv pip sync" not in log and "Installed" not in log
    assert "first line six = " in stdout

    # Another workstation has its own cache: it builds there once, and volta's is untouched.
    volta_environments = sorted(os.listdir(cache("ws-volta") / "envs"))
    only_on(desks, "ws-fermi")
    third = submit(web, requirements)
    stdout, log = finished(third)
    assert "@ws-fermi@" in log and f"building environment {reference}" in log
    assert "/env-cache-ws-fermi/" in log
    assert sorted(os.listdir(cache("ws-volta") / "envs")) == volta_environments


def test_four_jobs_starting_together_on_one_workstation_build_once(web, desks):
    requirements = b"tomli-w==1.1.0\n"
    empty_cache("ws-volta")
    only_on(desks, "ws-volta")  # four CPUs: all four run there at once
    jobs = [
        submit(web, requirements, script="import tomli_w, time\ntime.sleep(2)\nprint('ok')\n")
        for _ in range(4)
    ]
    logs = [finished(job)[1] for job in jobs]
    assert all("@ws-volta@" in log for log in logs)
    # The builder's own line: a job that found the build under way says "another job is
    # building environment ..." and then reuses it.
    assert sum("cache, once for every later job" in log for log in logs) == 1
    assert sum("reusing environment" in log for log in logs) == 3
    assert len(os.listdir(cache("ws-volta") / "envs")) == 1


def uv_installing_into(workstation: str) -> int | None:
    """The process id of a uv installing into the workstation's cache in this test run's
    pool, if one runs now. The other pool (make test's other lane) has workstations of the
    same names, whose caches have the same paths inside its own root: a notebook there once
    had its build killed by this test instead."""
    target = f"/var/lib/condor/env-cache-{workstation}/envs/".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
                if b"sync" not in command or not any(target in part for part in command):
                    continue
                if Path(os.readlink(entry / "root")) == POOL_ROOT.resolve():
                    return int(entry.name)
            except OSError:
                continue
    return None


def keeper_answers(workstation: str) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(POOL_ROOT / "var/lib/condor" / f"keeper-{workstation}.sock"))
        except OSError:
            return False
    return True


def test_a_build_killed_halfway_is_cleaned_up_by_the_next_job(web, desks):
    # Big enough (about 50 MB to fetch and unpack) to be caught installing.
    requirements = b"numpy==2.3.5\nscipy==1.16.3\n"
    empty_cache("ws-volta")
    only_on(desks, "ws-volta")
    doomed = submit(web, requirements, script="import numpy\nprint(numpy.__version__)\n")
    pid = wait_for(
        lambda: uv_installing_into("ws-volta"),
        timeout=240,
        interval=0.01,
        what="uv installing numpy into the cache",
    )
    # The workstation's cache keeper builds it, as its own account; killed with its uv
    # (a crash, a reboot), it leaves half an environment, and condor_master starts it again.
    keeper = int((Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[1])
    assert "cache_keeper_daemon" in (Path("/proc") / str(keeper) / "cmdline").read_text()
    for doomed_pid in (pid, keeper):
        os.kill(doomed_pid, signal.SIGKILL)
    # Its job, cut off from the keeper, installs into its own sandbox and still runs.
    stdout, log = finished(doomed)
    assert "the cache keeper" in log and "installing into the job's sandbox" in log
    [key] = os.listdir(cache("ws-volta") / "envs")
    assert not (cache("ws-volta") / "envs" / key / "COMPLETE").exists()
    wait_for(lambda: keeper_answers("ws-volta"), timeout=60, what="condor_master restarting it")

    after = submit(web, requirements, script="import numpy\nprint('numpy', numpy.__version__)\n")
    stdout, log = finished(after)
    assert f"removing an unfinished build of environment {key}" in log
    assert "numpy 2.3.5" in stdout
    assert (cache("ws-volta") / "envs" / key / "COMPLETE").is_file()


def test_a_requirement_that_does_not_exist_is_explained_before_any_job_runs(web):
    data = {
        "name": "typo",
        "gpus": 0,
        "cpus": 1,
        "memory_gb": 0.25,
        "arguments": "",
        "script": script_upload(SCRIPT),
        "requirements": SimpleUploadedFile("requirements.txt", b"nightshift-no-such-pkg\n"),
    }
    response = web.post(reverse("jobs:new"), data)
    assert response.status_code == 400
    body = response.content.decode()
    assert "No package called nightshift-no-such-pkg exists on the package index" in body
    assert not Job.objects.exists()


def test_an_environment_for_another_python_stops_the_job_with_the_reason(web):
    user = get_user_model().objects.get(username="ada")
    environment_create(
        user=user, name="old-python", requirements="tomli-w==1.2.0", python_version="3.11"
    )
    response = web.post(
        reverse("jobs:new"),
        {
            "name": "wrong python",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 0.25,
            "arguments": "",
            "script": script_upload(SCRIPT),
            "software_environment": "old-python@1",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.latest("created_at")
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED}, timeout=240)
    assert job.state == JobState.FAILED
    stderr = (job.directory / "stderr.txt").read_text()
    assert "was locked for Python 3.11, and this workstation's Python is 3.13" in stderr
    assert EnvironmentVersion.objects.get(environment__name="old-python").python_version == "3.11"


RESUMABLE = """
import json, os, time
import nightshift, tomli_w

state = os.path.join(nightshift.checkpoint_dir(), "state.json")
step = json.load(open(state))["step"] if os.path.exists(state) else 0
print("resumed at", step, flush=True)
while step < 40:
    step += 1
    time.sleep(0.5)
    nightshift.log(step=step, loss=1 / step)
    if nightshift.should_checkpoint():
        def save(folder):
            json.dump({"step": step}, open(os.path.join(folder, "state.json"), "w"))
        nightshift.checkpoint_and_exit(save)
print("finished", tomli_w.dumps({"steps": step}), flush=True)
"""


def test_an_evicted_job_resumes_on_another_workstation_with_the_same_environment(web, desks):
    only_on(desks, "ws-volta")
    job = submit(web, b"tomli-w==1.2.0\n", script=RESUMABLE)
    log_path = job.directory / ".nightshift" / "install.log"
    wait_for(
        lambda: log_path.exists() and "starting the script" in log_path.read_text(),
        timeout=240,
        what="the job to start on ws-volta",
    )
    time.sleep(3)  # a few steps of training
    only_on(desks, "ws-fermi")  # volta's owner is back; fermi is free
    stdout, log = finished(job)
    reference = job.source["environment"]["reference"]
    runs = [line for line in log.splitlines() if "job started on" in line]
    assert len(runs) >= 2 and "@ws-volta@" in runs[0] and "@ws-fermi@" in runs[-1], log
    # The same lock on both workstations: each installs (or reuses) the same environment.
    assert log.count(f"environment {reference}") >= 2
    assert "finished steps = 40" in stdout


TAMPER = r"""
import json, os, sys, sysconfig
import tomli_w

site = sysconfig.get_paths()["purelib"]
module = tomli_w.__file__
tried = {}


def attempt(name, action):
    try:
        action()
        tried[name] = "done"
    except OSError as exc:
        tried[name] = type(exc).__name__


def plant():
    with open(os.path.join(site, "sitecustomize.py"), "w") as planted:
        planted.write("print('PLANTED')\n")


def append():
    with open(module, "a") as changed:
        changed.write("\nprint('CHANGED')\n")


def lock_forever():
    open(os.path.join(os.path.dirname(os.path.dirname(sys.prefix)), "locks", "any.lock"))


attempt("sitecustomize", plant)
attempt("change a module", append)
attempt("chmod a module", lambda: os.chmod(module, 0o666))
attempt("touch a module", lambda: os.utime(module, (0, 0)))
attempt("remove a module", lambda: os.remove(module))
attempt("rename the environment", lambda: os.rename(sys.prefix, sys.prefix + "-gone"))
attempt("list the cache's environments", lambda: os.listdir(os.path.dirname(sys.prefix)))
attempt("open the cache's locks", lock_forever)
print(json.dumps({"prefix": sys.prefix, "tried": tried}))
"""


def test_a_hostile_job_cannot_change_the_cached_environment_another_students_job_runs(
    web, desks, client
):
    requirements = b"tomli-w==1.2.0\n"
    empty_cache("ws-volta")
    only_on(desks, "ws-volta")
    mallory = get_user_model().objects.create_user("mallory", password="a-long-test-password")
    client.force_login(mallory)
    stdout, log = finished(submit(client, requirements, script=TAMPER))
    seen = json.loads(stdout.strip().splitlines()[-1])
    assert seen["prefix"].startswith("/var/lib/condor/env-cache-ws-volta/envs/"), seen
    # The keeper's account owns the cache; the job's account may read it and nothing more.
    assert set(seen["tried"].values()) == {"PermissionError"}, seen["tried"]

    ada = get_user_model().objects.get(username="ada")
    client.force_login(ada)
    victim = "import tomli_w\nprint('first line', tomli_w.dumps({'ok': True}))\n"
    stdout, log = finished(submit(client, requirements, script=victim))
    assert "reusing environment" in log, log
    assert "PLANTED" not in stdout and "CHANGED" not in stdout
    assert "first line" in stdout
