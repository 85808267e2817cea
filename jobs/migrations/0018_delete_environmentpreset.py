from django.db import migrations


class Migration(migrations.Migration):
    """Presets became site environments (environments.0002 copies them first). The table
    stays while the previous version may still serve and read it (docs/operations.md: add
    first, remove later); a later release drops it."""

    dependencies = [
        ("jobs", "0017_sweep_moves_to_experiments"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="EnvironmentPreset")],
            database_operations=[],
        ),
    ]
