"""Sampling running jobs and summarising finished ones, on the fake bridge."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from tests.conftest import script_upload
from usage import services
from usage.models import JobUsageSummary, UsageSample

T0 = datetime(2026, 11, 2, 21, 0, tzinfo=UTC)


def submit(user, **spec):
    spec.setdefault("name", "train")
    job = submission.job_submit(user=user, spec=specs.JobSpec(**spec), script=script_upload())
    return submission.job_submit_to_pool(job.pk)


def run(fake_bridge, job, at):
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, at=at)
    sync.jobs_sync()


@pytest.mark.django_db
def test_a_running_job_is_sampled_with_htcondors_figures(student, fake_bridge):
    job = submit(student, memory_mb=4096)
    run(fake_bridge, job, T0)
    fake_bridge.set_usage(
        str(job.public_id), cpus_used=0.9, memory_mb=300, memory_peak_mb=310, disk_mb=12
    )
    assert services.usage_sample_running(now=T0 + timedelta(seconds=30)) == 1
    [sample] = UsageSample.objects.filter(job=job)
    assert (sample.cpus, sample.memory_mb, sample.memory_peak_mb, sample.disk_mb) == (
        0.9,
        300,
        310,
        12,
    )
    assert sample.run_started_at == T0 and sample.workstation == "ws-ampere"
    assert sample.gpu_utilization is None and sample.gpu_source == ""


@pytest.mark.django_db
def test_jobs_that_do_not_run_are_not_sampled(student, fake_bridge):
    submit(student)
    assert services.usage_sample_running(now=T0) == 0
    assert not UsageSample.objects.exists()


@pytest.mark.django_db
def test_the_gpu_figures_of_a_sample_are_how_busy_the_gpus_were_since_the_last_one(
    student, fake_bridge
):
    job = submit(student, gpus=2)
    run(fake_bridge, job, T0)
    job_id = str(job.public_id)
    # HTCondor reports the run's average: 0.5 GPUs' worth over the first 100 s, then 1.0
    # over 200 s, so the second 100 s kept both GPUs fully busy.
    fake_bridge.set_usage(job_id, gpus_used=0.5, gpu_memory_peak_mb=2000)
    services.usage_sample_running(now=T0 + timedelta(seconds=100))
    fake_bridge.set_usage(job_id, gpus_used=1.0, gpu_memory_peak_mb=2500)
    services.usage_sample_running(now=T0 + timedelta(seconds=200))
    first, second = UsageSample.objects.filter(job=job).order_by("taken_at")
    assert first.gpu_utilization == pytest.approx(0.25)
    assert second.gpu_utilization == pytest.approx(0.75)
    assert (second.gpus_busy, second.gpu_memory_mb, second.gpu_source) == (1.0, 2500, "htcondor")


@pytest.mark.django_db
def test_without_htcondors_gpu_figures_the_helpers_nvidia_smi_samples_are_read(
    student, fake_bridge
):
    job = submit(student, gpus=2)
    run(fake_bridge, job, T0)
    samples = job.directory / ".nightshift" / "gpu-usage.jsonl"
    lines = [
        {
            "time": (T0 + timedelta(seconds=s)).timestamp(),
            "devices": [
                {"uuid": "GPU-aa", "utilization": 0.8, "memory_mb": 5000},
                {"uuid": "GPU-bb", "utilization": 0.0, "memory_mb": 300},
            ],
        }
        for s in (10, 20, 30)
    ]
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines) + "not json\n")
    services.usage_sample_running(now=T0 + timedelta(seconds=35))
    [sample] = UsageSample.objects.filter(job=job)
    assert sample.gpu_source == "helper"
    assert sample.gpu_utilization == pytest.approx(0.4)  # one of two GPUs busy at 80 %
    assert (sample.gpus_active, sample.gpu_memory_mb) == (1, 5000)


@pytest.mark.django_db
def test_a_link_in_place_of_the_helpers_samples_is_not_followed(student, fake_bridge, tmp_path):
    job = submit(student, gpus=1)
    run(fake_bridge, job, T0)
    secret = tmp_path / "secret.jsonl"
    secret.write_text(
        json.dumps(
            {
                "time": T0.timestamp() + 5,
                "devices": [{"uuid": "GPU-aa", "utilization": 1, "memory_mb": 1}],
            }
        )
        + "\n"
    )
    (job.directory / ".nightshift" / "gpu-usage.jsonl").symlink_to(secret)
    services.usage_sample_running(now=T0 + timedelta(seconds=35))
    assert UsageSample.objects.get(job=job).gpu_utilization is None


@pytest.mark.django_db
def test_a_finished_job_is_summarised_once_from_its_final_ad_and_its_runs(student, fake_bridge):
    job = submit(student, gpus=2, memory_mb=8192, cpus=4)
    job_id = str(job.public_id)
    run(fake_bridge, job, T0)
    fake_bridge.set_usage(
        job_id, cpus_used=1.5, memory_peak_mb=3100, gpus_used=0.35, gpu_memory_peak_mb=9000
    )
    services.usage_sample_running(now=T0 + timedelta(minutes=10))
    fake_bridge.set_state(job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=30), exit_code=0)
    sync.jobs_sync()
    assert services.usage_summarise_finished(now=T0 + timedelta(minutes=31)) == 1
    assert services.usage_summarise_finished(now=T0 + timedelta(minutes=32)) == 0
    summary = JobUsageSummary.objects.get(job=job)
    assert summary.measured_s == 1800
    assert summary.gpu_utilization == pytest.approx(0.35 / 2)
    assert summary.memory_peak_mb == 3100 and summary.cpus_used == 1.5
    assert summary.gpu_hours == pytest.approx(1.0)  # 30 min x 2 GPUs
    assert summary.idle_gpu_hours == pytest.approx(1.0 * (1 - 0.35 / 2))
    assert (summary.user, summary.lab_id) == (student, job.lab_id)
    assert UsageSample.objects.filter(job=job, final=True).count() == 1


@pytest.mark.django_db
def test_an_evicted_and_resumed_job_keeps_each_runs_samples(student, fake_bridge):
    job = submit(student)
    job_id = str(job.public_id)
    run(fake_bridge, job, T0)
    fake_bridge.set_usage(job_id, memory_mb=100)
    services.usage_sample_running(now=T0 + timedelta(minutes=5))
    fake_bridge.set_state(job_id, CondorState.IDLE, at=T0 + timedelta(minutes=6))
    sync.jobs_sync()
    run(fake_bridge, job, T0 + timedelta(minutes=8))
    fake_bridge.set_usage(job_id, memory_mb=150)
    services.usage_sample_running(now=T0 + timedelta(minutes=9))
    runs = [(s.run_started_at, s.memory_mb) for s in UsageSample.objects.filter(job=job)]
    assert runs == [(T0, 100), (T0 + timedelta(minutes=8), 150)]


@pytest.mark.django_db
def test_a_schedd_that_does_not_answer_skips_one_sampling(student, fake_bridge):
    from usage.tasks import sample_usage

    job = submit(student)
    run(fake_bridge, job, T0)
    fake_bridge.down = True
    assert sample_usage() == (0, 0)
    fake_bridge.down = False
    assert sample_usage()[0] == 1


@pytest.mark.django_db
def test_samples_of_jobs_summarised_long_ago_are_purged_and_their_summaries_kept(
    student, fake_bridge
):
    job = submit(student)
    job_id = str(job.public_id)
    run(fake_bridge, job, T0)
    services.usage_sample_running(now=T0 + timedelta(minutes=1))
    fake_bridge.set_state(job_id, CondorState.COMPLETED, at=T0 + timedelta(minutes=2), exit_code=0)
    sync.jobs_sync()
    services.usage_summarise_finished(now=T0 + timedelta(minutes=3))
    assert (
        services.usage_purge_samples(older_than=timedelta(days=90), now=T0 + timedelta(days=30))
        == 0
    )
    assert (
        services.usage_purge_samples(older_than=timedelta(days=90), now=T0 + timedelta(days=91))
        == 2
    )
    assert JobUsageSummary.objects.filter(job=job).exists()


@pytest.mark.django_db
def test_nonsense_in_the_helpers_samples_reads_as_nothing(student, fake_bridge):
    job = submit(student, gpus=1)
    run(fake_bridge, job, T0)
    at = (T0 + timedelta(seconds=5)).timestamp()
    nonsense = '[{"uuid": "a", "utilization": NaN, "memory_mb": Infinity}]'
    (job.directory / ".nightshift" / "gpu-usage.jsonl").write_text(
        '{"time": NaN, "devices": [{"uuid": "a", "utilization": 1, "memory_mb": 1}]}\n'
        f'{{"time": {at}, "devices": {nonsense}}}\n'
        f'{{"time": {at}, "devices": "no"}}\n'
    )
    services.usage_sample_running(now=T0 + timedelta(seconds=35))
    sample = UsageSample.objects.get(job=job)
    assert (sample.gpu_utilization, sample.gpu_memory_mb) == (0.0, 0.0)
