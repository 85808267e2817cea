from django.contrib import admin

from .models import Drain


@admin.register(Drain)
class DrainAdmin(admin.ModelAdmin):
    """Read-only: a drain is started and stopped with `manage.py drain`, which audits it."""

    list_display = ("active", "message", "started_at", "started_by")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
