"""The pool's observations become the jobs' states, timeline events and usage records."""

from __future__ import annotations

import functools
import json
import logging
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Protocol

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import audit_record
from condor_bridge import (
    BridgeError,
    FileMode,
    JobObservation,
    MatchSummary,
    made,
    summarize_matches,
)
from condor_bridge.explain import SUBCODE_NIGHTSHIFT_NO_PROGRESS
from plumbing import metrics
from plumbing.collector import KeptBetweenRuns, collector_paused
from plumbing.db import bulk_update_rows, copy_insert, in_threads, instances_of
from plumbing.tasks import enqueue

from .bridge import get_bridge
from .models import FINAL_STATES, Job, JobEvent, JobState, Workstation
from .schedulers import raise_unless_one_answered, schedds_answered, schedds_ask
from .second_copies import second_copies, second_copies_remove
from .selectors import job_output_files
from .specs import request_from_json
from .staging import uploads_clean_stale
from .submission import batch_submitters, job_enqueue_submit
from .sync_compare import (
    ActiveRows,
    Comparison,
    may_have_run,
    observed_changes,
    portal_state,
    sync_row,
)
from .timeline import Timelines, change_events, job_event_record, log_job_events

logger = logging.getLogger(__name__)


class RunLedger(Protocol):
    """What keeps a record of every run of every job (accounting's usage records). The sync
    hands it each observation it applies, in the same transaction as the job's new state,
    so that a crash halfway never counts a run twice or loses it."""

    def runs_outdated(self, observations: Mapping[int, JobObservation]) -> set[int]:
        """Of these jobs (by pk), those whose ads report a run the records do not hold."""
        ...

    def record_runs(self, pairs: list[tuple[Job, JobObservation]]) -> set[int]:
        """Bring the jobs' run records in line with their ads (the caller holds the jobs'
        row locks); the pks of the jobs whose records changed."""
        ...

    def evictions_without_progress(self, job: Job, limit: int) -> int:
        """How many of the job's latest ended runs in a row, up to `limit`, were evicted
        without saving any work."""
        ...


class _NoRunLedger:
    def runs_outdated(self, observations: Mapping[int, JobObservation]) -> set[int]:
        return set()

    def record_runs(self, pairs: list[tuple[Job, JobObservation]]) -> set[int]:
        return set()

    def evictions_without_progress(self, job: Job, limit: int) -> int:
        return 0


_run_ledger: RunLedger = _NoRunLedger()


def run_ledger_register(ledger: RunLedger) -> None:
    """Called from accounting's AppConfig.ready(): jobs does not import accounting."""
    global _run_ledger
    _run_ledger = ledger


def job_apply_observation(job_pk: int, observation: JobObservation) -> bool:
    """Bring one job (and its usage records) in line with what HTCondor reports.

    True when something changed.
    """
    return bool(jobs_apply_observations({job_pk: observation}))


# The changes their owners may be told of (notifications.tasks.job_changes, by name: the
# notifications app sits above jobs): a start, an end, a hold.
TOLD_STATES = {
    JobState.RUNNING: "started",
    JobState.COMPLETED: "ended",
    JobState.FAILED: "ended",
    JobState.REMOVED: "ended",
    JobState.HELD: "held",
}
# Jobs locked and written together: one transaction, and a few queries, per batch.
APPLY_BATCH = 1000
APPLY_THREADS = 2
# What applying an observation never reads of a job: its largest texts, left in the table.
UNREAD_FIELDS = ("submit_description", "source", "parameters", "last_error")
# What it reads: every other field, the request only for a batch where a job may have been
# evicted (whether it is a notebook session); a field not read loads if something asks.
READ_FIELDS = tuple(
    model_field.name
    for model_field in Job._meta.concrete_fields
    if model_field.name not in UNREAD_FIELDS and model_field.name != "request"
)


def jobs_apply_observations(
    observations: Mapping[int, JobObservation], *, as_read: Mapping[int, tuple] | None = None
) -> set[int]:
    """Bring jobs (and their usage records) in line with what HTCondor reports, keyed by
    job pk; returns the pks of those that changed.

    Each batch is one transaction under the jobs' row locks, so that overlapping syncs or a
    crash halfway never count a run twice or lose it. Rows, timeline events and usage
    records are written in bulk.

    `as_read`: each job's SYNC_FIELDS as the caller read them before asking HTCondor. A job
    whose row has changed since is left alone: whoever changed it may have asked HTCondor
    after this caller did, and an older answer written over a newer one would undo it (a
    run that ended shown running again). The next sync, asking afresh, brings it in line.
    """
    pks = sorted(observations)
    batches = [
        {pk: observations[pk] for pk in pks[start : start + APPLY_BATCH]}
        for start in range(0, len(pks), APPLY_BATCH)
    ]
    changed: set[int] = set()
    for found in in_threads(
        lambda batch: _apply_batch(batch, as_read), batches, threads=APPLY_THREADS
    ):
        changed |= found
    return changed


