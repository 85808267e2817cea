"""A small campus with known usage on 2 November 2026 (UTC), for the report tests.

Vision (lead: lena): ada ran 2 GPUs for 3 h (one run, 20:00-23:00), and 1 GPU from 23:00 to
01:00 the next day, evicted once at 22:00 after 1 h without a checkpoint (so 1 GPU-hour lost).
NLP (lead: noor): bob ran 1 GPU for 4 h. Nobody else. Capacity: ws-volta 2 GPUs, sampled at
21:00 and 22:00 on a Monday (1 h each): both used by Nightshift, then 1 idle and 1 owner-busy.
"""

from datetime import UTC, datetime, timedelta

import pytest

from accounting.models import CapacitySample, UsageRecord
from jobs.models import Job, JobOutcome, JobState
from tests.factories import LabFactory, MembershipFactory, UserFactory

DAY = datetime(2026, 11, 2, tzinfo=UTC)
PERIOD = {"period": "custom", "start": "2026-11-02", "end": "2026-11-03"}


def _run(
    job,
    start_h,
    end_h,
    *,
    gpus,
    ended_by="completed",
    committed=True,
    wait_s=600,
    workstation="ws-volta",
    first=True,
):
    start, end = DAY + timedelta(hours=start_h), DAY + timedelta(hours=end_h)
    wall = (end - start).total_seconds()
    return UsageRecord.objects.create(
        job=job,
        user=job.owner,
        lab=job.lab,
        started_at=start,
        ended_at=end,
        gpus=gpus,
        wall_s=wall,
        committed_s=wall if committed else 0,
        badput_s=0 if committed else wall,
        ended_by=ended_by,
        wait_s=wait_s,
        first_run=first,
        workstation=workstation,
        gpu_model="Tesla V100-PCIE-16GB",
    )


def _job(owner, lab, name, *, gpus, outcome, finished_h):
    return Job.objects.create(
        owner=owner,
        lab=lab,
        name=name,
        gpus=gpus,
        output_dir="/nonexistent",
        state=JobState.COMPLETED if outcome == JobOutcome.COMPLETED else JobState.REMOVED,
        outcome=outcome,
        finished_at=DAY + timedelta(hours=finished_h),
        workstation="ws-volta",
    )


@pytest.fixture
def campus(db):
    vision, nlp = LabFactory(name="Vision"), LabFactory(name="NLP")
    ada = MembershipFactory(lab=vision, user=UserFactory(username="ada")).user
    bob = MembershipFactory(lab=nlp, user=UserFactory(username="bob")).user
    lena = MembershipFactory(
        lab=vision, role="lead", user=UserFactory(username="lena", email="lena@example.org")
    ).user
    noor = MembershipFactory(
        lab=nlp, role="lead", user=UserFactory(username="noor", email="noor@example.org")
    ).user
    big = _job(ada, vision, "big", gpus=2, outcome=JobOutcome.COMPLETED, finished_h=23)
    _run(big, 20, 23, gpus=2, wait_s=300)
    late = _job(ada, vision, "late", gpus=1, outcome=JobOutcome.CANCELLED, finished_h=25)
    _run(late, 21, 22, gpus=1, ended_by="evicted", committed=False, wait_s=1800)
    _run(late, 23, 25, gpus=1, wait_s=3600, first=False)
    nlp_job = _job(bob, nlp, "nlp", gpus=1, outcome=JobOutcome.RUNTIME_LIMIT, finished_h=14)
    _run(nlp_job, 10, 14, gpus=1, ended_by="removed", wait_s=7200)
    for hour, idle, ours, unavailable in ((21, 0, 2, 0), (22, 1, 0, 1)):
        CapacitySample.objects.create(
            taken_at=DAY + timedelta(hours=hour),
            seconds=3600,
            workstation="ws-volta",
            total_gpus=2,
            idle_gpus=idle,
            nightshift_gpus=ours,
            unavailable_gpus=unavailable,
        )
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    return {
        "vision": vision,
        "nlp": nlp,
        "ada": ada,
        "bob": bob,
        "lena": lena,
        "noor": noor,
        "admin": admin,
    }
