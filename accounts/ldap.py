"""LDAP sign-in (django-auth-ldap): lab memberships follow the directory's groups."""

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from labs.services import lab_memberships_sync_from_ldap


@receiver(user_logged_in)
def sync_labs_from_ldap_groups(sender, request, user, **kwargs) -> None:
    ldap_user = getattr(user, "ldap_user", None)
    if ldap_user is not None:
        lab_memberships_sync_from_ldap(user=user, group_dns=set(ldap_user.group_dns))
