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


def poll(client, job, etag=None, *, partial=False, **offsets):
    headers = {"HTTP_IF_NONE_MATCH": etag} if etag else {}
    if partial:
        headers["HTTP_X_NIGHTSHIFT_PARTIAL"] = "logs"
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


# The page's next poll: the ETag of an answer names the document for the offsets it leaves
# the page at, and the middleware answers that poll before sessions and users are loaded.


def test_the_page_asks_from_where_the_answer_left_it_and_gets_a_304(student_client, job):
    first = poll(student_client, job, stdout_offset=-1)
    assert first.json()["logs"]["stdout"]["offset"] == 8
    assert poll(student_client, job, first["ETag"], stdout_offset=8).status_code == 304


def test_an_unchanged_poll_costs_one_query_and_loads_no_session(
    student_client, job, django_assert_num_queries
):
    etag = first_etag(student_client, job)
    with django_assert_num_queries(1) as captured:
        answer = poll(student_client, job, etag, stdout_offset=8)
    assert answer.status_code == 304
    # The one query is the middleware's: no session row read on its own, no user, no job.
    assert "md5(j::text)" in captured.captured_queries[0]["sql"]


def test_the_early_304_carries_what_the_views_304_carries(student_client, job, settings):
    etag = first_etag(student_client, job)
    early = poll(student_client, job, etag, stdout_offset=8)
    settings.MIDDLEWARE = [
        m for m in settings.MIDDLEWARE if m != "jobs.polling.StatusPollMiddleware"
    ]
    late = poll(student_client, job, etag, stdout_offset=8)
    assert early.status_code == late.status_code == 304
    for header in ("ETag", "Cache-Control", "Vary"):
        assert early[header] == late[header], header
    assert "X-Nightshift-Partial" in early["Vary"]


def test_a_log_cut_short_leaves_the_rest_for_the_next_poll(student_client, job):
    from jobs.selectors import LOG_CHUNK_BYTES

    (job.directory / "stdout.txt").write_text("x" * (LOG_CHUNK_BYTES + 10))
    first = poll(student_client, job, stdout_offset=0)
    left_at = first.json()["logs"]["stdout"]["offset"]
    assert left_at == LOG_CHUNK_BYTES
    rest = poll(student_client, job, first["ETag"], stdout_offset=left_at)
    assert rest.status_code == 200 and rest.json()["logs"]["stdout"]["text"] == "x" * 10


def test_a_signed_out_session_gets_no_304_from_what_it_kept(client, student, job):
    client.force_login(student)
    etag = first_etag(client, job)
    session = client.cookies["sessionid"].value
    client.logout()
    client.cookies["sessionid"] = session
    answer = poll(client, job, etag, stdout_offset=8)
    assert answer.status_code == 302 and "/login" in answer["Location"]


@pytest.mark.parametrize("change", ["password", "deactivated"])
def test_a_viewer_whose_account_changed_gets_no_304(student_client, student, job, change):
    etag = first_etag(student_client, job)
    if change == "password":
        student.set_password("a-new-long-password")
    else:
        student.is_active = False
    student.save()
    assert poll(student_client, job, etag, stdout_offset=8).status_code == 302


def test_another_session_cannot_use_what_one_session_was_told(client, student, other_student, job):
    from django.test import Client

    owner = Client()
    owner.force_login(student)
    etag = first_etag(owner, job)
    client.force_login(other_student)
    assert poll(client, job, etag, stdout_offset=8).status_code == 404


def test_a_new_output_file_or_a_renamed_one_is_sent(student_client, job):
    etag = first_etag(student_client, job)
    (job.directory / "outputs" / "model.pt").write_bytes(b"w")
    answer = poll(student_client, job, etag, stdout_offset=8)
    assert [f["path"] for f in answer.json()["outputs"]] == ["outputs/model.pt"]
    (job.directory / "outputs" / "model.pt").rename(job.directory / "outputs" / "best.pt")
    answer = poll(student_client, job, answer["ETag"], stdout_offset=8)
    assert [f["path"] for f in answer.json()["outputs"]] == ["outputs/best.pt"]


