"""Second copies of a job in HTCondor's queues, found and removed by the sync.

A submission attempt holds its job's row lock while the schedd takes the job. If PostgreSQL
drops that connection meanwhile, the lock goes with it, and a resend by another worker may
find nothing in the queue yet and submit again: two jobs with one Nightshift id, each with
its own cluster (docs/faults.md). The row records one of them, the copy every action and
every page refers to. Any other ad carrying the id of a job whose submission is recorded is
a copy nobody asked for, and it would take a workstation that another job waits for: the
sync removes it, says so on the job's timeline, and never reads its state into the job.

Every attempt goes to the schedd chosen when the job was made, so a copy lands beside the
one the row records. A job whose submission is not recorded yet (its cluster id still empty)
is left alone: the attempt in flight may yet record either copy.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from audit.services import audit_record
from condor_bridge import BridgeError, JobObservation, JobState

from .bridge import get_bridge
from .models import Job, is_public_id
from .timeline import job_event_record

logger = logging.getLogger(__name__)

SECOND_COPY_DETAIL = (
    "HTCondor had a second copy of this job (sent twice, as when a database connection "
    "drops during a submission); Nightshift removed the copy cluster {cluster}.{proc} and "
    "kept {kept}."
)


# An ad already leaving the queue: a removed copy until its shadow has gone, or one that
# ended and waits in a spool for outputs nobody will fetch. Removing it again would only
# write another timeline event each cycle.
LEAVING = (JobState.REMOVED, JobState.COMPLETED)


def is_second_copy(schedd: str, ad: JobObservation, recorded: tuple | None) -> bool:
    """Whether `ad`, in `schedd`'s queue, is a second copy still to be removed. `recorded`:
    the (schedd, cluster, proc) its job's row records, None while none is recorded."""
    return (
        recorded is not None
        and recorded != (schedd, ad.cluster_id, ad.proc_id)
        and ad.state not in LEAVING
    )


def second_copies(
    unexpected: Iterable[tuple[str, JobObservation]],
) -> list[tuple[Job, str, JobObservation]]:
    """Of queue ads (schedd, ad) that are not the copy an active row records on that schedd,
    those of jobs whose submission is recorded elsewhere: each with its job and schedd.

    Most such ads are expected (a finished job waiting for its outputs to be fetched from
    the spool, a submission not recorded yet), so one query checks them all against their
    rows."""
    unexpected = [(schedd, ad) for schedd, ad in unexpected if is_public_id(ad.job_id)]
    if not unexpected:
        return []
    jobs = {
        str(job.public_id): job
        for job in Job.objects.filter(
            public_id__in={ad.job_id for _, ad in unexpected}, cluster_id__isnull=False
        ).only("pk", "public_id", "name", "state", "schedd", "cluster_id", "proc_id")
    }
    copies = []
    for schedd, ad in unexpected:
        job = jobs.get(ad.job_id)
        if job is not None and is_second_copy(
            schedd, ad, (job.schedd, job.cluster_id, job.proc_id)
        ):
            copies.append((job, schedd, ad))
    return copies


def second_copies_remove(copies: list[tuple[Job, str, JobObservation]]) -> int:
    """Remove each second copy from its schedd; how many went. One that cannot be removed
    now is tried again next cycle."""
    removed = 0
    for job, schedd, ad in copies:
        detail = SECOND_COPY_DETAIL.format(
            cluster=ad.cluster_id, proc=ad.proc_id, kept=f"{job.cluster_id}.{job.proc_id}"
        )
        try:
            get_bridge(schedd).act("remove", ad.cluster_id, ad.proc_id, reason=detail[:200])
        except BridgeError as exc:
            logger.warning(
                "could not remove the second copy %s.%s of job %s from %s: %s",
                ad.cluster_id,
                ad.proc_id,
                job.public_id,
                schedd,
                exc,
            )
            continue
        logger.warning(
            "removed the second copy %s.%s of job %s from %s",
            ad.cluster_id,
            ad.proc_id,
            job.public_id,
            schedd,
        )
        job_event_record(job, "second copy removed", detail)
        audit_record(
            action="job.second_copy_remove",
            actor=None,
            target=job,
            detail=f"{schedd} {ad.cluster_id}.{ad.proc_id}",
        )
        removed += 1
    return removed
