"""Sweeps now live in experiments (see experiments.0001): Job.sweep points there, and jobs
forgets its Sweep. Nothing in the database changes: the table and the foreign key stay."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0016_output_retention"),
        ("experiments", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="job",
                    name="sweep",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="runs",
                        to="experiments.sweep",
                    ),
                ),
                migrations.DeleteModel(name="Sweep"),
            ],
            database_operations=[],
        ),
    ]
