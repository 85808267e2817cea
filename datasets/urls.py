from django.urls import path

from . import views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("new/", views.dataset_new, name="new"),
    path("imports/<uuid:public_id>/", views.dataset_import_detail, name="import"),
    path("<int:pk>/", views.dataset_detail, name="detail"),
    path("<int:pk>/delete/", views.dataset_delete, name="delete"),
    path(
        "<int:pk>/versions/<int:number>/thumbnails/<int:index>.png",
        views.dataset_thumbnail,
        name="thumbnail",
    ),
]
