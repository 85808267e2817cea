"""Word of a job on the real pool, sent by the real worker: a signed webhook, an encrypted
push to a browser's push service and an e-mail through an SMTP server, all on 127.0.0.1;
each event once."""

import json
import time

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from standardwebhooks import Webhook as Verifier

from jobs.models import Job, JobState
from notifications import services
from notifications.models import Delivery
from tests.conftest import script_upload
from tests.helpers import wait_for
from tests.pipeline import wait_for_state

pytestmark = [pytest.mark.condor, pytest.mark.timeout(300)]

# Long enough that a sync (every second here) sees it running.
SCRIPT = "import time\nprint('training')\ntime.sleep(8)\nprint('done')\n"


@pytest.fixture
def worker_that_notifies(live_pipeline, notify_settings, smtp_server):
    """The worker reaches the receivers on 127.0.0.1, with the site key and mail server."""
    live_pipeline.kill_worker()
    live_pipeline.start_worker(
        NIGHTSHIFT_NOTIFY_URL_ALLOW="127.0.0.0/8",
        NIGHTSHIFT_VAPID_PRIVATE_KEY=str(notify_settings.VAPID_PRIVATE_KEY),
        NIGHTSHIFT_PORTAL_URL=notify_settings.PORTAL_URL,
        EMAIL_BACKEND="django.core.mail.backends.smtp.EmailBackend",
        EMAIL_HOST="127.0.0.1",
        EMAIL_PORT=str(smtp_server.port),
    )
    yield live_pipeline
    live_pipeline.kill_worker()
    live_pipeline.start_worker()


def test_a_job_on_the_pool_is_told_by_every_channel_once(
    client, worker_that_notifies, webhook_receiver, push_service, smtp_server
):
    student = get_user_model().objects.create_user(
        "hedy", email="hedy@example.edu", password="a-long-test-password"
    )
    _, secret = services.webhook_set(user=student, url=webhook_receiver.url + "/hook")
    push_service.browser(student, "phone")
    client.force_login(student)
    answer = client.post(
        reverse("jobs:new"),
        {
            "name": "told",
            "gpus": 0,
            "cpus": 1,
            "memory_gb": 1,
            "arguments": "",
            "notify_by_email": "on",
            "script": script_upload(SCRIPT),
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    job = Job.objects.get(owner=student)
    wait_for_state(job, {JobState.COMPLETED, JobState.FAILED, JobState.HELD}, timeout=200)
    assert job.state == JobState.COMPLETED, job.status_detail

    wait_for(
        lambda: (
            not Delivery.objects.filter(
                notification__user=student, state=Delivery.State.PENDING
            ).exists()
            and Delivery.objects.filter(notification__user=student).count() == 5
        ),
        timeout=60,
        what="the worker to send the start (browser, webhook) and the end (and e-mail)",
    )
    time.sleep(3)  # a second sync or a task run twice would send more by now

    types = [json.loads(m.body)["type"] for m in webhook_receiver.received]
    assert types == ["job.started", "job.ended"]
    for message in webhook_receiver.received:
        Verifier(secret).verify(message.body, message.headers)
    pushed = [push_service.decrypted(m)["title"] for m in push_service.received]
    assert pushed == ["“told” started", "“told” completed"]
    [mail] = smtp_server.messages
    assert mail.rcpt_tos == ["hedy@example.edu"]
    assert f"/jobs/{job.public_id}/" in mail.content.decode()
    assert set(Delivery.objects.values_list("state", flat=True)) == {"sent"}
