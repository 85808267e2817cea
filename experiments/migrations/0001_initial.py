"""Sweeps move from jobs to experiments, keeping their table (jobs_sweep) and rows.

Only Django's idea of the model moves (state_operations); the database is not touched,
apart from the content type, renamed so that admin history and permissions follow the model.
jobs.0017 then points Job.sweep here and forgets its own Sweep.
"""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def content_type_moves(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType")
    if not content_types.objects.filter(app_label="experiments", model="sweep").exists():
        content_types.objects.filter(app_label="jobs", model="sweep").update(
            app_label="experiments"
        )


def content_type_moves_back(apps, schema_editor):
    content_types = apps.get_model("contenttypes", "ContentType")
    if not content_types.objects.filter(app_label="jobs", model="sweep").exists():
        content_types.objects.filter(app_label="experiments", model="sweep").update(
            app_label="jobs"
        )


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("jobs", "0016_output_retention"),
        ("labs", "0004_output_retention"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Sweep",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "public_id",
                            models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
                        ),
                        ("name", models.CharField(max_length=200)),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("grid", "Grid: every combination"),
                                    ("list", "List of parameter sets"),
                                    ("random", "Random samples"),
                                    ("matrix", "Evaluation matrix: systems by datasets"),
                                    ("study", "Hyperparameter optimisation (Optuna)"),
                                ],
                                max_length=20,
                            ),
                        ),
                        ("definition", models.JSONField(default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        ("cluster_id", models.PositiveIntegerField(blank=True, null=True)),
                        ("submitted_at", models.DateTimeField(blank=True, null=True)),
                        ("submit_attempts", models.PositiveIntegerField(default=0)),
                        ("submit_requested_at", models.DateTimeField(blank=True, null=True)),
                        ("last_error", models.TextField(blank=True)),
                        ("finished_at", models.DateTimeField(blank=True, null=True)),
                        ("stop_reason", models.CharField(blank=True, max_length=200)),
                        (
                            "lab",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="sweeps",
                                to="labs.lab",
                            ),
                        ),
                        (
                            "owner",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="sweeps",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={"db_table": "jobs_sweep", "ordering": ["-created_at", "-id"]},
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_type_moves, content_type_moves_back),
    ]
