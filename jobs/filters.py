import django_filters
from django import forms

from .models import Job, JobState


class JobListFilter(django_filters.FilterSet):
    """The filters on "My jobs": state, name text and a date range, plus sorting."""

    state = django_filters.ChoiceFilter(choices=JobState.choices, empty_label="Any state")
    name = django_filters.CharFilter(lookup_expr="icontains", label="Name contains")
    submitted_after = django_filters.DateFilter(
        field_name="created_at", lookup_expr="date__gte", label="Submitted from",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    submitted_before = django_filters.DateFilter(
        field_name="created_at", lookup_expr="date__lte", label="Submitted until",
        widget=forms.DateInput(attrs={"type": "date"}),
    )  # fmt: skip
    sort = django_filters.OrderingFilter(
        fields=(("created_at", "submitted"), ("name", "name"), ("state", "state")),
        field_labels={"created_at": "Submitted", "name": "Name", "state": "State"},
        label="Sort by",
    )

    class Meta:
        model = Job
        fields = ["state", "name"]
