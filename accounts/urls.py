from django.urls import path

from . import views

app_name = "accounts"
urlpatterns = [
    path("", views.account, name="account"),
    path("register/", views.register, name="register"),
    path("approvals/", views.approvals, name="approvals"),
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
]
