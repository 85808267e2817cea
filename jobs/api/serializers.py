"""The API's shapes. They parse and present; the services decide."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from condor_bridge.types import MAX_CPUS, MAX_GPU_MEMORY_GB, MAX_GPUS, MAX_RUNTIME_S
from jobs.inputs import MAX_DATASETS_PER_JOB, MAX_MODELS_PER_JOB, job_datasets, job_models
from jobs.models import Job, JobEvent, JobState
from jobs.specs import JOB_NAME_MAX_LENGTH, LIVE_SERVICE_CHOICES, JobSpec, job_default_name
from labs.selectors import lab_by_name


class EnvironmentVariableField(serializers.CharField):
    """KEY=VALUE, as on a shell's command line."""

    def to_internal_value(self, data) -> tuple[str, str]:
        text = super().to_internal_value(data)
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise serializers.ValidationError(f"Write KEY=VALUE, not {text[:40]!r}.")
        return key.strip(), value


class JobRequestSerializer(serializers.Serializer):
    """What to run and on what: the same fields as the web form's."""

    # `datasets` names registered datasets to attach (False where a subclass's own field of
    # that name means something else: an evaluation matrix's rows).
    datasets_attach = True

    arguments = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=4096),
        required=False,
        default=list,
        max_length=1000,
        help_text="Passed to the script exactly as given, one list item per argument.",
    )
    environment = serializers.ListField(
        child=EnvironmentVariableField(max_length=8192, trim_whitespace=False),
        required=False,
        default=list,
        max_length=200,
        help_text="Environment variables for the script, each as KEY=VALUE.",
    )
    software_environment = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=240,
        help_text="A software environment, NAME (its latest version) or NAME@VERSION: the "
        "site's, your lab's or your own (see /environments/); OWNER/NAME (site/NAME for the "
        "site's) where several owners offer that name. Empty: the site's default, or the "
        "job's own requirements.txt.",
    )
    environment_preset = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=120,
        help_text="Deprecated: the same as software_environment.",
    )
    lab = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="The name of your lab to charge (see /me/); empty for your first lab.",
    )
    datasets = serializers.ListField(
        child=serializers.CharField(max_length=100),
        required=False,
        max_length=MAX_DATASETS_PER_JOB,
        help_text="Datasets, each NAME (its latest version) or NAME@VERSION (see "
        "/datasets/). Each appears read-only at datasets/NAME/ in the job, fetched once per "
        "workstation.",
    )
    models = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=MAX_MODELS_PER_JOB,
        help_text="Published models, each LAB/NAME (its latest version you may use) or "
        "LAB/NAME@VERSION (see /models/). Each appears read-only at models/NAME/ in the job, "
        "for fine-tuning or evaluation.",
    )
    entry_command = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=4096,
        help_text="For a project archive: how to start it, e.g. `python train.py --epochs 10`.",
    )
    gpus = serializers.IntegerField(
        min_value=0,
        max_value=MAX_GPUS,
        default=1,
        help_text="GPUs on one workstation; 0 runs on CPUs only.",
    )
    gpu_memory_gb = serializers.FloatField(
        min_value=0.1,
        max_value=MAX_GPU_MEMORY_GB,
        required=False,
        allow_null=True,
        help_text="Minimum memory of each GPU, in GB; null for any.",
    )
    gpu_capability = serializers.FloatField(
        min_value=1.0,
        max_value=20.0,
        required=False,
        allow_null=True,
        help_text="Minimum CUDA compute capability, e.g. 7.0; null for any.",
    )
    cpus = serializers.IntegerField(
        min_value=1, max_value=MAX_CPUS, default=1, help_text="CPU cores."
    )
    memory_gb = serializers.FloatField(
        min_value=0.125, max_value=1024, default=2.0, help_text="Main memory, in GB."
    )
    max_runtime_minutes = serializers.IntegerField(
        min_value=1,
        max_value=MAX_RUNTIME_S // 60,
        required=False,
        allow_null=True,
        help_text="HTCondor holds the job if it runs longer; null for no limit.",
    )
    finish_by = serializers.DateTimeField(
        required=False,
        allow_null=True,
        help_text="When it should be finished: the job's start prediction says whether that is "
        "likely, and it runs in its lab's deadline lane, ahead of the lab's jobs with later "
        "deadlines or none.",
    )
    keep_outputs = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        max_length=50,
        help_text="Files or folders at the top of the job's folder to keep; default outputs.",
    )
    notify_by_email = serializers.BooleanField(
        default=False, help_text="Email the account's address when the job ends or is held."
    )
    live_services = serializers.ListField(
        child=serializers.ChoiceField(choices=[name for name, _ in LIVE_SERVICE_CHOICES]),
        required=False,
        max_length=len(LIVE_SERVICE_CHOICES),
        help_text="Web services to reach through the portal while the job runs: "
        "`tensorboard` (on nightshift.tensorboard_dir()) and `serve` (the job's own HTTP "
        "endpoint on the Unix socket $NIGHTSHIFT_SERVE_SOCKET, or 127.0.0.1:"
        "$NIGHTSHIFT_SERVE_PORT, reached with a live token).",
    )

    def validate_environment(self, pairs: list[tuple[str, str]]) -> dict[str, str]:
        environment: dict[str, str] = {}
        for key, value in pairs:
            if key in environment:
                raise serializers.ValidationError(f"{key} is set twice.")
            environment[key] = value
        return environment

    def validate_lab(self, name: str) -> int | None:
        if not name:
            return None
        lab = lab_by_name(name)
        if lab is None:
            raise serializers.ValidationError(f"No lab is called {name[:100]!r}.")
        return lab.pk

    def validate_keep_outputs(self, names: list[str]) -> list[str]:
        names = [name.strip().strip("/") for name in names if name.strip()]
        if len(names) != len(set(names)):
            raise serializers.ValidationError("A name appears twice.")
        return names

    def spec_changes(self) -> dict:
        """The JobSpec fields the validated input sets; in a partial form, only those given."""
        data = self.validated_data
        changes = {field: data[field] for field in SAME_IN_SPEC if field in data}
        if "entry_command" in data:
            changes["entry_command"] = data["entry_command"].strip() or None
        if "memory_gb" in data:
            changes["memory_mb"] = round(data["memory_gb"] * 1024)
        if "max_runtime_minutes" in data:
            minutes = data["max_runtime_minutes"]
            changes["max_runtime_s"] = minutes * 60 if minutes else None
        if "finish_by" in data:
            changes["finish_by"] = data["finish_by"]
        if "keep_outputs" in data:
            changes["output_paths"] = data["keep_outputs"] or ["outputs"]
        if "lab" in data:
            changes["lab_id"] = data["lab"]
        if "datasets" in data and self.datasets_attach:
            changes["datasets"] = data["datasets"]
        if "models" in data:
            changes["models"] = data["models"]
        named = [f for f in ("software_environment", "environment_preset") if f in data]
        if named or not self.partial:
            # The environment sets the Python and image (jobs.submission looks them up).
            reference = (data.get(named[0]) if named else "").strip()
            changes.update(software=reference or None, python=None, container_image=None)
        return changes

    def to_spec(self, name: str) -> JobSpec:
        return JobSpec(**{"name": name, **self.spec_changes()})


