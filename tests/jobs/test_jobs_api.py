"""The jobs API: submit, read, act, follow logs and download, as a script would."""

import io
import zipfile

import pytest
from django.urls import reverse

from condor_bridge import JobState as CondorState
from jobs import actions, specs, staging, submission, sync
from jobs.models import Job, JobState
from tests.conftest import script_upload

pytestmark = pytest.mark.django_db

JOBS = reverse("api:job-list")


def submit(api, **fields):
    data = {"name": "mnist", "gpus": 0, "script": script_upload()}
    data.update(fields)
    return api.post(JOBS, data, format="multipart")


def a_job(student, **spec) -> Job:
    return submission.job_submit(
        user=student,
        spec=specs.JobSpec(name=spec.pop("name", "x"), **spec),
        script=script_upload(),
    )


def test_submitting_a_script_creates_a_queued_job(api, fake_bridge):
    response = submit(
        api,
        arguments=["--epochs=3", "--lr 0.1"],
        environment=["WANDB_MODE=offline", "A=b=c"],
        gpus=1,
        gpu_memory_gb=10,
        cpus=2,
        memory_gb=4,
        max_runtime_minutes=30,
    )
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    body = response.json()
    assert body["id"] == str(job.public_id)
    assert body["state"] == "queued"
    assert body["request"]["arguments"] == ["--epochs=3", "--lr 0.1"]
    assert body["request"]["environment"] == {"WANDB_MODE": "offline", "A": "b=c"}
    assert body["request"]["gpus"] == 1
    assert body["request"]["gpu_memory_gb"] == 10
    assert body["request"]["memory_mb"] == 4096
    assert body["request"]["max_runtime_s"] == 1800
    assert body["links"]["self"].endswith(reverse("api:job-detail", args=[job.public_id]))
    assert job.events.filter(kind="created").exists()


def test_a_json_body_can_copy_an_earlier_jobs_script(api, student, fake_bridge):
    first = a_job(student, name="first")
    response = api.post(JOBS, {"name": "again", "source_job": str(first.public_id)}, format="json")
    assert response.status_code == 201, response.json()
    again = Job.objects.get(name="again")
    assert (again.directory / "train.py").read_text() == "print('hello')\n"


def test_a_project_archive_runs_its_entry_command(api, fake_bridge):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("train.py", "print('hi')\n")
        archive.writestr("data/x.csv", "1,2\n")
    upload = script_upload(name="project.zip")
    upload.file = io.BytesIO(buffer.getvalue())
    upload.size = len(buffer.getvalue())
    response = submit(api, script=upload, entry_command="python train.py --epochs 2")
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert job.request["arguments"] == ["--epochs", "2"]
    assert sorted(job.request["input_files"]) == ["data", "train.py"]


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"gpus": 99}, "gpus", "less than or equal to 8"),
        ({"gpus": "two"}, "gpus", "valid integer"),
        ({"memory_gb": 0}, "memory_gb", "greater than or equal to"),
        ({"name": "x" * 201}, "name", "no more than 200"),
        ({"script": None}, "script", "Upload a Python script"),
        ({"environment": ["NOEQUALS"]}, "environment.0", "KEY=VALUE"),
        ({"environment": ["NIGHTSHIFT_X=1"]}, "environment", "set by Nightshift"),
        ({"environment": ["1BAD=x"]}, "environment", "not a valid variable name"),
        ({"software_environment": "Nope"}, "software_environment", "No environment called"),
        ({"keep_outputs": ["../etc"]}, "keep_outputs", ""),
        ({"arguments": ["x" * 5000]}, "arguments.0", "no more than 4096"),
        ({"arguments": ["a\x00b"]}, "arguments.0", "Null characters"),
        ({"script": script_upload(name="evil.sh")}, "script", "Upload a Python script"),
    ],
)
def test_invalid_input_is_a_400_that_names_the_field(api, fake_bridge, fields, field, words):
    data = {"name": "mnist", "gpus": 0, "script": script_upload()} | fields
    data = {key: value for key, value in data.items() if value is not None}
    response = api.post(JOBS, data, format="multipart")
    body = response.json()
    assert response.status_code == 400, body
    assert body["error"]["code"] == "invalid"
    assert field in body["error"]["fields"], body
    assert words in " ".join(body["error"]["fields"][field])
    assert not Job.objects.exists()


