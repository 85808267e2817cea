from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, re_path, reverse, reverse_lazy
from django.views.generic import RedirectView

from accounting import urls as accounting_urls
from accounts import forms as account_forms
from experiments import urls as experiments_urls
from forecasts import urls as forecasts_urls
from jobs import urls as jobs_urls
from jobs.views import healthz, pool
from labs import urls as labs_urls
from notifications.views import service_worker
from operations.views import metrics


def sweep_admin_moved(request: HttpRequest, rest: str) -> HttpResponsePermanentRedirect:
    query = request.META.get("QUERY_STRING")
    target = f"{reverse('admin:index')}experiments/sweep/{rest}"
    return HttpResponsePermanentRedirect(f"{target}?{query}" if query else target)


# A lab's pages, from the apps that own them: usage (accounting), members (labs),
# reservations (forecasts).
LAB_URLS = accounting_urls.lab_urlpatterns + labs_urls.urlpatterns + forecasts_urls.lab_urlpatterns

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="jobs:list", permanent=False)),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password-reset/", auth_views.PasswordResetView.as_view(), name="password_reset"),
    path(
        "accounts/password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/password-reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(form_class=account_forms.NewPasswordForm),
        name="password_reset_confirm",
    ),
    path(
        "accounts/password-reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path(
        "accounts/password/",
        auth_views.PasswordChangeView.as_view(
            form_class=account_forms.ChangePasswordForm,
            success_url=reverse_lazy("password_change_done"),
        ),
        name="password_change",
    ),
    path(
        "accounts/password/changed/",
        auth_views.PasswordChangeDoneView.as_view(),
        name="password_change_done",
    ),
    path("accounts/", include("accounts.urls")),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("labs/", include((LAB_URLS, "labs"))),
    path("reports/utilisation/", include("usage.report_urls")),
    path("reports/", include("accounting.urls")),
    path("environments/", include("environments.urls")),
    path("datasets/", include("datasets.urls")),
    path("models/", include("model_registry.urls")),
    path("templates/", include("job_templates.urls")),
    path("api/v1/", include("portal.api_urls")),
    path("api/", RedirectView.as_view(url="/api/v1/docs/", permanent=False), name="api-docs"),
    # Experiments (sweeps, matrices, studies) have their pages in the jobs namespace.
    path("jobs/<uuid:public_id>/live/", include("live_sessions.urls")),
    path("sessions/", include("live_sessions.session_urls")),
    path("jobs/<uuid:public_id>/", include("usage.urls")),
    path("jobs/<uuid:public_id>/", include("forecasts.urls")),
    path("jobs/", include((jobs_urls.urlpatterns + experiments_urls.urlpatterns, "jobs"))),
    path("notifications/", include("notifications.urls")),
    path("workstations/", include("lending.urls")),
    # From the root, so that the service worker's scope is the whole portal.
    path("service-worker.js", service_worker, name="service-worker"),
    path("pool/", pool, name="pool"),
    path("healthz", healthz, name="healthz"),
    # Browsers ask for /favicon.ico on pages that name no icon (the admin's, the API's).
    path(
        "favicon.ico",
        RedirectView.as_view(url=static("img/favicon.svg"), permanent=True),
        name="favicon",
    ),
    path("metrics", metrics, name="metrics"),
    # Sweeps moved from jobs to experiments, and with them their admin pages: the old
    # addresses (bookmarks, links in old emails) lead to the new ones.
    re_path(r"^admin/jobs/sweep/(?P<rest>.*)$", sweep_admin_moved, name="sweep-admin-moved"),
    path("admin/", admin.site.urls),
]
