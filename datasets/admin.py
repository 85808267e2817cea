from django.contrib import admin

from plumbing.admin import VersionsInline, page_link

from .models import Dataset, DatasetDelivery, DatasetImport, DatasetUpload, DatasetVersion


class DatasetVersionInline(VersionsInline):
    """Versions never change; new ones come from imports on the datasets page or the API,
    where their files are checked and checksummed."""

    model = DatasetVersion
    fields = (
        "number",
        "sha256",
        "size_bytes",
        "file_count",
        "source",
        "origin",
        "created_by",
        "created_at",
    )


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("name", "visibility", "owner", "lab", "created_at", "page")
    list_filter = ("visibility",)
    search_fields = ("name", "description", "owner__username")
    list_select_related = ("owner", "lab")
    fields = ("name", "description", "visibility", "lab", "owner")
    readonly_fields = ("name", "owner")
    inlines = [DatasetVersionInline]

    def has_add_permission(self, request) -> bool:
        return False  # imported on the datasets page, where the files are checked

    @admin.display(description="Preview")
    def page(self, dataset: Dataset) -> str:
        return page_link("datasets:detail", dataset.pk)


@admin.register(DatasetImport)
class DatasetImportAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "source", "state", "created_at", "finished_at")
    list_filter = ("state", "source")
    search_fields = ("name", "owner__username", "origin")
    list_select_related = ("owner",)
    readonly_fields = [field.name for field in DatasetImport._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(DatasetUpload)
class DatasetUploadAdmin(admin.ModelAdmin):
    """Resumable uploads under way, finished or abandoned (removed once they expire)."""

    list_display = (
        "filename",
        "owner",
        "state",
        "upload_offset",
        "upload_length",
        "expires",
        "created_at",
    )
    list_filter = ("state",)
    search_fields = ("filename", "owner__username", "guid")
    list_select_related = ("owner",)
    readonly_fields = [field.name for field in DatasetUpload._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(DatasetDelivery)
class DatasetDeliveryAdmin(admin.ModelAdmin):
    """Each archive sent to a job's workstation: what datasets cost the network."""

    list_display = ("sha256", "version", "job", "workstation", "size_bytes", "delivered_at")
    search_fields = ("sha256", "workstation")
    list_select_related = ("version__dataset", "job")
    date_hierarchy = "delivered_at"
    readonly_fields = [field.name for field in DatasetDelivery._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
