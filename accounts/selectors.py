from django.db.models import QuerySet

from .models import AccessToken


def token_list_for_user(user) -> QuerySet[AccessToken]:
    return AccessToken.objects.filter(user=user)


def token_get_for_user(user, token_id: int) -> AccessToken:
    """The user's token; AccessToken.DoesNotExist for anyone else's."""
    return token_list_for_user(user).get(pk=token_id)
