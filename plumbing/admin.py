"""What the apps' admin pages share."""

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Read and filter only: records that the system writes cannot be changed in the UI."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
