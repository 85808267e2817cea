"""A job's GPU energy: the job helper's power samples, above the cards' idle draw, become
kWh and CO2e on the job's summary, its runs, its page, the API, the lab reports and the
owner's page; the file is the job's, so what it holds is bounded."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from accounting.models import UsageRecord
from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from lending.models import WorkstationOwner
from portal.env import GridIntensity, env_grid_intensity
from tests.conftest import script_upload
from tests.factories import UserFactory
from usage import services
from usage.energy import PowerRow, energy_of_run, energy_text, power_row

T0 = datetime(2026, 11, 2, 21, 0, tzinfo=UTC)
NO_GRID = lambda moment: None  # noqa: E731


def rows(watts, *, every_s=10, idle_w=None, simulated=False, start=T0):
    """One helper line per reading: each reading is the draw of every device in the list."""
    return [
        PowerRow(
            time=start.timestamp() + i * every_s,
            watts={f"GPU-{d}": w for d, w in enumerate(reading)},
            idle_w=idle_w,
            simulated=simulated,
        )
        for i, reading in enumerate(watts)
    ]


def test_energy_is_the_draw_above_the_cards_idle_over_each_stretch():
    # Two cards at 255 W, idle 55 W, for ten stretches of 10 s: 2 x 200 W x 100 s = 40 kJ.
    energy = energy_of_run(rows([[255, 255]] * 11, idle_w=55), NO_GRID)
    assert energy.kwh == pytest.approx(40_000 / 3.6e6)
    assert energy.measured_s == 100
    assert energy.co2e_kg is None and not energy.idle_estimated


def test_co2e_takes_the_grids_intensity_of_the_hour_each_stretch_was_drawn():
    # 3.6 MJ (1 kWh) drawn half before 22:00 at 100 g/kWh and half after at 300 g/kWh.
    readings = rows([[1055]] * 7, every_s=600, idle_w=55, start=T0 + timedelta(minutes=30))
    grid = GridIntensity(figure=200, by_hour_of_day={21: 100, 22: 300})
    energy = energy_of_run(readings, lambda moment: grid.at(moment, UTC))
    assert energy.kwh == pytest.approx(1.0)
    assert energy.co2e_kg == pytest.approx(0.5 * 0.1 + 0.5 * 0.3)


def test_without_a_known_idle_draw_the_lowest_reading_stands_in_and_says_so():
    energy = energy_of_run(rows([[40], [240], [240], [40]]), NO_GRID)
    # 0 + 200 W x 10 s + 200 W x 10 s above the 40 W the card showed at its least.
    assert energy.kwh == pytest.approx(4000 / 3.6e6)
    assert energy.idle_estimated


def test_a_gap_the_job_was_not_running_counts_nothing():
    before = rows([[255]] * 2, idle_w=55)
    after = rows([[255]] * 2, idle_w=55, start=T0 + timedelta(hours=1))
    assert energy_of_run(before + after, NO_GRID).measured_s == 20


def test_one_reading_is_no_energy():
    assert energy_of_run(rows([[255]], idle_w=55), NO_GRID) is None


@pytest.mark.parametrize(
    "line",
    [
        {"time": 1e9, "devices": [{"uuid": "a", "power_w": float("nan")}]},
        {"time": 1e9, "devices": [{"uuid": "a", "power_w": -5}]},
        {"time": 1e9, "devices": [{"uuid": "a", "power_w": True}]},
        {"time": 1e9, "devices": [{"uuid": "a", "power_w": "300"}]},
        {"time": 1e9, "devices": [{"uuid": "a"}]},
        {"time": float("inf"), "devices": [{"uuid": "a", "power_w": 300}]},
        {"time": "now", "devices": [{"uuid": "a", "power_w": 300}]},
        {"time": 1e9, "devices": "everything"},
        ["not", "a", "line"],
    ],
)
def test_a_line_the_job_broke_holds_no_reading(line):
    assert power_row(json.loads(json.dumps(line, allow_nan=True))) is None


def test_a_reading_past_any_card_counts_as_the_most_a_card_draws():
    row = power_row({"time": 1e9, "devices": [{"uuid": "a", "power_w": 1e12}], "idle_w": 1e12})
    assert row.watts == {"a": 2000.0} and row.idle_w == 2000.0


def test_energy_is_said_in_units_people_read():
    assert energy_text(0.0004) == "0.4 Wh"
    assert energy_text(0.0421, 0.0098) == "0.0421 kWh (9.8 g CO2e)"
    assert energy_text(312.4, 73.2) == "312 kWh (73.2 kg CO2e)"
    assert energy_text(None) == "not measured"


# -- the site's grid intensity ---------------------------------------------------------------


def test_the_grid_intensity_is_one_figure_or_a_csv_by_hour(monkeypatch, tmp_path):
    monkeypatch.setenv("GRID", "233")
    assert env_grid_intensity("GRID", UTC).at(T0, UTC) == 233
    table = tmp_path / "grid.csv"
    table.write_text("hour,g_co2e_per_kwh\n21,150\n2026-11-02T22:00+00:00,410\n")
    monkeypatch.delenv("GRID")
    monkeypatch.setenv("GRID_FILE", str(table))
    grid = env_grid_intensity("GRID", UTC)
    assert grid.at(T0 + timedelta(minutes=5), UTC) == 150  # 21:05, by the hour of the day
    assert grid.at(T0 + timedelta(hours=1, minutes=5), UTC) == 410  # that very hour
    assert grid.at(T0 + timedelta(hours=5), UTC) == 280  # neither: the file's mean


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("-3", "not between 0 and 5000"),
        ("hour,g\n21,lots\n", "line 2: 'lots' is not a figure"),
        ("hour,g\n25:00,100\n", "neither an hour of the day"),
        ("hour,g\n", "no figures"),
        ("21;400\n", "needs an hour and a figure"),
    ],
)
def test_a_bad_grid_intensity_stops_the_portal_with_the_reason(monkeypatch, text, says):
    monkeypatch.setenv("GRID", text)
    with pytest.raises(ImproperlyConfigured, match=says):
        env_grid_intensity("GRID", UTC)


# -- a job's energy, end to end on the fake bridge -----------------------------------------


def write_power_samples(job, lines):
    folder = job.directory / ".nightshift"
    folder.mkdir(exist_ok=True)
    (folder / "gpu-usage.jsonl").write_text("".join(line + "\n" for line in lines))


def helper_line(at, watts, **card):
    devices = [
        {"uuid": f"GPU-{i}", "utilization": 0.9, "memory_mb": 100, "power_w": w}
        for i, w in enumerate(watts)
    ]
    return json.dumps({"time": at.timestamp(), "devices": devices, **card})


def ended_gpu_job(user, fake_bridge, lines, *, gpus=2):
    spec = specs.JobSpec(name="train", gpus=gpus, memory_mb=1024)
    job = submission.job_submit(user=user, spec=spec, script=script_upload())
    job = submission.job_submit_to_pool(job.pk)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, at=T0)
    sync.jobs_sync()
    write_power_samples(job, lines(job))
    end = T0 + timedelta(minutes=30)
    fake_bridge.set_state(str(job.public_id), CondorState.COMPLETED, at=end, exit_code=0)
    sync.jobs_sync()
    services.usage_summarise_finished(now=end + timedelta(minutes=11))
    job.refresh_from_db()
    return job


def half_an_hour_at(watts, **card):
    return lambda job: [
        helper_line(T0 + timedelta(seconds=s), watts, **card) for s in range(5, 1800, 10)
    ]


@pytest.mark.django_db
def test_an_ended_jobs_energy_is_on_its_summary_its_run_and_its_page(
    student, fake_bridge, client, settings
):
    settings.GRID_INTENSITY = GridIntensity(figure=200)
    # Two simulated cards 200 W above their 55 W idle for the 1,790 s between the readings.
    simulated = half_an_hour_at([255, 255], idle_w=55, simulated=True)
    job = ended_gpu_job(student, fake_bridge, simulated)
    summary = job.usage_summary
    kwh = 2 * 200 * 1790 / 3.6e6
    assert summary.gpu_energy_kwh == pytest.approx(kwh)
    assert summary.co2e_kg == pytest.approx(kwh * 0.2)
    assert summary.energy_simulated and not summary.energy_idle_estimated
    [record] = UsageRecord.objects.filter(job=job)
    assert record.gpu_energy_kwh == pytest.approx(kwh) and record.energy_simulated
    client.force_login(student)
    text = client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "0.199 kWh (40 g CO2e) above the cards' idle draw" in text
    assert "simulated GPUs: the figures are the simulator&#x27;s" in text
    body = client.get(reverse("api:job-usage", args=[job.public_id])).json()
    assert body["summary"]["gpu_energy_kwh"] == pytest.approx(kwh)
    assert body["summary"]["energy_simulated"] is True


@pytest.mark.django_db
def test_a_job_whose_workstation_sent_no_power_readings_says_not_measured(
    student, fake_bridge, client
):
    job = ended_gpu_job(student, fake_bridge, lambda job: [])
    assert job.usage_summary.gpu_energy_kwh is None
    client.force_login(student)
    text = client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "not measured: no power readings came back from its workstation" in text


@pytest.mark.django_db
def test_without_the_sites_grid_intensity_energy_is_shown_without_co2e(
    student, fake_bridge, client, settings
):
    settings.GRID_INTENSITY = GridIntensity()
    job = ended_gpu_job(student, fake_bridge, half_an_hour_at([140, 140]), gpus=2)
    assert job.usage_summary.co2e_kg is None
    # No idle draw from the kit: the least reading (140 W) is the idle, so nothing is above it.
    assert job.usage_summary.gpu_energy_kwh == 0 and job.usage_summary.energy_idle_estimated
    client.force_login(student)
    text = client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "no CO2e, as the site has not set its grid's intensity" in text
    assert "idle draw taken as the lowest the job&#x27;s samples saw" in text


@pytest.mark.django_db
def test_a_hostile_jobs_file_cannot_break_the_summary(student, fake_bridge):
    def hostile(job):
        good = half_an_hour_at([255], idle_w=55)(job)
        return [
            "[" * 100_000,  # nested past reading
            "\xff\xfe not json",
            json.dumps({"time": 1e30, "devices": []}),
            *good,
        ]

    job = ended_gpu_job(student, fake_bridge, hostile, gpus=1)
    assert job.usage_summary.gpu_energy_kwh == pytest.approx(200 * 1790 / 3.6e6)


@pytest.mark.django_db
def test_the_lab_report_and_the_owners_page_add_up_the_energy(
    student, fake_bridge, client, settings
):
    settings.GRID_INTENSITY = GridIntensity(figure=200)
    job = ended_gpu_job(student, fake_bridge, half_an_hour_at([255, 255], idle_w=55))
    admin = UserFactory(username="root", is_staff=True, is_superuser=True)
    client.force_login(admin)
    query = {"period": "custom", "start": "2026-11-02", "end": "2026-11-03", "group": "user"}
    report = client.get(reverse("utilisation:report"), query).content.decode()
    assert "0.20 kWh</strong> of GPU energy above idle, 0.04 kg CO2e" in report
    rows = b"".join(
        client.get(reverse("utilisation:export", args=["energy"]), query).streaming_content
    ).decode()
    # 0.1989 kWh over 1 GPU-hour (two GPUs for half an hour): 198.9 W above idle per GPU.
    assert f"{student.username},1,1,0.1989,0.0398,198.9," in rows
    WorkstationOwner.objects.create(workstation=job.workstation, user=admin)
    owner_page = client.get(reverse("lending:workstation", args=[job.workstation]))
    assert "0.199 kWh (40 g CO2e)</strong> above its idle draw" in owner_page.content.decode()


@pytest.mark.parametrize("text", ["13-01", "9/1", "02-30", "x", " , "])
def test_a_term_start_that_is_not_a_day_of_the_year_stops_the_portal(monkeypatch, text):
    from portal.env import env_month_days

    monkeypatch.setenv("TERMS", text)
    with pytest.raises(ImproperlyConfigured, match="TERMS"):
        env_month_days("TERMS", "09-01")


def test_term_starts_are_read_sorted_and_once_each(monkeypatch):
    from portal.env import env_month_days

    monkeypatch.setenv("TERMS", "09-01, 01-15,09-01")
    assert env_month_days("TERMS", "01-01") == [(1, 15), (9, 1)]
