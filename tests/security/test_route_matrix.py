"""Every route the URL resolver knows, tried as each kind of user, against one table.

The table below is the whole access policy in one place. The route list comes from the
URL resolver, so a new route without a row fails `test_every_route_has_a_row`: nobody can
add a page or an endpoint and forget to decide who may reach it.

Roles: nobody signed in; a student of another lab; a lead of another lab; the owner of
the objects named in the URL (a student in Vision); the lead of the owner's lab; an admin.

Expectations: a status code; LOGIN, a redirect to the sign-in page; ADMIN_LOGIN, the
admin's sign-in page. Another user's job, token, lab or member is a 404, exactly as if it
did not exist, on the web and in the API.
"""

import re
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import transaction
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.models import Registration
from accounts.services import token_create
from datasets import services as dataset_services
from datasets.models import DatasetUpload
from environments.services import environment_create
from experiments import sweeps
from forecasts.models import Reservation
from job_templates.models import JobTemplate, TemplateVersion
from job_templates.parameters import parameters_parse, parameters_to_json
from jobs import specs, submission, sync
from lending.models import WorkstationOwner
from live_sessions.services import live_token_create
from model_registry.models import Model, ModelVersion
from notifications.models import PushSubscription
from portal.celery import app
from tests.conftest import (
    FAST_PASSWORD_HASHERS,
    apply_settings,
    client_with_token,
    datasets_settings,
    fake_bridge_settings,
    script_upload,
)
from tests.datasets.files import SAMPLE, upload, zip_of
from tests.factories import LabFactory, MembershipFactory, UserFactory

pytestmark = pytest.mark.django_db

LOGIN, ADMIN_LOGIN = "login", "admin login"
ROLES = ("anonymous", "other student", "lead of another lab", "owner", "lead of the lab", "admin")

