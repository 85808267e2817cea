from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from .services import audit_record


@receiver(user_logged_in)
def record_login(sender, request, user, **kwargs) -> None:
    audit_record(action="login", actor=user, target=user, target_label=user.get_username())


@receiver(user_login_failed)
def record_failed_login(sender, credentials, request=None, **kwargs) -> None:
    tried = str(credentials.get("username", ""))[:150]
    audit_record(action="login.failed", target_label=tried, detail=f"Tried username {tried!r}")
