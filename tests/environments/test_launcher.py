"""The launcher on a workstation: a locked environment is built once into the shared cache,
reused by later jobs, built once for jobs that start together, never taken from a killed
build, and installed into the sandbox where there is no cache. Real uv, real packages from
the index (a small one), real processes; only HTCondor is left out."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from environments.locking import lock_resolve
from environments.requirements import requirements_check
from jobs.staging import HELPER_FILES

SCRIPT = "import tomli_w, sys\nprint('first line', tomli_w.dumps({'ok': True}).strip())\n"
PYTHON_VERSION = "{}.{}".format(*sys.version_info[:2])


@pytest.fixture(scope="module")
def lock_text():
    requirements = requirements_check("tomli-w==1.2.0\n")
    return lock_resolve(requirements, python_version=PYTHON_VERSION).text


def sandbox(
    root: Path, name: str, lock: str, *, python_version=PYTHON_VERSION, script=SCRIPT
) -> Path:
    folder = root / name
    helper = folder / ".nightshift"
    helper.mkdir(parents=True)
    for module, name in HELPER_FILES:
        shutil.copy(module, helper / name)
    (helper / "requirements.lock").write_text(lock)
    (helper / "environment.json").write_text(
        json.dumps({"reference": "tomli@1", "python_version": python_version})
    )
    (folder / "train.py").write_text(script)
    return folder


def launch(folder: Path, cache: Path | None, *, uv=None, wait=True, **extra):
    environment = {
        "PATH": os.environ["PATH"],
        "HOME": str(folder),
        "PYTHONPATH": ".nightshift",
        "NIGHTSHIFT_UV": str(uv or settings.ENVIRONMENT_UV),
        **extra,
    }
    if cache is not None:
        environment["NIGHTSHIFT_ENV_CACHE"] = str(cache)
    for name in ("SSL_CERT_FILE", "HTTPS_PROXY", "https_proxy"):
        if name in os.environ:
            environment[name] = os.environ[name]
    process = subprocess.Popen(
        [sys.executable, ".nightshift/launch.py", "train.py"],
        cwd=folder,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if not wait:
        return process
    out, err = process.communicate(timeout=240)
    return process.returncode, out, err, (folder / ".nightshift" / "install.log").read_text()


def environments_in(cache: Path) -> list[str]:
    return sorted(p.name for p in (cache / "envs").iterdir())


def test_the_first_job_builds_the_environment_and_the_second_reuses_it(tmp_path, lock_text):
    cache = tmp_path / "cache"
    code, out, err, log = launch(sandbox(tmp_path, "one", lock_text), cache)
    assert code == 0, err + log
    assert "first line ok = true" in out
    assert "building environment tomli@1" in log
    [key] = environments_in(cache)
    assert (cache / "envs" / key / "COMPLETE").is_file()

    code, out, err, log = launch(sandbox(tmp_path, "two", lock_text), cache)
    assert code == 0, err + log
    assert "first line ok = true" in out
    assert f"reusing environment tomli@1 (key {key}) from this workstation's cache" in log
    assert "building" not in log and "uv pip sync" not in log
    # Nothing of the environment is in the job's own folder, which travels back.
    assert not (tmp_path / "two" / ".nightshift-venv").exists()


def test_four_jobs_starting_together_build_the_environment_once(tmp_path, lock_text):
    cache = tmp_path / "cache"
    folders = [sandbox(tmp_path, f"job{n}", lock_text) for n in range(4)]
    processes = [launch(folder, cache, wait=False) for folder in folders]
    for process in processes:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err
    logs = [(f / ".nightshift" / "install.log").read_text() for f in folders]
    # The builder's own line: one that found the build under way says "another job is
    # building environment ..." and then reuses it.
    assert sum("cache, once for every later job" in log for log in logs) == 1
    assert sum("reusing environment" in log for log in logs) == 3
    assert len(environments_in(cache)) == 1


def test_a_killed_build_is_never_taken_for_complete_and_is_cleaned_up(tmp_path, lock_text):
    cache = tmp_path / "cache"
    # A uv that makes the folder, then hangs in the install: the build is killed there.
    slow_uv = tmp_path / "slow-uv"
    slow_uv.write_text(
        '#!/bin/sh\nif [ "$1" = venv ]; then mkdir -p "$5/bin"; '
        'echo half > "$5/half-installed"; exit 0; fi\nsleep 120\n'
    )
    slow_uv.chmod(0o755)
    process = launch(sandbox(tmp_path, "killed", lock_text), cache, uv=slow_uv, wait=False)
    deadline = time.monotonic() + 30
    while not list((cache / "envs").glob("*/half-installed")) and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGKILL)  # an eviction's SIGKILL takes the whole tree
    process.wait()
    [key] = environments_in(cache)
    assert not (cache / "envs" / key / "COMPLETE").exists()

    code, out, err, log = launch(sandbox(tmp_path, "next", lock_text), cache)
    assert code == 0, err + log
    assert f"removing an unfinished build of environment {key}" in log
    assert "first line ok = true" in out
    assert not (cache / "envs" / key / "half-installed").exists()
    assert (cache / "envs" / key / "COMPLETE").is_file()


def test_an_index_that_has_not_caught_up_with_the_lock_is_asked_again_afresh(tmp_path, lock_text):
    # The real uv behind a wrapper whose first sync answers as uv does when the index does
    # not list a version the lock pins yet (seen in CI, two days after that release).
    uv = tmp_path / "lagging-uv"
    asked = tmp_path / "asked-once"
    uv.write_text(
        "#!/bin/sh\n"
        f'if [ "$2" = sync ] && [ ! -e "{asked}" ]; then touch "{asked}"; '
        "echo 'error: No solution found when resolving dependencies' >&2; exit 1; fi\n"
        f'exec "{settings.ENVIRONMENT_UV}" "$@"\n'
    )
    uv.chmod(0o755)
    code, out, err, log = launch(
        sandbox(tmp_path, "lagging", lock_text),
        tmp_path / "cache",
        uv=uv,
        NIGHTSHIFT_INSTALL_RETRY_S="0",
    )
    assert code == 0, err + log
    assert "first line ok = true" in out
    assert "No solution found" in log
    assert "trying once more in 0 s, with fresh index pages" in log
    assert "requirements.lock --refresh" in log


def test_without_the_kits_cache_the_job_installs_into_its_sandbox_and_says_why(tmp_path, lock_text):
    folder = sandbox(tmp_path, "plain", lock_text)
    code, out, err, log = launch(folder, None)
    assert code == 0, err + log
    assert "first line ok = true" in out
    assert "this workstation has no shared environment cache" in log
    assert (folder / ".nightshift-venv" / "bin" / "python").exists()


def test_a_cache_the_job_cannot_write_falls_back_to_the_sandbox(tmp_path, lock_text):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    code, out, err, log = launch(sandbox(tmp_path, "plain", lock_text), blocked)
    assert code == 0, err + log
    assert f"the shared environment cache {blocked} cannot be used" in log


def test_an_environment_for_another_python_stops_with_the_reason(tmp_path, lock_text):
    folder = sandbox(tmp_path, "old", lock_text, python_version="3.9")
    code, out, err, log = launch(folder, tmp_path / "cache")
    assert code == 3
    assert f"locked for Python 3.9, and this workstation's Python is {PYTHON_VERSION}" in err
    assert not (tmp_path / "cache" / "envs").exists() or not environments_in(tmp_path / "cache")


def test_past_the_size_cap_unused_environments_go_and_the_one_in_use_stays(tmp_path, lock_text):
    cache = tmp_path / "cache"
    assert launch(sandbox(tmp_path, "first", lock_text), cache)[0] == 0
    [old] = environments_in(cache)
    # Another lock (another environment), with a cap so small that only one fits.
    other = lock_text + "\n"
    code, _, err, log = launch(
        sandbox(tmp_path, "second", other), cache, NIGHTSHIFT_ENV_CACHE_GB="0.000001"
    )
    assert code == 0, err + log
    assert f"removed environment {old} from the cache" in log
    [kept] = environments_in(cache)
    assert kept != old


def test_an_environment_a_running_job_uses_is_never_removed_to_make_room(tmp_path, lock_text):
    cache = tmp_path / "cache"
    sleeper = SCRIPT + "import time\ntime.sleep(120)\n"
    running = launch(sandbox(tmp_path, "running", lock_text, script=sleeper), cache, wait=False)
    deadline = time.monotonic() + 120
    while not list((cache / "envs").glob("*/COMPLETE")) and time.monotonic() < deadline:
        time.sleep(0.2)
    [in_use] = environments_in(cache)
    code, _, err, log = launch(
        sandbox(tmp_path, "second", lock_text + "\n"), cache, NIGHTSHIFT_ENV_CACHE_GB="0.000001"
    )
    assert code == 0, err + log
    assert in_use in environments_in(cache)
    assert "removed environment" not in log
    running.kill()
    running.wait()
