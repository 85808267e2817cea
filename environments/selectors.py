"""Which environments a user may see and use."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from labs.models import Membership

from .models import Environment, EnvironmentVersion


def environment_list_usable_by(user, *, include_automatic: bool = False) -> QuerySet[Environment]:
    """Their own, their labs' and the site's active environments (staff: all)."""
    environments = Environment.objects.filter(is_active=True).select_related("owner", "lab")
    if not include_automatic:
        environments = environments.filter(is_automatic=False)
    if user.is_staff:
        return environments
    labs = Membership.objects.filter(user=user).values("lab_id")
    return environments.filter(
        Q(owner=user)
        | Q(visibility=Environment.Visibility.SITE)
        | Q(visibility=Environment.Visibility.LAB, lab__in=labs)
    )


def environment_get_usable(user, name: str) -> Environment | None:
    """By name: the user's own first, then their labs', then the site's."""
    matches = list(environment_list_usable_by(user, include_automatic=True).filter(name=name))
    order = {Environment.Visibility.PRIVATE: 0, Environment.Visibility.LAB: 1}

    def rank(environment: Environment) -> tuple[int, int]:
        return (0 if environment.owner_id == user.pk else 1, order.get(environment.visibility, 2))

    return min(matches, key=rank) if matches else None


def environment_may_change(user, environment: Environment) -> bool:
    """Add versions, delete: the owner; staff for every one (site environments)."""
    return user.is_staff or (environment.owner_id is not None and environment.owner_id == user.pk)


def version_jobs(version: EnvironmentVersion):
    from jobs.models import Job

    return Job.objects.filter(source__environment__id=version.pk)