# route name -> [(method, expectations in ROLES order)]. Unnamed routes go by their pattern.
# fmt: off
TABLE = {
    # Public pages
    "": [("get", (302, 302, 302, 302, 302, 302))],
    "login": [("get", (200, 200, 200, 200, 200, 200))],
    "logout": [("post", (302, 302, 302, 302, 302, 302))],
    "password_reset": [("get", (200, 200, 200, 200, 200, 200))],
    "password_reset_done": [("get", (200, 200, 200, 200, 200, 200))],
    # Names the owner's account: only the emailed token opens it, never a made-up one.
    "password_reset_confirm": [("get", (200, 200, 200, 200, 200, 200))],
    "password_reset_complete": [("get", (200, 200, 200, 200, 200, 200))],
    "accounts:register": [("get", (200, 200, 200, 200, 200, 200))],
    # Each user's own: signing in first.
    "password_change": [("get", (302, 200, 200, 200, 200, 200))],
    "password_change_done": [("get", (302, 200, 200, 200, 200, 200))],
    "oidc_authentication_init": [("get", (404, 404, 404, 404, 404, 404))],
    "oidc_authentication_callback": [("get", (404, 404, 404, 404, 404, 404))],
    "oidc_logout": [("post", (302, 302, 302, 302, 302, 302))],
    # 503 without a Celery worker: these tests run none.
    "healthz": [("get", (503, 503, 503, 503, 503, 503))],
    # For the monitoring server, by address or token, never by role: the test client's
    # 127.0.0.1 is on the default allow-list (tests/operations/test_metrics_view.py).
    "metrics": [("get", (200, 200, 200, 200, 200, 200))],
    "api-docs": [("get", (302, 302, 302, 302, 302, 302))],
    "favicon": [("get", (301, 301, 301, 301, 301, 301))],
    # The admin's old addresses of sweeps (before they moved to experiments) lead on.
    "sweep-admin-moved": [("get", (301, 301, 301, 301, 301, 301))],
    "api:schema": [("get", (200, 200, 200, 200, 200, 200))],
    "api:docs": [("get", (200, 200, 200, 200, 200, 200))],
    r"api/v1/^(?P<path>[\s\S]*)$": [("get", (404, 404, 404, 404, 404, 404))],
    "api:password-token": [("post", (400, 400, 400, 400, 400, 400))],
    # Signed-in pages about oneself
    "accounts:account": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "accounts:tokens": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "jobs:list": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "jobs:new": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "jobs:matrix_new": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "jobs:study_new": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "jobs:match": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "jobs:preview": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "pool": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "api:job-list": [("get", (401, 200, 200, 200, 200, 200))],
    "api:match": [("post", (401, 200, 200, 200, 200, 200))],
    "api:pool": [("get", (401, 200, 200, 200, 200, 200))],
    # The execute-node kit's figures: its service account (the permission) or admins only;
    # the world has no forecast, so the admin hears there is none yet.
    "api:placement-figures": [("get", (401, 403, 403, 403, 403, 404))],
    "api:kit-reservations": [("get", (401, 403, 403, 403, 403, 200))],
    "api:kit-terms": [("get", (401, 403, 403, 403, 403, 200))],
    # A workstation's page, terms and "I need it back": its owners (the world's owner owns
    # ws-volta) and admins; anyone else meets a workstation that does not exist. Empty
    # forms are refused as invalid.
    "lending:list": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    # Anyone signed in may try a code from a workstation; an empty one is invalid.
    "lending:claim": [("get", (LOGIN, 200, 200, 200, 200, 200)),
                      ("post", (LOGIN, 400, 400, 400, 400, 400))],
    "api:kit-claim-code": [("post", (401, 403, 403, 403, 403, 201))],
    "lending:workstation": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "lending:terms": [("post", (LOGIN, 404, 404, 400, 404, 400))],
    "lending:reclaim": [("post", (LOGIN, 404, 404, 400, 404, 400))],
    "lending:lend_again": [("post", (LOGIN, 404, 404, 302, 404, 302))],
    "lending:given_csv": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "api:workstation-list": [("get", (401, 200, 200, 200, 200, 200))],
    "api:workstation-terms": [("get", (401, 404, 404, 200, 404, 200)),
                              ("put", (401, 404, 404, 400, 404, 400))],
    "api:workstation-reclaim": [("post", (401, 404, 404, 400, 404, 400)),
                                ("delete", (401, 404, 404, 204, 404, 204))],
    # Reservations are public to the signed in (the pool page shows them); the lab's leads
    # and admins make and cancel them. An empty one is refused as invalid.
    "api:reservation-list": [("get", (401, 200, 200, 200, 200, 200)),
                             ("post", (401, 400, 400, 400, 400, 400))],
    "api:reservation-detail": [("get", (401, 200, 200, 200, 200, 200)),
                               ("delete", (401, 403, 403, 403, 200, 200))],
    "api:me": [("get", (401, 200, 200, 200, 200, 200))],
    "api:token-list": [("get", (401, 200, 200, 200, 200, 200))],
    "api:notifications": [("get", (401, 200, 200, 200, 200, 200))],
    "api:notification-preferences": [("get", (401, 200, 200, 200, 200, 200)),
                                     ("put", (401, 400, 400, 400, 400, 400))],
    # Reports: leads (their labs) and admins only.
    "accounting:reports": [("get", (LOGIN, 403, 200, 403, 200, 200))],
    "accounting:export": [("get", (LOGIN, 403, 200, 403, 200, 200))],
    "utilisation:report": [("get", (LOGIN, 403, 200, 403, 200, 200))],
    "utilisation:export": [("get", (LOGIN, 403, 200, 403, 200, 200))],
    "api:report": [("get", (401, 403, 200, 403, 200, 200))],
    "api:report-export": [("get", (401, 403, 200, 403, 200, 200))],
    # Approvals: the waiting registration (asking to join Vision) names an object.
    "accounts:approvals": [("get", (LOGIN, 200, 200, 200, 200, 200)),
                           ("post", (LOGIN, 404, 404, 404, 302, 302))],
    # The owner's job: leads of the owner's lab read it; only the owner and admins act.
    "jobs:detail": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:status": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:metrics": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:metrics_csv": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "usage:json": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "forecasts:start": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "usage:csv": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:log": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:outputs_zip": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:output": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:cancel": [("post", (LOGIN, 404, 404, 302, 403, 302))],
    "jobs:hold": [("post", (LOGIN, 404, 404, 302, 403, 302))],
    "jobs:release": [("post", (LOGIN, 404, 404, 302, 403, 302))],
    "jobs:rerun": [("post", (LOGIN, 404, 404, 302, 403, 403))],
    "api:job-detail": [("get", (401, 404, 404, 200, 200, 200))],
    # Its live services (TensorBoard, its endpoint): the owner alone until shared; the job
    # waits, so opening one goes back to its Live page.
    "live:page": [("get", (LOGIN, 404, 404, 200, 404, 404))],
    "live:status": [("get", (LOGIN, 404, 404, 200, 404, 404))],
    "live:open": [("get", (LOGIN, 404, 404, 302, 404, 404))],
    "live:token_new": [("post", (LOGIN, 404, 404, 302, 404, 404))],
    "live:token_revoke": [("post", (LOGIN, 404, 404, 302, 404, 404))],
    "live:share": [("post", (LOGIN, 404, 404, 302, 404, 404))],
    "sessions:new": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    # The owner's sweep: read like its runs.
    "jobs:sweep": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:sweep_progress": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "api:sweep-detail": [("get", (401, 404, 404, 200, 200, 200))],
    "api:sweep-results": [("get", (401, 404, 404, 200, 200, 200))],
    "api:sweep-results-csv": [("get", (401, 404, 404, 200, 200, 200))],
    "api:sweep-list": [("get", (401, 200, 200, 200, 200, 200))],
    # An empty submission: refused as invalid, once signed in.
    "api:sweep-matrix": [("post", (401, 415, 415, 415, 415, 415))],
    "api:sweep-study": [("post", (401, 400, 400, 400, 400, 400))],
    "jobs:sweep_results_csv": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "jobs:sweep_cancel": [("post", (LOGIN, 404, 404, 302, 403, 302))],
    "api:sweep-cancel": [("post", (401, 404, 404, 200, 403, 200))],
    "api:job-events": [("get", (401, 404, 404, 200, 200, 200))],
    "api:job-log": [("get", (401, 404, 404, 200, 200, 200))],
    "api:job-outputs": [("get", (401, 404, 404, 200, 200, 200))],
    "api:job-output": [("get", (401, 404, 404, 200, 200, 200))],
    "api:job-outputs-zip": [("get", (401, 404, 404, 200, 200, 200))],
    "api:job-metrics": [("get", (401, 404, 404, 200, 200, 200))],
    "api:job-usage": [("get", (401, 404, 404, 200, 200, 200))],
    "api:job-start": [("get", (401, 404, 404, 200, 200, 200))],
    "api:job-cancel": [("post", (401, 404, 404, 200, 403, 200))],
    "api:job-hold": [("post", (401, 404, 404, 200, 403, 200))],
    "api:job-release": [("post", (401, 404, 404, 409, 403, 409))],
    # Re-run and clone copy the files into a new job under the caller's name: owner only.
    "api:job-rerun": [("post", (401, 404, 404, 201, 403, 403))],
    "api:job-clone": [("post", (401, 404, 404, 201, 403, 403))],
    # The owner's access token: nobody else's business, admins included.
    "accounts:token_revoke": [("post", (LOGIN, 404, 404, 302, 404, 404))],
    # Notifications: each user's own choices; another's browser is a 404.
    "notifications:settings": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "notifications:push_subscribe": [("post", (LOGIN, 400, 400, 400, 400, 400))],
    "notifications:push_unsubscribe": [("post", (LOGIN, 404, 404, 302, 404, 404))],
    "notifications:webhook": [("post", (LOGIN, 400, 400, 400, 400, 400))],
    "notifications:test": [("post", (LOGIN, 302, 302, 302, 302, 302))],
    # The service worker is a script, the same for everyone.
    "service-worker": [("get", (200, 200, 200, 200, 200, 200))],
    "api:token-detail": [("get", (401, 405, 405, 405, 405, 405)),
                         ("delete", (401, 404, 404, 204, 404, 404))],
    # The owner's lab and membership: its lead and admins manage it.
    "labs:detail": [("get", (LOGIN, 404, 404, 404, 200, 200))],
    "labs:member_remove": [("post", (LOGIN, 404, 404, 404, 302, 302))],
    "labs:reservation_new": [("get", (LOGIN, 404, 404, 404, 200, 200)),
                             ("post", (LOGIN, 404, 404, 404, 200, 200))],
    "labs:reservation_cancel": [("post", (LOGIN, 404, 404, 404, 302, 302))],
    # Environments: everyone lists theirs and the site's; the owner's private one is theirs
    # (and admins') alone, its lab's lead included. Test builds are jobs of whoever asks.
    "environments:list": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "environments:new": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "environments:detail": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "environments:lock": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "environments:build": [("post", (LOGIN, 404, 404, 302, 404, 302))],
    "environments:delete": [("post", (LOGIN, 404, 404, 302, 404, 302))],
    "api:environment-list": [("get", (401, 200, 200, 200, 200, 200))],
    "api:environment-detail": [("get", (401, 404, 404, 200, 404, 200)),
                               ("delete", (401, 404, 404, 204, 404, 204))],
    # An empty version: refused as invalid, for those who may add one.
    "api:environment-versions": [("post", (401, 404, 404, 400, 404, 400))],
    "api:environment-lock": [("get", (401, 404, 404, 200, 404, 200))],
    "api:environment-build": [("post", (401, 404, 404, 202, 404, 202))],
    # The owner's private dataset; an import is its owner's alone (done: on to the dataset).
    "datasets:list": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "datasets:new": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "datasets:import": [("get", (LOGIN, 404, 404, 302, 404, 404))],
    "datasets:detail": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "datasets:thumbnail": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "datasets:delete": [("post", (LOGIN, 404, 404, 302, 404, 302))],
    # An empty import: refused as invalid.
    "api:dataset-list": [("get", (401, 200, 200, 200, 200, 200)),
                         ("post", (401, 400, 400, 400, 400, 400))],
    "api:dataset-detail": [("get", (401, 404, 404, 200, 404, 200)),
                           ("delete", (401, 404, 404, 204, 404, 204))],
    "api:dataset-archive": [("get", (401, 404, 404, 200, 404, 200))],
    "api:dataset-import": [("get", (401, 404, 404, 200, 404, 404))],
    # For a job's launcher, with the job's own credential: no person's session or token opens
    # it, the owner's and an admin's included (tests/datasets/test_delivery.py has the job's).
    "api:dataset-delivery": [("get", (401, 401, 401, 401, 401, 401))],
    # A resumable upload is its owner's alone, admins' included: nobody else learns it exists.
    # Without tus headers, a request to start one is refused as malformed.
    "api:dataset-upload-list": [("post", (401, 400, 400, 400, 400, 400))],
    "api:dataset-upload-detail": [("get", (401, 404, 404, 200, 404, 404)),
                                  ("delete", (401, 404, 404, 204, 404, 404))],
    # Models: any lab's catalogue page lists only what each may see; the owner's private
    # version is theirs (and admins') alone. Publishing from a job is its owner's; the
    # world's job has not ended, so the form shows and an empty API publication is invalid.
    "models:list": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "models:lab": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "models:version": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "models:archive": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "models:publish": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    "api:model-list": [("get", (401, 200, 200, 200, 200, 200)),
                       ("post", (401, 400, 400, 400, 400, 400))],
    "api:model-latest": [("get", (401, 404, 404, 200, 404, 200))],
    "api:model-version": [("get", (401, 404, 404, 200, 404, 200))],
    "api:model-archive": [("get", (401, 404, 404, 200, 404, 200))],
    # The owner's private model has no template to serve it: they and admins are told so.
    "api:model-serve": [("post", (401, 404, 404, 400, 404, 400))],
    "job_templates:serve": [("get", (LOGIN, 404, 404, 200, 404, 200))],
    # Templates: the lab's lead published one for the lab. Leads of any lab (and admins)
    # publish; an empty publication is invalid. A run without its needed value is refused.
    "job_templates:list": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "job_templates:lab": [("get", (LOGIN, 200, 200, 200, 200, 200))],
    "job_templates:publish": [("get", (LOGIN, 404, 200, 404, 200, 200))],
    "job_templates:detail": [("get", (LOGIN, 404, 404, 200, 200, 200))],
    "api:template-list": [("get", (401, 200, 200, 200, 200, 200)),
                          ("post", (401, 400, 400, 400, 400, 400))],
    "api:template-latest": [("get", (401, 404, 404, 200, 200, 200))],
    "api:template-version": [("get", (401, 404, 404, 200, 200, 200))],
    "api:template-run": [("post", (401, 404, 404, 400, 400, 400))],
    "api:template-version-run": [("post", (401, 404, 404, 400, 400, 400))],
}
# fmt: on