def _moved_on(job: Job, as_read: Mapping[int, tuple] | None) -> bool:
    return as_read is not None and sync_row(job) != as_read[job.pk]


def _apply_batch(
    observations: Mapping[int, JobObservation], as_read: Mapping[int, tuple] | None
) -> set[int]:
    with transaction.atomic():
        # FOR NO KEY UPDATE, not FOR UPDATE: a statement that inserts rows referencing many
        # jobs (usage samples, events) takes a key-share lock on each as its deferred
        # foreign-key checks run at commit, and FOR UPDATE would wait on those while they
        # wait on it (a deadlock CI saw). The sync never changes a job's key.
        evictions = any(seen.evicted for seen in observations.values())
        jobs = instances_of(
            Job.objects.select_for_update(no_key=True)
            .filter(pk__in=list(observations))
            .exclude(state__in=FINAL_STATES)
            .order_by("pk"),
            (*READ_FIELDS, "request") if evictions else READ_FIELDS,
        )
        jobs = [job for job in jobs if not _moved_on(job, as_read)]
        # A job that never started has no run to record (most of a waiting queue).
        runs_changed = _run_ledger.record_runs(
            [(job, observations[job.pk]) for job in jobs if may_have_run(job, observations[job.pk])]
        )
        timelines = Timelines.for_changes(
            (job.pk, state, observations[job.pk])
            for job in jobs
            if (state := portal_state(observations[job.pk])) != job.state
            or observations[job.pk].num_starts > job.num_starts
        )
        changed_jobs: list[Job] = []
        fields: set[str] = set()
        events: list[JobEvent] = []
        evicted: list[Job] = []
        tell: list[tuple[int, str]] = []
        for job in jobs:
            observation = observations[job.pk]
            changes = observed_changes(
                job, observation, cancel_requested=job.pk in timelines.cancel_requested
            )
            if not changes:
                continue
            previous_state = job.state
            for key, value in changes.items():
                setattr(job, key, value)
            changed_jobs.append(job)
            fields.update(changes)
            if "state" in changes or "num_starts" in changes and job.state == JobState.IDLE:
                new_events = change_events(job, previous_state, observation, timelines)
                events += new_events
                if new_events[-1].kind == "evicted":
                    evicted.append(job)
            if job.state in (JobState.COMPLETED, JobState.FAILED):
                transaction.on_commit(functools.partial(_enqueue_collect, job.pk))
            if "state" in changes and (told := TOLD_STATES.get(job.state)):
                tell.append((job.pk, told))
        if changed_jobs:
            bulk_update_rows(Job, changed_jobs, sorted(fields))
        if tell:
            transaction.on_commit(
                functools.partial(enqueue, "notifications.tasks.job_changes", tell)
            )
        copy_insert(JobEvent, events)
        log_job_events(events)
        for job in evicted:
            if "notebook" in job.live_services:
                _end_moved_session(job)
            else:
                _hold_without_progress(job)
    return set(runs_changed) | {job.pk for job in changed_jobs}


def _hold_without_progress(job: Job) -> None:
    """Hold a job evicted again and again without saving a checkpoint, instead of letting it
    start from zero for ever. Only where the portal sees the job's folder (shared mode): in
    spool mode its checkpoints are invisible here, and HTCondor's NIGHTSHIFT_MAX_STARTS
    guard applies alone."""
    limit = settings.MAX_EVICTIONS_WITHOUT_PROGRESS
    if not limit or get_bridge(job.schedd).mode is not FileMode.SHARED:
        return
    streak = _run_ledger.evictions_without_progress(job, limit)
    if streak < limit:
        return
    reason = f"Nightshift held it: evicted {streak} times in a row without saving a checkpoint."
    try:
        get_bridge(job.schedd).act(
            "hold",
            job.cluster_id,
            job.proc_id,
            reason=reason,
            reason_code=SUBCODE_NIGHTSHIFT_NO_PROGRESS,
        )
    except BridgeError as exc:
        logger.warning("could not hold job %s after %s evictions: %s", job.pk, streak, exc)
        return
    job_event_record(job, "hold requested", reason)
    audit_record(action="job.hold", actor=None, target=job, detail=reason)


