"""Usage records are exact on scripted histories: sequences of job ads as HTCondor reports them.

Each history is what the sync would observe of one job, ad by ad (the attributes mirror the
ones seen on the personal pool: RemoteWallClockTime and CommittedTime grow when a run ends,
JobCurrentStartDate dates the run in progress). The answers are worked out by hand.
"""

from datetime import UTC, datetime, timedelta

import pytest

from accounting.models import UsageRecord
from accounting.selectors import gpu_hours_used
from condor_bridge import JobObservation, map_job_ad
from condor_bridge import JobState as Condor
from jobs import sync
from jobs.models import Job, JobOutcome, JobState
from tests.factories import LabFactory, UserFactory

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def job(db):
    owner = UserFactory(username="ada")
    job = Job.objects.create(
        owner=owner,
        lab=LabFactory(name="Vision"),
        name="train",
        gpus=1,
        output_dir="/nonexistent",
        state=JobState.IDLE,
        cluster_id=7,
        proc_id=0,
        request={"gpus": 1},
    )
    Job.objects.filter(pk=job.pk).update(created_at=T0)
    job.refresh_from_db()
    return job


def ad(
    state,
    *,
    wall=0,
    committed=0,
    run_since=None,
    host="ws-volta",
    last_host="",
    vacated=None,
    finished=None,
    gpus=1,
    starts=0,
    **extra,
) -> JobObservation:
    return JobObservation(
        job_id="x",
        cluster_id=7,
        proc_id=0,
        state=state,
        in_queue=finished is None,
        num_starts=starts,
        workstation=host if run_since else (last_host or host),
        gpu_model="Tesla V100-PCIE-16GB",
        wall_time_s=wall,
        committed_time_s=committed,
        run_started_at=at(run_since) if run_since is not None else None,
        last_workstation=last_host,
        last_vacated_at=at(vacated) if vacated is not None else None,
        finished_at=at(finished) if finished is not None else None,
        entered_state_at=at(finished or vacated or run_since or 0),
        gpus_assigned=gpus,
        **extra,
    )


def play(job, history) -> list[UsageRecord]:
    for observation in history:
        sync.job_apply_observation(job.pk, observation)
    return list(UsageRecord.objects.filter(job=job).order_by("started_at"))


def runs(records):
    return [(r.started_at - T0).total_seconds() for r in records], [
        (r.wall_s, r.committed_s, r.badput_s, r.ended_by) for r in records
    ]


EVICTED_TWICE_NO_CHECKPOINT = [
    ad(Condor.RUNNING, run_since=100),
    ad(Condor.IDLE, wall=300, vacated=400, last_host="ws-volta", starts=1),
    ad(Condor.RUNNING, run_since=500, host="ws-ampere", wall=300, starts=1),
    ad(Condor.IDLE, wall=900, vacated=1100, last_host="ws-ampere", starts=2),
    ad(Condor.RUNNING, run_since=1200, host="ws-fermi", wall=900, starts=2),
    ad(
        Condor.COMPLETED,
        wall=1200,
        committed=300,
        finished=1500,
        last_host="ws-fermi",
        starts=3,
        exit_code=0,
    ),
]


def test_a_job_evicted_twice_without_checkpoints_loses_both_earlier_runs(job):
    records = play(job, EVICTED_TWICE_NO_CHECKPOINT)
    starts, values = runs(records)
    assert starts == [100, 500, 1200]
    assert values == [
        (300, 0, 300, "evicted"),
        (600, 0, 600, "evicted"),
        (300, 300, 0, "completed"),
    ]
    assert [r.workstation for r in records] == ["ws-volta", "ws-ampere", "ws-fermi"]
    assert [r.ended_at for r in records] == [at(400), at(1100), at(1500)]
    # Waited 100 s for the first workstation, then 100 s after each eviction.
    assert [r.wait_s for r in records] == [100, 100, 100]
    assert [r.first_run for r in records] == [True, False, False]
    assert sum(r.gpu_hours() for r in records) == pytest.approx(1200 / 3600)


