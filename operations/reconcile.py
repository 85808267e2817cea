"""Compare the portal with the schedd and repair what drifted apart.

The sync keeps the two together every few seconds; drift is what it cannot see: a job in
the pool that the portal does not know (a database restored from an older backup, a row
deleted by hand), a job that ended in the portal and still runs in the pool, a job the
pool has lost, or a submission whose reply never came back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from types import SimpleNamespace

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from audit.services import audit_record
from condor_bridge import BridgeError, JobObservation
from condor_bridge import JobState as CondorState
from experiments.models import Sweep
from experiments.services import sweep_enqueue_submit
from jobs.models import FINAL_STATES, Job, JobOutcome, JobState, is_public_id
from jobs.services import (
    SYNC_FIELDS,
    get_bridge,
    is_second_copy,
    job_enqueue_submit,
    job_event_record,
    jobs_apply_observations,
    observed_changes,
    portal_state,
    schedd_label,
    schedd_names,
    sync_row,
)

# How each kind of drift is repaired.
REPAIRS = {
    "unknown": "removed from the pool: the portal has no such job",
    "ended": "removed from the pool: the job had already ended in the portal",
    "unrecorded": "adopted: the pool has it, the portal missed the schedd's reply",
    "copy": "removed from the pool: a second copy of a job whose own copy is recorded",
    "stale": "updated from the pool",
    "lost": "marked failed: neither the queue nor the history knows it",
    "unsent": "sent to the pool again",
}
HISTORY_BATCH = 1000


@dataclass(frozen=True)
class Drift:
    kind: str  # a key of REPAIRS
    job_id: str
    condor_id: str  # "cluster.proc", or "" when the pool has none
    portal_state: str  # "" when the portal has no such job
    pool_state: str  # "" when the pool has none

    @property
    def repair(self) -> str:
        return REPAIRS[self.kind]


def reconcile(*, dry_run: bool, actor=None) -> list[Drift]:
    """Every drift found, repaired unless `dry_run`. Idempotent: a second run finds none.

    Schedd by schedd: each the portal sends jobs to, and each that holds its unfinished
    jobs. A schedd that does not answer fails the command, naming it: a job cannot be told
    lost while its schedd cannot be asked."""
    # The portal's submitted jobs are read before the queues, as the sync does: a job
    # submitted in between is then in a queue, never taken for lost.
    active = [
        SimpleNamespace(**row)
        for row in Job.objects.filter(cluster_id__isnull=False)
        .exclude(state__in=FINAL_STATES)
        .values(*SYNC_FIELDS)
    ]
    # A sync that writes a job between this read and the repair may have asked HTCondor
    # later than this command: such a job is left to the sync.
    as_read = {job.pk: sync_row(job) for job in active}
    drifts: list[Drift] = []
    in_a_queue: set[str] = set()
    repairs = []
    for name in sorted(set(schedd_names()) | {job.schedd for job in active}):
        found, queued, repair = _reconcile_schedd(
            name, [job for job in active if job.schedd == name]
        )
        drifts += found
        in_a_queue |= queued
        repairs.append(repair)

    cutoff = timezone.now() - timedelta(seconds=settings.RESUBMIT_AFTER_S)
    unsent = (
        Job.objects.filter(state=JobState.QUEUED, cluster_id__isnull=True, created_at__lt=cutoff)
        .exclude(public_id__in=[i for i in in_a_queue if is_public_id(i)])
        .values_list("pk", "public_id", "state")
    )
    resend = []
    for pk, public_id, state in unsent:
        drifts.append(Drift("unsent", str(public_id), "", state, ""))
        resend.append(pk)

    if not dry_run and drifts:
        for bridge, to_remove, to_adopt, outdated, lost in repairs:
            _repair(bridge, to_remove, to_adopt, outdated, lost, [], as_read)
        _repair(None, [], [], {}, [], resend, as_read)
        counts = {kind: sum(d.kind == kind for d in drifts) for kind in REPAIRS}
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
        audit_record(action="portal.reconcile", actor=actor, detail=summary)
    return drifts


def _reconcile_schedd(name: str, active: list):
    """One schedd's drifts, the ids in its queue, and what would repair them."""
    bridge = get_bridge(name)
    try:
        ads = bridge.active_jobs()
    except BridgeError as exc:
        raise BridgeError(f"{schedd_label(name)}: {exc}", transient=True) from exc
    known = {
        str(row["public_id"]): row
        for row in Job.objects.filter(
            public_id__in={ad.job_id for ad in ads if is_public_id(ad.job_id)}
        ).values("pk", "public_id", "state", "schedd", "cluster_id", "proc_id", "sweep_id")
    }
    drifts: list[Drift] = []
    to_remove: list[JobObservation] = []
    to_adopt: list[int] = []
    queue: list[JobObservation] = []
    for ad in ads:
        row = known.get(ad.job_id)
        recorded = None
        if row is not None and row["cluster_id"] is not None:
            recorded = (row["schedd"], row["cluster_id"], row["proc_id"])
        if recorded is None or recorded == (name, ad.cluster_id, ad.proc_id):
            queue.append(ad)
        elif is_second_copy(name, ad, recorded):
            # Sent twice (docs/faults.md): the sync removes such copies too.
            drifts.append(
                Drift(
                    "copy", ad.job_id, f"{ad.cluster_id}.{ad.proc_id}", row["state"], ad.state.value
                )
            )
            to_remove.append(ad)
    for observation in sorted(queue, key=lambda ad: (ad.job_id, ad.cluster_id, ad.proc_id)):
        job_id = observation.job_id
        row = known.get(job_id)
        condor_id = f"{observation.cluster_id}.{observation.proc_id}"
        pool_state = observation.state.value
        leaving = observation.state in (CondorState.REMOVED, CondorState.COMPLETED)
        if leaving and (row is None or row["state"] in FINAL_STATES):
            # Leaving the queue already, or a spooled job whose outputs wait to be fetched.
            continue
        if row is None:
            drifts.append(Drift("unknown", job_id, condor_id, "", pool_state))
            to_remove.append(observation)
        elif row["state"] in FINAL_STATES:
            drifts.append(Drift("ended", job_id, condor_id, row["state"], pool_state))
            to_remove.append(observation)
        elif row["cluster_id"] is None:
            drifts.append(Drift("unrecorded", job_id, condor_id, row["state"], pool_state))
            to_adopt.append(row["pk"])

    recorded_here = {str(job.public_id): (job.cluster_id, job.proc_id) for job in active}
    current = {
        ad.job_id: ad for ad in queue if recorded_here.get(ad.job_id) == (ad.cluster_id, ad.proc_id)
    }
    missing = [job_id for job_id in recorded_here if job_id not in current]
    history: dict[str, JobObservation] = {}
    for start in range(0, len(missing), HISTORY_BATCH):
        found = bridge.finished_jobs(missing[start : start + HISTORY_BATCH])
        history.update(
            {o.job_id: o for o in found if recorded_here.get(o.job_id) == (o.cluster_id, o.proc_id)}
        )
    outdated: dict[int, JobObservation] = {}
    lost: list[int] = []
    for job in active:
        job_id = str(job.public_id)
        observation = current.get(job_id) or history.get(job_id)
        condor_id = f"{job.cluster_id}.{job.proc_id}"
        if observation is None:
            drifts.append(Drift("lost", job_id, condor_id, job.state, ""))
            lost.append(job.pk)
        elif observed_changes(job, observation):
            pool_state = portal_state(observation)
            drifts.append(Drift("stale", job_id, condor_id, job.state, pool_state))
            outdated[job.pk] = observation
    return drifts, {ad.job_id for ad in ads}, (bridge, to_remove, to_adopt, outdated, lost)


