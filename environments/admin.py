from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from .models import Environment, EnvironmentVersion


class EnvironmentVersionInline(admin.TabularInline):
    """Versions never change; new ones are locked on the environment's page (or by the API),
    where their requirements are resolved."""

    model = EnvironmentVersion
    extra = 0
    can_delete = False
    fields = (
        "number",
        "python_version",
        "python",
        "container_image",
        "lock_sha256",
        "created_by",
        "created_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


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
        return format_html(
            '<a href="{}">open</a>', reverse("environments:detail", args=[environment.pk])
        )
