from django.contrib import admin

from .models import Delivery, Notification, Preference, PushSubscription, Webhook


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ["created_at", "user", "event", "title"]
    list_filter = ["event"]
    search_fields = ["user__username", "title", "key"]
    readonly_fields = [field.name for field in Notification._meta.fields]


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["notification", "channel", "state", "attempts", "sent_at", "last_error"]
    list_filter = ["channel", "state"]
    raw_id_fields = ["notification", "subscription"]


@admin.register(PushSubscription)
class PushSubscriptionAdmin(admin.ModelAdmin):
    list_display = ["user", "label", "created_at", "last_sent_at"]
    search_fields = ["user__username"]
    exclude = ["p256dh", "auth"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["user", "url", "last_status", "last_delivery_at"]
    search_fields = ["user__username", "url"]
    exclude = ["secret"]


@admin.register(Preference)
class PreferenceAdmin(admin.ModelAdmin):
    list_display = ["user", "event", "push", "email", "webhook"]
    list_filter = ["event"]
