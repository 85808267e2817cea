from django.conf import settings
from django.contrib import admin
from django.db.models import Count

from .models import Lab, Membership

QUOTA_FIELDS = ("gpu_hours", "max_concurrent_gpus", "max_gpus_per_job", "max_runtime_hours",
                "max_queued_jobs")  # fmt: skip


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]
    fields = ("user", "role", *QUOTA_FIELDS)
    verbose_name = "member"
    verbose_name_plural = "Members (limits set here override the lab's for that member)"


@admin.register(Lab)
class LabAdmin(admin.ModelAdmin):
    list_display = ("name", "accounting_group", "member_count", "gpu_hours",
                    "gpu_hours_period_days", "max_concurrent_gpus", "max_gpus_per_job")  # fmt: skip
    search_fields = ("name", "accounting_group")
    inlines = [MembershipInline]
    fieldsets = [
        (None, {"fields": ("name", "accounting_group")}),
        (
            "Quota (empty: no limit)",
            {"fields": ("gpu_hours", "gpu_hours_period_days", *QUOTA_FIELDS[1:])},
        ),  # fmt: skip
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_count=Count("memberships"))

    @admin.display(ordering="member_count", description="Members")
    def member_count(self, lab: Lab) -> int:
        return lab.member_count

    def get_changeform_initial_data(self, request) -> dict:
        """A new lab starts from the site's default quota."""
        defaults = {k: v for k, v in settings.QUOTA_DEFAULTS.items() if v is not None}
        return defaults | super().get_changeform_initial_data(request)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "lab", "role", *QUOTA_FIELDS)
    list_filter = ("role", "lab")
    list_select_related = ("user", "lab")
    search_fields = ("user__username", "user__email", "lab__name")
    autocomplete_fields = ["user", "lab"]
