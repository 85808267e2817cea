from django.contrib import admin

from plumbing.admin import ReadOnlyAdmin

from .models import CapacitySample, MonthlyReport, QuotaHold, UsageRecord


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = (
        "started_at",
        "ended_at",
        "job",
        "user",
        "lab",
        "workstation",
        "gpus",
        "wall_s",
        "committed_s",
        "badput_s",
        "ended_by",
    )
    list_filter = ("ended_by", "lab", "gpu_model", "workstation", "started_at")
    search_fields = ("user__username", "workstation", "=job__public_id")
    date_hierarchy = "started_at"
    list_select_related = ("job", "user", "lab")


@admin.register(CapacitySample)
class CapacitySampleAdmin(ReadOnlyAdmin):
    list_display = (
        "taken_at",
        "workstation",
        "total_gpus",
        "idle_gpus",
        "nightshift_gpus",
        "other_gpus",
        "unavailable_gpus",
    )
    list_filter = ("workstation", "taken_at")
    date_hierarchy = "taken_at"


@admin.register(MonthlyReport)
class MonthlyReportAdmin(ReadOnlyAdmin):
    list_display = ("month", "lab", "sent_at", "recipients")
    list_select_related = ("lab",)


@admin.register(QuotaHold)
class QuotaHoldAdmin(ReadOnlyAdmin):
    """Runs of a sweep being written, which the quota counts until their rows exist."""

    list_display = ("created_at", "owner", "lab", "runs", "gpus", "runtime_s")
    list_filter = ("lab",)
    search_fields = ("owner__username",)
    list_select_related = ("owner", "lab")
