"""Notifications through the API: one's choices of channels per event, and what was sent."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from plumbing.api import ApiError, error_responses

from . import selectors, services
from .events import Channel, Event
from .models import Delivery, Notification


class PreferenceSerializer(serializers.Serializer):
    event = serializers.ChoiceField(choices=Event.choices, help_text="What happened.")
    label = serializers.CharField(help_text="The event in words.")
    channels = serializers.ListField(
        child=serializers.ChoiceField(choices=Channel.choices),
        help_text="Where it is told: push (browsers), email, webhook.",
    )


class PreferencesChangeSerializer(serializers.Serializer):
    preferences = serializers.DictField(
        child=serializers.ListField(child=serializers.ChoiceField(choices=Channel.choices)),
        help_text='Events to change, each with all its channels: {"job.ended": ["email"]}. '
        "Events left out keep theirs.",
    )


class DeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = Delivery
        fields = ["channel", "state", "attempts", "last_error", "sent_at"]
        extra_kwargs = {
            "channel": {"help_text": "push (one browser), email or webhook."},
            "state": {"help_text": "pending (being sent or tried again), sent or failed."},
            "attempts": {"help_text": "How many times it was tried."},
            "last_error": {"help_text": "Why the last try failed, if it did."},
            "sent_at": {"help_text": "When it was delivered."},
        }


class NotificationSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", help_text="The webhook-id's message id.")
    deliveries = DeliverySerializer(many=True, help_text="Each channel's sending.")

    class Meta:
        model = Notification
        fields = ["id", "event", "title", "body", "url", "created_at", "deliveries"]
        extra_kwargs = {
            "event": {"help_text": "What happened: job.started, job.ended, sweep.finished, ..."},
            "title": {"help_text": "The notification's first line."},
            "body": {"help_text": "Its text."},
            "url": {"help_text": "The portal's page for it, as a path."},
            "created_at": {"help_text": "When it was told."},
        }


def _preferences(user) -> list[dict]:
    return [
        {"event": row.event, "label": row.label, "channels": sorted(row.channels)}
        for _, rows in selectors.preference_groups_for(user)
        for row in rows
    ]


class NotificationPreferencesView(APIView):
    @extend_schema(
        summary="Your notification choices",
        description="Each event, with the channels it is told by (defaults where never set).",
        responses={200: PreferenceSerializer(many=True), **error_responses(401)},
        tags=["notifications"],
    )
    def get(self, request: Request) -> Response:
        return Response(PreferenceSerializer(_preferences(request.user), many=True).data)

    @extend_schema(
        summary="Change your notification choices",
        request=PreferencesChangeSerializer,
        responses={200: PreferenceSerializer(many=True), **error_responses(400, 401)},
        tags=["notifications"],
    )
    def put(self, request: Request) -> Response:
        change = PreferencesChangeSerializer(data=request.data)
        change.is_valid(raise_exception=True)
        chosen = {event: set(ways) for event, ways in change.validated_data["preferences"].items()}
        try:
            services.preferences_set(user=request.user, chosen=chosen)
        except services.NotificationError as exc:
            raise ApiError(str(exc), code="invalid", status_code=400, field="preferences") from None
        return Response(PreferenceSerializer(_preferences(request.user), many=True).data)


class NotificationListView(APIView):
    @extend_schema(
        summary="What you were told lately",
        description="The 20 newest notifications, with each channel's delivery.",
        responses={200: NotificationSerializer(many=True), **error_responses(401)},
        tags=["notifications"],
    )
    def get(self, request: Request) -> Response:
        recent = selectors.notifications_recent_for(request.user)
        return Response(NotificationSerializer(recent, many=True).data)
