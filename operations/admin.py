from django.contrib import admin

from plumbing.admin import ReadOnlyAdmin

from .models import Drain


@admin.register(Drain)
class DrainAdmin(ReadOnlyAdmin):
    """Read-only: a drain is started and stopped with `manage.py drain`, which audits it."""

    list_display = ("active", "message", "started_at", "started_by")
