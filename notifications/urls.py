from django.urls import path

from . import views

app_name = "notifications"

urlpatterns = [
    path("", views.notification_settings, name="settings"),
    path("push/", views.push_subscribe, name="push_subscribe"),
    path("push/<int:subscription_id>/remove/", views.push_unsubscribe, name="push_unsubscribe"),
    path("webhook/", views.webhook_save, name="webhook"),
    path("test/", views.send_test, name="test"),
]