def test_a_change_the_sync_writes_in_bulk_is_sent(student_client, job):
    """The sync writes rows with UPDATE ... FROM VALUES, past the ORM's save()."""
    from plumbing.db import bulk_update_rows

    etag = first_etag(student_client, job)
    job.status_detail = "moved to ws-volta"
    bulk_update_rows(Job, [job], ["status_detail"])
    answer = poll(student_client, job, etag, stdout_offset=8)
    assert answer.status_code == 200 and answer.json()["status_detail"] == "moved to ws-volta"


# Only the logs grew, as they do all through a training run: the owner's page that asks for it
# gets just the new text, from the middleware.


def test_the_owners_page_gets_only_the_new_log_text(student_client, job, django_assert_num_queries):
    etag = first_etag(student_client, job)
    with open(job.directory / "stdout.txt", "a") as log:
        log.write("epoch 2\n")
    with django_assert_num_queries(1):
        answer = poll(student_client, job, etag, partial=True, stdout_offset=8)
    assert answer.status_code == 200
    assert answer.json() == {
        "logs_only": True,
        "logs": {
            "stdout": {"text": "epoch 2\n", "start": 8, "offset": 16, "size": 16},
            "stderr": {"text": "", "start": 0, "offset": 0, "size": 0},
            "install": {"text": "", "start": 0, "offset": 0, "size": 0},
        },
    }
    assert (
        poll(student_client, job, answer["ETag"], partial=True, stdout_offset=16).status_code == 304
    )


def test_a_page_that_does_not_ask_for_it_gets_the_whole_document(student_client, job):
    etag = first_etag(student_client, job)
    with open(job.directory / "stdout.txt", "a") as log:
        log.write("epoch 2\n")
    answer = poll(student_client, job, etag, stdout_offset=8)
    assert answer.json()["state"] and "logs_only" not in answer.json()


def test_a_change_beside_the_logs_gets_the_whole_document(student_client, job):
    etag = first_etag(student_client, job)
    with open(job.directory / "stdout.txt", "a") as log:
        log.write("epoch 2\n")
    JobEvent.objects.create(job=job, kind="note", state=JobState.RUNNING, detail="checkpointed")
    answer = poll(student_client, job, etag, partial=True, stdout_offset=8)
    assert "logs_only" not in answer.json()
    assert answer.json()["events"][-1]["detail"] == "checkpointed"
    assert answer.json()["logs"]["stdout"]["text"] == "epoch 2\n"


def test_a_lead_reading_the_job_gets_the_whole_document(client, student, job):
    """Only the owner's access cannot change under them; a lead's answers go through the
    view, which checks their access each time."""
    from labs.models import Membership

    membership = MembershipFactory(user=student, lab__name="Vision")
    Job.objects.filter(pk=job.pk).update(lab=membership.lab)
    lead = MembershipFactory(lab=membership.lab, role=Membership.Role.LEAD).user
    client.force_login(lead)
    etag = first_etag(client, job)
    assert poll(client, job, etag, stdout_offset=8).status_code == 304
    with open(job.directory / "stdout.txt", "a") as log:
        log.write("epoch 2\n")
    answer = poll(client, job, etag, partial=True, stdout_offset=8)
    assert "logs_only" not in answer.json()


def test_a_log_replaced_by_a_link_is_not_read_by_the_early_answer(student_client, job, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the other job's weights\n")
    etag = first_etag(student_client, job)
    (job.directory / "stdout.txt").unlink()
    (job.directory / "stdout.txt").symlink_to(secret)
    answer = poll(student_client, job, etag, partial=True, stdout_offset=0)
    assert "weights" not in answer.content.decode()


def test_a_change_made_while_the_document_is_read_shows_in_the_next_poll(
    student_client, job, monkeypatch
):
    """The sync may write the job between the view's read of it and its look at what the
    ETag is made of: the page must not be told 304 over a document without the change."""
    from jobs import polling

    look_now = polling.look_now

    def sync_writes_first(note, session_key):
        Job.objects.filter(pk=job.pk).update(state=JobState.REMOVED)
        return look_now(note, session_key)

    monkeypatch.setattr(polling, "look_now", sync_writes_first)
    first = poll(student_client, job, stdout_offset=8)
    monkeypatch.undo()
    again = poll(student_client, job, first["ETag"], stdout_offset=8)
    shown = first.json()["state"] if again.status_code == 304 else again.json()["state"]
    assert shown == JobState.REMOVED
