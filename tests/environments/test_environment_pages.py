"""The environments pages: a student lists, makes, reads, extends, test-builds and deletes
environments in the browser's forms; others' private ones stay hidden."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from environments.models import Environment
from environments.services import environment_create
from jobs.models import Job

pytestmark = pytest.mark.django_db


def make(user, name="tomli", **fields):
    return environment_create(user=user, name=name, requirements="tomli-w==1.2.0\n", **fields)


def test_the_list_shows_mine_and_the_sites(student_client, student, other_student):
    make(student, description="TOML writing")
    make(other_student, name="theirs")
    body = student_client.get(reverse("environments:list")).content.decode()
    assert "tomli" in body and "TOML writing" in body and "System Python" in body
    assert "1 package, Python 3.13" in body
    assert "theirs" not in body


def test_a_student_makes_an_environment_from_a_requirements_file(student_client):
    response = student_client.post(
        reverse("environments:new"),
        {
            "name": "from-file",
            "visibility": "private",
            "requirements_file": SimpleUploadedFile("requirements.txt", b"tomli-w==1.2.0\n"),
        },
    )
    environment = Environment.objects.get(name="from-file")
    assert response.status_code == 302
    assert response["Location"] == reverse("environments:detail", args=[environment.pk])
    page = student_client.get(response["Location"]).content.decode()
    assert "tomli-w==1.2.0" in page and "--hash=sha256:" in page
    lock = student_client.get(reverse("environments:lock", args=[environment.pk, 1]))
    assert lock.content.decode() == environment.versions.get().lock


def test_a_requirement_that_cannot_be_resolved_is_explained_with_uvs_report(student_client):
    response = student_client.post(
        reverse("environments:new"),
        {
            "name": "typo",
            "visibility": "private",
            "requirements": "nightshift-no-such-pkg\n",
        },
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "No package called nightshift-no-such-pkg exists on the package index" in body
    assert "not found in the package registry" in body  # uv's own words, below
    assert not Environment.objects.filter(name="typo").exists()


def test_an_empty_environment_is_refused(student_client):
    response = student_client.post(
        reverse("environments:new"), {"name": "empty", "visibility": "private"}
    )
    assert response.status_code == 400
    assert "List some packages, or name a container image." in response.content.decode()


def test_only_admins_offer_site_environments(student_client):
    page = student_client.get(reverse("environments:new")).content.decode()
    assert 'value="site"' not in page


def test_the_owner_adds_a_version_and_others_cannot(student_client, student, client, other_student):
    environment = make(student)
    url = reverse("environments:detail", args=[environment.pk])
    response = student_client.post(url, {"requirements": "tomli-w==1.1.0\n"})
    assert response.status_code == 302
    assert list(environment.versions.values_list("number", flat=True)) == [2, 1]
    client.force_login(other_student)
    assert client.get(url).status_code == 404


def test_a_lab_member_sees_a_lab_environment_but_cannot_change_it(student, other_student, client):
    from tests.factories import LabFactory, MembershipFactory

    lab = LabFactory(name="vision")
    MembershipFactory(lab=lab, user=student)
    MembershipFactory(lab=lab, user=other_student)
    environment = make(student, visibility="lab", lab=lab)
    client.force_login(other_student)
    page = client.get(reverse("environments:detail", args=[environment.pk])).content.decode()
    assert "Add a version" not in page and "Delete this environment" not in page
    response = client.post(reverse("environments:delete", args=[environment.pk]))
    assert response.status_code == 403
    assert Environment.objects.filter(pk=environment.pk).exists()


def test_the_test_build_button_submits_a_job_and_opens_its_page(
    student_client, student, fake_bridge
):
    environment = make(student)
    response = student_client.post(reverse("environments:build", args=[environment.pk, 1]))
    job = Job.objects.get()
    assert response["Location"] == reverse("jobs:detail", args=[job.public_id])
    page = student_client.get(reverse("environments:detail", args=[environment.pk]))
    assert 'Test build: <span class="state state-queued">queued</span>' in page.content.decode()


def test_the_owner_deletes_an_environment(student_client, student):
    environment = make(student)
    response = student_client.post(reverse("environments:delete", args=[environment.pk]))
    assert response["Location"] == reverse("environments:list")
    assert not Environment.objects.filter(pk=environment.pk).exists()


def test_the_job_form_offers_my_environments(student_client, student, fake_bridge):
    make(student)
    page = student_client.get(reverse("jobs:new")).content.decode()
    assert '<option value="tomli@1">tomli (version 1) — yours</option>' in page
