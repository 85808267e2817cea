"""Sweeps: many runs of one job with different parameters, submitted as one cluster.

A sweep is accepted whole or refused whole: every run is checked as a single job would be,
and the quota for all of them together, before anything is written. Its runs are then
written (experiments.preparation): in the request for a small sweep, by the worker for a
large one. They are ordinary jobs (the sync, the job pages and the API treat them as such);
only their submission differs: one HTCondor cluster with itemdata, exactly once, instead of
one per job.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from accounting.services import quota_hold
from audit.services import audit_record
from condor_bridge import BridgeError, FileMode, InvalidJobRequest
from condor_bridge.submit import description_text
from jobs.models import FINAL_STATES, Job, JobEvent, JobOutcome, JobState
from jobs.services import (
    BatchSubmitter,
    JobActionError,
    JobSpec,
    check_may_submit,
    content_hashes,
    get_bridge,
    install_helper,
    job_request_of,
    job_validate_request,
    quota_lock,
    schedd_choose,
    stage_files,
)
from plumbing import metrics
from plumbing.collector import collector_paused
from plumbing.db import (
    bulk_update_rows,
    copy_insert,
    copy_update,
    instances_of,
)
from plumbing.tasks import enqueue

from .models import Sweep
from .plans import SweepPlan, check_placeholders, run_spec
from .preparation import (
    Preparation,
    drop_unwritten,
    run_folder,
    sweep_fill_folders,
    sweep_prepare,
)
from .run_folders import staged_tree
from .runs import check_runs, check_sweep_quota, log_sweep_events, run_entry_arguments

event_log = logging.getLogger("nightshift.jobs")


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
    """Accept a sweep: check every run and the quota for all of them, stage the shared files
    once, record the sweep with the quota held for its runs, and have its runs written
    (experiments.preparation): here for a small sweep, by the worker for a large one, which
    then submits it to HTCondor as one cluster."""
    check_may_submit(user, script=script, copy_from=copy_from)
    job_validate_request(user=user, spec=spec)
    runs = plan.runs(limit=settings.MAX_SWEEP_RUNS)
    check_placeholders(spec, set(runs[0]))
    run_specs = [run_spec(spec, index, values) for index, values in enumerate(runs)]
    lab, remove_after_s = check_runs(user, spec, run_specs, check_pool=check_pool)
    sweep = Sweep(
        owner=user,
        lab=lab,
        name=spec.name.strip(),
        kind=plan.kind,
        definition=plan.definition,
        planned_runs=len(runs),
    )
    first = run_folder(sweep.public_id, 0)
    first.mkdir(parents=True)
    try:
        staged = stage_files(
            first,
            spec=run_specs[0],
            script=script,
            copy_from=copy_from,
            requirements=requirements,
            user=user,
        )
        for run in run_specs:
            run_entry_arguments(run, staged)
        tree, hashes = staged_tree(first), content_hashes(first, staged)
        install_helper(first, software=staged.software, datasets=staged.datasets)
        # One cluster, so one schedd for every run.
        schedd = schedd_choose(lab=lab)
        sweep.preparation = Preparation(
            spec=spec,
            staged=staged,
            hashes=hashes,
            tree=tree,
            runs=runs,
            remove_after_s=remove_after_s,
            schedd=schedd,
            # A large sweep's folders would delay its submit by seconds (docs/benchmarks.md);
            # a small one's cost less than the page's answer.
            folders_later=len(runs) > settings.SWEEP_RUNS_IN_REQUEST
            and get_bridge(schedd).mode is FileMode.SHARED,
        ).to_json()
        with transaction.atomic():
            # Checked again with the quota locked: a racing submission may have used it.
            quota_lock(user, lab)
            check_sweep_quota(user, lab, spec, len(runs))
            sweep.quota_hold = quota_hold(
                user=user,
                lab=lab,
                gpus=spec.gpus,
                runtime_s=spec.max_runtime_s or remove_after_s,
                runs=len(runs),
            )
            sweep.save()
            audit_record(
                action="sweep.submit",
                actor=user,
                target=sweep,
                detail=f"{len(runs)} runs ({sweep.kind}); {staged.origin}; "
                f"lab {lab.name if lab else 'none'}",
            )
    except BaseException:
        shutil.rmtree(first, ignore_errors=True)
        raise
    if len(runs) > settings.SWEEP_RUNS_IN_REQUEST:
        transaction.on_commit(lambda: sweep_enqueue_submit(sweep.pk))
        return sweep
    sweep = sweep_prepare(sweep.pk)
    if not sweep.is_preparing:
        transaction.on_commit(lambda: sweep_enqueue_submit(sweep.pk))
    return sweep


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
    """Send again, whole, each sweep with runs waiting (or runs still to write, or folders
    still to fill) whose submission task was lost."""
    with transaction.atomic():
        waiting = Job.objects.filter(sweep=OuterRef("pk"), state=JobState.QUEUED)
        unwritten = Q(planned_runs__gt=F("prepared_runs"))
        unfilled = Q(cluster_id__isnull=False, prepared_runs__gt=F("ready_runs"))
        stale = list(
            Sweep.objects.select_for_update(skip_locked=True)
            .filter(silent, (Q(cluster_id__isnull=True) & (Exists(waiting) | unwritten)) | unfilled)
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
    """Hand a sweep's runs to HTCondor as one cluster, exactly once, then fill the folders
    of those submitted with empty ones (experiments.preparation). Transient failures
    re-raise for retry.

    As for single jobs, the attempt is committed before the schedd is contacted: a first
    attempt skips the lookup, and a later one finds the cluster by the sweep's id and
    adopts it, since the schedd creates a cluster whole or not at all.
    """
    if sweep_prepare(sweep_pk).is_preparing:
        # Another process is writing its runs, and submits them once it has.
        return Sweep.objects.get(pk=sweep_pk)
    sweep = submit_cluster(sweep_pk)
    if sweep.is_submitted and sweep.is_filling_folders:
        sweep = sweep_fill_folders(sweep_pk)
    return sweep


def submit_cluster(sweep_pk: int) -> Sweep:
    """The written runs of a sweep not yet in HTCondor, submitted as its one cluster; they
    wait in its queue while their folders are empty (ready_runs short of prepared_runs)."""
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
                folders_ready=not sweep.is_filling_folders,
                # A run waiting for its folder may as well wait to be made: the schedd
                # takes the cluster in a tenth of the time, and makes its jobs after.
                materialize_at_most=(
                    min(len(jobs), settings.SWEEP_MATERIALIZE_AT_ONCE)
                    if sweep.is_filling_folders
                    else None
                ),
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
        # Runs not written yet never will be (a worker writing them stops at its next chunk).
        unwritten = drop_unwritten(sweep)
        runs = list(
            sweep.runs.select_for_update(no_key=True).exclude(state__in=FINAL_STATES).order_by("pk")
        )
        if not runs and not unwritten:
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
            detail=f"{len(runs)} runs ({len(submitted)} in HTCondor)"
            + (f"; {unwritten} runs not yet written dropped" if unwritten else ""),
        )
    return len(runs) + unwritten


# -- evaluation matrices: systems by datasets ------------------------------------------------
