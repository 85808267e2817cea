"""Sweeps: many runs of one job with different parameters, submitted as one cluster.

A sweep is accepted whole or refused whole: every run is checked as a single job would be,
and the quota for all of them together, before anything is written. Its runs are ordinary
jobs (the sync, the job pages and the API treat them as such); only their submission
differs: one HTCondor cluster with itemdata, exactly once, instead of one per job.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from audit.services import audit_record
from condor_bridge import BridgeError, InvalidJobRequest
from condor_bridge.submit import description_text
from jobs.admission import QuotaExceeded, quota_check, quota_lock
from jobs.bridge import get_bridge
from jobs.models import FINAL_STATES, Job, JobEvent, JobOutcome, JobState
from jobs.schedulers import schedd_choose
from jobs.specs import (
    PARAMETERS_VARIABLE,
    JobActionError,
    JobSpec,
    JobSubmissionError,
    QuotaRefusal,
    job_request_of,
    new_seed,
    parse_entry_command,
    request_fields,
)
from jobs.staging import (
    content_hashes,
    install_helper,
    stage_files,
)
from jobs.submission import (
    BatchSubmitter,
    check_may_submit,
    job_validate_request,
    job_validate_runs,
    lab_for_submission,
    request_match_summary,
)
from plumbing import metrics
from plumbing.collector import collector_paused
from plumbing.db import (
    bulk_update_rows,
    copy_insert,
    copy_update,
    instances_of,
    new_instances,
)
from plumbing.tasks import enqueue

from .models import Sweep
from .plans import SweepPlan, check_placeholders, run_spec
from .run_folders import FOLDER_CHUNK, FOLDER_THREADS, copy_run_folders, staged_tree

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


@collector_paused()
def sweep_submit(
    *,
    user,
    spec: JobSpec,
    plan: SweepPlan,
    script=None,
    copy_from: Job | None = None,
    requirements=None,
    check_pool: bool = True,
) -> Sweep:
    """Accept a sweep: check every run and the quota for all of them, store the runs' files,
    record them, and queue the sweep's submission to HTCondor as one cluster."""
    check_may_submit(user, script=script, copy_from=copy_from)
    job_validate_request(user=user, spec=spec)
    runs = plan.runs(limit=settings.MAX_SWEEP_RUNS)
    check_placeholders(spec, set(runs[0]))
    run_specs = [run_spec(spec, index, values) for index, values in enumerate(runs)]
    lab, remove_after_s = check_runs(user, spec, run_specs, check_pool=check_pool)
    sweep = Sweep(
        owner=user, lab=lab, name=spec.name.strip(), kind=plan.kind, definition=plan.definition
    )
    # One cluster, so one schedd for every run.
    schedd = schedd_choose(lab=lab)
    jobs = new_instances(
        Job,
        (
            {"name": run.name.strip(), "sweep_index": index, "parameters": runs[index]}
            for index, run in enumerate(run_specs)
        ),
        owner=user,
        lab=lab,
        gpus=spec.gpus,
        schedd=schedd,
    )
    made: list[Path] = []
    try:
        first = new_folder(jobs[0], made)
        staged = stage_files(
            first,
            spec=run_specs[0],
            script=script,
            copy_from=copy_from,
            requirements=requirements,
            user=user,
        )
        tree, hashes = staged_tree(first), content_hashes(first, staged)
        install_helper(first, software=staged.software, datasets=staged.datasets)
        others = [new_folder(job, made, create=False) for job in jobs[1:]]
        # The other runs' folders are copies of the first, made by threads while the runs
        # are filled in and their rows written (file system calls let them run beside that
        # work and the database's), and finished before those rows commit.
        with ThreadPoolExecutor(max_workers=FOLDER_THREADS) as folders:
            copies = [
                folders.submit(copy_run_folders, first, others[n : n + FOLDER_CHUNK], tree)
                for n in range(0, len(others), FOLDER_CHUNK)
            ]
            try:
                for job, run in zip(jobs, run_specs, strict=True):
                    fill_run(
                        job, run, staged, hashes, user=user, lab=lab, remove_after_s=remove_after_s
                    )
                record_sweep(
                    user,
                    lab,
                    spec,
                    sweep,
                    jobs,
                    origin=staged.origin,
                    before_commit=lambda: [copy.result() for copy in copies],
                )
            except BaseException:
                folders.shutdown(cancel_futures=True)
                raise
    except BaseException:
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    return sweep


