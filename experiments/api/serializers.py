"""The experiments API's shapes. They parse and present; the services decide."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.models import Job, JobState
from jobs.web import JobRequestSerializer, JobSubmitSerializer

from ..models import Sweep
from ..selectors import sweep_stage


class SweepSubmitSerializer(JobSubmitSerializer):
    parameters = serializers.JSONField(
        help_text='The runs: {"grid": {"lr": [0.1, 0.01], "batch": [32, 64]}} for every '
        'combination, {"rows": [{"lr": 0.1, "batch": 32}, ...]} for a list, or {"random": '
        '{"lr": {"kind": "log_uniform", "low": 1e-5, "high": 0.1}, "opt": {"kind": "choice", '
        '"choices": ["adam", "sgd"]}}, "count": 20, "seed": 1} for random samples (kinds: '
        "uniform, log_uniform, int_uniform, choice). Write {name} in arguments, environment "
        "values or the entry command where a parameter's value goes. Multipart: as JSON text.",
    )


class SweepSubmitJSONSerializer(SweepSubmitSerializer):
    """A sweep as JSON, whose files come from source_job (see JobSubmitJSONSerializer)."""

    script = None
    requirements = None


class MatrixSubmitSerializer(JobRequestSerializer):
    datasets_attach = False  # its datasets are the matrix's rows
    name = serializers.CharField(max_length=200, help_text="A name you will recognise.")
    systems = serializers.JSONField(
        help_text='The systems: [{"name": "bert", "file": "bert.zip", "entry_command": '
        '"python eval.py --data {dataset}"}, ...]; each file is one of system_files, by its '
        'name. A system may be a published model: {"name": "v2", "file": "eval.py", "model": '
        '"LAB/NAME@2"}; its runs get it at models/NAME/, which {model} names. {dataset} '
        "becomes the dataset's path (or dataset, the folder an uploaded one is unpacked "
        "into), {system} the system's name. Multipart: as JSON text.",
    )
    system_files = serializers.ListField(
        child=serializers.FileField(),
        max_length=100,
        help_text="The systems' scripts or project archives.",
    )
    datasets = serializers.JSONField(
        help_text='The datasets: [{"name": "squad", "path": "/data/squad"}, {"name": "glue", '
        '"file": "glue.tar.gz"}, ...]; a file is one of dataset_files, by its name. '
        "Multipart: as JSON text.",
    )
    dataset_files = serializers.ListField(
        child=serializers.FileField(),
        required=False,
        default=list,
        max_length=100,
        help_text="Uploaded datasets: files or archives.",
    )

    def _named(self, entries, field: str, keys: set[str]) -> list[dict]:
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise serializers.ValidationError({field: "Give a list of objects."})
        for entry in entries:
            if not isinstance(entry.get("name"), str) or set(entry) - keys:
                raise serializers.ValidationError(
                    {field: f"Each needs a name, and only {', '.join(sorted(keys))}."}
                )
            for key in keys - {"name"}:
                if entry.get(key) is not None and not isinstance(entry[key], str):
                    raise serializers.ValidationError({field: f"{key} must be text."})
        return entries

    def validate(self, data: dict) -> dict:
        systems = self._named(
            data["systems"], "systems", {"name", "file", "entry_command", "model"}
        )
        datasets = self._named(data["datasets"], "datasets", {"name", "file", "path"})
        for field, entries, uploads in (
            ("systems", systems, data["system_files"]),
            ("datasets", datasets, data["dataset_files"]),
        ):
            by_name = {upload.name: upload for upload in uploads}
            for entry in entries:
                if entry.get("file") is not None and entry["file"] not in by_name:
                    raise serializers.ValidationError(
                        {
                            field: f"{entry['name'][:40]}: no uploaded file is called "
                            f"{entry['file'][:100]!r}."
                        }
                    )
                entry["upload"] = by_name.get(entry.get("file"))
        for entry in systems:
            if entry["upload"] is None:
                raise serializers.ValidationError({"systems": f"{entry['name'][:40]}: no file."})
        data["systems"], data["datasets"] = systems, datasets
        return data


class StudySubmitSerializer(JobSubmitSerializer):
    study = serializers.JSONField(
        help_text='The search: {"space": {"lr": {"kind": "log_uniform", "low": 1e-5, "high": '
        '0.1}, "layers": {"kind": "int_uniform", "low": 2, "high": 8}}, "objective": "val_loss", '
        '"direction": "minimize", "sampler": "tpe", "pruner": "median", "parallel": 4, '
        '"max_trials": 40, "gpu_hours": 20, "deadline_minutes": 600, "seed": 1}. Samplers: tpe, '
        "random; pruners: none, median, asha. Write {name} in arguments or environment values "
        "where a hyperparameter goes; the script logs the objective with nightshift.log and "
        "stops when nightshift.should_stop() says so. Multipart: as JSON text.",
    )


class SweepRunSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True, help_text="The run's job id.")
    index = serializers.IntegerField(source="sweep_index", help_text="Its place in the sweep.")
    state = serializers.ChoiceField(choices=JobState.choices, help_text="Where the run stands.")
    condor_id = serializers.CharField(help_text="HTCondor's cluster.proc; empty until submitted.")

    class Meta:
        model = Job
        fields = [
            "id",
            "index",
            "parameters",
            "state",
            "status_detail",
            "exit_code",
            "workstation",
            "condor_id",
            "started_at",
            "finished_at",
        ]
        extra_kwargs = {
            "parameters": {"help_text": "This run's parameter values."},
            "status_detail": {"help_text": "The latest word on its state."},
            "exit_code": {"help_text": "The script's exit code, once it has ended."},
            "workstation": {"help_text": "Where it runs or last ran."},
            "started_at": {"help_text": "When its latest run started."},
            "finished_at": {"help_text": "When it ended."},
        }


class SweepSummarySerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="public_id", read_only=True, help_text="The sweep's id.")
    owner = serializers.CharField(source="owner.get_username", help_text="Who submitted it.")
    lab = serializers.CharField(
        source="lab.name", allow_null=True, default=None, help_text="The lab it is charged to."
    )
    run_count = serializers.IntegerField(help_text="How many runs it has.")
    stage = serializers.SerializerMethodField(
        help_text="Where it is on its way to HTCondor: writing (its runs are being written; "
        "see prepared_runs of planned_runs), submitting, retrying (after an error), filling "
        "(HTCondor has its runs and starts each once its folder is made; see ready_runs), "
        "submitted, or stopped (cancelled or failed before HTCondor took it)."
    )
    links = serializers.SerializerMethodField(help_text="Where to read more about it.")

    class Meta:
        model = Sweep
        fields = [
            "id",
            "name",
            "owner",
            "lab",
            "kind",
            "definition",
            "created_at",
            "submitted_at",
            "cluster_id",
            "last_error",
            "stop_reason",
            "finished_at",
            "run_count",
            "planned_runs",
            "prepared_runs",
            "ready_runs",
            "stage",
            "links",
        ]
        extra_kwargs = {
            "name": {"help_text": "The name its owner gave it."},
            "kind": {"help_text": "Grid, list of parameter sets, or random samples."},
            "definition": {"help_text": "The parameters as given."},
            "created_at": {"help_text": "When Nightshift accepted it."},
            "submitted_at": {"help_text": "When HTCondor accepted its cluster."},
            "cluster_id": {"help_text": "HTCondor's cluster of all its runs."},
            "last_error": {"help_text": "The latest error submitting it, if any."},
            "stop_reason": {"help_text": "A study: why it stopped asking for trials."},
            "finished_at": {"help_text": "A study: when its last trial ended."},
            "planned_runs": {
                "help_text": "A grid, list or random sweep: how many runs it has once all are "
                "written (0 for a matrix or study)."
            },
            "prepared_runs": {"help_text": "How many of its planned runs are written so far."},
            "ready_runs": {
                "help_text": "How many of its written runs have their folders made, so that "
                "HTCondor may start them."
            },
        }

    @extend_schema_field(
        serializers.ChoiceField(
            choices=["writing", "submitting", "retrying", "filling", "submitted", "stopped"]
        )
    )
    def get_stage(self, sweep: Sweep) -> str:
        return sweep_stage(sweep)

    @extend_schema_field(serializers.DictField(child=serializers.URLField()))
    def get_links(self, sweep: Sweep) -> dict[str, str]:
        paths = {
            "self": reverse("api:sweep-detail", args=[sweep.public_id]),
            "web": reverse("jobs:sweep", args=[sweep.public_id]),
        }
        request = self.context.get("request")
        if request is None:
            return paths
        return {key: request.build_absolute_uri(path) for key, path in paths.items()}


class SweepSerializer(SweepSummarySerializer):
    states = serializers.SerializerMethodField(help_text="How many runs are in each state.")
    runs = SweepRunSerializer(many=True, source="ordered_runs", help_text="Its runs, in order.")

    class Meta(SweepSummarySerializer.Meta):
        fields = [*SweepSummarySerializer.Meta.fields, "states", "runs"]

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField()))
    def get_states(self, sweep: Sweep) -> dict[str, int]:
        counts: dict[str, int] = {}
        for run in sweep.ordered_runs:
            counts[run.state] = counts.get(run.state, 0) + 1
        return counts
