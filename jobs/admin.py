from django.contrib import admin

from .models import EnvironmentPreset, Job, JobEvent


@admin.register(EnvironmentPreset)
class EnvironmentPresetAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "python", "container_image", "is_default", "is_active")
    list_filter = ("kind", "is_active")
    search_fields = ("name", "container_image")


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    readonly_fields = ("at", "kind", "state", "detail", "actor")
    can_delete = False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "state", "condor_id", "workstation", "created_at")
    list_filter = ("state",)
    search_fields = ("name", "public_id", "owner__username")
    readonly_fields = [f.name for f in Job._meta.fields]
    inlines = [JobEventInline]
