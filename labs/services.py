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
                audit_record(action="membership.add", target=membership, target_label=label,
                             detail="from the LDAP group")  # fmt: skip
            elif not in_group and membership is not None and membership.source == LDAP:
                audit_record(action="membership.remove", target=membership, target_label=label,
                             detail="left the LDAP group")  # fmt: skip
                membership.delete()
