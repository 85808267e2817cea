from django.contrib import admin
from django.http import HttpRequest

from .models import Sweep


@admin.register(Sweep)
class SweepAdmin(admin.ModelAdmin):
    """Sweeps are read here; their runs are jobs, acted on one by one or from the portal."""

    list_display = (
        "name",
        "owner",
        "lab",
        "kind",
        "planned_runs",
        "prepared_runs",
        "cluster_id",
        "created_at",
    )
    list_filter = ("kind", "lab", "created_at")
    list_select_related = ("owner", "lab")
    search_fields = ("name", "owner__username")
    # What the worker writes the runs from (every run's parameters) is its, not a page's.
    exclude = ("preparation",)
    readonly_fields = [f.name for f in Sweep._meta.fields if f.name != "preparation"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
