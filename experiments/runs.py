"""A sweep's runs, as every kind of sweep makes them: each checked as a job would be, its
folder, its request from its own spec, and the log lines of their events."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from jobs.models import Job, JobEvent
from jobs.services import (
    PARAMETERS_VARIABLE,
    JobSpec,
    JobSubmissionError,
    QuotaExceeded,
    QuotaRefusal,
    check_pool_can_run,
    job_request_fill,
    job_validate_runs,
    lab_for_submission,
    new_seed,
    parse_entry_command,
    quota_check,
)

from .models import Sweep

event_log = logging.getLogger("nightshift.jobs")


def log_sweep_events(sweep: Sweep, events: Iterable[JobEvent]) -> None:
    """The same events for a sweep's runs, one line per kind with the sweep's id: a
    thousand runs make one line, not a thousand; each run's timeline has them all."""
    kinds = Counter(event.kind for event in events)
    for kind, count in kinds.items():
        event_log.info(
            "%s: %s run%s of sweep %s",
            kind,
            count,
            "s" if count != 1 else "",
            sweep.public_id,
            extra={"sweep_id": str(sweep.public_id)},
        )


def check_sweep_quota(user, lab, spec: JobSpec, runs: int) -> int | None:
    try:
        return quota_check(
            user=user, lab=lab, gpus=spec.gpus, max_runtime_s=spec.max_runtime_s, runs=runs
        )
    except QuotaExceeded as exc:
        raise QuotaRefusal(exc.field or "quota", exc.message) from None


def check_runs(user, spec: JobSpec, run_specs: list[JobSpec], *, check_pool: bool):
    """Every run checked as a job would be, the quota for all of them, and the pool.
    Returns the lab charged and the runtime limit its quota sets."""
    requests = job_validate_runs(user=user, specs=run_specs)
    lab = lab_for_submission(user=user, lab_id=spec.lab_id)
    remove_after_s = check_sweep_quota(user, lab, spec, len(run_specs))
    if check_pool:
        check_pool_can_run(requests[0])
    return lab, remove_after_s


def new_folder(job: Job, made: list[Path], *, create: bool = True) -> Path:
    """The run's own folder, noted so that a refused sweep leaves none behind."""
    job.output_dir = str(settings.JOBS_DIR / str(job.public_id))
    if create:
        job.directory.mkdir(parents=True, exist_ok=False)
    made.append(job.directory)
    return job.directory


def run_entry_arguments(run: JobSpec, staged) -> list[str]:
    """The arguments a run's entry command gives its script, which must be the staged one."""
    if not run.entry_command:
        return staged.entry_arguments
    script_name, entry_arguments = parse_entry_command(run.entry_command)
    if script_name != staged.script_name:
        raise JobSubmissionError(
            "entry_command",
            "Parameters may change the arguments of the entry command, not the script it starts.",
        )
    return entry_arguments


def fill_run(
    job: Job,
    run: JobSpec,
    staged,
    hashes: dict[str, str],
    *,
    user,
    lab,
    remove_after_s: int | None,
    extra_inputs: tuple[str, ...] = (),
) -> None:
    """The run's request and source, from its (substituted) spec and the staged files."""
    entry_arguments = run_entry_arguments(run, staged)
    environment = {**run.environment, PARAMETERS_VARIABLE: json.dumps(job.parameters)}
    job.source = {**staged.source, "sha256": hashes}
    if "entry_command" in staged.source:
        job.source["entry_command"] = run.entry_command
    inputs = list(staged.input_files)
    if extra_inputs:
        inputs = [*(inputs or [staged.script_name]), *extra_inputs]
    job_request_fill(
        job,
        dataclasses.replace(run, environment=environment),
        staged,
        entry_arguments=entry_arguments,
        input_files=inputs,
        user=user,
        lab=lab,
        remove_after_s=remove_after_s,
        seed=new_seed(),
    )
