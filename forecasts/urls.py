from django.urls import path

from . import views

app_name = "forecasts"
urlpatterns = [
    path("start.json", views.job_start, name="start"),
]

# Under /labs/, in the labs: namespace (portal/urls.py composes it).
lab_urlpatterns = [
    path("<int:lab_id>/reservations/new/", views.reservation_new, name="reservation_new"),
    path(
        "<int:lab_id>/reservations/<uuid:public_id>/cancel/",
        views.reservation_cancel,
        name="reservation_cancel",
    ),
]