def _end_moved_session(job: Job) -> None:
    """A notebook session whose workstation was reclaimed: HTCondor matches it nowhere else
    (its requirements), and the portal removes it, saying why. Its folder keeps the files
    saved until then (shared mode; in spool mode they stay on the workstation)."""
    where = job.workstation or "the workstation"
    detail = (
        f"The owner of {where} came back, so the session ended: a notebook session "
        "does not move to another workstation. The files you saved in the session "
        "folder until then are kept with the job's outputs; start a new session to go "
        "on."
    )
    try:
        get_bridge(job.schedd).act("remove", job.cluster_id, job.proc_id, reason=detail[:200])
    except BridgeError as exc:
        logger.warning("could not end the moved session %s: %s", job.pk, exc)
        return
    job_event_record(job, "session ended", detail)
    audit_record(action="job.session_end", actor=None, target=job, detail="owner came back")


def _enqueue_collect(job_pk: int) -> None:
    enqueue("jobs.tasks.collect_outputs", job_pk)


# A cycle's phases, in the order they run; SyncReport.phases and /metrics time each.
SYNC_PHASES = (
    "read",  # the portal's rows of its active jobs
    "ask",  # the schedds' queues (and histories), asked in parallel, as observations
    "compare",  # the observations against the rows in memory; second copies removed
    "apply",  # the changed jobs' rows, events and usage records written
    "housekeeping",  # stranded jobs, why jobs wait, stale submissions, old uploads
)


@dataclass
class SyncReport:
    active: int = 0
    changed: int = 0
    finished: int = 0
    resubmitted: int = 0
    second_copies_removed: int = 0
    seconds: float = 0.0
    # Seconds spent in each of SYNC_PHASES: where a slow cycle's time went.
    phases: dict[str, float] = field(default_factory=dict)

    def phase_done(self, phase: str) -> None:
        """The phase that ends now began where the previous one ended."""
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._phase_started
        self._phase_started = now

    def __post_init__(self) -> None:
        self._phase_started = time.perf_counter()


def jobs_sync() -> SyncReport:
    """One sync cycle: one queue query, one history call, and only changed rows written."""
    started = time.perf_counter()
    try:
        with collector_paused():
            report = _sync_cycle()
    except Exception:
        metrics.sync_done(seconds=time.perf_counter() - started, ok=False)
        raise
    report.seconds = time.perf_counter() - started
    metrics.sync_done(seconds=report.seconds, ok=True, phases=report.phases)
    return report


_active_rows = ActiveRows()
_comparison = Comparison()
# The rows and observations above outlive each cycle: kept out of the cycle collector's walks,
# with one full collection every 200 cycles (ten minutes at the default interval).
_kept_between_cycles = KeptBetweenRuns(full_every=200)


def _sync_cycle() -> SyncReport:
    report = SyncReport()
    active = _active_rows.read()
    report.active = len(active)
    report.phase_done("read")
    if active:
        observations, report.finished, copies = _observe_every_schedd(active)
        report.phase_done("ask")
        report.second_copies_removed = second_copies_remove(copies)
        # Compared in memory first: an unchanged job costs no lock and no write.
        outdated, unchanged, started = _comparison.split(active, observations)
        for pk in _run_ledger.runs_outdated(started):
            outdated[pk] = unchanged[pk]
        report.phase_done("compare")
        if outdated:
            as_read = {job.pk: job for job in active}
            report.changed = len(jobs_apply_observations(outdated, as_read=as_read))
        report.phase_done("apply")
        report.resubmitted += _withdraw_stranded(active, observations)
    _explain_unmatched_jobs(get_bridge())
    report.resubmitted += _resubmit_stale_jobs()
    uploads_clean_stale()
    _kept_between_cycles.run_done()
    report.phase_done("housekeeping")
    return report


def _observe_every_schedd(active: list) -> tuple[dict[str, JobObservation], int, list]:
    """What each schedd with active jobs says of them: one queue query and at most one
    history call per schedd, the schedds asked in parallel. A schedd that does not answer
    leaves its own jobs as they were (and their pages say so); only when none answers does
    the cycle fail. Each job is observed only through the copy its row records; the second
    copies found in the queues come last (second_copies)."""
    by_schedd: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    for job in active:
        by_schedd[job.schedd][job.public_id] = (job.cluster_id, job.proc_id)
    answers, failures = schedds_ask(by_schedd, lambda name: _observe_schedd(name, by_schedd[name]))
    schedds_answered(answers, {name: str(exc) for name, exc in failures.items()})
    raise_unless_one_answered(failures, answers)
    observations: dict[str, JobObservation] = {}
    for found, _, _ in answers.values():
        observations.update(found)
    copies = second_copies(
        (name, ad) for name, (_, _, unexpected) in answers.items() for ad in unexpected
    )
    from_history = sum(count for _, count, _ in answers.values())
    return observations, from_history, copies


