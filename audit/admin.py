from django.contrib import admin

from .models import AuditEntry


class ReadOnlyAdmin(admin.ModelAdmin):
    """Read and filter only: records that the system writes cannot be changed in the UI."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AuditEntry)
class AuditEntryAdmin(ReadOnlyAdmin):
    """The audit log, which cannot be changed through the UI."""

    list_display = (
        "at",
        "actor_name",
        "action",
        "target_type",
        "target_label",
        "ip",
        "token_prefix",
        "via",
    )
    list_filter = ("action", "via", "target_type", "at")
    search_fields = ("actor_name", "target_label", "target_id", "ip", "detail")
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEntry._meta.fields]
    list_select_related = ("actor",)