@dataclass
class World:
    users: dict
    job: object
    sweep: object
    token_id: int
    lab_id: int
    membership_id: int
    registration_id: int
    environment: object
    dataset_import: object
    dataset_upload: object
    live_token_id: int
    subscription_id: int
    reservation: object
    model_version: object
    template_version: object


def build_world() -> World:
    """The objects every route names, with the fake bridge in charge."""
    vision, nlp = LabFactory(name="Vision"), LabFactory(name="NLP")
    membership = MembershipFactory(lab=vision, user=UserFactory(username="owner"))
    owner = membership.user
    admin_user = get_user_model().objects.create_superuser("operator", "op@example.org", "pw")
    users = {
        "anonymous": None,
        "other student": MembershipFactory(lab=nlp).user,
        "lead of another lab": MembershipFactory(lab=nlp, role="lead").user,
        "owner": owner,
        "lead of the lab": MembershipFactory(lab=vision, role="lead").user,
        "admin": admin_user,
    }
    job = submission.job_submit(
        user=owner,
        spec=specs.JobSpec(name="vision job", live_services=["tensorboard", "serve"]),
        script=script_upload(),
    )
    submission.job_submit_to_pool(job.pk)
    sync.jobs_sync()  # the job now waits in the (fake) queue, idle: it can be held
    (job.directory / "outputs").mkdir(exist_ok=True)
    (job.directory / "outputs" / "model.txt").write_text("weights")
    (job.directory / "stdout.txt").write_text("epoch 1\n")
    sweep = sweeps.sweep_submit(
        user=owner,
        spec=specs.JobSpec(name="vision sweep", arguments=["{lr}"]),
        plan=sweeps.SweepPlan.from_json({"grid": {"lr": [1, 2]}}),
        script=script_upload(),
    )
    environment = environment_create(user=owner, name="owner-env", requirements="tomli-w==1.2.0")
    started = dataset_services.dataset_import_from_upload(
        user=owner, name="owner-data", upload=upload(zip_of(SAMPLE))
    )
    dataset_import = dataset_services.dataset_import_run(started.pk)
    WorkstationOwner.objects.create(workstation="ws-volta", user=owner)
    applicant = UserFactory(username="applicant")
    registration = Registration.objects.create(user=applicant, lab=vision)
    return World(
        users=users,
        job=job,
        sweep=sweep,
        token_id=token_create(user=owner, name="laptop").token.pk,
        lab_id=vision.pk,
        membership_id=membership.pk,
        registration_id=registration.pk,
        environment=environment,
        dataset_import=dataset_import,
        dataset_upload=DatasetUpload.objects.create(
            owner=owner, upload_length=10, upload_metadata="{}"
        ),
        live_token_id=live_token_create(user=owner, job=job, name="script")[0].pk,
        subscription_id=PushSubscription.objects.create(
            user=owner, endpoint="https://push.example.org/owner", p256dh="k", auth="a"
        ).pk,
        reservation=Reservation.objects.create(
            lab=vision,
            purpose="Course",
            starts_at=timezone.now() + timedelta(hours=1),
            ends_at=timezone.now() + timedelta(hours=2),
            workstations=["ws-volta"],
            gpus=2,
        ),
        # The owner's private model, whose files are the dataset's (stored already).
        model_version=ModelVersion.objects.create(
            model=Model.objects.create(lab=vision, name="owner-model", created_by=owner),
            number=1,
            visibility="private",
            sha256=dataset_import.version.sha256,
            size_bytes=1,
            file_count=1,
            lineage={},
            published_by=owner,
        ),
        # The lab lead's template for the lab, whose one parameter has no default.
        template_version=TemplateVersion.objects.create(
            template=JobTemplate.objects.create(
                lab=vision, name="lab-template", created_by=users["lead of the lab"]
            ),
            number=1,
            title="Lab template",
            visibility="lab",
            project_name="train.py",
            project_sha256=dataset_import.version.sha256,
            project_size=1,
            entry_command="python train.py",
            resources={"gpus": 0},
            parameters=parameters_to_json(
                parameters_parse([{"name": "epochs", "type": "integer"}])
            ),
            published_by=users["lead of the lab"],
        ),
    )


