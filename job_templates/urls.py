from django.urls import path

from . import views

app_name = "job_templates"
urlpatterns = [
    path("", views.template_catalogue, name="list"),
    path("lab/<slug:lab>/", views.template_catalogue, name="lab"),
    path("publish/", views.template_publish_page, name="publish"),
    path("versions/<int:pk>/", views.template_detail, name="detail"),
    path("serve-model/<int:pk>/", views.model_serve_page, name="serve"),
]
