"""Environments: made, versioned, locked, resolved for jobs, and test-built."""

from __future__ import annotations

import dataclasses
import logging
import re
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Max

from audit.services import audit_record
from jobs.services import JobSubmissionError, PreparedSoftware, SoftwareChoice, SoftwareNotFound
from plumbing.names import AmbiguousName, needs_qualifying, qualified_name

from .locking import Lock, LockError, lock_resolve, pinned_names
from .models import Environment, EnvironmentVersion
from .requirements import RequirementsError, requirements_check
from .selectors import (
    NOTEBOOK_DEFAULT_REQUIREMENTS,
    NOTEBOOK_ENVIRONMENT_NAME,
    NOTEBOOK_PACKAGE,
    environment_get_usable,
    environment_list_usable_by,
    site_notebook_environment,
)

logger = logging.getLogger(__name__)

REQUIREMENTS_FILE = "requirements.txt"


class EnvironmentError(ValueError):
    """A request about environments that cannot be done; `field` names the input at fault,
    and `detail` carries a tool's report (uv's) when there is one."""

    def __init__(self, field: str, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.detail = detail


def allowed_outside() -> frozenset[str]:
    return frozenset(settings.REQUIREMENTS_ALLOW)


def _lock(text: str, python_version: str) -> tuple[str, Lock | None]:
    """The checked package lines and their lock (None when the site lets them reach
    outside the index: those are installed per job, unlocked)."""
    try:
        requirements = requirements_check(text, allowed=allowed_outside())
    except RequirementsError as exc:
        raise EnvironmentError("requirements", str(exc)) from None
    if not requirements.lockable:
        return text, None
    try:
        return text, lock_resolve(requirements, python_version=python_version)
    except LockError as exc:
        raise EnvironmentError("requirements", exc.explanation, exc.output) from None


def environment_create(
    *,
    user,
    name: str,
    visibility: str = Environment.Visibility.PRIVATE,
    description: str = "",
    lab=None,
    requirements: str = "",
    python_version: str = "",
    container_image: str = "",
    python: str = "",
) -> Environment:
    """A new environment with its first version (see environment_version_add)."""
    site = visibility == Environment.Visibility.SITE
    if site and not user.is_staff:
        raise EnvironmentError("visibility", "Only administrators make site environments.")
    if visibility == Environment.Visibility.LAB and (
        lab is None or not lab.members.filter(pk=user.pk).exists()
    ):
        raise EnvironmentError("lab", "Choose one of your labs to share it with.")
    environment = Environment(
        name=name,
        owner=None if site else user,
        lab=lab if visibility == Environment.Visibility.LAB else None,
        visibility=visibility,
        description=description,
        kind=Environment.Kind.CONTAINER if container_image else Environment.Kind.PACKAGES,
    )
    _full_clean(environment)
    clash = Environment.objects.filter(name=name, owner=environment.owner, is_automatic=False)
    if clash.exists():
        raise EnvironmentError("name", f"You already have an environment called {name}.")
    version = _version_checked(
        environment,
        requirements=requirements,
        python_version=python_version,
        container_image=container_image,
        python=python,
    )
    with transaction.atomic():
        environment.save()
        version.environment = environment
        version.number, version.created_by = 1, user
        version.save()
        audit_record(
            action="environment.create",
            actor=user,
            target=environment,
            detail=f"{environment.get_visibility_display()}; {_summary(version)}",
        )
    return environment


def environment_version_add(
    *,
    user,
    environment: Environment,
    requirements: str = "",
    python_version: str = "",
    container_image: str = "",
    python: str = "",
) -> EnvironmentVersion:
    """A new immutable version: its requirements resolved now into a lock (or an image)."""
    version = _version_checked(
        environment,
        requirements=requirements,
        python_version=python_version,
        container_image=container_image,
        python=python,
    )
    with transaction.atomic():
        Environment.objects.select_for_update().get(pk=environment.pk)
        latest = environment.versions.aggregate(n=Max("number"))["n"] or 0
        version.environment = environment
        version.number, version.created_by = latest + 1, user
        version.save()
        audit_record(
            action="environment.version",
            actor=user,
            target=environment,
            detail=f"version {version.number}: {_summary(version)}",
        )
    return version


def site_notebook_environment_ensure() -> tuple[Environment, bool]:
    """The site's notebook environment, made by the system from NOTEBOOK_REQUIREMENTS (locked
    against the index now, which takes a few seconds) when there is none; with whether it
    was made now. EnvironmentError when the requirements cannot be locked."""
    existing = site_notebook_environment()
    if existing is not None:
        return existing, False
    requirements = settings.NOTEBOOK_REQUIREMENTS.strip() or NOTEBOOK_DEFAULT_REQUIREMENTS
    if NOTEBOOK_PACKAGE not in re.split(r"[\s=<>!~\[;]+", requirements.lower()):
        raise EnvironmentError(
            "requirements", "NIGHTSHIFT_NOTEBOOK_REQUIREMENTS must include jupyterlab."
        )
    name = NOTEBOOK_ENVIRONMENT_NAME
    environment = Environment.objects.filter(
        visibility=Environment.Visibility.SITE, name=name, owner=None, is_automatic=False
    ).first()
    made = environment is None
    if made:
        environment = Environment(
            name=name,
            owner=None,
            visibility=Environment.Visibility.SITE,
            description="JupyterLab with NumPy, pandas, Matplotlib and scikit-learn: what "
            "notebook sessions start with.",
        )
        _full_clean(environment)
    version = _version_checked(
        environment, requirements=requirements, python_version="", container_image="", python=""
    )
    with transaction.atomic():
        if made:
            environment.save()
        else:
            Environment.objects.select_for_update().get(pk=environment.pk)
            environment.is_active = True
            environment.save(update_fields=["is_active"])
        latest = environment.versions.aggregate(n=Max("number"))["n"] or 0
        version.environment, version.number = environment, latest + 1
        version.save()
        audit_record(
            action="environment.create" if made else "environment.version",
            actor=None,
            target=environment,
            detail=f"the site's notebook environment, version {version.number}: "
            f"{_summary(version)}",
        )
    return environment, True


def environment_delete(*, user, environment: Environment) -> None:
    """Gone from lists and from new jobs; jobs that ran with it keep their record."""
    with transaction.atomic():
        audit_record(
            action="environment.delete", actor=user, target=environment, detail=environment.name
        )
        environment.delete()


def _summary(version: EnvironmentVersion) -> str:
    if version.container_image:
        return f"image {version.container_image}"
    return f"Python {version.python_version}, {version.package_count} packages locked"


def _full_clean(instance, exclude=()) -> None:
    from django.core.exceptions import ValidationError

    try:
        instance.full_clean(exclude=[*exclude], validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise EnvironmentError(field, " ".join(messages)) from None


def _version_checked(
    environment: Environment,
    *,
    requirements: str,
    python_version: str,
    container_image: str,
    python: str,
) -> EnvironmentVersion:
    from condor_bridge import InvalidJobRequest, JobRequest

    python_version = python_version or settings.ENVIRONMENT_PYTHON_VERSION
    version = EnvironmentVersion(
        requirements=requirements.strip(),
        python_version=python_version,
        container_image=container_image.strip(),
        python=python.strip(),
    )
    _full_clean(version, exclude=("environment", "number"))
    try:
        JobRequest(
            job_id="environment-check",
            job_dir="/check",
            script_name="check.py",
            python=version.python or settings.JOB_PYTHON,
            container_image=version.container_image or None,
        )
    except InvalidJobRequest as exc:
        raise EnvironmentError(exc.field, exc.message) from None
    if version.container_image:
        if version.requirements:
            raise EnvironmentError(
                "requirements",
                "A container environment takes its packages from the image; "
                "leave the requirements empty.",
            )
        return version
    if not version.requirements:
        raise EnvironmentError("requirements", "List some packages, or name a container image.")
    _, lock = _lock(version.requirements, python_version)
    if lock is None:
        raise EnvironmentError(
            "requirements",
            "An environment's requirements must be locked: they may not "
            "name other indexes, URLs or local paths (a job's own requirements.txt may, "
            "where the site allows it).",
        )
    version.lock, version.lock_sha256 = lock.text, lock.sha256
    return version


def private_version_for_requirements(*, user, text: str) -> EnvironmentVersion | None:
    """The user's private environment for a job's own requirements.txt: one per lock, made
    on first use and reused whenever the lock is the same. None for a specification the
    site lets reach outside the index (installed per job, unlocked)."""
    python_version = settings.ENVIRONMENT_PYTHON_VERSION
    _, lock = _lock(text, python_version)
    if lock is None:
        return None
    name = f"requirements-{lock.sha256[:12]}"
    existing = (
        EnvironmentVersion.objects.filter(
            environment__owner=user,
            environment__name=name,
            lock_sha256=lock.sha256,
            python_version=python_version,
        )
        .select_related("environment")
        .first()
    )
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            environment = Environment.objects.create(
                name=name,
                owner=user,
                is_automatic=True,
                description="Made from a job's requirements.txt.",
            )
            return EnvironmentVersion.objects.create(
                environment=environment,
                number=1,
                requirements=text.strip(),
                python_version=python_version,
                lock=lock.text,
                lock_sha256=lock.sha256,
                created_by=user,
            )
    except IntegrityError:  # the same lock, made by a job submitted at the same moment
        return EnvironmentVersion.objects.select_related("environment").get(
            environment__owner=user, environment__name=name, number=1
        )


def version_resolve(user, reference: str) -> EnvironmentVersion:
    """NAME (its latest version) or NAME@VERSION, among those the user may use; OWNER/NAME
    where several owners offer NAME (SoftwareNotFound names the choices)."""
    name, _, number = reference.strip().partition("@")
    try:
        environment = environment_get_usable(user, name) if name else None
    except AmbiguousName as exc:
        raise SoftwareNotFound(str(exc)) from None
    if environment is None:
        offered = (
            ", ".join(environment_list_usable_by(user).values_list("name", flat=True)[:20])
            or "none"
        )
        raise SoftwareNotFound(
            f"No environment called {name[:80]!r} that you may use; yours, your labs' "
            f"and the site's: {offered}."
        )
    versions = environment.versions.all()
    if number:
        if not number.isdigit():
            raise SoftwareNotFound(f"{number[:20]!r} is not a version number (NAME@3).")
        version = versions.filter(number=int(number)).first()
    else:
        version = versions.order_by("-number").first()
    if version is None:
        raise SoftwareNotFound(f"{environment.name} has no version {number or ''}".strip() + ".")
    version.environment = environment
    return version


def version_record(version: EnvironmentVersion) -> dict:
    """What a job keeps about the environment it ran with (page, reproducibility record)."""
    environment = version.environment
    return {
        "id": version.pk,
        "reference": version.reference,
        "name": environment.name,
        "version": version.number,
        "visibility": environment.visibility,
        "automatic": environment.is_automatic,
        "python_version": version.python_version,
        "container_image": version.container_image or None,
        "lock_sha256": version.lock_sha256 or None,
    }


def _qualified(choice: SoftwareChoice, environment: Environment, number: int) -> SoftwareChoice:
    whose = qualified_name(environment)
    return dataclasses.replace(
        choice, reference=f"{whose}@{number}", label=f"{whose} (version {number})"
    )


def _choice(version: EnvironmentVersion) -> SoftwareChoice:
    environment = version.environment
    return SoftwareChoice(
        reference=version.reference,
        label=f"{environment.name} (version {version.number})"
        + (" — yours" if environment.owner_id and environment.visibility != "site" else ""),
        description=environment.description,
        python=version.python or None,
        container_image=version.container_image or None,
        is_default=environment.is_default,
        is_site=environment.visibility == Environment.Visibility.SITE,
        packages=pinned_names(version.lock),
    )


class Catalogue:
    """What jobs sees of environments: the choices, a lookup, and each job's preparation."""

    def choices(self, user) -> list[SoftwareChoice]:
        choices = []
        environments = list(environment_list_usable_by(user).prefetch_related("versions"))
        # A name several owners offer is chosen by its qualified name (OWNER/NAME).
        ambiguous = needs_qualifying(environments, user_id=user.pk)
        for environment in environments:
            versions = sorted(environment.versions.all(), key=lambda v: -v.number)
            if versions:
                versions[0].environment = environment
                choice = _choice(versions[0])
                if environment.name in ambiguous:
                    choice = _qualified(choice, environment, versions[0].number)
                choices.append(choice)
        return choices

    def lookup(self, user, reference: str) -> SoftwareChoice:
        return _choice(version_resolve(user, reference))

    def prepare(
        self, *, user, spec, directory: Path, has_requirements_file: bool
    ) -> PreparedSoftware | None:
        if spec.software:
            try:
                version = version_resolve(user, spec.software)
            except SoftwareNotFound as exc:
                raise JobSubmissionError("software_environment", str(exc)) from None
            if has_requirements_file and not version.environment.is_automatic:
                raise JobSubmissionError(
                    "requirements",
                    f"Choose the environment {version.reference} or give a "
                    "requirements.txt, not both: the environment already says which packages "
                    "the job gets.",
                )
            return _prepared(version)
        if has_requirements_file:
            text = _read_requirements(directory / REQUIREMENTS_FILE)
            try:
                version = private_version_for_requirements(user=user, text=text)
            except EnvironmentError as exc:
                raise JobSubmissionError(
                    "requirements", exc.message + (f"\n\n{exc.detail}" if exc.detail else "")
                ) from None
            if version is None:
                allowed = ", ".join(settings.REQUIREMENTS_ALLOW)
                reason = f"It uses sources the site allows ({allowed}): installed per job."
                return PreparedSoftware(record={"unlocked": True, "reason": reason})
            return _prepared(version)
        default = (
            Environment.objects.filter(visibility="site", is_default=True, is_active=True)
            .order_by("pk")
            .first()
        )
        version = default.latest_version if default else None
        if version is None:
            return None
        version.environment = default
        return _prepared(version)


def _read_requirements(path: Path) -> str:
    from .requirements import MAX_REQUIREMENTS_BYTES

    if path.stat().st_size > MAX_REQUIREMENTS_BYTES:
        raise JobSubmissionError(
            "requirements",
            f"requirements.txt is larger than {MAX_REQUIREMENTS_BYTES // 1024} "
            "KB; list only the packages you import.",
        )
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise JobSubmissionError("requirements", "requirements.txt is not UTF-8 text.") from None


def _prepared(version: EnvironmentVersion) -> PreparedSoftware:
    return PreparedSoftware(
        record=version_record(version),
        lock=version.lock or None,
        python=version.python or None,
        container_image=version.container_image or None,
    )


CATALOGUE = Catalogue()
