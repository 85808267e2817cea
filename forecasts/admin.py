from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from .kit import kit_credentials_revoke
from .models import KitCredential, Reservation


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    """Reservations are made and cancelled on the lab's page (an admin reaches every lab's)
    or through the API, where conflicts and the lab's quota are checked and each change is
    audited; here they are read."""

    list_display = (
        "lab",
        "purpose",
        "starts_at",
        "ends_at",
        "gpus",
        "held",
        "created_by",
        "cancelled_at",
        "page",
    )
    list_filter = ("lab",)
    search_fields = ("purpose", "lab__name")
    list_select_related = ("lab", "created_by")
    date_hierarchy = "starts_at"
    readonly_fields = [field.name for field in Reservation._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # cancelled on the lab's page, which audits it

    @admin.display(description="Workstations")
    def held(self, reservation: Reservation) -> str:
        return ", ".join(reservation.workstations)

    @admin.display(description="Lab page")
    def page(self, reservation: Reservation) -> str:
        return format_html(
            '<a href="{}">open</a>', reverse("labs:detail", args=[reservation.lab_id])
        )


@admin.register(KitCredential)
class KitCredentialAdmin(admin.ModelAdmin):
    """The execute-node kits' credentials: made by manage.py kit_token (the secret is shown
    once, there); here they are read and revoked."""

    list_display = ("label", "hint", "workstations", "created_at", "last_used_at", "revoked_at")
    list_filter = ("label",)
    readonly_fields = [field.name for field in KitCredential._meta.fields]
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke the chosen kit credentials")
    def revoke(self, request, queryset) -> None:
        for label in set(queryset.filter(revoked_at__isnull=True).values_list("label", flat=True)):
            kit_credentials_revoke(label=label, actor=request.user)
