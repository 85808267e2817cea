from django.urls import path

from . import views

# Included by portal.urls in the "jobs" namespace, with experiments' pages.
urlpatterns = [
    path("", views.job_list, name="list"),
    path("new/", views.job_new, name="new"),
    path("match.json", views.job_match, name="match"),
    path("preview.txt", views.job_preview, name="preview"),
    path("<uuid:public_id>/", views.job_detail, name="detail"),
    path("<uuid:public_id>/status.json", views.job_status, name="status"),
    path("<uuid:public_id>/cancel/", views.job_cancel, name="cancel"),
    path("<uuid:public_id>/hold/", views.job_hold, name="hold"),
    path("<uuid:public_id>/release/", views.job_release, name="release"),
    path("<uuid:public_id>/rerun/", views.job_rerun, name="rerun"),
    path("<uuid:public_id>/metrics.json", views.job_metrics, name="metrics"),
    path("<uuid:public_id>/metrics.csv", views.job_metrics_csv, name="metrics_csv"),
    path("<uuid:public_id>/logs/<str:stream>.txt", views.job_log, name="log"),
    path("<uuid:public_id>/outputs.zip", views.job_outputs_zip, name="outputs_zip"),
    path("<uuid:public_id>/files/<path:path>", views.job_output, name="output"),
]
