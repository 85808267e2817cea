"""Publishing job templates, running them with a student's values, and serving a model
with a template's serve command."""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.core.files import File
from django.db import transaction
from django.db.models import Max

from audit.services import audit_record
from datasets.services import Digest, archive_path, archive_store, partial_archive_path
from jobs.models import Job
from jobs.services import (
    MODELS_FOLDER,
    ArchiveError,
    JobSpec,
    JobSubmissionError,
    archive_limits,
    check_archive,
    data_choices,
    data_prepare,
    is_archive,
    job_submit,
    job_validate_request,
    model_prepare,
    parse_entry_command,
    safe_archive_name,
    safe_script_name,
)
from labs.models import Lab, Membership, Visibility
from model_registry.models import ModelVersion
from model_registry.selectors import model_versions_visible_to
from model_registry.services import MAX_CARD_CHARACTERS

from .models import (
    TEMPLATE_NAME_HELP,
    TEMPLATE_NAME_PATTERN,
    JobTemplate,
    TemplateRun,
    TemplateVersion,
)
from .parameters import (
    ParameterError,
    parameters_from_json,
    parameters_parse,
    parameters_to_json,
    values_delivery,
    values_parse,
)
from .selectors import template_versions_visible_to

MAX_TITLE_CHARACTERS = 120
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# What a template sets of a job's resources, with the JobSpec defaults students get.
RESOURCE_DEFAULTS: dict[str, Any] = {
    "gpus": 0,
    "gpu_memory_gb": None,
    "cpus": 1,
    "memory_mb": 2048,
    "disk_mb": 4096,
    "max_runtime_s": None,
    "output_paths": ["outputs"],
}
_WHOLE = ("gpus", "cpus", "memory_mb", "disk_mb", "max_runtime_s")


