from __future__ import annotations

from django.db import transaction

from audit.services import audit_record

from .models import Lab, Membership

LDAP = "ldap"


def lab_memberships_sync_from_ldap(*, user, group_dns: set[str]) -> None:
    """Join the labs whose LDAP group the user is in; leave those (joined through LDAP)
    whose group they have left. Memberships made by hand are never removed."""
    wanted = {dn.lower() for dn in group_dns}
    with transaction.atomic():
        for lab in Lab.objects.exclude(ldap_group=""):
            in_group = lab.ldap_group.lower() in wanted
            membership = Membership.objects.filter(lab=lab, user=user).first()
            label = f"{user} in {lab}"
            if in_group and membership is None:
                membership = Membership.objects.create(lab=lab, user=user, source=LDAP)
                audit_record(
                    action="membership.add",
                    target=membership,
                    target_label=label,
                    detail="from the LDAP group",
                )
            elif not in_group and membership is not None and membership.source == LDAP:
                audit_record(
                    action="membership.remove",
                    target=membership,
                    target_label=label,
                    detail="left the LDAP group",
                )
                membership.delete()


class MembershipError(Exception):
    pass


def lab_member_add(*, lab: Lab, who: str, actor) -> Membership:
    """Add a user, by username or e-mail address, to a lab (done by its lead or staff)."""
    from django.contrib.auth import get_user_model
    from django.db.models import Q

    who = who.strip()
    user = get_user_model().objects.filter(Q(username__iexact=who) | Q(email__iexact=who)).first()
    if not who or user is None:
        raise MembershipError(f"Nobody is called {who[:100]!r}; they may need to register first.")
    membership, created = Membership.objects.get_or_create(lab=lab, user=user)
    if not created:
        raise MembershipError(f"{user.get_username()} is already in {lab.name}.")
    audit_record(
        action="membership.add",
        actor=actor,
        target=membership,
        target_label=f"{user} in {lab}",
        detail="added by a lab lead",
    )
    return membership


def lab_member_remove(*, membership: Membership, actor) -> None:
    if membership.is_lead and membership.user_id == actor.pk:
        raise MembershipError("You cannot remove yourself as lead; ask an administrator.")
    label = f"{membership.user} in {membership.lab}"
    audit_record(
        action="membership.remove",
        actor=actor,
        target=membership,
        target_label=label,
        detail="by a lab lead",
    )
    membership.delete()
    lab_leads_group_sync(membership.user)


def lab_leads_group_sync(user) -> None:
    """A user who leads some lab is in the "Lab leads" group, which holds labs.lead_lab."""
    from django.contrib.auth.models import Group

    from .roles import LEADS_GROUP

    group = Group.objects.get(name=LEADS_GROUP)
    leads = Membership.objects.filter(user=user, role=Membership.Role.LEAD).exists()
    if leads:
        user.groups.add(group)
    else:
        user.groups.remove(group)