def check_runs(user, spec: JobSpec, run_specs: list[JobSpec], *, check_pool: bool):
    """Every run checked as a job would be, the quota for all of them, and the pool.
    Returns the lab charged and the runtime limit its quota sets."""
    requests = job_validate_runs(user=user, specs=run_specs)
    lab = lab_for_submission(user=user, lab_id=spec.lab_id)
    remove_after_s = check_sweep_quota(user, lab, spec, len(run_specs))
    if check_pool:
        summary = request_match_summary(requests[0])
        if summary is not None and not summary.can_ever_run:
            raise JobSubmissionError(
                summary.blocking_field or "gpus",
                f"{summary.reason} Change the request so that a workstation can run it.",
            )
    return lab, remove_after_s


def new_folder(job: Job, made: list[Path], *, create: bool = True) -> Path:
    """The run's own folder, noted so that a refused sweep leaves none behind."""
    job.output_dir = str(settings.JOBS_DIR / str(job.public_id))
    if create:
        job.directory.mkdir(parents=True, exist_ok=False)
    made.append(job.directory)
    return job.directory


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
    entry_arguments = staged.entry_arguments
    if run.entry_command:
        script_name, entry_arguments = parse_entry_command(run.entry_command)
        if script_name != staged.script_name:
            raise JobSubmissionError(
                "entry_command",
                "Parameters may change the arguments of the entry "
                "command, not the script it starts.",
            )
    environment = {**run.environment, PARAMETERS_VARIABLE: json.dumps(job.parameters)}
    job.source = {**staged.source, "sha256": hashes}
    if "entry_command" in staged.source:
        job.source["entry_command"] = run.entry_command
    inputs = list(staged.input_files)
    if extra_inputs:
        inputs = [*(inputs or [staged.script_name]), *extra_inputs]
    job.request = request_fields(
        dataclasses.replace(
            run, arguments=[*entry_arguments, *run.arguments], environment=environment
        ),
        script_name=staged.script_name,
        user=user,
        input_files=inputs,
        install_requirements=staged.install_requirements,
        lab=lab,
        remove_after_s=remove_after_s,
        seed=new_seed(),
        software=staged.software,
        datasets=staged.datasets,
    )
    try:
        job_request_of(job)
    except InvalidJobRequest as exc:
        raise JobSubmissionError(exc.field, exc.message) from exc


def record_sweep(
    user,
    lab,
    spec: JobSpec,
    sweep: Sweep,
    jobs: list[Job],
    *,
    origin: str,
    before_commit: Callable[[], object] = lambda: None,
):
    """The sweep and its runs, written in one transaction with the quota locked, and its
    submission queued once that commits. `before_commit` runs last in the transaction:
    what it raises rolls the sweep back."""
    with transaction.atomic():
        # Checked again with the quota locked: a racing submission may have used it.
        quota_lock(user, lab)
        check_sweep_quota(user, lab, spec, len(jobs))
        sweep.save()
        for job in jobs:
            job.sweep = sweep
        copy_insert(Job, jobs)
        detail = f"{origin}; run {{}} of sweep “{sweep.name}”"
        events = [
            JobEvent(
                job=job,
                kind="created",
                state=job.state,
                actor=user,
                detail=detail.format(job.sweep_index),
            )
            for job in jobs
        ]
        copy_insert(JobEvent, events)
        log_sweep_events(sweep, events)
        audit_record(
            action="sweep.submit",
            actor=user,
            target=sweep,
            detail=f"{len(jobs)} runs ({sweep.kind}); {origin}; lab {lab.name if lab else 'none'}",
        )
        before_commit()
        sweep_pk = sweep.pk
        transaction.on_commit(lambda: sweep_enqueue_submit(sweep_pk))


def sweep_enqueue_submit(sweep_pk: int) -> None:
    enqueue("jobs.tasks.submit_sweep", sweep_pk)


