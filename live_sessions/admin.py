from django.contrib import admin

from .models import LiveShare, LiveToken


@admin.register(LiveToken)
class LiveTokenAdmin(admin.ModelAdmin):
    list_display = ("__str__", "job", "user", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "hint", "user__username")
    readonly_fields = ("job", "user", "name", "hint", "digest", "created_at", "last_used_at")
    fields = (*readonly_fields, "revoked_at")

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(LiveShare)
class LiveShareAdmin(admin.ModelAdmin):
    list_display = ("job", "shared_by", "shared_at")
    readonly_fields = ("job", "shared_by", "shared_at")

    def has_add_permission(self, request) -> bool:
        return False
