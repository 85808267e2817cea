from django.contrib import admin

from plumbing.admin import ReadOnlyAdmin

from .models import ClaimCode, LendingTerms, Reclaim, WorkstationOwner
from .services import owner_add


@admin.register(WorkstationOwner)
class WorkstationOwnerAdmin(admin.ModelAdmin):
    """Admins name each workstation's owners here; owners set the rest on its page."""

    list_display = ("workstation", "user", "added_by", "added_at")
    search_fields = ("workstation", "user__username")
    autocomplete_fields = ("user",)
    readonly_fields = ("added_by", "added_at")

    def save_model(self, request, obj, form, change) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        # Through the service, which audits it.
        made = owner_add(workstation=obj.workstation, user=obj.user, actor=request.user)
        obj.pk, obj.added_by, obj.added_at = made.pk, made.added_by, made.added_at


@admin.register(LendingTerms)
class LendingTermsAdmin(admin.ModelAdmin):
    list_display = ("workstation", "days", "from_minute", "until_minute", "paused_until")
    search_fields = ("workstation",)


@admin.register(Reclaim)
class ReclaimAdmin(admin.ModelAdmin):
    list_display = ("workstation", "requested_by", "requested_at", "deadline", "until", "ended_at")
    search_fields = ("workstation",)


@admin.register(ClaimCode)
class ClaimCodeAdmin(ReadOnlyAdmin):
    """Read-only: kits ask for codes, owners use them; only their digests are kept."""

    list_display = ("workstation", "created_at", "expires_at", "used_at", "used_by")
    search_fields = ("workstation",)
    exclude = ("digest",)
