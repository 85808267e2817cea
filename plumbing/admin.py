"""What the apps' admin pages share."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html


class ReadOnlyAdmin(admin.ModelAdmin):
    """Read and filter only: records that the system writes cannot be changed in the UI."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class VersionsInline(admin.TabularInline):
    """A catalogue entry's versions (an environment's, a dataset's, a template's, a model's).
    A version never changes once made, and is made where it is checked (its page, the API,
    the CLI): here it is listed, never added, changed or deleted."""

    extra = 0
    can_delete = False

    def get_readonly_fields(self, request, obj=None):
        return self.fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


def page_link(url_name: str, pk: int) -> str:
    """A link from an admin list to the record's own page in the portal."""
    return format_html('<a href="{}">open</a>', reverse(url_name, args=[pk]))
