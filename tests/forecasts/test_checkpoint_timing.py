"""The checkpoint timing a workstation's forecast gives its jobs: Daly's interval, the mean
time to the owner's return, and when the owner may be back."""

import importlib.util
import json
import math
import time
import uuid
from pathlib import Path

import pytest

from forecasts.model.checkpoints import (
    LONGEST_S,
    SHORTEST_S,
    daly_interval_s,
    figures_for_row,
    mean_time_to_return_s,
    possible_return_s,
)


def test_dalys_interval_matches_his_papers_examples():
    # Daly's first-order examples with a 5-minute checkpoint: M = 24 h gives about 115 min
    # (the higher-order form, which he tabulates, 117), M = 6 h about 55.
    assert daly_interval_s(300, 24 * 3600) / 60 == pytest.approx(115, abs=1)
    assert daly_interval_s(300, 6 * 3600) / 60 == pytest.approx(55, abs=1)


def test_an_interval_is_never_absurdly_short_or_long():
    assert daly_interval_s(1, 60) == SHORTEST_S
    assert daly_interval_s(600, 365 * 86400) == LONGEST_S
    with pytest.raises(ValueError):
        daly_interval_s(0, 3600)


def test_the_mean_is_counted_up_to_a_day():
    # An owner who never comes back: as long as the curve says, no longer.
    assert mean_time_to_return_s([(2, 1.0), (24, 1.0)]) == 24 * 3600
    mean_h = 5.0
    curve = [(h, math.exp(-h / mean_h)) for h in (2, 4, 8, 16, 24)]
    # Straight lines over a convex curve overestimate a little; nothing past a day counts.
    restricted = mean_h * (1 - math.exp(-24 / mean_h))
    assert mean_time_to_return_s(curve) / 3600 == pytest.approx(restricted, rel=0.08)


def test_the_owner_may_be_back_once_the_chance_of_it_reaches_one_in_twenty():
    assert possible_return_s([(2, 0.9), (4, 0.3), (8, 0.1)]) == pytest.approx(
        2 * 3600 * (1 - 0.95) / (1 - 0.9)
    )
    assert possible_return_s([(2, 1.0), (24, 0.97)]) is None
    # A curve that rises again (noise in the counts) is read as never rising.
    assert possible_return_s([(2, 1.0), (4, 0.4), (8, 0.99)]) == pytest.approx(
        2 * 3600 + 2 * 3600 * (1 - 0.95) / 0.6
    )


def test_a_forecasts_row_becomes_whole_seconds():
    mean_s, possible_s = figures_for_row((2, 4, 8, 16, 24), (1.0, 0.98, 0.3, 0.1, 0.05))
    assert isinstance(mean_s, int) and isinstance(possible_s, int)
    assert 4 * 3600 < possible_s < 8 * 3600


# -- the job helper, which applies them on the workstation --------------------------------

RUNTIME = Path(__file__).resolve().parents[2] / "jobs" / "runtime" / "nightshift.py"


def helper(monkeypatch, tmp_path, *, ad: str | None = None, interval: str = "3600"):
    """A fresh import of the job helper, as a run on a workstation starts it."""
    if ad is not None:
        (tmp_path / ".machine.ad").write_text(ad)
    (tmp_path / ".nightshift").mkdir(exist_ok=True)
    monkeypatch.setenv("_CONDOR_MACHINE_AD", str(tmp_path / ".machine.ad"))
    monkeypatch.setenv("NIGHTSHIFT_CHECKPOINT_INTERVAL_S", interval)
    monkeypatch.setenv("NIGHTSHIFT_CHECKPOINT_DIR", str(tmp_path / ".nightshift" / "checkpoint"))
    monkeypatch.setenv("NIGHTSHIFT_HELPER_DIR", str(tmp_path / ".nightshift"))
    spec = importlib.util.spec_from_file_location(f"nightshift_{uuid.uuid4().hex}", RUNTIME)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_helpers_interval_is_the_portals(monkeypatch, tmp_path):
    module = helper(monkeypatch, tmp_path)
    for cost in (1, 30, 60, 600):
        for mean in (60, 3600, 8 * 3600, 30 * 86400):
            assert module._daly_interval_s(cost, mean) == daly_interval_s(cost, mean)


