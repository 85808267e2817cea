from django.contrib import admin

from plumbing.admin import VersionsInline, page_link

from .models import Model, ModelVersion


class ModelVersionInline(VersionsInline):
    """Versions never change; they are published from finished jobs (page, API, CLI)."""

    model = ModelVersion
    fields = (
        "number",
        "visibility",
        "sha256",
        "size_bytes",
        "file_count",
        "published_by",
        "created_at",
        "page",
    )

    @admin.display(description="Page")
    def page(self, version: ModelVersion) -> str:
        return page_link("models:version", version.pk)


@admin.register(Model)
class ModelAdmin(admin.ModelAdmin):
    list_display = ("name", "lab", "created_by", "created_at")
    list_filter = ("lab",)
    search_fields = ("name", "lab__name", "created_by__username")
    list_select_related = ("lab", "created_by")
    readonly_fields = ("name", "lab", "created_by", "created_at")
    inlines = [ModelVersionInline]

    def has_add_permission(self, request) -> bool:
        return False  # published from a finished job, whose files are checked
