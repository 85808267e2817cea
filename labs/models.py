"""Labs share the pool: members, leads, an HTCondor accounting group, and a quota."""

from __future__ import annotations

import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from condor_bridge.types import SCHEDD_NAME_PATTERN

# HTCondor accounting group names: letters, digits and '_' (a '.' would make a subgroup).
_GROUP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,62}$")


class Visibility(models.TextChoices):
    """Who may see and use what someone shares: datasets, environments, published models and
    job templates all share with these three words (labs.selectors.shared_with)."""

    PRIVATE = "private", "Only me"
    LAB = "lab", "My lab"
    SITE = "site", "Everyone"


def accounting_group_for(name: str) -> str:
    """A safe HTCondor accounting group for a lab's name, e.g. 'Vision & Robotics' ->
    'group_vision_robotics'."""
    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")[:50]
    return f"group_{slug or 'lab'}"


def validate_accounting_group(value: str) -> None:
    if not _GROUP_NAME.fullmatch(value):
        raise ValidationError(
            "Use a letter, then letters, digits and underscores (at most 63), e.g. group_vision."
        )


def validate_schedd_name(value: str) -> None:
    if value and not SCHEDD_NAME_PATTERN.fullmatch(value):
        raise ValidationError("A schedd's name as the collector knows it, e.g. ap1@campus.edu.")
    if value and settings.CONDOR_SCHEDDS and value not in settings.CONDOR_SCHEDDS:
        raise ValidationError(
            f"{value} is not one of the portal's schedds ({', '.join(settings.CONDOR_SCHEDDS)})."
        )


class QuotaLimits(models.Model):
    """The limits a quota can set. Empty means: no limit (on a lab), or the lab's (on a user)."""

    gpu_hours = models.FloatField(
        "GPU-hours per period",
        null=True,
        blank=True,
        help_text="GPU-hours that may be used in any rolling period of the length below.",
    )
    max_concurrent_gpus = models.PositiveIntegerField(
        "GPUs at once",
        null=True,
        blank=True,
        help_text="GPUs that unfinished jobs may ask for at the same time.",
    )
    max_gpus_per_job = models.PositiveIntegerField("GPUs per job", null=True, blank=True)
    max_runtime_hours = models.FloatField(
        "Runtime per job (hours)",
        null=True,
        blank=True,
        help_text="HTCondor removes a job that runs longer.",
    )
    max_queued_jobs = models.PositiveIntegerField(
        "Waiting jobs at once",
        null=True,
        blank=True,
        help_text="Jobs not yet running (queued, idle or held) at the same time.",
    )

    LIMIT_FIELDS = (
        "gpu_hours",
        "max_concurrent_gpus",
        "max_gpus_per_job",
        "max_runtime_hours",
        "max_queued_jobs",
    )

    class Meta:
        abstract = True

    def clean(self) -> None:
        for field in ("gpu_hours", "max_runtime_hours"):
            value = getattr(self, field)
            if value is not None and value <= 0:
                raise ValidationError({field: "Must be more than 0; leave empty for no limit."})


class Lab(QuotaLimits):
    name = models.CharField(max_length=100, unique=True)
    accounting_group = models.CharField(
        max_length=63,
        unique=True,
        blank=True,
        validators=[validate_accounting_group],
        help_text="HTCondor accounting group of the lab's jobs; made from the name when empty.",
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="labs"
    )
    ldap_group = models.CharField(
        "LDAP group",
        max_length=500,
        blank=True,
        help_text="With LDAP sign-in: the DN of a group whose members join this lab when they "
        "sign in (and leave it when they are no longer in the group).",
    )
    schedd = models.CharField(
        "Scheduler",
        max_length=200,
        blank=True,
        db_default="",
        default="",
        validators=[validate_schedd_name],
        help_text="With several access points (CONDOR_SCHEDDS) and NIGHTSHIFT_SCHEDD_POLICY "
        "per-lab: the schedd this lab's jobs go to, by its collector name. Empty: the least "
        "loaded one.",
    )
    dataset_storage_gb = models.FloatField(
        "Dataset storage (GB)",
        null=True,
        blank=True,
        help_text="What the datasets shared with this lab may keep on the portal; empty: no "
        "limit. Each user's own datasets have the site's limit (NIGHTSHIFT_DATASET_QUOTA_GB).",
    )
    gpu_hours_period_days = models.PositiveIntegerField(
        "Period (days)", default=7, help_text="The rolling period of the GPU-hours limit."
    )
    output_retention_days = models.PositiveIntegerField(
        "Keep outputs (days)",
        null=True,
        blank=True,
        help_text="`manage.py purge_outputs` removes the output files of this lab's jobs this "
        "many days after they ended. Empty: the command's --days.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            (
                "lead_lab",
                "Can read the jobs and usage of the labs they lead, and manage their members",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        if not self.accounting_group:
            self.accounting_group = accounting_group_for(self.name)
        super().save(*args, **kwargs)

    def clean(self) -> None:
        super().clean()
        if not self.accounting_group:
            self.accounting_group = accounting_group_for(self.name)
        if Lab.objects.exclude(pk=self.pk).filter(accounting_group=self.accounting_group).exists():
            raise ValidationError(
                {"accounting_group": f"{self.accounting_group} is taken; choose another."}
            )
        if self.gpu_hours_period_days < 1:
            raise ValidationError({"gpu_hours_period_days": "At least one day."})


class Membership(QuotaLimits):
    """A user in a lab; the limit fields, when set, override the lab's for this user alone."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        LEAD = "lead", "Lab lead"

    lab = models.ForeignKey(Lab, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    # "ldap": added because the user is in the lab's LDAP group, and removed when they leave it.
    source = models.CharField(max_length=10, default="manual", editable=False)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["lab__name", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["lab", "user"], name="one_membership_per_lab")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.lab} ({self.get_role_display()})"

    @property
    def is_lead(self) -> bool:
        return self.role == self.Role.LEAD
