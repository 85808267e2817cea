from django.urls import path

from . import views

app_name = "environments"
urlpatterns = [
    path("", views.environment_list, name="list"),
    path("new/", views.environment_new, name="new"),
    path("<int:pk>/", views.environment_detail, name="detail"),
    path("<int:pk>/delete/", views.environment_delete, name="delete"),
    path("<int:pk>/versions/<int:number>/lock.txt", views.environment_lock, name="lock"),
    path("<int:pk>/versions/<int:number>/build/", views.environment_build, name="build"),
]