def settings_for_a_world(folder: Path) -> dict:
    """What `fake_bridge` and the autouse fixtures set for one test, for a world kept longer."""
    return {
        **fake_bridge_settings(folder),
        **datasets_settings(folder),
        "PASSWORD_HASHERS": FAST_PASSWORD_HASHERS,
    }


@pytest.fixture
def world(fake_bridge):
    """A world of the test's own, for the cases that write."""
    return build_world()


@pytest.fixture(scope="class")
def shared_world(django_db_setup, django_db_blocker, tmp_path_factory):
    """One world for all the cases that only read, built once in a transaction that is
    rolled back after them: building it is most of a case's cost, and some thousand cases
    each building their own made this module a tenth of CI's time. Each case still runs in
    a savepoint of its own, so what a read writes (a session, a ticket) goes with it."""
    overrides = settings_for_a_world(tmp_path_factory.mktemp("route-matrix"))
    with django_db_blocker.unblock(), override_settings(**overrides), transaction.atomic():
        app.conf.task_always_eager = True
        try:
            yield build_world(), overrides
        finally:
            app.conf.task_always_eager = False
            transaction.set_rollback(True)


@pytest.fixture
def world_to_read(shared_world, settings):
    """The shared world, with its settings back over those each test's autouse fixtures
    set (its datasets live in its own folder, not the test's)."""
    world, overrides = shared_world
    apply_settings(settings, overrides)
    return world


