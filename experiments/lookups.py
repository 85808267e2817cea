"""The sweep a request names, if the user may see it (404) or act on it (403)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404

from . import selectors
from .models import Sweep


def visible_sweep_or_404(user, public_id) -> Sweep:
    """A sweep the user may read, by the same rule as its runs."""
    try:
        return selectors.sweep_get_visible(user, public_id)
    except (Sweep.DoesNotExist, ValidationError, ValueError):
        raise Http404("No such sweep.") from None


def actionable_sweep_or_403(user, public_id) -> Sweep:
    """A sweep the user may cancel: the owner's, or any for staff."""
    sweep = visible_sweep_or_404(user, public_id)
    if sweep.owner_id != user.pk and not user.is_staff:
        raise PermissionDenied("Only the sweep's owner can do that; a lab lead can only read it.")
    return sweep