@pytest.mark.parametrize("name", [None, "", "  "])
def test_a_job_submitted_without_a_name_is_named_after_its_file(api, fake_bridge, name):
    data = {"gpus": 0, "script": script_upload(name="train_resnet.py")}
    if name is not None:
        data["name"] = name
    response = api.post(JOBS, data, format="multipart")
    assert response.status_code == 201, response.json()
    assert response.json()["name"] == "train_resnet.py"


def test_a_copy_submitted_without_a_name_takes_its_source_jobs_name(api, fake_bridge):
    first = api.post(
        JOBS, {"name": "mnist baseline", "gpus": 0, "script": script_upload()}, format="multipart"
    ).json()
    copy = api.post(JOBS, {"source_job": first["id"], "gpus": 0}, format="json")
    assert copy.status_code == 201, copy.json()
    assert copy.json()["name"] == "mnist baseline"


def test_a_request_no_workstation_could_run_is_refused_with_the_reason(api, fake_bridge):
    response = submit(api, gpus=1, gpu_memory_gb=200)
    body = response.json()
    assert response.status_code == 400
    assert "gpu_memory_gb" in body["error"]["fields"]
    assert "Change the request" in body["error"]["message"]


def test_the_list_filters_by_state_and_name_and_pages(api, student, fake_bridge):
    for index in range(30):
        a_job(student, name=f"resnet {index}")
    a_job(student, name="bert")
    Job.objects.filter(name="bert").update(state=JobState.COMPLETED)
    page = api.get(JOBS, {"page_size": 10}).json()
    assert page["count"] == 31
    assert len(page["results"]) == 10
    assert page["next"]
    assert [j["name"] for j in api.get(JOBS, {"state": "completed"}).json()["results"]] == ["bert"]
    assert api.get(JOBS, {"name": "RESNET 2"}).json()["count"] == 11  # 2 and 20 to 29
    today = Job.objects.first().created_at.date().isoformat()
    assert api.get(JOBS, {"submitted_after": today}).json()["count"] == 31
    assert api.get(JOBS, {"submitted_before": "2000-01-01"}).json()["count"] == 0


def test_a_job_can_be_found_by_the_start_of_its_id(api, student, fake_bridge):
    job = a_job(student)
    found = api.get(JOBS, {"id_prefix": str(job.public_id)[:8]}).json()
    assert [j["id"] for j in found["results"]] == [str(job.public_id)]
    assert api.get(JOBS, {"id_prefix": "zz'; drop"}).json()["count"] == 0


def test_a_bad_filter_value_is_a_400(api):
    response = api.get(JOBS, {"state": "exploded", "submitted_after": "yesterday"})
    body = response.json()
    assert response.status_code == 400
    assert set(body["error"]["fields"]) == {"state", "submitted_after"}


def test_cancel_hold_and_release_act_and_are_recorded(api, student, fake_bridge):
    job = a_job(student)
    submission.job_submit_to_pool(job.pk)
    fake_bridge.set_state(str(job.public_id), CondorState.IDLE)
    sync.jobs_sync()
    held = api.post(reverse("api:job-hold", args=[job.public_id]))
    assert held.status_code == 200, held.json()
    job.refresh_from_db()
    assert job.events.filter(kind="hold requested", actor__username="student").exists()
    fake_bridge.set_state(str(job.public_id), CondorState.HELD, hold_reason="held by user")
    sync.jobs_sync()
    assert api.post(reverse("api:job-release", args=[job.public_id])).status_code == 200
    cancel = api.post(reverse("api:job-cancel", args=[job.public_id]))
    assert cancel.status_code == 200
    assert Job.objects.get(pk=job.pk).events.filter(kind__startswith="cancel").exists()


def test_an_action_that_is_not_possible_now_is_a_409_with_the_reason(api, student, fake_bridge):
    job = a_job(student)
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    response = api.post(reverse("api:job-release", args=[job.public_id]))
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
    assert response.json()["error"]["message"]


def test_rerun_and_clone_submit_new_jobs(api, student, fake_bridge):
    job = a_job(student, name="base", arguments=["--lr", "0.1"], gpus=0)
    rerun = api.post(reverse("api:job-rerun", args=[job.public_id]))
    assert rerun.status_code == 201
    clone = api.post(
        reverse("api:job-clone", args=[job.public_id]),
        {"name": "base lr 0.01", "arguments": ["--lr", "0.01"]},
        format="json",
    )
    assert clone.status_code == 201, clone.json()
    body = clone.json()
    assert body["name"] == "base lr 0.01"
    assert body["request"]["arguments"] == ["--lr", "0.01"]
    assert body["request"]["gpus"] == 0  # kept from the original
    assert Job.objects.count() == 3