def routes(patterns=None, prefix="", namespace=""):
    """(key, pattern, url name) for every route the resolver knows, admin's aside."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            if entry.app_name == "admin":
                continue
            yield from routes(entry.url_patterns, prefix + str(entry.pattern), inner)
        elif isinstance(entry, URLPattern):
            pattern = prefix + str(entry.pattern)
            name = f"{namespace}{entry.name}" if entry.name else None
            yield (name or pattern), pattern, name


def url_of(key, pattern, name, world):
    values = {
        "public_id": world.job.public_id,
        "stream": "stdout",
        "path": "outputs/model.txt",
        "table": "usage",
        "token_id": world.token_id,
        "lab_id": world.lab_id,
        "membership_id": world.membership_id,
        "uidb64": urlsafe_base64_encode(force_bytes(world.users["owner"].pk)),
        "token": "set-password-1a2b3c",
        "rest": "",
        "pk": world.environment.pk,
        "name": world.environment.name,
        "number": 1,
        "workstation": "ws-volta",
        "subscription_id": world.subscription_id,
    }
    if name is None:
        return "/" + re.sub(r"\^\(\?P<path>.*\)\$$", "nothing-here/", pattern)
    if name and "reservation" in name:
        values["public_id"] = world.reservation.public_id
    if name and name.startswith("lending:"):
        values["name"] = "ws-volta"
    if name and "sweep" in name:
        values["public_id"] = world.sweep.public_id
    if name == "utilisation:export":
        values["table"] = "bands"
    if name and name.startswith("live:"):
        values.update(service="serve", token_id=world.live_token_id)
    if name and ("datasets:" in name or "api:dataset" in name):
        dataset = world.dataset_import.version.dataset
        values.update(
            pk=dataset.pk,
            name=dataset.name,
            public_id=world.dataset_import.public_id,
            index=0,
            sha256=world.dataset_import.version.sha256,
            guid=world.dataset_upload.guid,
        )
    if name and ("models:" in name or "api:model" in name):
        values.update(pk=world.model_version.pk, lab="vision", name="owner-model")
    if name and ("job_templates:" in name or "api:template" in name):
        values.update(pk=world.template_version.pk, lab="vision", name="lab-template")
    if name == "job_templates:serve":
        values.update(pk=world.model_version.pk)
    wanted = re.findall(r"<(?:\w+:)?(\w+)>", pattern)
    return reverse(name, kwargs={param: values[param] for param in wanted})


def request_as(role, method, url, world, client, data):
    user = world.users[role]
    if url.startswith("/api/v1/") and not url.startswith(("/api/v1/schema", "/api/v1/docs")):
        from rest_framework.test import APIClient

        api = client_with_token(user) if user else APIClient()
        return getattr(api, method)(url, data, format="json")
    if user:
        client.force_login(user)
    return getattr(client, method)(url, data)


QUERIES = {
    "jobs:match": {"gpus": 1, "gpu_memory_gb": 10, "cpus": 1, "memory_gb": 2},
    "jobs:preview": {"gpus": 1, "gpu_memory_gb": 10, "cpus": 1, "memory_gb": 2},
}
BODIES = {
    "accounts:approvals": lambda world: {"registration": world.registration_id},
    "api:match": lambda world: {"gpus": 1},
    "api:password-token": lambda world: {"username": "owner", "password": "not-it"},
}

CASES = [
    (key, method, role, expected)
    for key, rows in TABLE.items()
    for method, row in rows
    for role, expected in zip(ROLES, row, strict=True)
]
READS = [case for case in CASES if case[1] == "get"]
WRITES = [case for case in CASES if case[1] != "get"]


def test_every_route_has_a_row():
    known = {key for key, _, _ in routes()}
    assert sorted(known - TABLE.keys()) == [], "routes nobody decided access for"
    assert sorted(TABLE.keys() - known) == [], "rows for routes that no longer exist"


def check_route(client, world, key, method, role, expected):
    (pattern, name) = next((p, n) for k, p, n in routes() if k == key)
    url = url_of(key, pattern, name, world)
    data = BODIES.get(key, lambda world: {})(world) if method == "post" else QUERIES.get(key)
    response = request_as(role, method, url, world, client, data)
    if expected == LOGIN:
        assert (response.status_code, response.get("Location", "").split("?")[0]) == (
            302,
            reverse("login"),
        ), url
    else:
        assert response.status_code == expected, f"{method.upper()} {url} as {role}"
    if role in ("other student", "lead of another lab") and expected == 404:
        assert b"epoch 1" not in response.content and b"weights" not in response.content


@pytest.mark.parametrize(("key", "method", "role", "expected"), WRITES)
def test_a_write_answers_each_role_as_the_table_says(client, world, key, method, role, expected):
    check_route(client, world, key, method, role, expected)


class TestReads:
    """The cases that only read share one world."""

    @pytest.mark.parametrize(("key", "method", "role", "expected"), READS)
    def test_a_read_answers_each_role_as_the_table_says(
        self, client, world_to_read, key, method, role, expected
    ):
        check_route(client, world_to_read, key, method, role, expected)

    def test_a_made_up_reset_token_never_opens_the_password_form(self, client, world_to_read):
        pattern = "accounts/password-reset/<uidb64>/<token>/"
        url = url_of("password_reset_confirm", pattern, "password_reset_confirm", world_to_read)
        response = client.get(url, follow=True)
        assert b"new_password1" not in response.content

    @pytest.mark.parametrize("model", [m._meta.label for m in admin.site._registry])
    @pytest.mark.parametrize("role", [role for role in ROLES if role != "admin"])
    def test_only_admins_reach_the_admin(self, client, world_to_read, model, role):
        """Every registered model's list, add and change pages, tried on one existing row."""
        model_class = next(m for m in admin.site._registry if m._meta.label == model)
        info = (model_class._meta.app_label, model_class._meta.model_name)
        row = model_class._default_manager.first()
        urls = [reverse("admin:{}_{}_changelist".format(*info))]
        if row is not None:
            urls.append(reverse("admin:{}_{}_change".format(*info), args=[row.pk]))
            urls.append(reverse("admin:{}_{}_delete".format(*info), args=[row.pk]))
        if world_to_read.users[role]:
            client.force_login(world_to_read.users[role])
        for url in urls:
            response = client.get(url)
            assert response.status_code == 302, url
            assert response["Location"].startswith(reverse("admin:login")), url

    @pytest.mark.parametrize("model", [m._meta.label for m in admin.site._registry])
    def test_an_admin_reaches_every_admin_list(self, client, world_to_read, model):
        model_class = next(m for m in admin.site._registry if m._meta.label == model)
        info = (model_class._meta.app_label, model_class._meta.model_name)
        client.force_login(world_to_read.users["admin"])
        assert client.get(reverse("admin:{}_{}_changelist".format(*info))).status_code == 200
