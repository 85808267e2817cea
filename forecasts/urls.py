from django.urls import path

from . import views

app_name = "forecasts"
urlpatterns = [
    path("start.json", views.job_start, name="start"),
]
