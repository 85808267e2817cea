"""A campus package mirror (NIGHTSHIFT_PACKAGE_INDEX_URL) is what locks resolve against and
what jobs install from; a container environment runs in HTCondor's container universe; a
failed test build is explained."""

import hashlib
import http.server
import os
import subprocess
import sys
import threading

import pytest

from condor_bridge.submit import build_submit_description
from condor_bridge.types import FileMode
from environments.builds import build_report, environment_test_build
from environments.locking import lock_resolve
from environments.models import Environment, EnvironmentVersion
from environments.requirements import requirements_check
from environments.services import environment_create
from jobs import specs, submission
from jobs.models import Job, JobState
from jobs.staging import HELPER_FILES
from tests.projects import tiny_wheel


@pytest.fixture
def mirror(tmp_path):
    """A PEP 503 index on 127.0.0.1 that holds one package, tinypkg 0.1, and nothing else."""
    name, wheel = tiny_wheel()
    root = tmp_path / "mirror"
    (root / "simple" / "tinypkg").mkdir(parents=True)
    (root / "files").mkdir()
    (root / "files" / name).write_bytes(wheel)
    digest = hashlib.sha256(wheel).hexdigest()
    (root / "simple" / "tinypkg" / "index.html").write_text(
        f'<html><body><a href="/files/{name}#sha256={digest}">{name}</a></body></html>'
    )
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=root, **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    server.shutdown()


def test_locks_resolve_against_the_sites_mirror(settings, mirror):
    settings.PACKAGE_INDEX_URL = mirror
    lock = lock_resolve(requirements_check("tinypkg\n"), python_version="3.11")
    assert lock.packages == (("tinypkg", "0.1"),)  # found only on the mirror


def test_jobs_are_told_the_mirror_and_the_launcher_installs_from_it(settings, mirror, tmp_path):
    settings.PACKAGE_INDEX_URL = mirror
    lock = lock_resolve(requirements_check("tinypkg\n"), python_version="3.11").text
    stored = specs.request_fields(
        specs.JobSpec(name="x"),
        script_name="t.py",
        user=type("U", (), {"get_username": lambda s: "ada", "pk": 1})(),
    )
    assert [specs.INDEX_VARIABLE, mirror] in stored["environment"]
    folder = tmp_path / "job"
    (folder / ".nightshift").mkdir(parents=True)
    for module, name in HELPER_FILES:
        (folder / ".nightshift" / name).write_bytes(module.read_bytes())
    (folder / ".nightshift" / "requirements.lock").write_text(lock)
    (folder / "train.py").write_text("import tinypkg\nprint(tinypkg.GREETING)\n")
    done = subprocess.run(
        [sys.executable, ".nightshift/launch.py", "train.py"],
        cwd=folder,
        text=True,
        capture_output=True,
        timeout=120,
        env={
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "NIGHTSHIFT_ENV_CACHE": str(tmp_path / "cache"),
            "NIGHTSHIFT_UV": settings.ENVIRONMENT_UV,
            specs.INDEX_VARIABLE: mirror,
        },
    )
    assert done.returncode == 0, done.stderr + (folder / ".nightshift/install.log").read_text()
    assert "hello from tinypkg 0.1" in done.stdout


@pytest.mark.django_db
def test_a_container_environment_runs_in_the_container_universe(student, fake_bridge):
    environment = Environment.objects.create(name="torch-image", owner=student, kind="container")
    EnvironmentVersion.objects.create(
        environment=environment,
        number=1,
        python="/opt/conda/bin/python",
        container_image="docker://pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
    )
    spec = specs.JobSpec(name="x", software="torch-image@1")
    request = submission.job_validate_request(user=student, spec=spec)
    description = build_submit_description(request, mode=FileMode.SHARED)
    assert description["universe"] == "container"
    assert description["container_image"] == (
        "docker://pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
    )
    assert description["executable"] == "/opt/conda/bin/python"


@pytest.mark.django_db
def test_a_failed_test_build_is_explained_in_plain_words(student, fake_bridge):
    environment = environment_create(user=student, name="tomli", requirements="tomli-w==1.2.0\n")
    build = environment_test_build(user=student, version=environment.versions.get())
    job = build.job
    (job.directory / ".nightshift" / "install.log").write_text(
        "  × Failed to build `pyyaml==5.3`\n  error: command 'gcc' failed: No such file\n"
    )
    (job.directory / "stderr.txt").write_text(
        "nightshift: installing the environment failed (exit 1); see the install log\n"
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED)
    build.job.refresh_from_db()
    report = build_report(build)
    assert report.state == "failed"
    assert "pyyaml==5.3 has to be compiled from source" in report.explanation
    assert "Failed to build" in report.log_tail


@pytest.mark.django_db
def test_a_test_build_that_cannot_import_a_package_says_which(student, fake_bridge):
    environment = environment_create(user=student, name="tomli", requirements="tomli-w==1.2.0\n")
    build = environment_test_build(user=student, version=environment.versions.get())
    (build.job.directory / "stdout.txt").write_text(
        "import tomli_w (tomli-w 1.2.0): ImportError: libfoo.so\ntest build failed: tomli_w\n"
    )
    Job.objects.filter(pk=build.job.pk).update(state=JobState.FAILED)
    build.job.refresh_from_db()
    assert "importing tomli_w failed" in build_report(build).explanation
