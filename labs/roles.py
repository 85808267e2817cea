"""The Django groups that carry Nightshift's roles, made after every migrate (and flush)."""

from django.apps import apps
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import Group, Permission
from django.db.models import Q

LEADS_GROUP = "Lab leads"
ADMINS_GROUP = "Nightshift administrators"


def ensure_role_groups(**kwargs) -> None:
    # Every app's permissions first: this may run before the later apps' were made.
    for app_config in apps.get_app_configs():
        create_permissions(app_config, verbosity=0)
    leads, _ = Group.objects.get_or_create(name=LEADS_GROUP)
    leads.permissions.add(
        *Permission.objects.filter(content_type__app_label="labs", codename="lead_lab")
    )
    admins, _ = Group.objects.get_or_create(name=ADMINS_GROUP)
    admins.permissions.add(
        *Permission.objects.filter(
            Q(
                content_type__app_label__in=[
                    "labs",
                    "jobs",
                    "experiments",
                    "environments",
                    "accounts",
                ]
            )
            | Q(content_type__app_label__in=["audit", "accounting"], codename__startswith="view_")
            | Q(
                content_type__app_label="auth",
                codename__in=["view_user", "change_user", "add_user"],
            )
        )
    )