def sweeps_resend_silent(silent: Q, now: datetime) -> int:
    """Send again, whole, each sweep with runs waiting whose submission task was lost."""
    with transaction.atomic():
        waiting = Job.objects.filter(sweep=OuterRef("pk"), state=JobState.QUEUED)
        stale = list(
            Sweep.objects.select_for_update(skip_locked=True)
            .filter(silent, Exists(waiting), cluster_id__isnull=True)
            .exclude(kind=Sweep.Kind.STUDY)
            .values_list("pk", flat=True)[:100]
        )
        Sweep.objects.filter(pk__in=stale).update(submit_requested_at=now)
    for sweep_pk in stale:
        sweep_enqueue_submit(sweep_pk)
    return len(stale)


# A sweep's runs are submitted together, as one cluster; a study's trials one by one, as jobs.
SWEEP_SUBMITTER = BatchSubmitter(
    owns=lambda: Q(sweep__isnull=False) & ~Q(sweep__kind=Sweep.Kind.STUDY),
    resend_silent=sweeps_resend_silent,
)


def sweep_schedd(sweep: Sweep) -> str:
    """The schedd of a sweep's cluster: its runs' (all the same one)."""
    return sweep.runs.order_by("pk").values_list("schedd", flat=True).first() or ""


# What submitting a sweep's runs reads of each, and what failing them writes.
SUBMIT_FIELDS = (
    "pk",
    "public_id",
    "output_dir",
    "request",
    "sweep_id",
    "sweep_index",
    "state",
    "cluster_id",
    "proc_id",
    "status_detail",
    "last_error",
)


@collector_paused()
def sweep_submit_to_pool(sweep_pk: int) -> Sweep:
    """Hand a sweep's runs to HTCondor as one cluster, exactly once. Transient failures
    re-raise for retry.

    As for single jobs, the attempt is committed before the schedd is contacted: a first
    attempt skips the lookup, and a later one finds the cluster by the sweep's id and
    adopts it, since the schedd creates a cluster whole or not at all.
    """
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep_pk)
        if sweep.is_submitted or sweep.is_study:  # a study's trials go one by one
            return sweep
        sweep.submit_attempts += 1
        sweep.submit_requested_at = timezone.now()
        sweep.save(update_fields=["submit_attempts", "submit_requested_at"])
        first_attempt = sweep.submit_attempts == 1

    bridge = get_bridge(sweep_schedd(sweep))
    transient_error = None
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep_pk)
        if sweep.is_submitted:
            return sweep
        # Locked in pk order, as the sync locks jobs, so that the two never deadlock.
        jobs = sorted(
            instances_of(
                sweep.runs.select_for_update(no_key=True)
                .filter(cluster_id__isnull=True)
                .exclude(state__in=FINAL_STATES)
                .order_by("pk"),
                SUBMIT_FIELDS,
            ),
            key=lambda job: job.sweep_index,
        )
        if not jobs:
            return sweep
        now = timezone.now()
        requests = [job_request_of(job) for job in jobs]
        try:
            # Each run's own description, as it would be submitted alone: what its
            # reproduction submits, and what the cluster's description is made of.
            descriptions = [bridge.description(request) for request in requests]
            results = bridge.submit_cluster(
                requests,
                sweep_id=str(sweep.public_id),
                check_existing=not first_attempt,
                descriptions=descriptions,
            )
        except BridgeError as exc:
            sweep.last_error = str(exc)
            sweep.save(update_fields=["last_error"])
            if exc.transient:
                metrics.submission_done(kind="sweep", outcome="retrying")
                for job in jobs:
                    job.last_error = str(exc)
                    job.status_detail = "The scheduler is not answering; Nightshift keeps trying."
                bulk_update_rows(Job, jobs, ["last_error", "status_detail"])
                transient_error = exc
            else:
                _fail_runs(jobs, "HTCondor refused the sweep.", str(exc), now)
                metrics.submission_done(kind="sweep", outcome="refused")
                return sweep
        except InvalidJobRequest as exc:
            _fail_runs(jobs, "The job request is invalid.", str(exc), now)
            metrics.submission_done(kind="sweep", outcome="invalid")
            return sweep
        else:
            for job, description, result in zip(jobs, descriptions, results, strict=True):
                job.cluster_id, job.proc_id = result.cluster_id, result.proc_id
                job.state, job.status_detail, job.submitted_at = JobState.IDLE, "", now
                job.submit_description = description_text(description)
            copy_update(
                Job,
                jobs,
                [
                    "cluster_id",
                    "proc_id",
                    "state",
                    "status_detail",
                    "submitted_at",
                    "submit_description",
                ],
            )
            how = "found already submitted" if results[0].adopted else "submitted"
            events = [
                JobEvent(
                    job=job,
                    kind="submitted",
                    state=job.state,
                    detail=f"HTCondor job {job.condor_id} ({how} with its sweep)",
                )
                for job in jobs
            ]
            copy_insert(JobEvent, events)
            log_sweep_events(sweep, events)
            sweep.cluster_id, sweep.submitted_at = results[0].cluster_id, now
            sweep.save(update_fields=["cluster_id", "submitted_at"])
            metrics.submission_done(
                kind="sweep", outcome="submitted", waited_s=(now - sweep.created_at).total_seconds()
            )
    if transient_error is not None:
        raise transient_error
    return sweep