def _observe_schedd(
    name: str, recorded: Mapping[str, tuple[int, int]]
) -> tuple[dict[str, JobObservation], int, list[JobObservation]]:
    """The observations of the jobs recorded on this schedd, how many came from its
    history, and the queue's other ads (most of them expected, see second_copies)."""
    bridge = get_bridge(name)
    observations, unexpected = {}, []
    for ad in bridge.active_jobs():
        if recorded.get(ad.job_id) == (ad.cluster_id, ad.proc_id):
            observations[ad.job_id] = ad
        else:
            unexpected.append(ad)
    missing = [job_id for job_id in recorded if job_id not in observations]
    if missing:
        # A late cluster's runs that its schedd has not made yet are not in its history
        # either: asking for them there would read the whole history at every cycle.
        making = bridge.clusters_making()
        missing = [job_id for job_id in missing if made(recorded[job_id], making)]
    finished = {}
    if missing:
        finished = {
            ad.job_id: ad
            for ad in bridge.finished_jobs(missing)
            if recorded.get(ad.job_id) == (ad.cluster_id, ad.proc_id)
        }
        observations.update(finished)
    return observations, len(finished), unexpected


SEEN_REFRESH_S = 60


def pool_record_seen(machines) -> int:
    """Remember the workstations the pool reports (at most once a minute each)."""
    now = timezone.now()
    fresh = set(
        Workstation.objects.filter(
            last_seen_at__gte=now - timedelta(seconds=SEEN_REFRESH_S)
        ).values_list("name", flat=True)
    )
    rows = [
        Workstation(
            name=m.name,
            last_seen_at=now,
            total_gpus=m.total_gpus,
            gpu_name=m.gpu.name if m.gpu else "",
            gpu_memory_mb=m.gpu.memory_mb if m.gpu else 0,
            gpu_capability=m.gpu.capability if m.gpu else 0,
            total_cpus=m.total_cpus,
            total_memory_mb=m.total_memory_mb,
        )
        for m in machines
        if m.name not in fresh
    ]
    if rows:
        Workstation.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["name"],
            update_fields=[
                "last_seen_at",
                "total_gpus",
                "gpu_name",
                "gpu_memory_mb",
                "gpu_capability",
                "total_cpus",
                "total_memory_mb",
            ],
        )
    return len(rows)


# Said on the page of an idle job that a free workstation could run, after more than
# POOL_STALL_AFTER_S of that: the negotiator is not matching (stopped, or unable to talk
# to the schedd). Fixed text, so that the metric can count the jobs that show it.
POOL_STALLED_REASON = (
    "The pool is not matching jobs to workstations: one that could run this job has been "
    "free for several scheduling cycles, yet the job waits. The administrators have been told."
)


# Since when each idle job has had a free matching workstation at every sync: {pk: time}.
FREE_MATCH_SINCE_KEY = "jobs:free-match-since"


def _explain_unmatched_jobs(bridge) -> None:
    """Tell each idle job why it waits. Jobs asking for the same thing (a sweep's runs) share
    one explanation, and jobs are updated one statement per distinct explanation. A job
    that waits while a workstation that fits it stays free means the pool is not matching."""
    machines = bridge.pool_machines()
    pool_record_seen(machines)
    idle = Job.objects.filter(state=JobState.IDLE).values_list(
        "pk", "public_id", "output_dir", "request", "match_problem", "wait_reason"
    )
    now = time.time()
    free_since: dict[str, float] = cache.get(FREE_MATCH_SINCE_KEY) or {}
    still_free: dict[str, float] = {}
    summaries: dict[str, MatchSummary] = {}
    to_update: dict[tuple[str, str], list[int]] = defaultdict(list)
    for pk, public_id, output_dir, request, match_problem, wait_reason in idle:
        key = json.dumps(request, sort_keys=True)
        if key not in summaries:
            job_request = request_from_json(request, job_id=str(public_id), job_dir=output_dir)
            summaries[key] = summarize_matches(job_request, machines)
        summary = summaries[key]
        explained = (summary.reason, summary.busy_reason)
        if summary.machines_free_now:
            since = still_free[str(pk)] = free_since.get(str(pk), now)
            if now - since >= settings.POOL_STALL_AFTER_S:
                explained = ("", POOL_STALLED_REASON)
        if explained != (match_problem, wait_reason):
            to_update[explained].append(pk)
    cache.set(FREE_MATCH_SINCE_KEY, still_free, timeout=None)
    for (reason, busy_reason), pks in to_update.items():
        # Only jobs still idle: one that started meanwhile must not show a stale reason. A
        # plain UPDATE would lock rows in the table's physical order while an overlapping
        # sync holds its batch in pk order (a deadlock); rows another sync holds are skipped
        # instead, and explained at the next cycle.
        with transaction.atomic():
            free = list(
                Job.objects.select_for_update(skip_locked=True, no_key=True)
                .filter(pk__in=pks, state=JobState.IDLE)
                .order_by("pk")
                .values_list("pk", flat=True)
            )
            Job.objects.filter(pk__in=free).update(match_problem=reason, wait_reason=busy_reason)
        if busy_reason == POOL_STALLED_REASON:
            logger.error(
                "the pool is not matching: %d more idle jobs have had a free matching "
                "workstation for over %d s (manage.py condor_doctor)",
                len(pks),
                settings.POOL_STALL_AFTER_S,
            )


