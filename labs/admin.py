from django.conf import settings
from django.contrib import admin
from django.db.models import Count

from audit.services import audit_record

from .models import Lab, Membership
from .services import lab_leads_group_sync


def _changes(form) -> str:
    """The fields a form changed, with their new values."""
    return "; ".join(
        f"{form.fields[name].label or name}: {form.cleaned_data.get(name)!s}"
        for name in form.changed_data
        if name in form.cleaned_data
    )


class AuditedMembershipChanges:
    """Every lab, quota and membership change made in the admin writes an audit entry."""

    def log_membership(self, request, membership: Membership, action: str, detail: str) -> None:
        label = f"{membership.user} in {membership.lab}"
        audit_record(
            action=action,
            actor=request.user,
            target=membership,
            target_label=label,
            detail=detail,
        )


QUOTA_FIELDS = (
    "gpu_hours",
    "max_concurrent_gpus",
    "max_gpus_per_job",
    "max_runtime_hours",
    "max_queued_jobs",
)


# Stacked, not tabular: each field keeps its own label (a tabular inline's inputs have only
# column headings, which screen readers do not announce: axe-core's label rule), and no
# empty row is shown until "Add another member" is pressed.
class MembershipInline(admin.StackedInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]
    fields = ("user", "role", *QUOTA_FIELDS)
    verbose_name = "member"
    verbose_name_plural = "Members (limits set here override the lab's for that member)"


@admin.register(Lab)
class LabAdmin(AuditedMembershipChanges, admin.ModelAdmin):
    list_display = (
        "name",
        "accounting_group",
        "member_count",
        "gpu_hours",
        "gpu_hours_period_days",
        "max_concurrent_gpus",
        "max_gpus_per_job",
    )
    search_fields = ("name", "accounting_group")
    inlines = [MembershipInline]
    fieldsets = [
        (
            None,
            {
                "fields": (
                    "name",
                    "accounting_group",
                    "ldap_group",
                    "output_retention_days",
                    "schedd",
                )
            },
        ),
        (
            "Quota (empty: no limit)",
            {
                "fields": (
                    "gpu_hours",
                    "gpu_hours_period_days",
                    *QUOTA_FIELDS[1:],
                    "dataset_storage_gb",
                )
            },
        ),
    ]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(member_count=Count("memberships"))

    @admin.display(ordering="member_count", description="Members")
    def member_count(self, lab: Lab) -> int:
        return lab.member_count

    def save_model(self, request, obj: Lab, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not change or form.changed_data:
            audit_record(
                action="lab.change" if change else "lab.create",
                actor=request.user,
                target=obj,
                detail=_changes(form),
            )

    def delete_model(self, request, obj: Lab) -> None:
        audit_record(action="lab.delete", actor=request.user, target=obj)
        super().delete_model(request, obj)

    def save_formset(self, request, form, formset, change: bool) -> None:
        super().save_formset(request, form, formset, change)
        for membership in formset.new_objects:
            self.log_membership(request, membership, "membership.add", "")
        for membership, changed in formset.changed_objects:
            self.log_membership(request, membership, "membership.change", ", ".join(changed))
        for membership in formset.deleted_objects:
            self.log_membership(request, membership, "membership.remove", "")
        touched = [
            *formset.new_objects,
            *(m for m, _ in formset.changed_objects),
            *formset.deleted_objects,
        ]
        for user in {membership.user for membership in touched}:
            lab_leads_group_sync(user)

    def get_changeform_initial_data(self, request) -> dict:
        """A new lab starts from the site's default quota."""
        defaults = {k: v for k, v in settings.QUOTA_DEFAULTS.items() if v is not None}
        return defaults | super().get_changeform_initial_data(request)


@admin.register(Membership)
class MembershipAdmin(AuditedMembershipChanges, admin.ModelAdmin):
    list_display = ("user", "lab", "role", *QUOTA_FIELDS)
    list_filter = ("role", "lab")
    list_select_related = ("user", "lab")
    search_fields = ("user__username", "user__email", "lab__name")
    autocomplete_fields = ["user", "lab"]

    def save_model(self, request, obj: Membership, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not change or form.changed_data:
            action = "membership.change" if change else "membership.add"
            self.log_membership(request, obj, action, _changes(form))
        lab_leads_group_sync(obj.user)

    def delete_model(self, request, obj: Membership) -> None:
        self.log_membership(request, obj, "membership.remove", "")
        super().delete_model(request, obj)
        lab_leads_group_sync(obj.user)