# Input fields that JobSpec names and holds the same way.
SAME_IN_SPEC = (
    "name",
    "arguments",
    "environment",
    "gpus",
    "gpu_memory_gb",
    "gpu_capability",
    "cpus",
    "notify_by_email",
    "live_services",
)


class JobSubmitSerializer(JobRequestSerializer):
    name = serializers.CharField(
        max_length=JOB_NAME_MAX_LENGTH,
        required=False,
        allow_blank=True,
        help_text="A name you will recognise. Default: the uploaded file's name, or the "
        "name of source_job.",
    )
    script = serializers.FileField(
        required=False,
        help_text="A Python script (.py) or a project archive (.zip, .tar.gz, .tgz). An archive "
        "needs entry_command; one with requirements.txt at its top gets those installed.",
    )
    requirements = serializers.FileField(
        required=False, help_text="For a single script: a requirements.txt to install first."
    )
    source_job = serializers.CharField(
        required=False,
        max_length=36,
        help_text="Copy the script or project of this earlier job of yours: its id, or the "
        "start of it as `nightshift list` shows it.",
    )

    def validate(self, data: dict) -> dict:
        if not data.get("script") and not data.get("source_job"):
            raise serializers.ValidationError(
                {"script": "Upload a Python script or a project archive, or give source_job."}
            )
        if not (data.get("name") or "").strip() and data.get("script"):
            data["name"] = job_default_name(uploaded_name=data["script"].name)
        return data


