from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0002_sweep_preparation"),
    ]

    operations = [
        migrations.AddField(
            model_name="sweep",
            name="ready_runs",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        # Every run written before this had its folder made whole before its submit.
        migrations.RunSQL(
            "UPDATE jobs_sweep SET ready_runs = prepared_runs",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
