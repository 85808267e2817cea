"""The admins' environment presets become site environments of the same kind, each with a
version 1 (the system Python or a container image), before jobs drops the presets."""

import re

from django.db import migrations


def presets_to_site_environments(apps, schema_editor):
    Preset = apps.get_model("jobs", "EnvironmentPreset")
    Environment = apps.get_model("environments", "Environment")
    Version = apps.get_model("environments", "EnvironmentVersion")
    for preset in Preset.objects.all():
        # Names are now typed as NAME@VERSION: no '@', quotes or other signs.
        name = re.sub(r"[^A-Za-z0-9 ._+()\[\]-]+", "-", preset.name).strip(" .-")[:80] or "site"
        if Environment.objects.filter(owner=None, name=name).exists():
            continue
        container = preset.kind == "container"
        environment = Environment.objects.create(
            name=name,
            owner=None,
            visibility="site",
            kind="container" if container else "packages",
            description=preset.description,
            is_default=preset.is_default,
            is_active=preset.is_active,
        )
        Version.objects.create(
            environment=environment,
            number=1,
            python=preset.python,
            container_image=preset.container_image if container else "",
        )


def site_environments_to_presets(apps, schema_editor):
    Preset = apps.get_model("jobs", "EnvironmentPreset")
    Environment = apps.get_model("environments", "Environment")
    for environment in Environment.objects.filter(owner=None, visibility="site"):
        version = environment.versions.order_by("-number").first()
        Preset.objects.get_or_create(
            name=environment.name,
            defaults={
                "description": environment.description[:300],
                "kind": "container" if environment.kind == "container" else "vanilla",
                "python": (version.python if version else "") or "/usr/bin/python3",
                "container_image": version.container_image if version else "",
                "is_default": environment.is_default,
                "is_active": environment.is_active,
            },
        )


class Migration(migrations.Migration):
    dependencies = [
        ("environments", "0001_initial"),
        ("jobs", "0017_sweep_moves_to_experiments"),
    ]
    # jobs drops the presets only once they are copied (jobs itself knows nothing of this app).
    run_before = [("jobs", "0018_delete_environmentpreset")]

    operations = [
        migrations.RunPython(presets_to_site_environments, site_environments_to_presets),
    ]