def test_on_a_workstation_that_publishes_figures_a_run_saves_at_dalys_interval(
    monkeypatch, tmp_path
):
    module = helper(monkeypatch, tmp_path, ad='Name = "slot1@ws"\nNightshiftMeanFreeS = 3600\n')
    interval, save_at = module._checkpoint_plan()
    assert interval == pytest.approx(math.sqrt(2 * 60 * 3600) - 60)  # a save costs 60 s
    assert save_at is None
    plan = json.loads((tmp_path / ".nightshift" / "checkpoint-plan.json").read_text())
    assert plan["interval_s"] == round(interval)


def test_a_job_that_measured_its_saves_gets_an_interval_for_its_own_cost(monkeypatch, tmp_path):
    (tmp_path / ".nightshift").mkdir()
    (tmp_path / ".nightshift" / "checkpoints.jsonl").write_text(
        '{"time": 1, "save_s": 2}\n{"time": 2, "save_s": 200}\n'
    )
    module = helper(monkeypatch, tmp_path, ad="NightshiftMeanFreeS = 36000\n")
    assert module._checkpoint_plan()[0] == pytest.approx(math.sqrt(2 * 200 * 36000) - 200)


def test_a_run_saves_once_just_before_its_owner_may_be_back(monkeypatch, tmp_path):
    soon = int(time.time()) + 1800
    module = helper(monkeypatch, tmp_path, ad=f"NightshiftPossibleReturnAt = {soon}\n")
    interval, save_at = module._checkpoint_plan()
    assert interval == 3600 and save_at == soon - 120
    assert not module.should_checkpoint()
    monkeypatch.setattr(module.time, "time", lambda: soon - 100)
    assert module.should_checkpoint()


def test_a_return_too_close_to_save_for_and_a_job_that_saves_only_when_asked(monkeypatch, tmp_path):
    now = int(time.time())
    # After a save just before the return, the run that starts again must not save again.
    module = helper(monkeypatch, tmp_path, ad=f"NightshiftPossibleReturnAt = {now + 100}\n")
    assert module._checkpoint_plan()[1] is None
    # NIGHTSHIFT_CHECKPOINT_INTERVAL_S=0 means only on SIGTERM, whatever the workstation.
    module = helper(
        monkeypatch,
        tmp_path,
        ad=f"NightshiftMeanFreeS = 600\nNightshiftPossibleReturnAt = {now + 9000}\n",
        interval="0",
    )
    assert module._checkpoint_plan() == (0.0, None)


def test_elsewhere_the_sites_interval_holds_and_a_hostile_ad_changes_nothing(monkeypatch, tmp_path):
    assert helper(monkeypatch, tmp_path)._checkpoint_plan() == (3600.0, None)
    hostile = 'NightshiftMeanFreeS = "3600"\nNightshiftPossibleReturnAt = 1e99\nX = \x00\n'
    assert helper(monkeypatch, tmp_path, ad=hostile)._checkpoint_plan() == (3600.0, None)


def told_of_a_reclaim(tmp_path, *, reclaim_by: float, noticed_at: float) -> str:
    notice = tmp_path / "notice.json"
    notice.write_text(json.dumps({"reclaim_by": reclaim_by, "noticed_at": noticed_at}))
    return f'NightshiftReclaimNotice = "{notice}"\n'


def test_asked_back_by_its_owner_a_run_saves_once_before_the_sigterm(monkeypatch, tmp_path):
    now = time.time()
    ad = told_of_a_reclaim(tmp_path, reclaim_by=now + 60, noticed_at=now - 5)
    module = helper(monkeypatch, tmp_path, ad=ad)
    assert module.should_checkpoint()
    assert not module.should_checkpoint()  # once: a job that saves and goes on is not nagged
    # The run saved for it (checkpoint_and_exit logs the save) and HTCondor started it again
    # on the same workstation: it goes on until the SIGTERM.
    (tmp_path / ".nightshift" / "checkpoints.jsonl").write_text(
        json.dumps({"time": now, "save_s": 2}) + "\n"
    )
    assert not helper(monkeypatch, tmp_path, ad=ad).should_checkpoint()


def test_a_request_that_ended_or_a_broken_notice_asks_for_nothing(monkeypatch, tmp_path):
    now = time.time()
    ended = told_of_a_reclaim(tmp_path, reclaim_by=now - 1, noticed_at=now - 60)
    assert not helper(monkeypatch, tmp_path, ad=ended).should_checkpoint()
    (tmp_path / "notice.json").write_text("{not json")
    assert not helper(monkeypatch, tmp_path, ad=ended).should_checkpoint()
    missing = 'NightshiftReclaimNotice = "/nonexistent/notice.json"\n'
    assert not helper(monkeypatch, tmp_path, ad=missing).should_checkpoint()