def test_the_timeline_lists_events_with_their_actor(api, student, fake_bridge):
    job = a_job(student)
    actions.job_cancel(job=job, user=student)
    events = api.get(reverse("api:job-events", args=[job.public_id])).json()
    assert [e["kind"] for e in events][:1] == ["created"]
    assert events[-1]["actor"] == "student"


def test_logs_are_followed_by_byte_offset(api, student, fake_bridge):
    job = a_job(student)
    (job.directory / "stdout.txt").write_text("epoch 1\n")
    url = reverse("api:job-log", args=[job.public_id, "stdout"])
    first = api.get(url).json()
    assert first | {"is_final": None} == {
        "stream": "stdout",
        "text": "epoch 1\n",
        "start": 0,
        "offset": 8,
        "size": 8,
        "is_final": None,
    }
    with open(job.directory / "stdout.txt", "a") as log:
        log.write("epoch 2\n")
    second = api.get(url, {"offset": first["offset"]}).json()
    assert (second["text"], second["offset"]) == ("epoch 2\n", 16)
    assert api.get(url, {"offset": "x"}).status_code == 400
    assert api.get(reverse("api:job-log", args=[job.public_id, "passwd"])).status_code == 404


def test_outputs_list_download_and_zip(api, student, fake_bridge):
    job = a_job(student)
    (job.directory / "outputs" / "model.txt").write_text("weights")
    (job.directory / "outputs" / "link.txt").symlink_to("/etc/passwd")
    listing = api.get(reverse("api:job-outputs", args=[job.public_id])).json()
    assert [(f["path"], f["size"]) for f in listing] == [("outputs/model.txt", 7)]
    one = api.get(listing[0]["url"])
    assert b"".join(one.streaming_content) == b"weights"
    assert (
        api.get(reverse("api:job-output", args=[job.public_id, "outputs/link.txt"])).status_code
        == 404
    )
    zipped = api.get(reverse("api:job-outputs-zip", args=[job.public_id]))
    archive = zipfile.ZipFile(io.BytesIO(b"".join(zipped.streaming_content)))
    assert archive.namelist() == ["outputs/model.txt"]


def test_metrics_come_as_json_and_can_be_downsampled(api, student, fake_bridge):
    job = a_job(student)
    path = staging.job_metrics_path(job)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'{{"step": {i}, "loss": {1 / (i + 1)}}}\n' for i in range(50)))
    url = reverse("api:job-metrics", args=[job.public_id])
    body = api.get(url, {"limit": 10}).json()
    assert body["names"] == ["loss"]
    assert body["total_rows"] == 50
    assert len(body["rows"]) <= 10
    assert api.get(url, {"limit": 0}).status_code == 400


def test_the_pool_lists_workstations_gpus_and_environments(api, fake_bridge):
    body = api.get(reverse("api:pool")).json()
    names = {w["name"] for w in body["workstations"]}
    assert "ws-ampere" in names
    ampere = next(w for w in body["workstations"] if w["name"] == "ws-ampere")
    assert ampere["gpu"]["name"]
    assert body["total_gpus"] >= 1
    assert [e["reference"] for e in body["environments"]] == ["System Python@1"]
    assert [e["name"] for e in body["environments"]] == ["System Python"]


def test_match_says_what_fits_with_the_same_logic_as_the_form(api, student, fake_bridge):
    fits = api.post(reverse("api:match"), {"gpus": 1, "gpu_memory_gb": 40}, format="json").json()
    spec = specs.JobSpec(name="m", gpus=1, gpu_memory_gb=40)
    expected = submission.job_match_summary(user=student, spec=spec)
    assert fits["machines_matching"] == expected.machines_matching >= 1
    nothing = api.post(reverse("api:match"), {"gpus": 8}, format="json").json()
    assert nothing["can_ever_run"] is False
    assert nothing["reason"]


def test_me_counts_my_jobs_by_state(api, student, fake_bridge):
    a_job(student)
    body = api.get(reverse("api:me")).json()
    assert body["username"] == "student"
    assert body["jobs_by_state"] == {"queued": 1}
    assert [q["lab"] for q in body["quotas"]] == [None]  # no lab: the site's defaults
    assert body["quotas"][0]["accounting_group"] == "nightshift"
