"""The job pages: upload, follow, download; and nobody sees another's job."""

import json
import os
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from accounting.models import UsageRecord
from jobs import selectors, specs, staging, submission, sync
from jobs.models import Job, JobState
from tests.conftest import script_upload
from tests.factories import job_that_ran

pytestmark = pytest.mark.django_db


def post_job(client, **fields):
    data = {
        "name": "mnist",
        "gpus": 1,
        "cpus": 1,
        "memory_gb": 2,
        "arguments": "",
        "script": script_upload(),
    }
    data.update(fields)
    return client.post(reverse("jobs:new"), data)


def test_pages_need_a_login(client):
    response = client.get(reverse("jobs:list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_uploading_a_script_creates_a_job_and_shows_its_page(student_client, fake_bridge):
    response = post_job(student_client, arguments="--epochs=3\n--lr 0.1")
    job = Job.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("jobs:detail", args=[job.public_id])
    assert job.request["arguments"] == ["--epochs=3", "--lr 0.1"]
    page = student_client.get(response["Location"])
    assert "Waiting for the scheduler" in page.content.decode()


def test_a_job_submitted_without_a_name_is_named_after_its_file(student_client, fake_bridge):
    response = post_job(student_client, name="", script=script_upload(name="train_resnet.py"))
    assert response.status_code == 302
    assert Job.objects.get().name == "train_resnet.py"


def test_a_form_error_names_the_field_and_keeps_what_was_typed(student_client, fake_bridge):
    response = post_job(student_client, gpus=99, name="keep me")
    body = response.content.decode()
    assert response.status_code == 400
    assert "Ensure this value is less than or equal to 8" in body
    assert 'value="keep me"' in body
    assert not Job.objects.exists()


def test_a_hostile_argument_is_refused_with_the_reason(student_client, fake_bridge):
    response = post_job(student_client, arguments="ok\n" + "x" * 5000)
    assert response.status_code == 400
    assert "at most 4096 characters" in response.content.decode()


def test_a_shell_script_upload_is_refused(student_client, fake_bridge):
    response = post_job(student_client, script=script_upload(name="evil.sh"))
    assert response.status_code == 400
    assert "Upload a Python script (.py) or a project archive" in response.content.decode()


def test_the_status_feed_follows_logs_by_byte_offset(student_client, student, fake_bridge):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    (job.directory / "stdout.txt").write_text("epoch 1\n")
    url = reverse("jobs:status", args=[job.public_id])
    first = json.loads(student_client.get(url).content)
    assert first["logs"]["stdout"] == {"text": "epoch 1\n", "start": 0, "offset": 8, "size": 8}
    with open(job.directory / "stdout.txt", "a") as log:
        log.write("epoch 2\n")
    second = json.loads(student_client.get(url, {"stdout_offset": 8}).content)
    assert second["logs"]["stdout"] == {"text": "epoch 2\n", "start": 8, "offset": 16, "size": 16}


def test_an_output_file_downloads(student_client, student, fake_bridge):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    (job.directory / "outputs" / "model.txt").write_text("weights")
    response = student_client.get(reverse("jobs:output", args=[job.public_id, "outputs/model.txt"]))
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"weights"
    assert "attachment" in response["Content-Disposition"]


@pytest.mark.parametrize(
    "path",
    [
        "outputs/../train.py",
        "outputs/../../../../etc/passwd",
        "outputs/%2e%2e/train.py",
        "outputs/link.txt",
        "outputs/linkdir/passwd",
        "/etc/passwd",
        "train.py",
        "stdout.txt",
        ".nightshift/nightshift.py",
        "outputs//link.txt",
        "outputs/./link.txt",
    ],
)
def test_downloads_never_leave_the_kept_outputs(student_client, student, fake_bridge, path):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    (job.directory / "outputs" / "link.txt").symlink_to("/etc/passwd")
    (job.directory / "outputs" / "linkdir").symlink_to("/etc")
    (job.directory / "stdout.txt").write_text("log")
    url = reverse("jobs:detail", args=[job.public_id]) + "files/" + path
    assert student_client.get(url).status_code == 404


def test_other_kept_outputs_are_listed_and_download(student_client, student, fake_bridge):
    response = post_job(student_client, keep_outputs="outputs, results.json, checkpoints/")
    assert response.status_code == 302
    job = Job.objects.get()
    assert job.request["output_paths"] == ["outputs", "results.json", "checkpoints"]
    (job.directory / "results.json").write_text("{}")
    (job.directory / "checkpoints").mkdir()
    (job.directory / "checkpoints" / "last.pt").write_bytes(b"w")
    (job.directory / "notes.txt").write_text("not kept")
    paths = [f.path for f in selectors.job_output_files(job)]
    assert paths == ["checkpoints/last.pt", "results.json"]
    download = student_client.get(reverse("jobs:output", args=[job.public_id, "results.json"]))
    assert b"".join(download.streaming_content) == b"{}"
    not_kept = student_client.get(reverse("jobs:output", args=[job.public_id, "notes.txt"]))
    assert not_kept.status_code == 404


@pytest.mark.parametrize("keep", ["../etc", ".nightshift", "a b", "x,x"])
def test_bad_outputs_to_keep_are_refused(student_client, fake_bridge, keep):
    response = post_job(student_client, keep_outputs=keep)
    assert response.status_code == 400
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "name, method, extra",
    [
        ("jobs:detail", "get", []),
        ("jobs:status", "get", []),
        ("jobs:cancel", "post", []),
        ("jobs:hold", "post", []),
        ("jobs:release", "post", []),
        ("jobs:rerun", "post", []),
        ("jobs:metrics", "get", []),
        ("jobs:metrics_csv", "get", []),
        ("jobs:outputs_zip", "get", []),
        ("jobs:log", "get", ["stdout"]),
        ("jobs:output", "get", ["outputs/model.txt"]),
    ],
)
def test_another_users_job_is_a_404_on_every_url(
    client, student, other_student, fake_bridge, name, method, extra
):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    (job.directory / "outputs" / "model.txt").write_text("secret")
    (job.directory / "stdout.txt").write_text("secret")
    client.force_login(other_student)
    response = getattr(client, method)(reverse(name, args=[job.public_id, *extra]))
    assert response.status_code == 404
    job.refresh_from_db()
    assert not job.is_final


def test_my_jobs_lists_only_my_jobs(student_client, student, other_student, fake_bridge):
    submission.job_submit(user=student, spec=specs.JobSpec(name="mine"), script=script_upload())
    submission.job_submit(
        user=other_student, spec=specs.JobSpec(name="theirs"), script=script_upload()
    )
    body = student_client.get(reverse("jobs:list")).content.decode()
    assert "mine" in body and "theirs" not in body


def test_a_job_name_with_a_line_break_is_refused_naming_the_field(student_client, fake_bridge):
    response = post_job(student_client, name="ok\nqueue 1000")
    assert response.status_code == 400
    assert "must not contain line breaks" in response.content.decode()
    assert not Job.objects.exists()


def test_a_log_rewritten_by_a_new_run_is_followed_from_its_start(
    student_client, student, fake_bridge
):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    (job.directory / "stdout.txt").write_text("run 2\n")
    url = reverse("jobs:status", args=[job.public_id])
    chunk = json.loads(student_client.get(url, {"stdout_offset": 500}).content)["logs"]["stdout"]
    assert chunk == {"text": "run 2\n", "start": 0, "offset": 6, "size": 6}


def test_a_long_log_opens_at_its_tail_and_is_paged(student_client, student, fake_bridge):
    from jobs.selectors import LOG_CHUNK_BYTES, LOG_TAIL_BYTES

    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    (job.directory / "stdout.txt").write_text("x" * (LOG_CHUNK_BYTES * 3) + "last line\n")
    url = reverse("jobs:status", args=[job.public_id])
    tail = json.loads(student_client.get(url, {"stdout_offset": -1}).content)["logs"]["stdout"]
    assert tail["text"].endswith("last line\n") and len(tail["text"]) == LOG_TAIL_BYTES
    page = json.loads(student_client.get(url, {"stdout_offset": 0}).content)["logs"]["stdout"]
    assert len(page["text"]) == LOG_CHUNK_BYTES and page["offset"] == LOG_CHUNK_BYTES


def test_a_held_job_page_explains_the_hold_and_what_to_do(student_client, student, fake_bridge):
    from condor_bridge import JobState as CondorState

    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    job = submission.job_submit_to_pool(job.pk)
    fake_bridge.set_state(
        str(job.public_id),
        CondorState.HELD,
        hold_reason="Transfer output files failure: No such file or directory",
        hold_reason_code=12,
        hold_reason_subcode=2,
    )
    sync.jobs_sync()
    body = student_client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "An output file or folder it should have made is missing." in body
    assert 'HTCondor said: <span data-role="hold-reason">Transfer output files failure' in body
    status = json.loads(student_client.get(reverse("jobs:status", args=[job.public_id])).content)
    assert status["hold_title"] == "An output file or folder it should have made is missing."


def test_clone_prefills_the_form_and_reuses_the_script(student_client, student, fake_bridge):
    original = submission.job_submit(
        user=student,
        spec=specs.JobSpec(name="resnet", arguments=["--epochs=3"], gpus=2, memory_mb=4096),
        script=script_upload("print('original')\n"),
    )
    form = student_client.get(reverse("jobs:new"), {"from": original.public_id}).content.decode()
    assert 'value="resnet"' in form and "--epochs=3" in form
    assert "Cloned from" in form
    response = student_client.post(
        reverse("jobs:new"),
        {
            "name": "resnet v2",
            "gpus": 2,
            "cpus": 1,
            "memory_gb": 4,
            "arguments": "--epochs=5",
            "source_job": original.public_id,
        },
    )
    assert response.status_code == 302
    clone = Job.objects.get(name="resnet v2")
    assert (clone.directory / "train.py").read_text() == "print('original')\n"
    assert clone.request["arguments"] == ["--epochs=5"]


def test_a_form_without_script_or_source_asks_for_a_script(student_client, fake_bridge):
    response = post_job(student_client, script="")
    assert response.status_code == 400
    assert (
        "Choose a Python script (.py) or a project archive to upload." in response.content.decode()
    )


def test_cloning_another_users_job_is_a_404(client, student, other_student, fake_bridge):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    client.force_login(other_student)
    assert client.get(reverse("jobs:new"), {"from": job.public_id}).status_code == 404
    response = client.post(
        reverse("jobs:new"),
        {"name": "stolen", "gpus": 0, "cpus": 1, "memory_gb": 1, "source_job": job.public_id},
    )
    assert response.status_code == 404
    assert not Job.objects.filter(name="stolen").exists()


def test_metrics_come_as_json_for_the_chart_and_as_csv(student_client, student, fake_bridge):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    assert (job.directory / ".nightshift" / "nightshift.py").is_file()
    staging.job_metrics_path(job).write_text(
        '{"step": 0, "loss": 1.0, "=HYPERLINK(1)": 2}\n{"step": 1, "loss": 0.5}\n'
    )
    data = json.loads(student_client.get(reverse("jobs:metrics", args=[job.public_id])).content)
    assert data["names"] == ["loss", "=HYPERLINK(1)"]
    assert [row["loss"] for row in data["rows"]] == [1.0, 0.5]
    response = student_client.get(reverse("jobs:metrics_csv", args=[job.public_id]))
    text = b"".join(response.streaming_content).decode()
    assert text.splitlines()[0] == "step,time,loss,'=HYPERLINK(1)"
    assert text.splitlines()[2] == "1,,0.5,"


def test_the_live_match_count_says_what_fits_right_now(student_client, fake_bridge):
    url = reverse("jobs:match")
    data = json.loads(
        student_client.get(url, {"gpus": 1, "gpu_memory_gb": 10, "cpus": 1, "memory_gb": 2}).content
    )
    assert (data["machines_matching"], data["gpus_matching"], data["machines_free_now"]) == (
        2,
        3,
        2,
    )
    none = json.loads(
        student_client.get(
            url, {"gpus": 1, "gpu_memory_gb": 100, "cpus": 1, "memory_gb": 2}
        ).content
    )
    assert none["machines_matching"] == 0
    assert "the largest GPU in the pool has 46.5 GB" in none["reason"]


def test_the_match_count_reports_bad_values_instead_of_failing(student_client, fake_bridge):
    response = student_client.get(reverse("jobs:match"), {"gpus": "lots", "cpus": 1})
    assert response.status_code == 400
    assert "gpus" in json.loads(response.content)["errors"]


def test_a_request_nothing_can_run_is_refused_with_the_reason(student_client, fake_bridge):
    response = post_job(student_client, gpus=1, gpu_memory_gb=100)
    body = response.content.decode()
    assert response.status_code == 400
    assert "the largest GPU in the pool has 46.5 GB" in body
    assert not Job.objects.exists()


def test_when_the_pool_is_down_a_job_is_accepted_and_waits(student_client, fake_bridge):
    fake_bridge.down = True
    assert post_job(student_client, gpus=1, gpu_memory_gb=100).status_code == 302


def test_all_outputs_download_as_one_zip_without_symlinked_files(
    student_client, student, fake_bridge
):
    import io
    import zipfile

    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    outputs = job.directory / "outputs"
    (outputs / "checkpoints").mkdir()
    (outputs / "model.txt").write_text("weights")
    (outputs / "checkpoints" / "epoch-1.pt").write_bytes(b"\x00\x01")
    (outputs / "secret").symlink_to("/etc/passwd")
    # While the job may still write its files, the zip has no length known ahead.
    response = student_client.get(reverse("jobs:outputs_zip", args=[job.public_id]))
    data = b"".join(response.streaming_content)
    assert "Content-Length" not in response
    archive = zipfile.ZipFile(io.BytesIO(data))
    assert sorted(archive.namelist()) == ["outputs/checkpoints/epoch-1.pt", "outputs/model.txt"]
    assert archive.read("outputs/model.txt") == b"weights"
    # Once it has ended, its files no longer change: the download says its size.
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    response = student_client.get(reverse("jobs:outputs_zip", args=[job.public_id]))
    data = b"".join(response.streaming_content)
    assert int(response["Content-Length"]) == len(data)
    assert zipfile.ZipFile(io.BytesIO(data)).read("outputs/model.txt") == b"weights"


def test_the_preview_shows_the_exact_submit_description_with_user_text_quoted(
    student_client, fake_bridge
):
    response = student_client.get(
        reverse("jobs:preview"),
        {
            "name": "x",
            "gpus": 1,
            "gpu_memory_gb": 10,
            "cpus": 2,
            "memory_gb": 2,
            "arguments": "--tag=$(HOME)\nit's",
            "script_name": "my model.py",
        },
    )
    text = response.content.decode()
    assert response.status_code == 200
    # A GPU job runs under the launcher, which samples its GPUs beside it.
    assert (
        "arguments = \"'.nightshift/launch.py' 'my_model.py' '--tag=$(DOLLAR)(HOME)' 'it''s'\""
    ) in text
    assert "require_gpus = GlobalMemoryMb >= 10240" in text
    assert "request_cpus = 2" in text
    assert text.endswith("queue\n")


def test_the_preview_names_a_bad_value(student_client, fake_bridge):
    response = student_client.get(
        reverse("jobs:preview"),
        {"name": "x", "gpus": 1, "cpus": 1, "memory_gb": 2, "arguments": "x" * 5000},
    )
    assert response.status_code == 400
    assert "arguments: must be at most 4096 characters" in response.content.decode()


def test_environment_variables_come_as_key_value_rows(student_client, fake_bridge):
    response = post_job(
        student_client, env_key=["WANDB_MODE", "SEED", ""], env_value=["offline", "7", ""]
    )
    assert response.status_code == 302
    assert Job.objects.get().request["environment"] == [["WANDB_MODE", "offline"], ["SEED", "7"]]


@pytest.mark.parametrize(
    "keys, values, message",
    [
        (["1BAD"], ["x"], "is not a valid variable name"),
        (["A", "A"], ["1", "2"], "A is set twice"),
        (["PYTHONPATH"], ["/evil"], "is set by Nightshift"),
        ([""], ["orphan"], "has no variable name"),
        (["OK"], ["line\nbreak"], "must not contain line breaks"),
    ],
)
def test_bad_environment_rows_are_refused_and_kept(
    student_client, fake_bridge, keys, values, message
):
    response = post_job(student_client, env_key=keys, env_value=values)
    body = response.content.decode()
    assert response.status_code == 400
    assert message in body
    assert f'value="{keys[-1]}"' in body  # what was typed is shown again
    assert not Job.objects.exists()


def test_after_a_form_error_the_chosen_file_is_kept_and_used(
    student_client, student, fake_bridge, settings
):
    first = post_job(student_client, gpus=99, script=script_upload("print('kept')\n", "mine.py"))
    body = first.content.decode()
    assert first.status_code == 400
    assert "Kept from your last try: <strong>mine.py</strong>" in body
    token = first.context["form"].data["staged_upload"]
    second = student_client.post(
        reverse("jobs:new"),
        {"name": "fixed", "gpus": 1, "cpus": 1, "memory_gb": 2, "staged_upload": token},
    )
    assert second.status_code == 302
    job = Job.objects.get(name="fixed")
    assert (job.directory / "mine.py").read_text() == "print('kept')\n"
    assert not (settings.JOBS_DIR / ".staging" / str(student.pk) / token).exists()


def test_a_kept_file_belongs_to_its_student_only(client, student, other_student, fake_bridge):
    client.force_login(student)
    token = post_job(client, gpus=99).context["form"].data["staged_upload"]
    client.force_login(other_student)
    response = client.post(
        reverse("jobs:new"),
        {"name": "stolen", "gpus": 1, "cpus": 1, "memory_gb": 2, "staged_upload": token},
    )
    assert response.status_code == 400
    assert not Job.objects.filter(name="stolen").exists()


@pytest.mark.parametrize("token", ["../../etc", "x" * 32, "0" * 31, "/etc/passwd"])
def test_a_forged_kept_file_token_finds_nothing(student_client, fake_bridge, token):
    response = student_client.post(
        reverse("jobs:new"),
        {"name": "forged", "gpus": 1, "cpus": 1, "memory_gb": 2, "staged_upload": token},
    )
    assert response.status_code == 400
    assert not Job.objects.exists()


def test_a_kept_requirements_file_survives_an_error_too(student_client, fake_bridge):
    from django.core.files.uploadedfile import SimpleUploadedFile

    first = post_job(
        student_client, gpus=99, requirements=SimpleUploadedFile("requirements.txt", b"six\n")
    )
    data = first.context["form"].data
    assert "Kept from your last try: <strong>requirements.txt</strong>" in first.content.decode()
    second = student_client.post(
        reverse("jobs:new"),
        {
            "name": "fixed",
            "gpus": 1,
            "cpus": 1,
            "memory_gb": 2,
            "staged_upload": data["staged_upload"],
            "staged_requirements": data["staged_requirements"],
        },
    )
    assert second.status_code == 302
    job = Job.objects.get(name="fixed")
    assert (job.directory / "requirements.txt").read_text() == "six\n"
    assert job.request["install_requirements"] is True


@pytest.mark.parametrize("log", ["stdout.txt", "stderr.txt", ".nightshift/install.log"])
def test_a_log_the_job_replaced_by_a_link_is_never_followed(
    student_client, student, fake_bridge, log
):
    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    (job.directory / log).symlink_to("/etc/passwd")
    stream = {"stdout.txt": "stdout", "stderr.txt": "stderr"}.get(log, "install")
    raw = student_client.get(reverse("jobs:log", args=[job.public_id, stream]))
    assert raw.status_code == 404
    status = json.loads(student_client.get(reverse("jobs:status", args=[job.public_id])).content)
    assert status["logs"][stream]["text"] == ""


def test_a_helper_folder_the_job_replaced_by_a_link_is_never_followed(
    student_client, student, fake_bridge, tmp_path
):
    import shutil

    job = submission.job_submit(user=student, spec=specs.JobSpec(name="x"), script=script_upload())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "metrics.jsonl").write_text('{"step": 0, "secret": 1}\n')
    shutil.rmtree(job.directory / ".nightshift")
    (job.directory / ".nightshift").symlink_to(outside)
    data = json.loads(student_client.get(reverse("jobs:metrics", args=[job.public_id])).content)
    assert data["rows"] == []


