from django.urls import path

from . import views

app_name = "utilisation"
urlpatterns = [
    path("", views.utilisation_page, name="report"),
    path("<slug:table>.csv", views.utilisation_export, name="export"),
]