class JobSubmitJSONSerializer(JobSubmitSerializer):
    """The submission as JSON, which carries no files: source_job names them. Its own
    schema component, so that a generated client's multipart and JSON bodies differ."""

    script = None
    requirements = None


class JobCloneSerializer(JobRequestSerializer):
    """A new job from an earlier one: its files and settings, with these fields changed."""

    name = serializers.CharField(
        max_length=200, required=False, help_text="Default: the original's name."
    )
    script = serializers.FileField(
        required=False, help_text="A new script or archive instead of the original's."
    )


class JobCloneJSONSerializer(JobCloneSerializer):
    """A clone as JSON: the original's files, with other fields changed."""

    script = None


class JobMatchSerializer(JobRequestSerializer):
    """A proposed request, to see what in the pool fits it."""


class HoldSerializer(serializers.Serializer):
    reason = serializers.CharField(help_text="HTCondor's own words.")
    code = serializers.IntegerField(allow_null=True, help_text="HTCondor's HoldReasonCode.")
    subcode = serializers.IntegerField(allow_null=True, help_text="HoldReasonSubCode.")
    title = serializers.CharField(help_text="What happened, in plain terms.")
    advice = serializers.CharField(help_text="What to do about it.")


class JobRequestViewSerializer(serializers.Serializer):
    script_name = serializers.CharField(help_text="The script that runs.")
    arguments = serializers.ListField(
        child=serializers.CharField(), help_text="Passed to the script, in order."
    )
    environment = serializers.DictField(
        child=serializers.CharField(), help_text="Environment variables set for the script."
    )
    gpus = serializers.IntegerField(help_text="GPUs asked for; 0 for CPUs only.")
    gpu_memory_gb = serializers.FloatField(allow_null=True, help_text="Minimum per GPU, in GB.")
    gpu_capability = serializers.FloatField(
        allow_null=True, help_text="Minimum CUDA compute capability."
    )
    cpus = serializers.IntegerField(help_text="CPU cores asked for.")
    memory_mb = serializers.IntegerField(help_text="Main memory asked for, in MB.")
    max_runtime_s = serializers.IntegerField(
        allow_null=True, help_text="Runtime limit in seconds; null for none."
    )
    output_paths = serializers.ListField(
        child=serializers.CharField(), help_text="Files or folders kept as outputs."
    )
    python = serializers.CharField(help_text="The Python that runs the script.")
    container_image = serializers.CharField(
        allow_null=True, help_text="The container image it runs in; null for none."
    )

    def to_representation(self, job: Job) -> dict:
        stored = job.request
        return {
            "script_name": stored.get("script_name", ""),
            "arguments": list(stored.get("arguments", [])),
            "environment": dict(stored.get("environment", [])),
            "gpus": stored.get("gpus", 0),
            "gpu_memory_gb": stored.get("gpu_memory_gb"),
            "gpu_capability": stored.get("gpu_capability"),
            "cpus": stored.get("cpus", 1),
            "memory_mb": stored.get("memory_mb", 0),
            "max_runtime_s": stored.get("max_runtime_s"),
            "output_paths": list(stored.get("output_paths", [])),
            "python": stored.get("python", ""),
            "container_image": stored.get("container_image"),
        }


