from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from .models import JobTemplate, TemplateVersion


class TemplateVersionInline(admin.TabularInline):
    """Versions never change; leads publish them on the template pages, the API or the CLI,
    where the project and the parameter form are checked."""

    model = TemplateVersion
    extra = 0
    can_delete = False
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
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="Page")
    def page(self, version: TemplateVersion) -> str:
        return format_html(
            '<a href="{}">open</a>', reverse("job_templates:detail", args=[version.pk])
        )


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