def test_a_job_evicted_twice_with_checkpoints_loses_only_the_work_since_each_checkpoint(job):
    records = play(
        job,
        [
            ad(Condor.RUNNING, run_since=100),
            # Checkpointed 240 s into the run, evicted 60 s later: 240 s committed.
            ad(Condor.IDLE, wall=300, committed=240, vacated=400, last_host="ws-volta", starts=1),
            ad(Condor.RUNNING, run_since=500, wall=300, committed=240, starts=1),
            ad(Condor.IDLE, wall=900, committed=780, vacated=1100, last_host="ws-volta", starts=2),
            ad(Condor.RUNNING, run_since=1200, wall=900, committed=780, starts=2),
            ad(Condor.COMPLETED, wall=1200, committed=1080, finished=1500, starts=3, exit_code=0),
        ],
    )
    assert runs(records)[1] == [
        (300, 240, 60, "evicted"),
        (600, 540, 60, "evicted"),
        (300, 300, 0, "completed"),
    ]


def test_a_two_gpu_job_counts_wall_time_times_two(job):
    records = play(
        job,
        [
            ad(Condor.RUNNING, run_since=0, gpus=2),
            ad(Condor.COMPLETED, wall=5400, committed=5400, finished=5400, gpus=2, exit_code=0),
        ],
    )
    assert [(r.gpus, r.gpu_hours()) for r in records] == [(2, 3.0)]
    used = gpu_hours_used(UsageRecord.objects.filter(job=job), since=at(-60), until=at(9000))
    assert used.total == pytest.approx(3.0)


def test_a_job_removed_by_the_runtime_limit_counts_its_run_and_says_why_it_ended(job):
    records = play(
        job,
        [
            ad(Condor.RUNNING, run_since=60),
            ad(
                Condor.REMOVED,
                wall=3600,
                finished=3660,
                vacated=3660,
                last_host="ws-volta",
                starts=1,
                removed_by_limit=True,
                status_detail="removed by limit",
            ),
        ],
    )
    assert runs(records)[1] == [(3600, 0, 0, "removed")]
    job.refresh_from_db()
    assert (job.state, job.outcome) == (JobState.REMOVED, JobOutcome.RUNTIME_LIMIT)


def test_a_removed_job_whose_run_htcondor_never_counted_is_closed_at_its_removal(job):
    records = play(
        job,
        [
            ad(Condor.RUNNING, run_since=60),
            ad(Condor.REMOVED, wall=0, finished=660, starts=1),
        ],
    )
    assert runs(records)[1] == [(600, 0, 0, "removed")]


def test_a_run_that_started_and_ended_between_two_syncs_is_still_recorded(job):
    records = play(
        job,
        [
            ad(Condor.IDLE),
            # Never seen running: the ad says 120 s of wall time, evicted at 400 on ws-ampere.
            ad(Condor.IDLE, wall=120, vacated=400, last_host="ws-ampere", starts=1),
        ],
    )
    assert runs(records) == ([280], [(120, 0, 120, "evicted")])
    assert records[0].workstation == "ws-ampere"


def test_a_job_first_seen_ended_before_htcondor_counted_its_run_is_recorded_from_its_dates(job):
    records = play(
        job,
        [
            # Completed between two syncs, its ad read before the shadow added the wall time.
            ad(
                Condor.COMPLETED,
                wall=0,
                finished=95,
                last_host="ws-fermi",
                starts=1,
                exit_code=0,
                started_at=at(90),
                last_pool="cm.physics:9618",
            ),
        ],
    )
    assert runs(records) == ([90], [(5, 5, 0, "completed")])
    assert (records[0].workstation, records[0].pool) == ("ws-fermi", "cm.physics:9618")


def test_a_run_htcondor_counted_as_no_time_at_all_still_says_where_it_ran(job):
    records = play(
        job,
        [
            # Started and completed within one second: RemoteWallClockTime 0, as on the pool.
            ad(
                Condor.COMPLETED,
                wall=0,
                finished=90,
                last_host="ws-fermi",
                starts=1,
                exit_code=0,
                started_at=at(90),
                last_pool="cm.physics:9618",
            ),
        ],
    )
    assert runs(records) == ([90], [(0, 0, 0, "completed")])
    assert (records[0].workstation, records[0].pool) == ("ws-fermi", "cm.physics:9618")


