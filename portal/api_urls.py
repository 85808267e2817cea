"""/api/v1/: the REST API, its OpenAPI schema and its interactive docs."""

from csp.decorators import csp_update
from django.urls import path, re_path, register_converter
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from accounting import api as accounting_api
from accounts import api as accounts_api
from datasets import uploads
from datasets.api import views as datasets_api
from environments.api import views as environments_api
from experiments.api import views as experiments_api
from forecasts import api as forecasts_api
from job_templates.api import views as templates_api
from jobs.api import views as jobs_api
from lending import api as lending_api
from model_registry.api import views as models_api
from notifications import api as notifications_api
from plumbing.api import api_not_found
from usage import api as usage_api


class JobReference:
    """A job's id, or the start of it as `nightshift list` shows it (at least 4 characters):
    jobs.selectors.job_by_reference finds the one job it names."""

    regex = "[0-9a-fA-F][0-9a-fA-F-]{3,35}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value) -> str:
        return str(value)


register_converter(JobReference, "job")

app_name = "api"
urlpatterns = [
    path("notifications/", notifications_api.NotificationListView.as_view(), name="notifications"),
    path(
        "notifications/preferences/",
        notifications_api.NotificationPreferencesView.as_view(),
        name="notification-preferences",
    ),
    path("jobs/", jobs_api.JobListView.as_view(), name="job-list"),
    path("jobs/<job:public_id>/", jobs_api.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<job:public_id>/cancel/", jobs_api.JobCancelView.as_view(), name="job-cancel"),
    path("jobs/<job:public_id>/hold/", jobs_api.JobHoldView.as_view(), name="job-hold"),
    path("jobs/<job:public_id>/release/", jobs_api.JobReleaseView.as_view(), name="job-release"),
    path("jobs/<job:public_id>/rerun/", jobs_api.JobRerunView.as_view(), name="job-rerun"),
    path("jobs/<job:public_id>/clone/", jobs_api.JobCloneView.as_view(), name="job-clone"),
    path("jobs/<job:public_id>/events/", jobs_api.JobEventsView.as_view(), name="job-events"),
    path("jobs/<job:public_id>/logs/<str:stream>/", jobs_api.JobLogView.as_view(), name="job-log"),
    path("jobs/<job:public_id>/outputs/", jobs_api.JobOutputsView.as_view(), name="job-outputs"),
    path(
        "jobs/<job:public_id>/outputs/<path:path>",
        jobs_api.JobOutputFileView.as_view(),
        name="job-output",
    ),
    path(
        "jobs/<job:public_id>/outputs.zip",
        jobs_api.JobOutputsZipView.as_view(),
        name="job-outputs-zip",
    ),
    path("jobs/<job:public_id>/metrics/", jobs_api.JobMetricsView.as_view(), name="job-metrics"),
    path("jobs/<job:public_id>/usage/", usage_api.JobUsageView.as_view(), name="job-usage"),
    path("jobs/<job:public_id>/start/", forecasts_api.JobStartView.as_view(), name="job-start"),
    path("sweeps/", experiments_api.SweepListView.as_view(), name="sweep-list"),
    path("sweeps/matrix/", experiments_api.MatrixSubmitView.as_view(), name="sweep-matrix"),
    path("sweeps/study/", experiments_api.StudySubmitView.as_view(), name="sweep-study"),
    path(
        "sweeps/<uuid:public_id>/", experiments_api.SweepDetailView.as_view(), name="sweep-detail"
    ),
    path(
        "sweeps/<uuid:public_id>/cancel/",
        experiments_api.SweepCancelView.as_view(),
        name="sweep-cancel",
    ),
    path(
        "sweeps/<uuid:public_id>/results/",
        experiments_api.SweepResultsView.as_view(),
        name="sweep-results",
    ),
    path(
        "sweeps/<uuid:public_id>/results.csv",
        experiments_api.SweepResultsCsvView.as_view(),
        name="sweep-results-csv",
    ),
    path("environments/", environments_api.EnvironmentListView.as_view(), name="environment-list"),
    path(
        "environments/<str:name>/",
        environments_api.EnvironmentDetailView.as_view(),
        name="environment-detail",
    ),
    path(
        "environments/<str:name>/versions/",
        environments_api.EnvironmentVersionsView.as_view(),
        name="environment-versions",
    ),
    path(
        "environments/<str:name>/versions/<int:number>/lock.txt",
        environments_api.EnvironmentLockView.as_view(),
        name="environment-lock",
    ),
    path(
        "environments/<str:name>/versions/<int:number>/build/",
        environments_api.EnvironmentBuildView.as_view(),
        name="environment-build",
    ),
    path("datasets/", datasets_api.DatasetListView.as_view(), name="dataset-list"),
    path("datasets/<str:name>/", datasets_api.DatasetDetailView.as_view(), name="dataset-detail"),
    path(
        "datasets/<str:name>/versions/<int:number>/archive.tar",
        datasets_api.DatasetArchiveView.as_view(),
        name="dataset-archive",
    ),
    path(
        "dataset-uploads/",
        uploads.DatasetUploadViewSet.as_view({"post": "create"}),
        name="dataset-upload-list",
    ),
    path(
        "dataset-uploads/<uuid:guid>/",
        uploads.DatasetUploadViewSet.as_view(
            {"get": "retrieve", "head": "info", "patch": "partial_update", "delete": "destroy"}
        ),
        name="dataset-upload-detail",
    ),
    path(
        "dataset-delivery/<str:sha256>.tar",
        datasets_api.DatasetDeliveryView.as_view(),
        name="dataset-delivery",
    ),
    path(
        "dataset-imports/<uuid:public_id>/",
        datasets_api.DatasetImportDetailView.as_view(),
        name="dataset-import",
    ),
    path("models/", models_api.ModelListView.as_view(), name="model-list"),
    path(
        "models/<str:lab>/<str:name>/", models_api.ModelVersionView.as_view(), name="model-latest"
    ),
    path(
        "models/<str:lab>/<str:name>/versions/<int:number>/",
        models_api.ModelVersionView.as_view(),
        name="model-version",
    ),
    path(
        "models/<str:lab>/<str:name>/versions/<int:number>/archive.tar",
        models_api.ModelArchiveView.as_view(),
        name="model-archive",
    ),
    path(
        "models/<str:lab>/<str:name>/versions/<int:number>/serve/",
        templates_api.ModelServeView.as_view(),
        name="model-serve",
    ),
    path("templates/", templates_api.TemplateListView.as_view(), name="template-list"),
    path(
        "templates/<str:lab>/<str:name>/",
        templates_api.TemplateVersionView.as_view(),
        name="template-latest",
    ),
    path(
        "templates/<str:lab>/<str:name>/versions/<int:number>/",
        templates_api.TemplateVersionView.as_view(),
        name="template-version",
    ),
    path(
        "templates/<str:lab>/<str:name>/runs/",
        templates_api.TemplateRunView.as_view(),
        name="template-run",
    ),
    path(
        "templates/<str:lab>/<str:name>/versions/<int:number>/runs/",
        templates_api.TemplateRunView.as_view(),
        name="template-version-run",
    ),
    path("match/", jobs_api.MatchView.as_view(), name="match"),
    path("pool/", jobs_api.PoolView.as_view(), name="pool"),
    path(
        "pool/placement/<str:workstation>/",
        forecasts_api.PlacementFiguresView.as_view(),
        name="placement-figures",
    ),
    path(
        "pool/reservations/<str:workstation>/",
        forecasts_api.KitReservationsView.as_view(),
        name="kit-reservations",
    ),
    path(
        "pool/terms/<str:workstation>/",
        lending_api.KitTermsView.as_view(),
        name="kit-terms",
    ),
    path(
        "pool/claim-code/<str:workstation>/",
        lending_api.KitClaimCodeView.as_view(),
        name="kit-claim-code",
    ),
    path("workstations/", lending_api.OwnedListView.as_view(), name="workstation-list"),
    path(
        "workstations/<str:workstation>/terms/",
        lending_api.TermsView.as_view(),
        name="workstation-terms",
    ),
    path(
        "workstations/<str:workstation>/reclaim/",
        lending_api.ReclaimView.as_view(),
        name="workstation-reclaim",
    ),
    path("reservations/", forecasts_api.ReservationListView.as_view(), name="reservation-list"),
    path(
        "reservations/<uuid:public_id>/",
        forecasts_api.ReservationDetailView.as_view(),
        name="reservation-detail",
    ),
    path("me/", accounts_api.MeView.as_view(), name="me"),
    path("tokens/", accounts_api.TokenListView.as_view(), name="token-list"),
    path("tokens/<int:token_id>/", accounts_api.TokenDetailView.as_view(), name="token-detail"),
    path("auth/token/", accounts_api.PasswordTokenView.as_view(), name="password-token"),
    path("reports/", accounting_api.ReportView.as_view(), name="report"),
    path(
        "reports/<slug:table>.csv",
        accounting_api.ReportExportView.as_view(),
        name="report-export",
    ),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI sets inline styles as it draws; its scripts still come from static only.
    path(
        "docs/",
        csp_update({"style-src": ["'unsafe-inline'"]})(
            SpectacularSwaggerSplitView.as_view(url_name="api:schema")
        ),
        name="docs",
    ),
    # [\s\S], not ".": a path with a line break in it is an API 404 too, not the HTML one.
    re_path(r"^(?P<path>[\s\S]*)$", api_not_found),
]
