"""Held jobs get a plain-language explanation and advice, keyed on HTCondor's codes."""

import pytest

from condor_bridge.explain import HoldUsage, explain_hold, request_that_fits


def test_nightshifts_runtime_limit_is_explained():
    explanation = explain_hold(3, 1, "The job ran longer than its maximum runtime of 1 hour.")
    assert explanation.title == "It ran longer than its maximum runtime."
    assert "checkpoints" in explanation.advice


@pytest.mark.parametrize("code", [46, 47])
def test_htcondors_own_duration_limits_read_the_same(code):
    assert explain_hold(code, 0, "").title == "It ran longer than its maximum runtime."


def test_memory_exceeded_says_to_ask_for_more_memory():
    explanation = explain_hold(
        34, 102, "Job has gone over cgroup memory limit of 512 megabytes. Peak usage: 900."
    )
    assert explanation.title == "It used more memory than it asked for."
    assert "more memory" in explanation.advice


def test_disk_exceeded_is_told_apart_from_memory():
    assert explain_hold(34, 104, "").title == "It used more disk than it asked for."


def test_the_workstations_memory_policy_hold_gives_the_peak_and_a_request_that_fits():
    used = HoldUsage(memory_mb=3150, memory_requested_mb=2048)
    explanation = explain_hold(21, 102, "memory usage exceeded request_memory", used=used)
    assert explanation.title == (
        "It used more memory than it asked for: 3.1 GB at its peak, against the 2 GB it asked for."
    )
    assert "Submit again asking for 4.5 GB of memory" in explanation.advice
    assert explanation.suggested == (("memory_mb", 4608),)


def test_a_peak_the_margin_leaves_below_the_request_still_suggests_more_than_asked():
    used = HoldUsage(memory_mb=130, memory_requested_mb=1024)
    assert dict(explain_hold(34, 102, "", used=used).suggested)["memory_mb"] == 1536


def test_a_disk_hold_with_figures_suggests_more_disk():
    used = HoldUsage(disk_mb=9000, disk_requested_mb=4096)
    explanation = explain_hold(34, 104, "", used=used)
    assert "8.8 GB at its peak, against the 4 GB" in explanation.title
    assert explanation.suggested == (("disk_mb", 11776),)


def test_a_request_that_fits_leaves_a_quarter_and_256_mb_above_the_peak():
    assert request_that_fits(3150) == 4608
    assert request_that_fits(100) == 512


def test_a_missing_output_file_points_at_outputs():
    explanation = explain_hold(
        12, 2, "Transfer output files failure ... failed to send file(s) ... No such file"
    )
    assert explanation.title == "An output file or folder it should have made is missing."
    assert "outputs/" in explanation.advice


def test_other_output_transfer_failures_suggest_a_release():
    assert "Release" in explain_hold(12, 0, "connection reset by peer").advice


def test_a_transfer_failure_and_spooling_are_explained():
    assert explain_hold(13, 0, "").title == "Its files could not be copied to the workstation."
    assert explain_hold(16, 0, "").advice.startswith("Nothing to do")


def test_a_user_hold_says_release_or_cancel():
    assert explain_hold(1, 0, "held by ada").advice == (
        "Release it when you want it to continue, or cancel it."
    )


def test_an_unknown_code_still_gets_a_useful_sentence():
    explanation = explain_hold(999, None, "something new")
    assert explanation.title == "HTCondor put it on hold."
    assert explain_hold(None, None, "").title == "HTCondor put it on hold."


def test_a_job_evicted_too_many_times_is_told_to_checkpoint():
    explanation = explain_hold(3, 2, "The job was stopped after starting 10 times: ...")
    assert "evicted too many times" in explanation.title
    assert "checkpoints" in explanation.advice and "release it" in explanation.advice


def test_the_portals_no_progress_hold_is_told_apart_from_a_persons():
    guard = explain_hold(1, 2, "Nightshift held it: evicted 5 times in a row ...")
    assert "without saving a checkpoint" in guard.title
    assert explain_hold(1, 1, "Held by ada from Nightshift").title == "Someone put it on hold."


def test_a_dataset_the_plugin_could_not_fetch_is_told_apart_from_other_input_failures():
    reason = (
        "Transfer input files failure at execution point slot1@ws-a using protocol "
        "nightshift. Details: Nightshift could not put a dataset in place: the portal "
        "refused cats@1: This credential is no longer valid: its job has ended."
    )
    explanation = explain_hold(13, 1, reason)
    assert explanation.title == "One of its datasets could not be brought to the workstation."
    assert "release the job" in explanation.advice
    assert explain_hold(13, 1, "connection reset").title == (
        "Its files could not be copied to the workstation."
    )
