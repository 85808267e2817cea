from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from .models import Lab, Membership, Visibility


def shared_with(user, items: QuerySet, *, owner_field: str, lab_field: str) -> QuerySet:
    """The one sharing rule: what `user` may see of `items` (rows with a Visibility): their
    own (`owner_field`), their labs' (`lab_field` names the row's lab) and everyone's;
    staff see all."""
    if user.is_staff:
        return items
    labs = Membership.objects.filter(user=user).values("lab_id")
    return items.filter(
        Q(**{owner_field: user})
        | Q(visibility=Visibility.SITE)
        | Q(visibility=Visibility.LAB, **{f"{lab_field}__in": labs})
    )


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
