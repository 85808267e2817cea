from django.urls import path

from . import views

# Included by portal.urls in the "labs" namespace, with accounting's page of a lab.
urlpatterns = [
    path(
        "<int:lab_id>/members/<int:membership_id>/remove/",
        views.member_remove,
        name="member_remove",
    ),
]
