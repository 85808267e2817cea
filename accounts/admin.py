from django.contrib import admin
from django.template.defaultfilters import pluralize
from django.utils import timezone

from .models import AccessToken, Registration


@admin.register(AccessToken)
class AccessTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "prefix", "status", "created_at", "expires_at", "last_used_at")
    list_filter = ("revoked_at",)
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = (
        "user",
        "name",
        "prefix",
        "digest",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    )
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False  # the secret must be shown to its owner, so owners create tokens

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        from .services import token_revoke

        for token in queryset.filter(revoked_at__isnull=True):
            token_revoke(token=token, actor=request.user)
        self.message_user(request, f"Revoked at {timezone.now():%H:%M}.")


@admin.register(Registration)
class RegistrationAdmin(admin.ModelAdmin):
    list_display = ("user", "lab", "note", "created_at", "approved_at", "approved_by")
    list_filter = (("approved_at", admin.EmptyFieldListFilter), "lab")
    list_select_related = ("user", "lab", "approved_by")
    search_fields = ("user__username", "user__email", "note")
    readonly_fields = ("user", "lab", "note", "created_at", "approved_at", "approved_by")
    actions = ["approve"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Approve the selected accounts")
    def approve(self, request, queryset):
        from .registration import registration_approve

        waiting = queryset.filter(approved_at__isnull=True).select_related("user", "lab")
        for registration in waiting:
            registration_approve(registration=registration, actor=request.user)
        self.message_user(request, f"Approved {len(waiting)} account{pluralize(len(waiting))}.")
