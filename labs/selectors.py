from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from .models import Lab, Membership


def labs_managed_by(user) -> QuerySet[Lab]:
    """The labs whose members a user manages: those they lead; every lab for staff."""
    if user.is_staff:
        return Lab.objects.all()
    if not user.has_perm("labs.lead_lab"):
        return Lab.objects.none()
    return Lab.objects.filter(memberships__user=user, memberships__role=Membership.Role.LEAD)


def lab_managed_or_404(user, lab_id: int) -> Lab:
    """One of the labs `user` leads (or any, for an admin); 404 for any other."""
    try:
        return labs_managed_by(user).distinct().get(pk=lab_id)
    except Lab.DoesNotExist:
        raise Http404("No such lab of yours.") from None


def lab_by_name(name: str) -> Lab | None:
    """The lab with this name, if any: what a form's or the API's `lab` field names."""
    return Lab.objects.filter(name=name).first() if name else None
