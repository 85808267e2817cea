from django.db import migrations


def create_system_python(apps, schema_editor):
    EnvironmentPreset = apps.get_model("jobs", "EnvironmentPreset")
    EnvironmentPreset.objects.get_or_create(
        name="System Python",
        defaults={
            "description": "The python3 installed on every workstation.",
            "kind": "vanilla",
            "python": "/usr/bin/python3",
            "is_default": True,
        },
    )


class Migration(migrations.Migration):
    dependencies = [("jobs", "0005_environment_presets")]

    operations = [migrations.RunPython(create_system_python, migrations.RunPython.noop)]
