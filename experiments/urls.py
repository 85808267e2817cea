from django.urls import path

from . import views

# Included by portal.urls in the "jobs" namespace, beside the jobs' own pages: a sweep's
# runs are jobs, and its pages live under /jobs/sweeps/.
urlpatterns = [
    path("sweeps/matrix/new/", views.matrix_new, name="matrix_new"),
    path("sweeps/study/new/", views.study_new, name="study_new"),
    path("sweeps/<uuid:public_id>/", views.sweep_detail, name="sweep"),
    path("sweeps/<uuid:public_id>/progress/", views.sweep_progress, name="sweep_progress"),
    path("sweeps/<uuid:public_id>/cancel/", views.sweep_cancel, name="sweep_cancel"),
    path("sweeps/<uuid:public_id>/results.csv", views.sweep_results_csv, name="sweep_results_csv"),
]
