"""The job page's status poll (jobs:status) answers 304 when nothing it shows has changed,
and a new document as soon as anything has."""

import pytest
from django.urls import reverse

from jobs import specs, submission
from jobs.models import Job, JobEvent, JobState
from jobs.schedulers import schedds_answered
from tests.conftest import script_upload
from tests.factories import MembershipFactory


@pytest.fixture
def job(student, fake_bridge):
    made = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    (made.directory / "stdout.txt").write_text("epoch 1\n")
    return made


def poll(client, job, etag=None, **offsets):
    headers = {"HTTP_IF_NONE_MATCH": etag} if etag else {}
    return client.get(reverse("jobs:status", args=[job.public_id]), offsets, **headers)


def test_a_poll_that_finds_nothing_new_is_answered_304_without_a_body(student_client, job):
    first = poll(student_client, job, stdout_offset=8)
    assert first.status_code == 200 and first["ETag"].startswith('"')
    again = poll(student_client, job, first["ETag"], stdout_offset=8)
    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == first["ETag"]


def test_the_browser_is_told_to_keep_the_answer_and_ask_again_each_time(student_client, job):
    cache_control = {part.strip() for part in poll(student_client, job)["Cache-Control"].split(",")}
    assert {"private", "no-cache"} <= cache_control
    assert "no-store" not in cache_control


def first_etag(client, job) -> str:
    return poll(client, job, stdout_offset=8)["ETag"]


def test_a_log_that_grew_is_sent(student_client, job):
    etag = first_etag(student_client, job)
    with open(job.directory / "stdout.txt", "a") as log:
        log.write("epoch 2\n")
    answer = poll(student_client, job, etag, stdout_offset=8)
    assert answer.status_code == 200
    assert answer.json()["logs"]["stdout"]["text"] == "epoch 2\n"


def test_another_offset_is_another_document(student_client, job):
    etag = first_etag(student_client, job)
    assert poll(student_client, job, etag, stdout_offset=0).status_code == 200


def test_a_change_of_state_or_a_new_event_is_sent(student_client, job):
    etag = first_etag(student_client, job)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, workstation="ws-volta")
    answer = poll(student_client, job, etag, stdout_offset=8)
    assert answer.status_code == 200 and answer.json()["workstation"] == "ws-volta"
    etag = answer["ETag"]
    JobEvent.objects.create(job=job, kind="note", state=JobState.RUNNING, detail="checkpointed")
    answer = poll(student_client, job, etag, stdout_offset=8)
    assert answer.status_code == 200
    assert answer.json()["events"][-1]["detail"] == "checkpointed"


def test_an_output_written_deep_in_the_outputs_is_sent(student_client, job):
    (job.directory / "outputs" / "checkpoints").mkdir()
    etag = first_etag(student_client, job)
    (job.directory / "outputs" / "checkpoints" / "step-100.pt").write_bytes(b"w" * 10)
    answer = poll(student_client, job, etag, stdout_offset=8)
    assert answer.status_code == 200
    assert [f["path"] for f in answer.json()["outputs"]] == ["outputs/checkpoints/step-100.pt"]
    etag = answer["ETag"]
    (job.directory / "outputs" / "checkpoints" / "step-100.pt").write_bytes(b"w" * 20)
    assert poll(student_client, job, etag, stdout_offset=8).json()["outputs"][0]["size"] == 20


def test_a_schedd_that_stops_answering_is_sent(student_client, job):
    etag = first_etag(student_client, job)
    schedds_answered([], {job.schedd: "Failed to connect"})
    answer = poll(student_client, job, etag, stdout_offset=8)
    assert answer.status_code == 200
    assert "is not answering" in answer.json()["schedd_problem"]


def test_each_viewer_has_their_own_document(client, student_client, student, job):
    """A lead reads the job but may not act on it: the same ETag must not give them the
    owner's buttons."""
    from labs.models import Membership

    membership = MembershipFactory(user=student, lab__name="Vision")
    Job.objects.filter(pk=job.pk).update(lab=membership.lab)
    lead = MembershipFactory(lab=membership.lab, role=Membership.Role.LEAD).user
    etag = first_etag(student_client, job)
    client.force_login(lead)
    answer = poll(client, job, etag, stdout_offset=8)
    assert answer.status_code == 200
    assert "Cancel" not in answer.json()["actions_html"]


def test_someone_elses_job_stays_a_404_whatever_etag_they_send(client, other_student, job):
    client.force_login(other_student)
    assert poll(client, job, '"anything"').status_code == 404
    assert poll(client, job, "*").status_code == 404
