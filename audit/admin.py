from django.contrib import admin

from plumbing.admin import ReadOnlyAdmin

from .models import AuditEntry


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
