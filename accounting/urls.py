from django.urls import path

from . import views

app_name = "accounting"
urlpatterns = [
    path("", views.reports_page, name="reports"),
    path("export/<slug:table>.csv", views.report_export, name="export"),
]

# A lab's page shows its members' usage to its leads; portal.urls puts it in the labs namespace,
# beside labs' own routes.
lab_urlpatterns = [
    path("<int:lab_id>/", views.lab_detail, name="detail"),
]