@pytest.mark.parametrize("value", ["not-a-uuid", "../../etc", "1' OR '1'='1"])
def test_cloning_from_a_malformed_job_id_is_a_404_not_a_500(student_client, value):
    assert student_client.get(reverse("jobs:new"), {"from": value}).status_code == 404


def test_the_job_page_lists_each_run_with_the_work_an_eviction_lost(student_client, student):
    start = timezone.now() - timedelta(hours=3)
    job = job_that_ran(student, gpus=1, start=start, end=start + timedelta(hours=2))
    UsageRecord.objects.filter(job=job).update(
        ended_by="evicted", committed_s=0, badput_s=7200, workstation="ws-volta"
    )
    body = student_client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert 'data-role="runs"' in body
    assert "ws-volta" in body and "2 h 00 min" in body and "Evicted" in body


def test_the_job_page_shows_the_checkpoints_age_and_size(
    student_client, student, settings, tmp_path
):
    job = job_that_ran(student, gpus=1, start=timezone.now() - timedelta(minutes=30))
    Job.objects.filter(pk=job.pk).update(output_dir=str(tmp_path))
    folder = tmp_path / ".nightshift" / "checkpoint"
    folder.mkdir(parents=True)
    (folder / "model.pt").write_bytes(b"x" * 2048)
    (folder / "optimizer.pt").write_bytes(b"y" * 1024)
    saved = (timezone.now() - timedelta(minutes=4)).timestamp()
    for path in folder.iterdir():
        os.utime(path, (saved, saved))
    body = student_client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "saved 4 min" in body and "3.0\xa0KB in 2 files" in body


def test_a_checkpoint_folder_that_is_a_link_out_of_the_job_is_not_read(
    student_client, student, tmp_path
):
    job = job_that_ran(student, gpus=1, start=timezone.now() - timedelta(minutes=30))
    Job.objects.filter(pk=job.pk).update(output_dir=str(tmp_path / "job"))
    (tmp_path / "job" / ".nightshift").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "secret").write_text("x")
    (tmp_path / "job" / ".nightshift" / "checkpoint").symlink_to(tmp_path / "elsewhere")
    body = student_client.get(reverse("jobs:detail", args=[job.public_id])).content.decode()
    assert "none yet" in body
