from django.contrib import admin

from plumbing.admin import VersionsInline, page_link

from .models import JobTemplate, TemplateVersion


class TemplateVersionInline(VersionsInline):
    """Versions never change; leads publish them on the template pages, the API or the CLI,
    where the project and the parameter form are checked."""

    model = TemplateVersion
    fields = (
        "number",
        "title",
        "visibility",
        "entry_command",
        "serve_command",
        "published_by",
        "created_at",
        "page",
    )

    @admin.display(description="Page")
    def page(self, version: TemplateVersion) -> str:
        return page_link("job_templates:detail", version.pk)


@admin.register(JobTemplate)
class JobTemplateAdmin(admin.ModelAdmin):
    list_display = ("name", "lab", "created_by", "created_at")
    list_filter = ("lab",)
    search_fields = ("name", "lab__name", "created_by__username", "versions__title")
    list_select_related = ("lab", "created_by")
    readonly_fields = ("name", "lab", "created_by", "created_at")
    inlines = [TemplateVersionInline]

    def has_add_permission(self, request) -> bool:
        return False