def _repair(bridge, to_remove, to_adopt, outdated, lost, resend, as_read) -> None:
    for observation in to_remove:
        bridge.act(
            "remove",
            observation.cluster_id,
            observation.proc_id,
            reason="Removed by Nightshift's reconcile: the portal has no running job with this id",
        )
    # A submission that reached the pool but not the portal: the next attempt looks the job
    # up (it is not a first attempt any more) and adopts it.
    again = Job.objects.filter(pk__in=to_adopt + resend)
    again.update(submit_attempts=F("submit_attempts") + 1)
    sweeps = set()
    for job in again.select_related("sweep"):
        if job.sweep is not None and not job.sweep.is_study:
            sweeps.add(job.sweep)
        else:
            job_enqueue_submit(job.pk)
    for sweep in sweeps:
        Sweep.objects.filter(pk=sweep.pk).update(submit_attempts=F("submit_attempts") + 1)
        sweep_enqueue_submit(sweep.pk)
    jobs_apply_observations(outdated, as_read=as_read)
    now = timezone.now()
    for pk in lost:
        with transaction.atomic():
            job = Job.objects.select_for_update().get(pk=pk)
            if job.is_final:
                continue
            job.state, job.outcome, job.finished_at = JobState.FAILED, JobOutcome.FAILED, now
            job.status_detail = (
                "HTCondor has no record of this job any more (its queue and history were "
                "checked), so it cannot finish. Re-run it."
            )
            job.save(update_fields=["state", "outcome", "finished_at", "status_detail"])
            job_event_record(
                job, "lost", f"HTCondor job {job.condor_id} is in neither queue nor history"
            )
