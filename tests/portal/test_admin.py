"""The Django admin: labs and quotas, jobs with filters, service-backed actions, the HTCondor ad."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from accounting.models import UsageRecord
from accounts.models import Registration
from audit.models import AuditEntry
from audit.services import audit_record
from condor_bridge import JobState as CondorState
from jobs import specs, submission, sync
from jobs.models import Job, JobEvent, JobState
from tests.conftest import script_upload
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db


def make_jobs(count: int) -> None:
    """Jobs of several users and labs, with the audit entries and registrations they bring."""
    for index in range(count):
        lab = LabFactory(name=f"Lab {index % 3}")
        user = UserFactory(username=f"u{index % 5}")
        job = Job.objects.create(
            owner=user,
            lab=lab,
            name=f"job {index}",
            output_dir="/x",
            gpus=1,
            cluster_id=100 + index,
            proc_id=0,
        )
        audit_record(action="job.submit", actor=user, target=job)
        UsageRecord.objects.create(
            job=job, user=user, lab=lab, started_at=timezone.now(), gpus=1, workstation="ws-volta"
        )
        newcomer = UserFactory(username=f"new{Registration.objects.count()}")
        Registration.objects.create(user=newcomer, lab=lab)


def changelist_queries(client, django_assert_max_num_queries, url) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return len(captured)


@pytest.mark.parametrize(
    "name",
    [
        "admin:jobs_job_changelist",
        "admin:labs_lab_changelist",
        "admin:labs_membership_changelist",
        "admin:audit_auditentry_changelist",
        "admin:accounts_registration_changelist",
        "admin:accounting_usagerecord_changelist",
    ],
)
def test_changelists_cost_the_same_queries_for_5_or_50_rows(
    admin_client, django_assert_max_num_queries, name
):
    make_jobs(5)
    for lab in LabFactory._meta.model.objects.all():
        MembershipFactory(lab=lab)
    few = changelist_queries(admin_client, django_assert_max_num_queries, reverse(name))
    make_jobs(50)
    for index in range(40):
        MembershipFactory(lab=LabFactory(name=f"More {index}"))
    many = changelist_queries(admin_client, django_assert_max_num_queries, reverse(name))
    assert many == few


def test_the_job_changelist_filters_by_state_lab_and_user(admin_client):
    make_jobs(6)
    Job.objects.filter(name="job 1").update(state=JobState.HELD)
    url = reverse("admin:jobs_job_changelist")
    body = admin_client.get(url, {"state": "held"}).content.decode()
    assert "job 1" in body and "job 2" not in body
    lab = LabFactory(name="Lab 0")
    assert "job 3" in admin_client.get(url, {"lab__id__exact": lab.pk}).content.decode()


@pytest.mark.parametrize("term", ["104", "104.0"])
def test_a_job_is_found_by_its_htcondor_cluster(admin_client, term):
    make_jobs(6)
    body = admin_client.get(reverse("admin:jobs_job_changelist"), {"q": term}).content.decode()
    assert "job 4" in body and "job 5" not in body


def test_a_job_is_found_by_the_start_of_its_id(admin_client):
    make_jobs(3)
    job = Job.objects.get(name="job 2")
    url = reverse("admin:jobs_job_changelist")
    body = admin_client.get(url, {"q": str(job.public_id)[:8]}).content.decode()
    assert "job 2" in body and "job 1" not in body


def test_admin_actions_use_the_services_and_are_recorded(admin_client, fake_bridge):
    owner = UserFactory(username="ada")
    job = submission.job_submit(user=owner, spec=specs.JobSpec(name="j"), script=script_upload())
    submission.job_submit_to_pool(job.pk)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING)
    sync.jobs_sync()
    response = admin_client.post(
        reverse("admin:jobs_job_changelist"), {"action": "hold_jobs", "_selected_action": [job.pk]}
    )
    assert response.status_code == 302
    assert fake_bridge.actions[-1][0] == "hold"
    event = JobEvent.objects.get(job=job, kind="hold requested")
    assert event.actor.username == "root"


def test_an_action_that_is_not_possible_is_reported_not_raised(admin_client, fake_bridge):
    make_jobs(1)
    Job.objects.update(state=JobState.COMPLETED)
    selected = {"action": "release_jobs", "_selected_action": [Job.objects.get().pk]}
    response = admin_client.post(reverse("admin:jobs_job_changelist"), selected, follow=True)
    assert "Only a held job can be released." in response.content.decode()


def test_the_htcondor_ad_is_shown_read_only(admin_client, fake_bridge):
    owner = MembershipFactory(lab=LabFactory(name="Vision"), user=UserFactory(username="ada")).user
    job = submission.job_submit(user=owner, spec=specs.JobSpec(name="j"), script=script_upload())
    submission.job_submit_to_pool(job.pk)
    change = admin_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    assert reverse("admin:jobs_job_condor_ad", args=[job.pk]) in change
    body = admin_client.get(reverse("admin:jobs_job_condor_ad", args=[job.pk])).content.decode()
    assert "AcctGroup" in body and "group_vision" in body
    assert "<form" not in body.split('id="content"')[-1]


def test_a_new_lab_starts_from_the_site_defaults(admin_client, settings):
    settings.QUOTA_DEFAULTS = settings.QUOTA_DEFAULTS | {"gpu_hours": 50.0}
    body = admin_client.get(reverse("admin:labs_lab_add")).content.decode()
    assert 'name="gpu_hours" value="50.0"' in body


def test_a_lab_gets_a_safe_accounting_group_from_its_name(admin_client):
    response = admin_client.post(
        reverse("admin:labs_lab_add"),
        {
            "name": "Vision & Robotics",
            "accounting_group": "",
            "gpu_hours_period_days": 7,
            "memberships-TOTAL_FORMS": 0,
            "memberships-INITIAL_FORMS": 0,
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert LabFactory._meta.model.objects.get().accounting_group == "group_vision_robotics"


def test_an_admin_moves_a_running_job_off_its_workstation(admin_client, fake_bridge):
    owner = UserFactory(username="ada")
    job = submission.job_submit(user=owner, spec=specs.JobSpec(name="j"), script=script_upload())
    submission.job_submit_to_pool(job.pk)
    fake_bridge.set_state(str(job.public_id), CondorState.RUNNING, workstation="ws-volta")
    sync.jobs_sync()
    admin_client.post(
        reverse("admin:jobs_job_changelist"),
        {"action": "vacate_jobs", "_selected_action": [job.pk]},
    )
    assert fake_bridge.actions[-1][0] == "vacate"
    assert JobEvent.objects.get(job=job, kind="vacate requested").detail == (
        "Moved off ws-volta by root"
    )
    sync.jobs_sync()
    job.refresh_from_db()
    assert job.state == JobState.IDLE
    assert AuditEntry.objects.filter(action="job.vacate", target_id=str(job.public_id)).exists()


def test_admins_see_each_dataset_delivery_and_cannot_edit_one(admin_client):
    from datasets.models import Dataset, DatasetDelivery, DatasetVersion

    owner = UserFactory(username="ada")
    dataset = Dataset.objects.create(name="cats", owner=owner)
    version = DatasetVersion.objects.create(
        dataset=dataset, number=1, sha256="ab" * 32, size_bytes=2048, file_count=2
    )
    job = Job.objects.create(owner=owner, name="reader", output_dir="/x")
    delivery = DatasetDelivery.objects.create(
        version=version,
        sha256=version.sha256,
        job=job,
        workstation="slot1@ws-volta",
        size_bytes=2560,
    )
    page = admin_client.get(reverse("admin:datasets_datasetdelivery_changelist")).content.decode()
    assert "slot1@ws-volta" in page and "ab" * 32 in page
    change = reverse("admin:datasets_datasetdelivery_change", args=[delivery.pk])
    assert admin_client.get(change).status_code == 200
    admin_client.post(change, {"workstation": "elsewhere"})
    delivery.refresh_from_db()
    assert delivery.workstation == "slot1@ws-volta"
    assert admin_client.get(reverse("admin:datasets_datasetdelivery_add")).status_code == 403
    uploads = admin_client.get(reverse("admin:datasets_datasetupload_changelist"))
    assert uploads.status_code == 200


def test_a_catalogues_versions_are_listed_read_only_each_with_a_link_to_its_page(admin_client):
    from datasets.models import Dataset, DatasetVersion
    from environments.models import Environment, EnvironmentVersion
    from job_templates.models import JobTemplate, TemplateVersion
    from model_registry.models import Model, ModelVersion

    lab, owner = LabFactory(name="vision"), UserFactory(username="ada")
    dataset = Dataset.objects.create(name="cats", owner=owner)
    DatasetVersion.objects.create(
        dataset=dataset, number=1, sha256="ab" * 32, size_bytes=2048, file_count=2
    )
    environment = Environment.objects.create(name="torch", owner=owner)
    EnvironmentVersion.objects.create(
        environment=environment, number=1, python="/usr/bin/python3", lock_sha256="ef" * 32
    )
    model = Model.objects.create(lab=lab, name="resnet", created_by=owner)
    model_version = ModelVersion.objects.create(
        model=model,
        number=1,
        visibility="lab",
        sha256="cd" * 32,
        size_bytes=1,
        file_count=1,
        lineage={},
        published_by=owner,
    )
    template = JobTemplate.objects.create(lab=lab, name="mnist", created_by=owner)
    template_version = TemplateVersion.objects.create(
        template=template,
        number=1,
        title="MNIST digits",
        visibility="lab",
        project_name="train.py",
        project_sha256="01" * 32,
        project_size=1,
        entry_command="python train.py",
        resources={"gpus": 0},
        parameters=[],
    )
    for change, entry, shown, link in [
        ("admin:datasets_dataset_change", dataset, "ab" * 32, None),
        ("admin:environments_environment_change", environment, "ef" * 32, None),
        (
            "admin:model_registry_model_change",
            model,
            "cd" * 32,
            reverse("models:version", args=[model_version.pk]),
        ),
        (
            "admin:job_templates_jobtemplate_change",
            template,
            "MNIST digits",
            reverse("job_templates:detail", args=[template_version.pk]),
        ),
    ]:
        response = admin_client.get(reverse(change, args=[entry.pk]))
        assert response.status_code == 200, change
        page = response.content.decode()
        assert shown in page, change
        # Shown as text: no field of the version's can be edited; none added or deleted.
        assert not re.search(r'name="[^"]*-0-number"', page), change
        (versions,) = response.context["inline_admin_formsets"]
        assert not versions.has_add_permission and not versions.formset.can_delete, change
        if link:
            assert f'href="{link}">open</a>' in page, change
    datasets = admin_client.get(reverse("admin:datasets_dataset_changelist")).content.decode()
    assert f'href="{reverse("datasets:detail", args=[dataset.pk])}">open</a>' in datasets
