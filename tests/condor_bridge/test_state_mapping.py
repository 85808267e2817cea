"""Every HTCondor job status maps to exactly one Nightshift state."""

import pytest

from condor_bridge import JobState, map_job_ad, workstation_of
from condor_bridge.states import staging_failed


def ad(**fields):
    return {"NightshiftJobId": "j-1", "ClusterId": 7, "ProcId": 0, **fields}


@pytest.mark.parametrize(
    "status, state",
    [
        (1, JobState.IDLE),
        (2, JobState.RUNNING),
        (3, JobState.REMOVED),
        (4, JobState.COMPLETED),
        (5, JobState.HELD),
        (6, JobState.TRANSFERRING),
        (7, JobState.SUSPENDED),
    ],
)
def test_each_job_status_has_its_state(status, state):
    assert map_job_ad(ad(JobStatus=status), in_queue=True).state is state


def test_spooling_input_is_uploading_not_held():
    observation = map_job_ad(
        ad(JobStatus=5, HoldReasonCode=16, HoldReason="Spooling input data files"), in_queue=True
    )
    assert observation.state is JobState.TRANSFERRING
    assert observation.status_detail == "uploading input"
    assert observation.hold_reason == ""


def test_a_real_hold_keeps_its_reason():
    observation = map_job_ad(
        ad(JobStatus=5, HoldReasonCode=13, HoldReason="Transfer input files failure"),
        in_queue=True,
    )
    assert observation.state is JobState.HELD
    assert observation.hold_reason == "Transfer input files failure"
    assert observation.hold_reason_code == 13


def test_an_evicted_job_is_idle_again_and_keeps_its_start_count():
    observation = map_job_ad(ad(JobStatus=1, NumJobStarts=2), in_queue=True)
    assert observation.state is JobState.IDLE
    assert observation.num_starts == 2
    assert observation.evicted
    assert "evicted" in observation.status_detail


def test_a_job_that_never_ran_is_not_evicted():
    assert not map_job_ad(ad(JobStatus=1, NumJobStarts=0), in_queue=True).evicted


def test_history_tells_an_exit_code_from_a_signal():
    exited = map_job_ad(ad(JobStatus=4, ExitBySignal=False, ExitCode=3), in_queue=False)
    killed = map_job_ad(
        ad(JobStatus=4, ExitBySignal=True, ExitSignal=9, ExitCode=0), in_queue=False
    )
    assert (exited.exit_code, exited.exit_signal) == (3, None)
    assert (killed.exit_code, killed.exit_signal) == (None, 9)


def test_a_removed_job_in_history_is_removed_with_its_reason():
    observation = map_job_ad(ad(JobStatus=3, RemoveReason="Cancelled by user 4"), in_queue=False)
    assert observation.state is JobState.REMOVED
    assert observation.status_detail == "Cancelled by user 4"
    assert not observation.in_queue


def test_a_job_the_schedd_removed_when_its_spool_was_cut_off_may_be_submitted_again():
    cut_off = map_job_ad(ad(JobStatus=3, RemoveReason="Staging of job files failed"), in_queue=True)
    assert staging_failed(cut_off)
    removed = map_job_ad(
        ad(JobStatus=3, RemoveReason="via condor_rm (by user portal)"), in_queue=True
    )
    assert not staging_failed(removed)
    spooling = map_job_ad(
        ad(JobStatus=5, HoldReasonCode=16, HoldReason="Spooling input"), in_queue=True
    )
    assert not staging_failed(spooling) and spooling.awaiting_input


def test_an_unknown_status_is_an_error_not_a_guess():
    with pytest.raises(ValueError, match="unknown JobStatus"):
        map_job_ad(ad(JobStatus=42), in_queue=True)


@pytest.mark.parametrize(
    "slot, workstation",
    [
        ("slot1_1@ws-volta@vm", "ws-volta"),
        ("slot1@gpu01.example.edu", "gpu01.example.edu"),
        ("", ""),
    ],
)
def test_workstation_names_come_from_slot_names(slot, workstation):
    assert workstation_of(slot) == workstation


def test_the_matched_gpu_model_comes_from_the_machine_attributes():
    observation = map_job_ad(
        ad(
            JobStatus=2,
            RemoteHost="slot1_1@ws-ampere@vm",
            MachineAttrGPUs_DeviceName0="A100-SXM4-40GB",
        ),
        in_queue=True,
    )
    assert (observation.workstation, observation.gpu_model) == ("ws-ampere", "A100-SXM4-40GB")


def test_a_run_in_another_pool_names_that_pool_and_a_home_run_names_none():
    flocked = map_job_ad(
        ad(JobStatus=2, RemoteHost="slot1_1@ws-fermi@vm", RemotePool="cm.physics:9618"),
        in_queue=True,
    )
    assert (flocked.workstation, flocked.pool) == ("ws-fermi", "cm.physics:9618")
    # Back home after a flocked run: the run in progress is the home pool's.
    home_again = map_job_ad(
        ad(
            JobStatus=2,
            RemoteHost="slot1_1@ws-volta@vm",
            LastRemoteHost="slot1_1@ws-fermi@vm",
            LastRemotePool="cm.physics:9618",
        ),
        in_queue=True,
    )
    assert (home_again.pool, home_again.last_pool) == ("", "cm.physics:9618")
    ended = map_job_ad(
        ad(
            JobStatus=4,
            LastRemoteHost="slot1_1@ws-fermi@vm",
            ExitCode=0,
            LastRemotePool="cm.physics:9618",
        ),
        in_queue=False,
    )
    assert (ended.workstation, ended.pool) == ("ws-fermi", "cm.physics:9618")


def classad(**fields):
    import classad2

    made = classad2.ClassAd()
    for name, value in ad(**fields).items():
        made[name] = value
    return made


def test_a_queue_ad_seen_again_unchanged_is_not_converted_again():
    from condor_bridge.states import JobAdMemo

    memo = JobAdMemo()
    first = memo.observations(
        [classad(JobStatus=1, ServerTime=1), classad(JobStatus=1, ProcId=1)], in_queue=True
    )
    # The schedd's clock in every ad it sends moves on between queries.
    again = memo.observations(
        [
            classad(JobStatus=1, ServerTime=2),
            classad(JobStatus=2, ProcId=1, RemoteHost="slot1@ws-volta"),
        ],
        in_queue=True,
    )
    assert again[0] is first[0]
    assert (again[1].state, again[1].workstation) == (JobState.RUNNING, "ws-volta")
    assert again == [
        map_job_ad(classad(JobStatus=1), in_queue=True),
        map_job_ad(classad(JobStatus=2, ProcId=1, RemoteHost="slot1@ws-volta"), in_queue=True),
    ]


def test_a_session_removed_by_htcondor_at_its_limit_says_so():
    reason = "The job attribute PeriodicRemove expression '...' evaluated to TRUE"
    removed = ad(JobStatus=3, NightshiftSessionLimit=7200, RemoveReason=reason)
    observation = map_job_ad(removed, in_queue=False)
    assert observation.removed_by_limit
    assert observation.status_detail == (
        "HTCondor ended the session: it ran past its time limit of 2 hours."
    )
    cancelled = map_job_ad(
        ad(JobStatus=3, NightshiftSessionLimit=7200, RemoveReason="Cancelled by user 4"),
        in_queue=False,
    )
    assert not cancelled.removed_by_limit
