from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from .models import Reservation


@admin.register(Reservation)
class ReservationAdmin(admin.ModelAdmin):
    """Reservations are made and cancelled on the lab's page (an admin reaches every lab's)
    or through the API, where conflicts and the lab's quota are checked and each change is
    audited; here they are read."""

    list_display = ("lab", "purpose", "starts_at", "ends_at", "gpus", "held", "created_by",
                    "cancelled_at", "page")  # fmt: skip
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
