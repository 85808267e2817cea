from django.contrib import admin

from plumbing.admin import VersionsInline, page_link

from .models import Environment, EnvironmentVersion


class EnvironmentVersionInline(VersionsInline):
    """Versions never change; new ones are locked on the environment's page (or by the API),
    where their requirements are resolved."""

    model = EnvironmentVersion
    fields = (
        "number",
        "python_version",
        "python",
        "container_image",
        "lock_sha256",
        "created_by",
        "created_at",
    )


@admin.register(Environment)
class EnvironmentAdmin(admin.ModelAdmin):
    list_display = ("name", "visibility", "kind", "owner", "lab", "is_default", "is_active", "page")
    list_filter = ("visibility", "kind", "is_active", "is_automatic")
    search_fields = ("name", "description", "owner__username")
    list_select_related = ("owner", "lab")
    fields = (
        "name",
        "description",
        "visibility",
        "lab",
        "owner",
        "kind",
        "is_default",
        "is_active",
        "is_automatic",
    )
    readonly_fields = ("owner", "kind", "is_automatic")
    inlines = [EnvironmentVersionInline]

    def has_add_permission(self, request) -> bool:
        return False  # made on the environments page, where the first version is locked

    @admin.display(description="Versions and test builds")
    def page(self, environment: Environment) -> str:
        return page_link("environments:detail", environment.pk)