STRANDED_DETAIL = "Its input files never reached the scheduler; Nightshift sends it again."


def _withdraw_stranded(active: list, observations: Mapping[str, JobObservation]) -> int:
    """A spooled job still awaiting its input long after its submission was recorded (the
    schedd lost the files: seen when it was stopped as they arrived) would wait for good: its
    cluster is withdrawn, and its jobs queued again, to be sent as lost submissions are."""
    cutoff = timezone.now() - timedelta(seconds=settings.RESUBMIT_AFTER_S)
    waiting = {
        job_id: seen.cluster_id
        for job_id, seen in observations.items()
        if seen.awaiting_input and (seen.entered_state_at or cutoff) < cutoff
    }
    if not waiting:
        return 0
    stranded = {(job.schedd, waiting[job.public_id]) for job in active if job.public_id in waiting}
    for schedd, cluster_id in sorted(stranded):
        try:
            get_bridge(schedd).withdraw(cluster_id)
        except BridgeError as exc:
            logger.warning("could not withdraw cluster %s from %s: %s", cluster_id, schedd, exc)
            continue
        with transaction.atomic():
            jobs = (
                Job.objects.select_for_update(no_key=True)
                .filter(schedd=schedd, cluster_id=cluster_id)
                .exclude(state__in=FINAL_STATES)
            )
            for job in jobs:
                job.cluster_id = job.proc_id = job.submitted_at = job.submit_requested_at = None
                job.state, job.status_detail = JobState.QUEUED, STRANDED_DETAIL
                job.save(
                    update_fields=[
                        "cluster_id",
                        "proc_id",
                        "submitted_at",
                        "state",
                        "submit_requested_at",
                        "status_detail",
                    ]
                )
                job_event_record(job, "resent", STRANDED_DETAIL)
    return len(stranded)


def _resubmit_stale_jobs() -> int:
    """The database is the source of truth: a queued job whose task was lost is sent again.

    A job counts as lost when no submission task has touched it for RESUBMIT_AFTER_S: a
    task retrying against a scheduler that is down touches it at every attempt, so those
    are left alone instead of being sent again on every sync tick. Jobs that another app
    submits as a batch (a sweep's runs) are that app's to send again, whole.
    """
    now = timezone.now()
    cutoff = now - timedelta(seconds=settings.RESUBMIT_AFTER_S)
    silent = Q(submit_requested_at__lt=cutoff) | Q(
        submit_requested_at__isnull=True, created_at__lt=cutoff
    )
    submitters = batch_submitters()
    with transaction.atomic():
        lost = Job.objects.select_for_update(skip_locked=True, of=("self",), no_key=True).filter(
            silent, state=JobState.QUEUED, cluster_id__isnull=True
        )
        for submitter in submitters:
            lost = lost.exclude(submitter.owns())
        stale = list(lost.values_list("pk", flat=True)[:500])
        Job.objects.filter(pk__in=stale).update(submit_requested_at=now)
    for job_pk in stale:
        job_enqueue_submit(job_pk)
    return len(stale) + sum(submitter.resend_silent(silent, now) for submitter in submitters)


def job_collect_outputs(job_pk: int) -> Job:
    """Bring outputs home (spool mode) and mark them ready to download."""
    with transaction.atomic():
        job = Job.objects.select_for_update(no_key=True).get(pk=job_pk)
        if job.outputs_ready or not job.is_submitted:
            return job
        get_bridge(job.schedd).retrieve(job.cluster_id, job.proc_id)
        job.outputs_collected_at = timezone.now()
        job.save(update_fields=["outputs_collected_at"])
        count = len(job_output_files(job))
        job_event_record(job, "outputs", f"{count} output file{'s' if count != 1 else ''} ready")
    return job
