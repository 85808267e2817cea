"""Self-registration: open, approved by an admin or lab lead, or closed (a setting)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from audit.services import audit_record
from labs.models import Lab, Membership

from .models import Registration


class RegistrationError(Exception):
    pass


def registration_mode() -> str:
    return settings.REGISTRATION_MODE


def account_register(
    *, username: str, email: str, password: str, lab: Lab | None, note: str = ""
) -> Registration:
    """A new account; approved at once when registration is open."""
    if registration_mode() == "closed":
        raise RegistrationError("Registration is closed; ask the Nightshift administrators.")
    with transaction.atomic():
        user = get_user_model().objects.create_user(username, email=email, password=password)
        registration = Registration.objects.create(user=user, lab=lab, note=note)
        audit_record(
            action="account.register",
            actor=user,
            target=user,
            detail=f"asked to join {lab.name if lab else 'no lab'}",
        )
        if registration_mode() == "open":
            _approve(registration, actor=None)
        else:
            transaction.on_commit(lambda: _tell_approvers(registration))
    return registration


def registrations_to_approve(user) -> QuerySet[Registration]:
    """What `user` may approve: everything for staff, their labs' requests for a lead."""
    waiting = Registration.objects.filter(approved_at__isnull=True).select_related("user", "lab")
    if user.is_staff:
        return waiting
    if not user.has_perm("labs.lead_lab"):
        return waiting.none()
    led = Membership.objects.filter(user=user, role=Membership.Role.LEAD).values("lab_id")
    return waiting.filter(Q(lab__in=led))


def registration_approve(*, registration: Registration, actor) -> Registration:
    if not registrations_to_approve(actor).filter(pk=registration.pk).exists():
        raise RegistrationError("That request is not yours to approve.")
    with transaction.atomic():
        _approve(registration, actor=actor)
    user = registration.user
    if user.email:
        send_mail(
            "Your Nightshift account is approved",
            f"Hello {user.get_username()},\n\nYou can now submit training jobs: "
            f"{settings.PORTAL_URL}{reverse('jobs:new')}\n",
            None,
            [user.email],
            fail_silently=True,
        )
    return registration


def _approve(registration: Registration, *, actor) -> None:
    registration.approved_at = timezone.now()
    registration.approved_by = actor
    registration.save(update_fields=["approved_at", "approved_by"])
    if registration.lab is not None:
        Membership.objects.get_or_create(lab=registration.lab, user=registration.user)
    joined = f"member of {registration.lab.name}" if registration.lab else ""
    audit_record(action="account.approve", actor=actor, target=registration.user, detail=joined)


def _tell_approvers(registration: Registration) -> None:
    leads = Membership.objects.filter(lab=registration.lab, role=Membership.Role.LEAD)
    addresses = [m.user.email for m in leads.select_related("user") if m.user.email]
    if not addresses:
        staff = get_user_model().objects.filter(is_staff=True, is_active=True)
        addresses = [user.email for user in staff if user.email]
    if addresses:
        send_mail(
            f"Nightshift: {registration.user.get_username()} asks for an account",
            f"{registration.user.get_username()} ({registration.user.email}) registered"
            f"{' for ' + registration.lab.name if registration.lab else ''}.\n"
            f"Approve or ignore: {settings.PORTAL_URL}{reverse('accounts:approvals')}\n",
            None,
            addresses,
            fail_silently=True,
        )


def user_may_submit(user) -> bool:
    registration = getattr(user, "registration", None)
    return registration is None or registration.is_approved
