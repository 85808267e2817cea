from django.contrib import admin, messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.defaultfilters import pluralize
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from condor_bridge import BridgeError

from . import actions, specs
from .bridge import get_bridge
from .models import Job, JobEvent


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    readonly_fields = ("at", "kind", "state", "detail", "actor")
    can_delete = False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("actor")


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "owner",
        "lab",
        "state",
        "gpus",
        "condor_id",
        "workstation",
        "created_at",
    )
    list_filter = ("state", "lab", ("owner", admin.RelatedOnlyFieldListFilter), "created_at")
    list_select_related = ("owner", "lab")
    date_hierarchy = "created_at"
    search_fields = ("name", "owner__username")
    readonly_fields = [f.name for f in Job._meta.fields] + ["condor_ad_link"]
    inlines = [JobEventInline]
    actions = ["cancel_jobs", "hold_jobs", "release_jobs", "vacate_jobs"]

    def get_search_results(self, request, queryset, search_term):
        """Also finds a job by its id (or the start of it) and by HTCondor's cluster[.proc]."""
        results, duplicates = super().get_search_results(request, queryset, search_term)
        term = search_term.strip().lower()
        cluster = term.split(".", 1)[0]
        if cluster.isdigit():
            results |= queryset.filter(cluster_id=int(cluster))
        if len(term) >= 4 and all(c in "0123456789abcdef-" for c in term):
            results |= queryset.filter(public_id__startswith=term)
        return results, duplicates

    @admin.display(description="HTCondor job ad")
    def condor_ad_link(self, job: Job) -> str:
        if not job.is_submitted:
            return "Not submitted yet."
        url = reverse("admin:jobs_job_condor_ad", args=[job.pk])
        return format_html('<a href="{}">Every attribute of {}</a>', url, job.condor_id)

    def get_urls(self):
        view = self.admin_site.admin_view(self.condor_ad_view)
        return [path("<int:pk>/condor-ad/", view, name="jobs_job_condor_ad"), *super().get_urls()]

    def condor_ad_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        """Read-only: the job's ad as the schedd (or its history) has it now."""
        job = get_object_or_404(Job, pk=pk)
        if not self.has_view_permission(request, job):
            raise Http404
        error, ad = "", None
        try:
            ad = get_bridge(job.schedd).job_ad(str(job.public_id))
        except BridgeError as exc:
            error = str(exc)
        context = {
            **self.admin_site.each_context(request),
            "title": f"HTCondor job ad of {job.name} ({job.condor_id})",
            "job": job,
            "ad": ad,
            "error": error,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/jobs/job/condor_ad.html", context)

    def _act(self, request, queryset, service, done: str) -> None:
        acted, refused = 0, []
        for job in queryset.select_related("owner"):
            try:
                service(job=job, user=request.user)
                acted += 1
            except specs.JobActionError as exc:
                refused.append(f"{job.name}: {exc}")
        if acted:
            self.message_user(request, f"{done} {acted} job{pluralize(done)}.", messages.SUCCESS)
        for reason in refused[:10]:
            self.message_user(request, reason, messages.WARNING)

    @admin.action(description="Cancel the selected jobs", permissions=["change"])
    def cancel_jobs(self, request, queryset):
        self._act(request, queryset, actions.job_cancel, "Cancelling")

    @admin.action(description="Hold the selected jobs", permissions=["change"])
    def hold_jobs(self, request, queryset):
        self._act(request, queryset, actions.job_hold, "Holding")

    @admin.action(description="Release the selected jobs", permissions=["change"])
    def release_jobs(self, request, queryset):
        self._act(request, queryset, actions.job_release, "Released")

    @admin.action(
        description="Move the selected running jobs to another workstation (they checkpoint)",
        permissions=["change"],
    )
    def vacate_jobs(self, request, queryset):
        self._act(request, queryset, actions.job_vacate, "Moving")
