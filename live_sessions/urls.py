from django.urls import path

from . import views

app_name = "live"
urlpatterns = [
    path("", views.live_page, name="page"),
    path("open/<str:service>/", views.live_open, name="open"),
    path("tokens/", views.live_token_new, name="token_new"),
    path("tokens/<int:token_id>/revoke/", views.live_token_revoke_view, name="token_revoke"),
    path("share/", views.live_share, name="share"),
    path("status.json", views.live_status, name="status"),
]