class TemplateError(ValueError):
    """A template refused, or a run of one; `field` is the form's field it concerns (a
    parameter's name for a value)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def template_may_publish(user, lab: Lab) -> bool:
    """A lab's leads publish its templates; admins any lab's."""
    return (
        user.is_staff
        or Membership.objects.filter(lab=lab, user=user, role=Membership.Role.LEAD).exists()
    )


def resources_parse(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The template's default resources, each of the right type; the job's own checks
    (job_validate_request) then bound them as they bound every job's."""
    given = dict(raw or {})
    unknown = set(given) - set(RESOURCE_DEFAULTS)
    if unknown:
        raise TemplateError(
            "resources",
            f"Unknown resource {sorted(unknown)[0][:40]!r}; "
            f"a template sets {', '.join(RESOURCE_DEFAULTS)}.",
        )
    resources = dict(RESOURCE_DEFAULTS)
    for key, value in given.items():
        if value is None or value == "":
            resources[key] = RESOURCE_DEFAULTS[key]
            continue
        if key == "output_paths":
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise TemplateError("output_paths", "List the files or folders to keep.")
            resources[key] = [path.strip() for path in value if path.strip()] or ["outputs"]
            continue
        try:
            number = float(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None or number != number or number in (float("inf"), float("-inf")):
            raise TemplateError(key, f"{key} must be a number.")
        if key in _WHOLE:
            if number != int(number):
                raise TemplateError(key, f"{key} must be a whole number.")
            resources[key] = int(number)
        else:
            resources[key] = number
    return resources


def _one_line(field: str, value: str, *, limit: int, needed: bool = True) -> str:
    value = (value or "").strip()
    if needed and not value:
        raise TemplateError(field, "This is needed.")
    if len(value) > limit or _CONTROL.search(value):
        raise TemplateError(field, f"One line of at most {limit} characters.")
    return value


def _copy_and_hash(upload, out: IO[bytes]) -> Digest:
    digest, size = hashlib.sha256(), 0
    limit = settings.MAX_UPLOAD_MB * 1024 * 1024
    for chunk in upload.chunks():
        size += len(chunk)
        if size > limit:
            raise TemplateError(
                "project", f"The project is larger than {settings.MAX_UPLOAD_MB} MB."
            )
        digest.update(chunk)
        out.write(chunk)
    return Digest(digest.hexdigest(), size, 1)


def _check_project(upload, entry_command: str) -> str:
    """The project's stored name; the entry command must start the script it holds."""
    name = upload.name or ""
    try:
        script, _ = parse_entry_command(entry_command)
    except JobSubmissionError as exc:
        raise TemplateError("entry_command", exc.message) from None
    if is_archive(name):
        with tempfile.NamedTemporaryFile(suffix=safe_archive_name(name)) as copy:
            _copy_and_hash(upload, copy)
            copy.flush()
            try:
                members = check_archive(Path(copy.name), archive_limits())
            except ArchiveError as exc:
                raise TemplateError("project", str(exc)) from None
        upload.seek(0)
        if script not in {member.name for member in members if not member.is_dir}:
            raise TemplateError("entry_command", f"The project has no {script}.")
        return safe_archive_name(name)
    if not name.lower().endswith(".py"):
        raise TemplateError(
            "project", "Upload a Python script (.py) or a project archive (.zip, .tar.gz)."
        )
    if (upload.size or 0) > settings.MAX_SCRIPT_MB * 1024 * 1024:
        raise TemplateError(
            "project",
            f"The script is larger than {settings.MAX_SCRIPT_MB} MB; make it a project archive.",
        )
    stored = safe_script_name(name)
    if script != stored:
        raise TemplateError(
            "entry_command", f"The project is {stored}: start it, e.g. python {stored}."
        )
    return stored


def template_publish(
    *,
    user,
    lab: Lab,
    name: str,
    title: str,
    project,
    entry_command: str,
    card: str = "",
    visibility: str = Visibility.LAB,
    serve_command: str = "",
    software: str = "",
    datasets: list[str] | None = None,
    models: list[str] | None = None,
    resources: Mapping[str, Any] | None = None,
    parameters: Any = None,
    project_from: TemplateVersion | None = None,
) -> TemplateVersion:
    """A new version of the lab's template `name` (made on first use). Everything a run
    will need is checked now, with the publisher's defaults, so that a student's run fails
    only on what the student chose. Without a new `project`, `project_from`'s is kept (a
    new version that changes only the form). Raises TemplateError with the reason."""
    if project is None and project_from is not None:
        _check_visible(user, project_from)
        with _project_file(project_from) as kept:
            return template_publish(
                user=user,
                lab=lab,
                name=name,
                title=title,
                project=kept,
                entry_command=entry_command,
                card=card,
                visibility=visibility,
                serve_command=serve_command,
                software=software,
                datasets=datasets,
                models=models,
                resources=resources,
                parameters=parameters,
            )
    if lab is None or not template_may_publish(user, lab):
        raise TemplateError("lab", "Only a lab's leads (and admins) publish its templates.")
    if not re.fullmatch(TEMPLATE_NAME_PATTERN, name or ""):
        raise TemplateError(
            "name", f"{str(name)[:100]!r} cannot be a template's name. {TEMPLATE_NAME_HELP}"
        )
    title = _one_line("title", title, limit=MAX_TITLE_CHARACTERS)
    if visibility not in Visibility.values:
        raise TemplateError("visibility", "Choose private, lab or site.")
    if len(card or "") > MAX_CARD_CHARACTERS:
        raise TemplateError("card", f"Keep the card under {MAX_CARD_CHARACTERS:,} characters.")
    entry_command = _one_line("entry_command", entry_command, limit=1000)
    serve_command = _one_line("serve_command", serve_command, limit=1000, needed=False)
    if project is None:
        raise TemplateError("project", "Upload the project: a Python script or an archive.")
    try:
        defined = parameters_parse(parameters)
    except ParameterError as exc:
        raise TemplateError("parameters", exc.message) from None
    resources = resources_parse(resources)
    project_name = _check_project(project, entry_command)
    if serve_command:
        try:
            served = parse_entry_command(serve_command)[0]
        except JobSubmissionError as exc:
            raise TemplateError("serve_command", exc.message) from None
        if not is_archive(project_name) and served != project_name:
            raise TemplateError(
                "serve_command",
                f"A single-script project serves with its own script: python {project_name}.",
            )
    datasets = [str(d).strip() for d in datasets or [] if str(d).strip()]
    models = [str(m).strip() for m in models or [] if str(m).strip()]
    defaults = {p.name: p.default for p in defined if p.default is not None}
    delivery = values_delivery(defined, defaults)
    spec = JobSpec(
        name=title,
        entry_command=entry_command,
        arguments=delivery.arguments,
        environment=delivery.environment,
        software=software.strip() or None,
        lab_id=lab.pk,
        **resources,
    )
    try:
        job_validate_request(user=user, spec=spec)
        data_prepare(user=user, references=datasets)
        model_prepare(user=user, references=models)
    except JobSubmissionError as exc:
        raise TemplateError(exc.field, exc.message) from None
    digest = archive_store(partial_archive_path(), lambda out: _copy_and_hash(project, out))
    with transaction.atomic():
        template, _ = JobTemplate.objects.select_for_update().get_or_create(
            lab=lab, name=name, defaults={"created_by": user}
        )
        number = (template.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        version = TemplateVersion.objects.create(
            template=template,
            number=number,
            title=title,
            card=card or "",
            visibility=visibility,
            project_name=project_name,
            project_sha256=digest.sha256,
            project_size=digest.size_bytes,
            entry_command=entry_command,
            serve_command=serve_command,
            software=software.strip(),
            datasets=datasets,
            input_models=models,
            resources=resources,
            parameters=parameters_to_json(defined),
            published_by=user,
        )
        audit_record(
            action="template.publish",
            actor=user,
            target=template,
            detail=f"{version.reference} project sha256:{digest.sha256}",
        )
    return version


def _check_visible(user, version: TemplateVersion) -> None:
    if not template_versions_visible_to(user).filter(pk=version.pk).exists():
        raise TemplateError("template", "No such template that you may use.")


def _project_file(version: TemplateVersion) -> File:
    try:
        handle = open(archive_path(version.project_sha256), "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise TemplateError(
            "template", f"{version.reference}'s project is no longer stored; ask its lab's leads."
        ) from None
    return File(handle, name=version.project_name)


def _start(version: TemplateVersion, *, entry_command: str, arguments: list[str]) -> dict:
    """How the job starts: an archive keeps the entry command; a single script takes the
    entry command's arguments ahead of the parameters'."""
    if is_archive(version.project_name):
        return {"entry_command": entry_command, "arguments": arguments}
    return {
        "entry_command": None,
        "arguments": [*parse_entry_command(entry_command)[1], *arguments],
    }


def _submit(
    *, user, version: TemplateVersion, spec: JobSpec, parameters: dict, purpose: str, values: dict
) -> Job:
    project = _project_file(version)
    try:
        with transaction.atomic():
            job = job_submit(user=user, spec=spec, script=project, parameters=parameters)
            TemplateRun.objects.create(
                version=version, job=job, user=user, values=values, purpose=purpose
            )
            audit_record(
                action=f"template.{'serve' if purpose == 'serve' else 'run'}",
                actor=user,
                target=job,
                detail=f"{version.reference}; values {parameters}",
            )
    finally:
        project.close()
    return job


def template_run(
    *,
    user,
    version: TemplateVersion,
    values: Mapping[str, Any],
    name: str = "",
    lab_id: int | None = None,
) -> Job:
    """A job from the template with the student's values: typed and bounded by the
    parameter form, they reach the job as arguments or environment values only (and all of
    them as NIGHTSHIFT_PARAMETERS). Raises TemplateError, or JobSubmissionError for what the
    job itself refuses (a quota, an approval, a full pool)."""
    _check_visible(user, version)
    defined = parameters_from_json(version.parameters)
    usable = {choice.reference for choice in data_choices(user)}
    try:
        typed = values_parse(defined, values, datasets=usable)
    except ParameterError as exc:
        raise TemplateError(exc.field, exc.message) from None
    name = _one_line("name", name, limit=200, needed=False) or version.title
    delivery = values_delivery(defined, typed)
    spec = JobSpec(
        name=name,
        environment=delivery.environment,
        software=version.software or None,
        datasets=list(dict.fromkeys([*version.datasets, *delivery.datasets])),
        models=list(version.input_models),
        lab_id=lab_id,
        **version.resources,
        **_start(version, entry_command=version.entry_command, arguments=delivery.arguments),
    )
    return _submit(
        user=user, version=version, spec=spec, parameters=typed, purpose="train", values=typed
    )


def model_serve(
    *,
    user,
    model_version: ModelVersion,
    template_version: TemplateVersion,
    lab_id: int | None = None,
) -> Job:
    """A live session that serves the model with the template's serve command: the model
    is its only input, at models/NAME/ (also in NIGHTSHIFT_PARAMETERS as model_dir), and
    its endpoint is reached through the portal with the user's login or a live token."""
    _check_visible(user, template_version)
    if not model_versions_visible_to(user).filter(pk=model_version.pk).exists():
        raise TemplateError("model", "No such model version that you may use.")
    if not template_version.serve_command:
        raise TemplateError("template", f"{template_version.reference} declares no serve command.")
    folder = f"{MODELS_FOLDER}/{model_version.model.name}"
    spec = JobSpec(
        name=f"Serve {model_version.reference}",
        software=template_version.software or None,
        models=[model_version.reference],
        live_services=["serve"],
        lab_id=lab_id,
        **template_version.resources,
        **_start(template_version, entry_command=template_version.serve_command, arguments=[]),
    )
    parameters = {"model": model_version.reference, "model_dir": folder}
    return _submit(
        user=user,
        version=template_version,
        spec=spec,
        parameters=parameters,
        purpose="serve",
        values=parameters,
    )