def test_a_shadow_whose_job_never_began_executing_is_no_run_and_the_next_run_counts_once(job):
    def schedd_ad(status: int, **attributes) -> JobObservation:
        ad = {"ClusterId": 7, "ProcId": 0, "JobStatus": status, "ExitCode": 0, **attributes}
        return map_job_ad(ad, in_queue=status != 4)

    second = T0.timestamp()
    records = play(
        job,
        [
            # A shadow started (its claim's date), but its job never began executing: on a
            # busy machine a claim that cannot be activated sends the job back to the queue,
            # with no start counted and no wall time.
            schedd_ad(2, JobCurrentStartDate=second + 100, RemoteHost="slot1@ws-volta"),
            schedd_ad(1, JobCurrentStartDate=second + 100, NumShadowStarts=1),
            schedd_ad(
                2,
                JobCurrentStartDate=second + 130,
                JobCurrentStartExecutingDate=second + 131,
                NumJobStarts=1,
                RemoteHost="slot1@ws-ampere",
            ),
            schedd_ad(
                4,
                JobCurrentStartDate=second + 130,
                CompletionDate=second + 135,
                RemoteWallClockTime=5.0,
                CommittedTime=5,
                NumJobStarts=1,
                LastRemoteHost="slot1@ws-ampere",
            ),
        ],
    )
    assert runs(records) == ([130], [(5, 5, 0, "completed")])
    assert records[0].workstation == "ws-ampere"


def test_a_job_removed_before_it_ever_started_has_no_usage(job):
    assert play(job, [ad(Condor.REMOVED, finished=60)]) == []


def test_a_run_in_progress_counts_up_to_now_and_is_closed_when_it_ends(job):
    (record,) = play(job, [ad(Condor.RUNNING, run_since=0)])
    assert record.is_open and record.gpu_hours(until=at(1800)) == pytest.approx(0.5)
    used = gpu_hours_used(UsageRecord.objects.filter(job=job), since=at(-60), until=at(1800))
    assert used.total == pytest.approx(0.5)


def test_replaying_a_history_any_number_of_times_never_double_counts(job):
    first = runs(play(job, EVICTED_TWICE_NO_CHECKPOINT))
    # Every ad again, in order and then the last ones once more, as overlapping syncs would.
    again = runs(play(job, EVICTED_TWICE_NO_CHECKPOINT[2:] + EVICTED_TWICE_NO_CHECKPOINT[-2:]))
    assert again == first


def test_a_sync_that_crashes_halfway_records_nothing_and_the_next_one_everything(job, monkeypatch):
    play(job, EVICTED_TWICE_NO_CHECKPOINT[:1])

    def crash(*args, **kwargs):
        raise RuntimeError("worker killed")

    # The crash comes after the usage records were written, inside the same transaction.
    monkeypatch.setattr(sync, "change_events", crash)
    with pytest.raises(RuntimeError):
        sync.job_apply_observation(job.pk, EVICTED_TWICE_NO_CHECKPOINT[1])
    assert [r.ended_at for r in UsageRecord.objects.filter(job=job)] == [None]
    monkeypatch.undo()
    records = play(job, EVICTED_TWICE_NO_CHECKPOINT[1:])
    assert runs(records)[1][0] == (300, 0, 300, "evicted")
    assert len(records) == 3


def test_a_checkpoint_htcondor_did_not_count_is_kept_from_the_helpers_log(job, tmp_path):
    """On a shared file system HTCondor's CommittedTime ignores the job's own checkpoints
    (seen on the personal pool); the helper's log says when it saved."""
    Job.objects.filter(pk=job.pk).update(output_dir=str(tmp_path))
    job.refresh_from_db()
    (tmp_path / ".nightshift").mkdir()
    saved_at = at(340).timestamp()
    (tmp_path / ".nightshift" / "checkpoints.jsonl").write_text(
        f'{{"time": {saved_at}}}\nnot json\n{{"time": "soon"}}\n'
    )
    records = play(
        job,
        [
            ad(Condor.RUNNING, run_since=100),
            ad(Condor.IDLE, wall=300, committed=0, vacated=400, last_host="ws-volta", starts=1),
            ad(Condor.RUNNING, run_since=500, wall=300, starts=1),
            ad(Condor.COMPLETED, wall=500, committed=200, finished=700, starts=2, exit_code=0),
        ],
    )
    assert runs(records)[1] == [(300, 240, 60, "evicted"), (200, 200, 0, "completed")]
    assert records[0].saved_s == 240
