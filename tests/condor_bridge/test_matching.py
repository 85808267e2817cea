"""The pool-match summary explains, in plain words, why nothing can run a request."""

import dataclasses

from condor_bridge import JobRequest, LendingTerms, summarize_matches
from condor_bridge.fake import PERSONAL_POOL


def request(**overrides):
    return JobRequest(job_id="m-1", job_dir="/j", script_name="t.py", **overrides)


def test_a_one_gpu_request_matches_every_gpu_workstation():
    summary = summarize_matches(request(gpus=1), PERSONAL_POOL)
    assert summary.machines_matching == 3
    assert summary.gpus_matching == 4
    assert summary.can_ever_run


def test_gpu_memory_rules_out_small_gpus():
    summary = summarize_matches(request(gpus=1, gpu_memory_gb=30), PERSONAL_POOL)
    assert summary.machines_matching == 1  # only the A100


def test_two_gpus_match_only_the_two_gpu_workstation():
    assert summarize_matches(request(gpus=2), PERSONAL_POOL).machines_matching == 1


def test_too_much_gpu_memory_says_what_the_largest_gpu_has():
    summary = summarize_matches(request(gpus=1, gpu_memory_gb=80), PERSONAL_POOL)
    assert not summary.can_ever_run
    assert "at least 80 GB" in summary.reason
    assert "46.5 GB" in summary.reason


def test_too_many_gpus_says_the_most_any_workstation_has():
    summary = summarize_matches(request(gpus=4), PERSONAL_POOL)
    assert summary.reason == "You asked for 4 GPUs; no workstation has more than 2."


def test_capability_too_new_is_explained():
    summary = summarize_matches(request(gpus=1, gpu_capability=9.0), PERSONAL_POOL)
    assert "capability 9 or newer" in summary.reason


def test_an_empty_pool_is_explained():
    assert "No workstation" in summarize_matches(request(), []).reason


def busy(machine, state="Claimed"):
    import dataclasses

    return dataclasses.replace(machine, state=state, free_cpus=0, free_gpus=0)


def test_matching_workstations_that_are_all_busy_are_named_as_busy():
    ampere, fermi, office, volta = PERSONAL_POOL
    summary = summarize_matches(request(gpus=1, gpu_memory_gb=10), [busy(ampere), busy(volta)])
    assert summary.can_ever_run
    assert summary.busy_reason == "2 matching workstations, both busy right now."


def test_a_single_busy_workstation_is_named():
    ampere = PERSONAL_POOL[0]
    summary = summarize_matches(request(gpus=1, gpu_memory_gb=30), [busy(ampere)])
    assert summary.busy_reason == "1 matching workstation (ws-ampere), busy right now."


def test_workstations_taken_back_by_their_owners_are_said_so():
    ampere, _, _, volta = PERSONAL_POOL
    summary = summarize_matches(
        request(gpus=1, gpu_memory_gb=10), [busy(ampere, "Owner"), busy(volta, "Owner")]
    )
    assert (
        summary.busy_reason == "All 2 matching workstations are in use by their owners right now."
    )


def test_a_free_matching_workstation_leaves_nothing_to_explain():
    assert summarize_matches(request(gpus=1), PERSONAL_POOL).busy_reason == ""


def test_a_container_environment_needs_a_workstation_that_runs_containers():
    summary = summarize_matches(request(container_image="docker://pytorch/pytorch"), PERSONAL_POOL)
    assert not summary.can_ever_run
    assert summary.blocking_field == "container_image"
    assert "no workstation in the pool runs containers" in summary.reason


# -- the owners' lending terms -------------------------------------------------------------


def with_terms(**terms):
    return [dataclasses.replace(m, terms=LendingTerms(**terms)) for m in PERSONAL_POOL]


def test_a_lab_its_owners_do_not_lend_to_matches_nothing_and_is_told_why():
    pool = with_terms(accounting_groups=("group_vision",))
    theirs = summarize_matches(request(gpus=1, accounting_group="group_nlp"), pool)
    assert not theirs.can_ever_run
    assert (
        theirs.reason
        == "The 3 workstations that could run it are lent by their owners to other labs only."
    )
    assert summarize_matches(request(gpus=1, accounting_group="group_vision"), pool).can_ever_run


def test_more_gpus_or_memory_than_the_owners_lend_matches_nothing():
    summary = summarize_matches(request(gpus=2), with_terms(gpus=1))
    assert (summary.blocking_field, summary.machines_matching) == ("gpus", 0)
    assert "lend at most 1 at once" in summary.reason
    summary = summarize_matches(request(memory_mb=3000), with_terms(memory_mb=2048))
    assert summary.blocking_field == "memory_mb" and "lend at most 2048 MB" in summary.reason


def test_outside_the_owners_hours_it_matches_but_is_not_free_and_the_wait_is_explained():
    summary = summarize_matches(request(gpus=1), with_terms(open=False))
    assert summary.machines_matching == 3 and summary.machines_free_now == 0
    assert summary.busy_reason.startswith("The owners of all 3 matching workstations are not")
    asked_back = summarize_matches(request(gpus=1), with_terms(reclaim_by=1796374860))
    assert asked_back.machines_free_now == 0
