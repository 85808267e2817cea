from django.db import migrations


def create_groups(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the groups need them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    leads, _ = Group.objects.get_or_create(name="Lab leads")
    leads.permissions.add(
        *Permission.objects.filter(content_type__app_label="labs", codename="lead_lab")
    )
    admins, _ = Group.objects.get_or_create(name="Nightshift administrators")
    admins.permissions.add(
        *Permission.objects.filter(content_type__app_label__in=["labs", "jobs", "accounts"]),
        *Permission.objects.filter(content_type__app_label="audit", codename__startswith="view_"),
        *Permission.objects.filter(
            content_type__app_label="auth", codename__in=["view_user", "change_user", "add_user"]
        ),
    )


class Migration(migrations.Migration):
    dependencies = [
        ("labs", "0003_lead_permission"),
        ("jobs", "0009_job_lab_and_gpus"),
        ("accounts", "0002_registration"),
        ("audit", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
