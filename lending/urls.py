from django.urls import path

from . import views

app_name = "lending"

urlpatterns = [
    path("", views.workstation_list, name="list"),
    # Before the workstation's own pages: "claim" is not a workstation.
    path("claim/", views.claim, name="claim"),
    path("<str:name>/", views.workstation_page, name="workstation"),
    path("<str:name>/terms/", views.terms_update, name="terms"),
    path("<str:name>/reclaim/", views.reclaim, name="reclaim"),
    path("<str:name>/lend-again/", views.lend_again, name="lend_again"),
    path("<str:name>/given.csv", views.given_csv, name="given_csv"),
]
