"""/api/v1/environments/: a student makes an environment, shares it with a lab, adds
versions, downloads a lock, test-builds a version and deletes it; jobs name it."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from environments.models import Environment, EnvironmentBuild
from jobs.models import Job
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory

pytestmark = pytest.mark.django_db
ENVIRONMENTS = reverse("api:environment-list")


def create(api, **fields):
    return api.post(
        ENVIRONMENTS,
        {"name": "tomli", "requirements": "tomli-w==1.2.0\n", "python_version": "3.13", **fields},
        format="json",
    )


def test_a_new_environment_is_locked_with_exact_versions_and_hashes(api):
    response = create(api, description="TOML writing")
    assert response.status_code == 201, response.json()
    body = response.json()
    [version] = body["versions"]
    assert (body["name"], body["visibility"], body["owner"]) == ("tomli", "private", "student")
    assert version["reference"] == "tomli@1"
    assert version["packages"] == [{"name": "tomli-w", "version": "1.2.0"}]
    assert "--hash=sha256:" in version["lock"]
    lock = api.get(reverse("api:environment-lock", args=["tomli", 1]))
    assert lock.status_code == 200 and lock.content.decode() == version["lock"]
    assert "attachment" in lock["Content-Disposition"]


def test_versions_count_up_and_never_change(api):
    create(api)
    url = reverse("api:environment-versions", args=["tomli"])
    second = api.post(url, {"requirements": "tomli-w==1.1.0\n"}, format="json")
    assert second.status_code == 201 and second.json()["reference"] == "tomli@2"
    shown = api.get(reverse("api:environment-detail", args=["tomli"])).json()
    assert [v["number"] for v in shown["versions"]] == [2, 1]
    assert "tomli-w==1.2.0" in shown["versions"][1]["lock"]


@pytest.mark.parametrize(
    "fields, field, message",
    [
        (
            {"requirements": "--index-url https://evil.example/simple\n"},
            "requirements",
            "NIGHTSHIFT_REQUIREMENTS_ALLOW=index",
        ),
        (
            {"requirements": "nightshift-no-such-package-xyz\n"},
            "requirements",
            "No package called nightshift-no-such-package-xyz exists",
        ),
        ({"name": "../etc"}, "name", "Use letters, digits"),
        ({"name": "a@b"}, "name", "Use letters, digits"),
        ({"python_version": "2.7x"}, "python_version", "such as 3.13"),
        ({"visibility": "site"}, "visibility", "Only administrators"),
        ({"visibility": "lab"}, "lab", "one of your labs"),
        (
            {"container_image": "docker://x $(HOME)", "requirements": ""},
            "container_image",
            "without spaces",
        ),
    ],
)
def test_bad_input_is_refused_naming_the_field(api, fields, field, message):
    response = create(api, **fields)
    assert response.status_code == 400
    error = response.json()["error"]
    assert field in (error.get("fields") or {field: None}) or error.get("field") == field, error
    assert message in str(error)
    assert not Environment.objects.filter(owner__isnull=False).exists()


def test_a_private_environment_is_invisible_to_others_and_a_lab_one_to_its_members(
    api, other_api, student, other_student
):
    create(api)
    assert other_api.get(reverse("api:environment-detail", args=["tomli"])).status_code == 404
    assert [e["name"] for e in other_api.get(ENVIRONMENTS).json()["results"]] == ["System Python"]
    lab = LabFactory(name="vision")
    MembershipFactory(lab=lab, user=student)
    shared = create(api, name="shared", visibility="lab", lab="vision")
    assert shared.status_code == 201, shared.json()
    assert other_api.get(reverse("api:environment-detail", args=["shared"])).status_code == 404
    MembershipFactory(lab=lab, user=other_student)
    assert other_api.get(reverse("api:environment-detail", args=["shared"])).status_code == 200
    # Using is not owning: a member cannot add versions to it or delete it.
    url = reverse("api:environment-detail", args=["shared"])
    assert other_api.delete(url).status_code == 403


def test_the_owner_deletes_an_environment_and_jobs_keep_their_record(api, fake_bridge):
    create(api)
    job = api.post(
        reverse("api:job-list"),
        {"name": "j", "gpus": 0, "script": script_upload(), "software_environment": "tomli"},
        format="multipart",
    )
    assert job.status_code == 201, job.json()
    assert api.delete(reverse("api:environment-detail", args=["tomli"])).status_code == 204
    assert not Environment.objects.filter(name="tomli").exists()
    assert Job.objects.get().source["environment"]["reference"] == "tomli@1"


def test_a_job_names_an_environment_and_gets_its_lock(api, fake_bridge):
    create(api)
    response = api.post(
        reverse("api:job-list"),
        {
            "name": "j",
            "gpus": 0,
            "script": script_upload(),
            "software_environment": "tomli@1",
        },
        format="multipart",
    )
    assert response.status_code == 201, response.json()
    job = Job.objects.get()
    assert job.request["install_requirements"] is True
    lock = (job.directory / ".nightshift" / "requirements.lock").read_text()
    version = Environment.objects.get(name="tomli").versions.get()
    assert lock == version.lock
    # The reproducibility record names the version and the hash of its exact packages.
    record = response.json()["reproducibility"]["environment"]
    assert (record["reference"], record["lock_sha256"]) == ("tomli@1", version.lock_sha256)


def test_the_job_page_names_the_environment_it_ran_with(api, student, client, fake_bridge):
    create(api)
    api.post(
        reverse("api:job-list"),
        {"name": "j", "gpus": 0, "script": script_upload(), "software_environment": "tomli"},
        format="multipart",
    )
    client.force_login(student)
    page = client.get(reverse("jobs:detail", args=[Job.objects.get().public_id]))
    assert '<dd data-role="environment"><code>tomli@1</code>' in page.content.decode()


def test_an_unknown_environment_is_refused_with_those_there_are(api, fake_bridge):
    create(api)
    response = api.post(
        reverse("api:job-list"),
        {
            "name": "j",
            "gpus": 0,
            "script": script_upload(),
            "software_environment": "nope@1",
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert "No environment called 'nope' that you may use" in response.json()["error"]["message"]
    assert "tomli" in response.json()["error"]["message"]


def test_the_same_requirements_make_one_private_version_reused_by_later_jobs(api, fake_bridge):
    for text in (b"six==1.17.0\n", b"six==1.17.0  # again\n"):
        response = api.post(
            reverse("api:job-list"),
            {
                "name": "j",
                "gpus": 0,
                "script": script_upload(),
                "requirements": SimpleUploadedFile("requirements.txt", text),
            },
            format="multipart",
        )
        assert response.status_code == 201, response.json()
    first, second = Job.objects.order_by("pk")
    assert first.source["environment"] == second.source["environment"]
    assert Environment.objects.get(owner__isnull=False).is_automatic
    # Automatic environments stay out of the lists; the job's record names them.
    assert [e["name"] for e in api.get(ENVIRONMENTS).json()["results"]] == ["System Python"]


def test_an_environment_and_a_requirements_file_together_are_refused(api, fake_bridge):
    create(api)
    response = api.post(
        reverse("api:job-list"),
        {
            "name": "j",
            "gpus": 0,
            "script": script_upload(),
            "software_environment": "tomli",
            "requirements": SimpleUploadedFile("requirements.txt", b"six\n"),
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert "not both" in response.json()["error"]["message"]


def test_a_test_build_is_a_job_of_the_owner_that_imports_the_environment(api, fake_bridge):
    create(api)
    url = reverse("api:environment-build", args=["tomli", 1])
    assert api.get(url).status_code == 404
    response = api.post(url)
    assert response.status_code == 202, response.json()
    assert response.json()["state"] == "queued"
    build = EnvironmentBuild.objects.get()
    assert build.job.name == "Test build of tomli@1"
    assert build.job.source["environment"]["reference"] == "tomli@1"
    assert str(build.job.public_id) == response.json()["job"]
    assert api.get(url).json()["state"] == "queued"


@pytest.mark.parametrize(
    "text, message",
    [
        (
            b"--extra-index-url https://evil.example/simple\nnumpy\n",
            "Line 1: --extra-index-url (another package index or source) is not accepted",
        ),
        (b"numpy\n" + b"# padding\n" * 8000, "larger than 64 KB"),
        (b"\xff\xfe not text", "not UTF-8 text"),
    ],
)
def test_a_jobs_refused_requirements_file_is_a_400_naming_it(api, fake_bridge, text, message):
    response = api.post(
        reverse("api:job-list"),
        {
            "name": "j",
            "gpus": 0,
            "script": script_upload(),
            "requirements": SimpleUploadedFile("requirements.txt", text),
        },
        format="multipart",
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert "requirements" in error["fields"] and message in error["message"]
    assert not Job.objects.exists()
