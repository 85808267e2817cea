from django.urls import path

from . import views

app_name = "accounting"
urlpatterns = [
    path("", views.reports_page, name="reports"),
    path("export/<slug:table>.csv", views.report_export, name="export"),
]