class ReproducibilitySerializer(serializers.Serializer):
    sha256 = serializers.DictField(
        child=serializers.CharField(),
        source="source.sha256",
        default=dict,
        help_text="SHA-256 of each file given.",
    )
    seed = serializers.IntegerField(allow_null=True, help_text="Given as NIGHTSHIFT_SEED.")
    parameters = serializers.JSONField(help_text="A sweep run's parameter values.")
    container_image = serializers.CharField(
        source="request.container_image",
        allow_null=True,
        default=None,
        help_text="The image, if any.",
    )
    image_digest = serializers.CharField(help_text="The image's digest, when named by one.")
    environment = serializers.JSONField(
        source="source.environment",
        default=None,
        help_text="The software environment it ran with: reference (NAME@VERSION), "
        "python_version, lock_sha256 (of the exact packages and hashes); null for none.",
    )
    datasets = serializers.SerializerMethodField(
        help_text="The dataset versions it read: reference (NAME@VERSION), sha256 (of the "
        "version's canonical archive), size_bytes, file_count, and kind (archive, or shared "
        "for a folder on a shared file system)."
    )
    models = serializers.SerializerMethodField(
        help_text="The published model versions it read: reference (LAB/NAME@VERSION), "
        "sha256 (of the version's canonical archive), size_bytes, file_count and kind."
    )
    submit_description = serializers.CharField(help_text="As sent to HTCondor.")
    reproduces = serializers.UUIDField(
        source="reproduces.public_id",
        allow_null=True,
        default=None,
        help_text="The job this one re-runs.",
    )

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_datasets(self, job: Job) -> list[dict]:
        return [
            {key: dataset[key] for key in LINEAGE_FIELDS if key in dataset}
            for dataset in job_datasets(job)
        ]

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_models(self, job: Job) -> list[dict]:
        return [
            {key: model[key] for key in LINEAGE_FIELDS if key in model} for model in job_models(job)
        ]


LINEAGE_FIELDS = ("reference", "sha256", "size_bytes", "file_count", "kind")


class JobSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True, help_text="The job's id.")
    lab = serializers.CharField(
        source="lab.name",
        allow_null=True,
        default=None,
        help_text="The lab it is charged to; null for none.",
    )
    owner = serializers.CharField(source="owner.get_username", help_text="Who submitted it.")
    state = serializers.ChoiceField(choices=JobState.choices, help_text="Where the job stands.")
    state_label = serializers.CharField(source="get_state_display", help_text="For people.")
    hold = serializers.SerializerMethodField(help_text="Why the job is held; null unless held.")
    condor_id = serializers.CharField(help_text="HTCondor's cluster.proc; empty until submitted.")
    num_starts = serializers.IntegerField(source="starts", help_text="Runs so far.")
    is_final = serializers.BooleanField(help_text="Completed, failed or removed.")
    outputs_ready = serializers.BooleanField(help_text="The output files can be downloaded.")
    request = JobRequestViewSerializer(source="*", help_text="What was asked for.")
    links = serializers.SerializerMethodField(help_text="Where to read more about this job.")
    reproducibility = ReproducibilitySerializer(source="*", help_text="What reproduces it.")

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "owner",
            "lab",
            "state",
            "state_label",
            "status_detail",
            "hold",
            "match_problem",
            "wait_reason",
            "exit_code",
            "exit_signal",
            "workstation",
            "pool",
            "gpu_model",
            "condor_id",
            "schedd",
            "num_starts",
            "created_at",
            "submitted_at",
            "started_at",
            "finished_at",
            "is_final",
            "outputs_ready",
            "outputs_purged_at",
            "request",
            "reproducibility",
            "links",
        ]
        extra_kwargs = {
            "name": {"help_text": "The name its owner gave it."},
            "status_detail": {"help_text": "The latest word on its state."},
            "match_problem": {"help_text": "Why no workstation in the pool can run it."},
            "wait_reason": {"help_text": "Why it waits although some workstation could run it."},
            "exit_code": {"help_text": "The script's exit code, once it has ended."},
            "exit_signal": {"help_text": "The signal that ended it, if one did."},
            "workstation": {"help_text": "Where it runs or last ran."},
            "pool": {
                "help_text": "The central manager of the pool that workstation is in, when the "
                "job flocked to another pool; empty: the home pool."
            },
            "gpu_model": {"help_text": "The GPU it was given."},
            "schedd": {
                "help_text": "The HTCondor schedd (access point) that holds it, by its "
                "collector name; empty: the portal's only one.",
                "read_only": True,
            },
            "created_at": {"help_text": "When Nightshift accepted it."},
            "submitted_at": {"help_text": "When HTCondor accepted it."},
            "started_at": {"help_text": "When its latest run started."},
            "finished_at": {"help_text": "When it ended."},
            "outputs_purged_at": {
                "help_text": "When its output files were removed under the "
                "outputs retention policy; null while they are kept."
            },
        }

    @extend_schema_field(HoldSerializer(allow_null=True))
    def get_hold(self, job: Job) -> dict | None:
        explanation = job.hold_explanation
        if explanation is None:
            return None
        return {
            "reason": job.hold_reason,
            "code": job.hold_reason_code,
            "subcode": job.hold_reason_subcode,
            "title": explanation.title,
            "advice": explanation.advice,
        }

    @extend_schema_field(serializers.DictField(child=serializers.URLField()))
    def get_links(self, job: Job) -> dict[str, str]:
        request = self.context.get("request")
        paths = {
            "self": reverse("api:job-detail", args=[job.public_id]),
            "web": reverse("jobs:detail", args=[job.public_id]),
            "events": reverse("api:job-events", args=[job.public_id]),
            "outputs": reverse("api:job-outputs", args=[job.public_id]),
            "metrics": reverse("api:job-metrics", args=[job.public_id]),
            "stdout": reverse("api:job-log", args=[job.public_id, "stdout"]),
            "stderr": reverse("api:job-log", args=[job.public_id, "stderr"]),
        }
        if request is None:
            return paths
        return {key: request.build_absolute_uri(path) for key, path in paths.items()}


class JobEventSerializer(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField(help_text="Who acted; null for the system.")

    class Meta:
        model = JobEvent
        fields = ["at", "kind", "state", "detail", "actor"]
        extra_kwargs = {
            "at": {"help_text": "When it happened."},
            "kind": {"help_text": "e.g. accepted, submitted, state, cancel, hold, release."},
            "state": {"help_text": "The job's state just after."},
            "detail": {"help_text": "What happened, in words."},
        }

    def get_actor(self, event: JobEvent) -> str | None:
        return event.actor.get_username() if event.actor_id else None


class LogChunkSerializer(serializers.Serializer):
    stream = serializers.CharField(help_text="stdout, stderr or install.")
    text = serializers.CharField(help_text="The text read, decoded as UTF-8.")
    start = serializers.IntegerField(help_text="Byte offset of `text` in the log.")
    offset = serializers.IntegerField(help_text="Pass as ?offset= to read what follows.")
    size = serializers.IntegerField(help_text="The log's size now, in bytes.")
    is_final = serializers.BooleanField(help_text="The job has ended; the log will not grow.")


class OutputFileSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="Relative to the job's folder, e.g. outputs/model.pt.")
    size = serializers.IntegerField(help_text="Bytes.")
    url = serializers.URLField(help_text="Where to download it.")


class MetricsSerializer(serializers.Serializer):
    names = serializers.ListField(child=serializers.CharField(), help_text="Metric names.")
    rows = serializers.ListField(
        child=serializers.DictField(), help_text="Each with step, time and metric values."
    )
    total_rows = serializers.IntegerField(help_text="Rows logged, before downsampling.")
    skipped_lines = serializers.IntegerField(help_text="Lines that were not valid metrics.")
    is_final = serializers.BooleanField(help_text="The job has ended; no more rows will come.")
