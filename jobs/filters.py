import django_filters
from django import forms

from . import selectors
from .models import Job, JobState


class JobListFilter(django_filters.FilterSet):
    """The filters on "My jobs": whose, state, name text and a date range, plus sorting.

    The queryset is every job the user may see; unless `scope` says otherwise, only their
    own are listed. A lab lead can widen it to their labs' jobs, staff to every job.
    """

    scope = django_filters.ChoiceFilter(
        choices=[("mine", "Mine"), ("visible", "My labs' too")],
        method="filter_scope",
        empty_label=None,
        label="Whose jobs",
    )

    state = django_filters.ChoiceFilter(choices=JobState.choices, empty_label="Any state")
    name = django_filters.CharFilter(lookup_expr="icontains", label="Name contains")
    submitted_after = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__gte",
        label="Submitted from",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    submitted_before = django_filters.DateFilter(
        field_name="created_at",
        lookup_expr="date__lte",
        label="Submitted until",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    sort = django_filters.OrderingFilter(
        fields=(("created_at", "submitted"), ("name", "name"), ("state", "state")),
        field_labels={"created_at": "Submitted", "name": "Name", "state": "State"},
        label="Sort by",
    )

    class Meta:
        model = Job
        fields = ["scope", "state", "name"]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        user = getattr(self.request, "user", None)
        if user is None:
            return  # the API schema: every filter is described
        if user.is_staff:
            self.filters["scope"].extra["choices"] = [("mine", "Mine"), ("visible", "Everyone's")]
        elif not selectors.user_leads_a_lab(user):
            del self.filters["scope"]  # only their own jobs to see: nothing to choose

    def filter_scope(self, queryset, name, value):
        return queryset  # applied in filter_queryset, so that "mine" is also the default

    def filter_queryset(self, queryset):
        if self.form.cleaned_data.get("scope") != "visible" and self.request is not None:
            queryset = queryset.filter(owner=self.request.user)
        return super().filter_queryset(queryset)
