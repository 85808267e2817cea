"""Test builds: a version installed on a workstation by a small HTCondor job, which then
imports every package in it, so that a broken environment shows before a real job fails.
Its log is the job's (shown live on the job page); a failure is explained in plain words."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction

from audit.services import audit_record
from jobs.models import FINAL_STATES, JobState
from jobs.selectors import open_job_file
from jobs.services import JobSpec, job_logs_for, job_submit

from .locking import explain_failure
from .models import EnvironmentBuild, EnvironmentVersion

CHECK_SCRIPT = '''"""Nightshift's test build: import every package the environment installed."""
import importlib
import importlib.metadata as metadata
import sys

print(f"Python {sys.version.split()[0]} at {sys.executable}", flush=True)
failed = []
for dist in sorted(metadata.distributions(), key=lambda d: d.metadata["Name"].lower()):
    modules = sorted({
        str(f).split("/")[0].removesuffix(".py") for f in (dist.files or [])
        if (str(f).endswith("/__init__.py") and str(f).count("/") == 1)
        or (str(f).endswith(".py") and "/" not in str(f))
    } - {"setup", "conftest", "__init__"})
    for module in modules:
        if module.startswith("_"):
            continue
        try:
            importlib.import_module(module)
            print(f"import {module} ({dist.metadata['Name']} {dist.version}): ok", flush=True)
        except Exception as exc:  # noqa: BLE001 - every failure is reported
            failed.append(module)
            print(f"import {module} ({dist.metadata['Name']} {dist.version}): "
                  f"{type(exc).__name__}: {exc}", flush=True)
print("test build " + ("failed: " + ", ".join(failed) if failed else "passed"), flush=True)
sys.exit(1 if failed else 0)
'''


def environment_test_build(*, user, version: EnvironmentVersion) -> EnvironmentBuild:
    """Submit the test build of `version` as the user's job."""
    spec = JobSpec(
        name=f"Test build of {version.reference}",
        gpus=0,
        cpus=1,
        memory_mb=2048,
        disk_mb=8192,
        max_runtime_s=3600,
        software=version.reference,
    )
    job = job_submit(
        user=user,
        spec=spec,
        script=SimpleUploadedFile("check_environment.py", CHECK_SCRIPT.encode()),
    )
    with transaction.atomic():
        build = EnvironmentBuild.objects.create(version=version, job=job, requested_by=user)
        audit_record(
            action="environment.build",
            actor=user,
            target=version.environment,
            detail=f"test build of {version.reference}: job {job.public_id}",
        )
    return build


@dataclass(frozen=True)
class BuildReport:
    state: str  # queued, running, passed, failed
    job_public_id: str
    explanation: str
    log_tail: str


def _tail(job, name: str, limit: int = 6000) -> str:
    stream = open_job_file(job.directory, job_logs_for(job)[name])
    if stream is None:
        return ""
    with stream:
        return stream.read()[-limit:].decode(errors="replace")


def build_report(build: EnvironmentBuild) -> BuildReport:
    job = build.job
    install, stdout, stderr = (_tail(job, name) for name in ("install", "stdout", "stderr"))
    if job.state not in FINAL_STATES and job.state != JobState.HELD:
        state = "running" if job.state == JobState.RUNNING else "queued"
        return BuildReport(state, str(job.public_id), "", install)
    if job.state == JobState.COMPLETED:
        return BuildReport("passed", str(job.public_id), "", install + stdout)
    python_version = build.version.python_version or "this"
    if "was locked for Python" in stderr:
        explanation = stderr.strip().splitlines()[-1].removeprefix("nightshift: ")
    elif "installing the environment failed" in stderr:
        explanation = explain_failure(install, python_version=python_version)
    elif "test build failed" in stdout:
        broken = stdout.rsplit("test build failed: ", 1)[1].strip()
        explanation = (
            f"The packages installed, but importing {broken} failed: see the "
            "lines starting with 'import' below for the error of each."
        )
    else:
        explanation = job.status_detail or job.hold_reason or "The test build did not finish."
    return BuildReport("failed", str(job.public_id), explanation, install + stdout + stderr)


def latest_build(version: EnvironmentVersion) -> EnvironmentBuild | None:
    return version.builds.select_related("job").order_by("-created_at").first()
