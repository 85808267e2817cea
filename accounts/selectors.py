from django.db.models import QuerySet
from django.utils import timezone

from .models import AccessToken


def token_list_for_user(user) -> QuerySet[AccessToken]:
    return AccessToken.objects.filter(user=user)


def token_get_for_user(user, token_id: int) -> AccessToken:
    """The user's token; AccessToken.DoesNotExist for anyone else's."""
    return token_list_for_user(user).get(pk=token_id)


def token_list_active(user) -> QuerySet[AccessToken]:
    """The user's tokens that still open the API: not revoked, not expired."""
    return AccessToken.objects.filter(user=user, revoked_at__isnull=True).exclude(
        expires_at__lte=timezone.now()
    )
