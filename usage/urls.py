from django.urls import path

from . import views

app_name = "usage"
urlpatterns = [
    path("usage.json", views.job_usage, name="json"),
    path("usage.csv", views.job_usage_csv, name="csv"),
]