def _fail_runs(jobs: list[Job], detail: str, error: str, now) -> None:
    for job in jobs:
        job.state, job.finished_at, job.outcome = JobState.FAILED, now, JobOutcome.FAILED
        job.status_detail, job.last_error = detail, error
    bulk_update_rows(Job, jobs, ["state", "finished_at", "outcome", "status_detail", "last_error"])
    log_sweep_events(
        jobs[0].sweep,
        JobEvent.objects.bulk_create(
            [JobEvent(job=job, kind="rejected", state=job.state, detail=error) for job in jobs]
        ),
    )


def sweep_cancel(*, sweep: Sweep, user) -> int:
    """Cancel every run of a sweep that has not ended: those in HTCondor with one removal of
    the sweep's cluster, those not yet there at once. Returns how many runs it cancelled."""
    if sweep.owner_id != user.pk and not user.is_staff:
        raise JobActionError("Only the sweep's owner can cancel it; a lab lead can only read it.")
    with transaction.atomic():
        sweep = Sweep.objects.select_for_update().get(pk=sweep.pk)
        runs = list(
            sweep.runs.select_for_update(no_key=True).exclude(state__in=FINAL_STATES).order_by("pk")
        )
        if not runs:
            raise JobActionError("Every run of this sweep has already ended.")
        submitted = [run for run in runs if run.is_submitted]
        waiting = [run for run in runs if not run.is_submitted]
        who = user.get_username()
        # An earlier attempt may have reached the schedd without recording it: removing by
        # the sweep's id also takes such a cluster away.
        if submitted or sweep.submit_attempts:
            try:
                get_bridge(sweep_schedd(sweep)).remove_sweep(
                    str(sweep.public_id), reason=f"Cancelled by user {user.pk}"
                )
            except BridgeError as exc:
                raise JobActionError(f"HTCondor could not remove the sweep: {exc}") from exc
        now = timezone.now()
        for run in submitted:
            run.status_detail = "Cancelling…"
        for run in waiting:
            run.state, run.finished_at, run.outcome = JobState.REMOVED, now, JobOutcome.CANCELLED
            run.status_detail = f"Cancelled by {who} before it reached HTCondor."
        bulk_update_rows(Job, submitted, ["status_detail"])
        bulk_update_rows(Job, waiting, ["state", "finished_at", "outcome", "status_detail"])
        log_sweep_events(
            sweep,
            JobEvent.objects.bulk_create(
                [
                    JobEvent(
                        job=run,
                        kind="cancel requested",
                        state=run.state,
                        actor=user,
                        detail=f"Cancelled with its sweep by {who}",
                    )
                    for run in submitted
                ]
                + [
                    JobEvent(
                        job=run,
                        kind="cancelled",
                        state=run.state,
                        actor=user,
                        detail=run.status_detail,
                    )
                    for run in waiting
                ],
                batch_size=1000,
            ),
        )
        audit_record(
            action="sweep.cancel",
            actor=user,
            target=sweep,
            detail=f"{len(runs)} runs ({len(submitted)} in HTCondor)",
        )
    return len(runs)


# -- evaluation matrices: systems by datasets ------------------------------------------------
