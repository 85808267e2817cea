from django.urls import path

from . import views

app_name = "models"
urlpatterns = [
    path("", views.model_catalogue, name="list"),
    path("lab/<slug:lab>/", views.model_catalogue, name="lab"),
    path("versions/<int:pk>/", views.model_version_detail, name="version"),
    path("versions/<int:pk>/archive.tar", views.model_version_archive, name="archive"),
    path("publish/<uuid:public_id>/", views.model_publish_from_job, name="publish"),
]
