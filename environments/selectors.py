"""Which environments a user may see and use."""

from __future__ import annotations

from django.db.models import QuerySet

from labs.selectors import shared_with
from plumbing.names import pick_named, split_qualified

from .locking import pinned_names
from .models import Environment


def environment_list_usable_by(user, *, include_automatic: bool = False) -> QuerySet[Environment]:
    """Their own, their labs' and the site's active environments (staff: all)."""
    environments = Environment.objects.filter(is_active=True).select_related("owner", "lab")
    if not include_automatic:
        environments = environments.filter(is_automatic=False)
    return shared_with(user, environments, owner_field="owner", lab_field="lab")


def environment_get_usable(user, reference: str) -> Environment | None:
    """By NAME (the user's own, or the only one anyone else offers under that name) or by
    OWNER/NAME (site/NAME: the site's); plumbing.names.AmbiguousName where a bare name is
    offered by several owners, so that no lab member's environment takes the place of the
    one another member meant."""
    qualifier, name = split_qualified(reference)
    usable = environment_list_usable_by(user, include_automatic=True)
    matches = list(usable.filter(name=name).order_by("pk"))
    return pick_named("environment", matches, user_id=user.pk, qualifier=qualifier)


def environment_may_change(user, environment: Environment) -> bool:
    """Add versions, delete: the owner; staff for every one (site environments)."""
    return user.is_staff or (environment.owner_id is not None and environment.owner_id == user.pk)


NOTEBOOK_PACKAGE = "jupyterlab"
# The site's environment for notebook sessions, and what it holds unless the site says
# otherwise (NIGHTSHIFT_NOTEBOOK_REQUIREMENTS).
NOTEBOOK_ENVIRONMENT_NAME = "Notebook"
NOTEBOOK_DEFAULT_REQUIREMENTS = "jupyterlab\nnumpy\npandas\nmatplotlib\nscikit-learn"


def site_notebook_environment() -> Environment | None:
    """The site's environment that notebook sessions start with: the active site
    environment named NOTEBOOK_ENVIRONMENT_NAME whose newest version has JupyterLab."""
    environment = Environment.objects.filter(
        visibility=Environment.Visibility.SITE,
        name=NOTEBOOK_ENVIRONMENT_NAME,
        is_active=True,
        is_automatic=False,
    ).first()
    latest = environment.versions.first() if environment else None
    has_jupyterlab = latest is not None and NOTEBOOK_PACKAGE in pinned_names(latest.lock)
    return environment if has_jupyterlab else None
