"""Project archives with an entry command, through the submission service."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from jobs import actions, specs, submission
from jobs.models import Job

pytestmark = pytest.mark.django_db


def project(members: dict, name="project.zip") -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return SimpleUploadedFile(name, buffer.getvalue(), content_type="application/zip")


def submit(user, upload, entry="python src/train.py --epochs 3", **spec):
    return submission.job_submit(
        user=user, spec=specs.JobSpec(name="proj", entry_command=entry, **spec), script=upload
    )


def test_a_project_unpacks_and_its_entry_command_becomes_the_arguments(student, fake_bridge):
    job = submit(
        student, project({"src/train.py": "print(1)", "data/x.csv": "1,2"}), arguments=["--seed=1"]
    )
    assert (job.directory / "src" / "train.py").read_text() == "print(1)"
    assert job.request["script_name"] == "src/train.py"
    assert job.request["arguments"] == ["--epochs", "3", "--seed=1"]
    assert job.request["input_files"] == ["data", "src"]
    assert job.request["install_requirements"] is False
    submission.job_submit_to_pool(job.pk)
    description = fake_bridge.submitted[str(job.public_id)]
    assert description["arguments"] == "\"'src/train.py' '--epochs' '3' '--seed=1'\""


def test_a_requirements_file_runs_the_launcher_first(student, fake_bridge):
    job = submit(
        student, project({"train.py": "", "requirements.txt": "six\n"}), entry="python train.py"
    )
    submission.job_submit_to_pool(job.pk)
    arguments = fake_bridge.submitted[str(job.public_id)]["arguments"]
    assert arguments == "\"'.nightshift/launch.py' 'train.py'\""
    assert (job.directory / ".nightshift" / "launch.py").is_file()


@pytest.mark.parametrize(
    "entry, message",
    [
        ("", "Say how to start the project"),
        ("bash run.sh", "Start with python"),
        ("python missing.py", "The archive has no missing.py; it has src/train.py"),
        ("python 'src/train.py", "Check the quotes"),
        ("python data/x.csv", "not a Python file"),
    ],
)
def test_a_bad_entry_command_is_refused_with_the_reason(student, fake_bridge, entry, message):
    with pytest.raises(specs.JobSubmissionError, match=message) as error:
        submit(student, project({"src/train.py": "", "data/x.csv": ""}), entry=entry)
    assert error.value.field == "entry_command"
    assert not Job.objects.exists()


def test_a_hostile_archive_leaves_nothing_behind(student, fake_bridge, settings):
    with pytest.raises(specs.JobSubmissionError, match="would reach outside") as error:
        submit(student, project({"train.py": "", "../../escape.py": "x"}), entry="python train.py")
    assert error.value.field == "script"
    assert not Job.objects.exists()
    assert list(settings.JOBS_DIR.iterdir()) == []
    assert not (settings.JOBS_DIR.parent / "escape.py").exists()


def test_a_rerun_of_a_project_unpacks_the_original_archive_again(student, fake_bridge):
    job = submit(student, project({"src/train.py": "print('v1')"}))
    (job.directory / "src" / "train.py").write_text("changed by the run")
    rerun = actions.job_rerun(job=job, user=student)
    assert (rerun.directory / "src" / "train.py").read_text() == "print('v1')"
    assert rerun.request["arguments"] == job.request["arguments"]
    assert rerun.source["entry_command"] == "python src/train.py --epochs 3"


def test_a_single_script_can_bring_a_requirements_file(student, fake_bridge):
    job = submission.job_submit(
        user=student,
        spec=specs.JobSpec(name="with reqs"),
        script=SimpleUploadedFile("train.py", b"import six"),
        requirements=SimpleUploadedFile("reqs.txt", b"six==1.16.0\n"),
    )
    assert (job.directory / "requirements.txt").read_text() == "six==1.16.0\n"
    assert job.request["install_requirements"] is True
    assert job.request["input_files"] == ["train.py", "requirements.txt"]
    submission.job_submit_to_pool(job.pk)
    assert fake_bridge.submitted[str(job.public_id)]["arguments"] == (
        "\"'.nightshift/launch.py' 'train.py'\""
    )
    rerun = actions.job_rerun(job=job, user=student)
    assert (rerun.directory / "requirements.txt").read_text() == "six==1.16.0\n"
    assert rerun.request["install_requirements"] is True


def test_a_project_must_keep_its_requirements_in_the_archive(student, fake_bridge):
    with pytest.raises(specs.JobSubmissionError, match="put requirements.txt at the top"):
        submission.job_submit(
            user=student,
            spec=specs.JobSpec(name="p", entry_command="python train.py"),
            script=project({"train.py": ""}),
            requirements=SimpleUploadedFile("r.txt", b"six"),
        )
