"""/metrics: what a Prometheus server scrapes, and who may scrape it."""

import contextlib
import uuid

import pytest
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from accounting.models import CapacitySample
from condor_bridge import BridgeError
from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from portal.celery import app
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db
METRICS = reverse("metrics")


@pytest.fixture
def fresh_metrics(settings):
    """Counters live in Redis under the portal instance's name: a new name, a clean slate."""
    settings.NIGHTSHIFT_INSTANCE = f"metrics-{uuid.uuid4().hex[:12]}"


def scrape(client, **extra) -> dict[tuple[str, tuple], float]:
    response = client.get(METRICS, **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def submit(student, name="m"):
    """Accepted, then handed to the pool as the worker's task would."""
    job = submission.job_submit(user=student, spec=specs.JobSpec(name=name), script=script_upload())
    with contextlib.suppress(BridgeError):  # the task would retry
        submission.job_submit_to_pool(job.pk)
    return job


def test_jobs_are_counted_by_state(client, fresh_metrics, fake_bridge, student):
    first, second, _ = submit(student), submit(student), submit(student)
    fake_bridge.set_state(str(first.public_id), CondorState.RUNNING)
    fake_bridge.set_state(str(second.public_id), CondorState.COMPLETED, exit_code=0)
    sync.jobs_sync()
    samples = scrape(client)
    assert samples[("nightshift_jobs", (("state", "running"),))] == 1
    assert samples[("nightshift_jobs", (("state", "completed"),))] == 1
    assert samples[("nightshift_jobs", (("state", "idle"),))] == 1
    assert samples[("nightshift_jobs", (("state", "held"),))] == 0


def test_submissions_are_timed_and_their_failures_counted(
    client, fresh_metrics, fake_bridge, student
):
    submit(student)
    submit(student)
    fake_bridge.down = True
    stuck = submit(student)
    fake_bridge.down = False
    samples = scrape(client)
    submitted = (("kind", "job"), ("outcome", "submitted"))
    assert samples[("nightshift_submissions_total", submitted)] == 2
    retrying = (("kind", "job"), ("outcome", "retrying"))
    assert samples[("nightshift_submissions_total", retrying)] == 1
    assert samples[("nightshift_submission_latency_seconds_count", (("kind", "job"),))] == 2
    assert (
        samples[("nightshift_submission_latency_seconds_bucket", (("kind", "job"), ("le", "+Inf")))]
        == 2
    )
    assert stuck.pk


def test_sync_cycles_give_duration_and_lag_and_schedd_calls_their_latency(
    client, fresh_metrics, fake_bridge, student
):
    samples = scrape(client)
    assert samples[("nightshift_sync_lag_seconds", ())] == float("inf")
    submit(student)
    sync.jobs_sync()
    samples = scrape(client)
    assert 0 <= samples[("nightshift_sync_lag_seconds", ())] < 60
    assert samples[("nightshift_sync_duration_seconds_count", ())] == 1
    assert samples[("nightshift_sync_cycles_total", (("outcome", "ok"),))] == 1
    assert samples[("nightshift_schedd_call_duration_seconds_count", (("call", "query"),))] >= 1
    assert samples[("nightshift_schedd_reachable", ())] == 1

    fake_bridge.down = True
    with pytest.raises(Exception):  # noqa: B017 - the bridge's error, whatever its class
        sync.jobs_sync()
    samples = scrape(client)
    assert samples[("nightshift_sync_cycles_total", (("outcome", "failed"),))] == 1
    assert samples[("nightshift_schedd_reachable", ())] == 0
    assert samples[("nightshift_schedd_call_errors_total", (("call", "query"),))] >= 1


def test_queue_depth_is_read_from_the_broker(client, fresh_metrics, settings):
    import redis

    queue = f"metrics-test-{uuid.uuid4().hex[:8]}"
    broker = redis.Redis.from_url(settings.REDIS_URL)
    default = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        broker.rpush(queue, "a", "b", "c")
        assert scrape(client)[("nightshift_celery_queue_length", (("queue", queue),))] == 3
    finally:
        broker.delete(queue)
        app.conf.task_default_queue = default


def test_pool_gpus_come_from_the_latest_capacity_sample(client, fresh_metrics):
    now = timezone.now().replace(microsecond=0)
    earlier = now - timezone.timedelta(minutes=5)
    CapacitySample.objects.create(
        taken_at=earlier, seconds=300, workstation="a", total_gpus=4, idle_gpus=4
    )
    CapacitySample.objects.create(
        taken_at=now,
        seconds=300,
        workstation="a",
        total_gpus=4,
        idle_gpus=1,
        nightshift_gpus=2,
        other_gpus=1,
    )
    CapacitySample.objects.create(
        taken_at=now, seconds=300, workstation="b", total_gpus=2, unavailable_gpus=2
    )
    samples = scrape(client)
    gpus = {
        state: samples[("nightshift_pool_gpus", (("state", state),))]
        for state in ("free", "busy", "unavailable")
    }
    assert gpus == {"free": 1, "busy": 3, "unavailable": 2}
    assert samples[("nightshift_pool_gpus_nightshift", ())] == 2
    assert samples[("nightshift_pool_sample_timestamp_seconds", ())] == now.timestamp()


def test_scrapers_from_elsewhere_are_refused(client, settings):
    response = client.get(METRICS, REMOTE_ADDR="192.0.2.7")
    assert response.status_code == 403
    assert "NIGHTSHIFT_METRICS_TOKEN" in response.content.decode()
    assert b"nightshift_jobs" not in response.content


def test_an_allowed_network_may_scrape(client, settings):
    import ipaddress

    settings.METRICS_ALLOW = [ipaddress.ip_network("192.0.2.0/24")]
    assert client.get(METRICS, REMOTE_ADDR="192.0.2.7").status_code == 200
    assert client.get(METRICS, REMOTE_ADDR="127.0.0.1").status_code == 403


def test_the_token_lets_a_scraper_in_from_anywhere(client, settings):
    settings.METRICS_TOKEN = "s3cret-metrics-token"
    good = client.get(
        METRICS, REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer s3cret-metrics-token"
    )
    assert good.status_code == 200
    wrong = client.get(METRICS, REMOTE_ADDR="192.0.2.7", HTTP_AUTHORIZATION="Bearer guess")
    assert wrong.status_code == 403


def test_behind_nginx_the_address_nginx_saw_counts(client, settings):
    """Every request reaches gunicorn from nginx on 127.0.0.1; the real client is in
    X-Forwarded-For, which nginx appends to."""
    settings.TRUSTED_PROXY_COUNT = 1
    outside = client.get(
        METRICS, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1, 198.51.100.4"
    )
    assert outside.status_code == 403
    local = client.get(METRICS, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1")
    assert local.status_code == 200
