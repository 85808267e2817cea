from django.apps import AppConfig


class LiveSessionsConfig(AppConfig):
    name = "live_sessions"
    verbose_name = "Live sessions"
    default_auto_field = "django.db.models.BigAutoField"
