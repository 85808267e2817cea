import csv
import io

from django import forms

from condor_bridge.types import MAX_CPUS, MAX_GPU_MEMORY_GB, MAX_GPUS, MAX_RUNTIME_S
from jobs.archives import is_archive
from jobs.models import EnvironmentPreset, Job
from jobs.selectors import job_list_for_user
from jobs.specs import JobSpec, job_default_name
from labs.models import Lab


def parse_space(text: str) -> dict:
    """`lr = log_uniform 1e-5 0.1` and `opt = choice adam sgd` lines -> distributions."""
    space = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, rest = line.partition("=")
        words = rest.split()
        if not sep or not name.strip() or not words:
            raise forms.ValidationError(f"Line {number}: write name = kind low high.")
        kind, values = words[0], words[1:]
        if kind == "choice":
            space[name.strip()] = {"kind": "choice",
                                   "choices": [_number_or_text(v) for v in values]}  # fmt: skip
            continue
        try:
            low, high = (float(v) for v in values)
        except ValueError:
            raise forms.ValidationError(
                f"Line {number}: {kind} needs its lowest and highest value."
            ) from None
        space[name.strip()] = {"kind": kind, "low": low, "high": high}
    return space


MAX_ROWS_CSV_BYTES = 1024 * 1024


def _number_or_text(value: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


class JobSubmitForm(forms.Form):
    name = forms.CharField(
        label="Job name", max_length=200, required=False,
        help_text="A name you will recognise, e.g. “resnet18 lr 0.1”. Left empty, the job is "
        "named after its file.",
    )  # fmt: skip
    lab = forms.ModelChoiceField(
        label="Lab", queryset=Lab.objects.none(), required=False, empty_label=None,
        help_text="The lab whose quota and fair share the job counts against.",
    )  # fmt: skip
    script = forms.FileField(
        label="Training script or project", required=False,
        help_text="A Python file (.py), or a project archive (.zip, .tar.gz). A project with a "
        "requirements.txt at its top gets those packages installed first.",
    )  # fmt: skip
    requirements = forms.FileField(
        label="requirements.txt (optional)", required=False,
        help_text="For a single script: packages pip installs into a virtual environment "
        "before it runs. A project keeps its requirements.txt in the archive.",
    )  # fmt: skip
    entry_command = forms.CharField(
        label="Entry command", required=False, max_length=4096,
        help_text="For a project: how to start it, e.g. python train.py --epochs 10.",
    )  # fmt: skip
    # Set when cloning: the script is copied from this earlier job unless a new one is chosen.
    source_job = forms.UUIDField(required=False, widget=forms.HiddenInput)
    # Set after a form error: the file chosen last time, kept so it need not be chosen again.
    staged_upload = forms.CharField(required=False, max_length=32, widget=forms.HiddenInput)
    staged_requirements = forms.CharField(required=False, max_length=32, widget=forms.HiddenInput)
    arguments = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One argument per line, passed to your script exactly as written, "
        "e.g. --epochs=10.",
    )
    sweep_grid = forms.CharField(
        label="Parameter sweep (optional)", required=False, max_length=20000,
        widget=forms.Textarea(attrs={"rows": 3,
                                     "placeholder": "lr = 0.1, 0.01, 0.001\nbatch = 32, 64"}),
        help_text="One parameter per line: name = value, value, …. Every combination runs as "
        "its own job, all submitted together as a sweep; write {name} in the arguments or "
        "environment values where the value goes, e.g. --lr={lr}.",
    )  # fmt: skip
    sweep_rows = forms.FileField(
        label="…or parameter sets (CSV)", required=False,
        help_text="A CSV file: parameter names in its first row, then one run per row.",
    )  # fmt: skip
    sweep_random = forms.CharField(
        label="…or random samples", required=False, max_length=5000,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder":
                                     "lr = log_uniform 1e-5 0.1\nopt = choice adam sgd"}),
        help_text="One parameter per line: uniform, log_uniform or int_uniform with its "
        "lowest and highest value, or choice with its options; with how many samples below.",
    )  # fmt: skip
    sweep_count = forms.IntegerField(label="Random samples", required=False, min_value=1)
    sweep_seed = forms.IntegerField(label="Seed of the samples", required=False, min_value=0,
                                    initial=0)  # fmt: skip
    environment_preset = forms.ModelChoiceField(
        label="Software environment", queryset=EnvironmentPreset.objects.none(),
        required=False, empty_label=None,
        help_text="Set up by the pool's administrators.",
    )  # fmt: skip
    keep_outputs = forms.CharField(
        label="Outputs to keep", required=False, initial="outputs", max_length=1000,
        help_text="Files or folders at the top of the job's folder, separated by commas. "
        "By default everything the job writes under outputs/ is kept.",
    )  # fmt: skip
    # Rendered as key/value rows (inputs env_key and env_value); errors attach here.
    environment = forms.CharField(
        label="Environment variables", required=False, widget=forms.HiddenInput,
        help_text="Set for your script, e.g. WANDB_MODE = offline.",
    )  # fmt: skip
    gpus = forms.IntegerField(
        label="GPUs", min_value=0, max_value=MAX_GPUS, initial=1,
        help_text="How many GPUs on one workstation. 0 runs on CPUs only.",
    )  # fmt: skip
    gpu_memory_gb = forms.FloatField(
        label="Minimum GPU memory (GB)", required=False, min_value=0.1,
        max_value=MAX_GPU_MEMORY_GB,
        help_text="Each GPU must have at least this much memory. Leave empty for any.",
    )  # fmt: skip
    gpu_capability = forms.FloatField(
        label="Minimum compute capability", required=False, min_value=1.0, max_value=20.0,
        help_text="Only for code that needs newer GPUs, e.g. 7.0 for bfloat16 tensor cores. "
        "Leave empty for any.",
    )  # fmt: skip
    cpus = forms.IntegerField(
        label="CPUs", min_value=1, max_value=MAX_CPUS, initial=1,
        help_text="CPU cores for data loading and the rest of your script.",
    )  # fmt: skip
    memory_gb = forms.FloatField(
        label="Memory (GB)", min_value=0.125, max_value=1024, initial=2,
        help_text="Main memory for your script.",
    )  # fmt: skip

    max_runtime_minutes = forms.IntegerField(
        label="Maximum runtime (minutes)", required=False, min_value=1,
        max_value=MAX_RUNTIME_S // 60,
        help_text="HTCondor holds the job if it runs longer. Leave empty for no limit.",
    )  # fmt: skip

    notify_by_email = forms.BooleanField(
        label="Email me when it completes, fails or is held", required=False,
        help_text="Sent to the address on your account.",
    )  # fmt: skip

    def __init__(
        self, *args, user=None, staged_names: dict[str, str] | None = None, **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        labs = Lab.objects.filter(memberships__user=user).order_by("memberships__joined_at")
        if user is None or not labs.exists():
            del self.fields["lab"]
        else:
            self.fields["lab"].queryset = labs
        # Uploads kept from the last try, by field: their file names, to show.
        self.staged_names = dict(staged_names or {})
        presets = EnvironmentPreset.objects.filter(is_active=True)
        field = self.fields["environment_preset"]
        field.queryset = presets
        if not self.is_bound and "environment_preset" not in self.initial:
            self.initial["environment_preset"] = presets.filter(is_default=True).first()

    def environment_rows(self) -> list[tuple[str, str]]:
        """The key/value rows to show: what was typed, or the initial (clone) values."""
        if self.is_bound:
            keys, values = self.data.getlist("env_key"), self.data.getlist("env_value")
            rows = list(zip(keys, values, strict=False))
        else:
            rows = list((self.initial.get("environment") or {}).items())
        return rows + [("", "")]

    def clean_environment(self) -> dict[str, str]:
        keys, values = self.data.getlist("env_key"), self.data.getlist("env_value")
        if len(keys) != len(values):
            raise forms.ValidationError("Each variable needs a name and a value.")
        environment: dict[str, str] = {}
        for key, value in zip(keys, values, strict=True):
            key = key.strip()
            if not key and not value:
                continue
            if not key:
                raise forms.ValidationError(f"The value {value[:40]!r} has no variable name.")
            if key in environment:
                raise forms.ValidationError(f"{key} is set twice; keep one row.")
            environment[key] = value
        return environment

    def clean_sweep_grid(self) -> dict[str, list] | None:
        """`lr = 0.1, 0.01` lines -> {"lr": [0.1, 0.01]}; numbers become numbers."""
        text = (self.cleaned_data.get("sweep_grid") or "").replace("\r\n", "\n")
        grid: dict[str, list] = {}
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            name, sep, values = line.partition("=")
            name = name.strip()
            if not sep or not name:
                raise forms.ValidationError(f"Line {number}: write name = value, value, ….")
            if name in grid:
                raise forms.ValidationError(f"{name} is given twice; keep one line.")
            grid[name] = [_number_or_text(value.strip()) for value in values.split(",")
                          if value.strip()]  # fmt: skip
        return grid or None

    def clean_sweep_random(self) -> dict | None:
        return parse_space(self.cleaned_data.get("sweep_random") or "") or None

    def clean_sweep_rows(self) -> list[dict] | None:
        upload = self.cleaned_data.get("sweep_rows")
        if not upload:
            return None
        if upload.size is not None and upload.size > MAX_ROWS_CSV_BYTES:
            raise forms.ValidationError("A CSV of parameter sets is at most 1 MB.")
        try:
            text = upload.read(MAX_ROWS_CSV_BYTES).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise forms.ValidationError("The CSV file is not UTF-8 text.") from None
        rows = list(csv.DictReader(io.StringIO(text)))
        if any(None in row or None in row.values() for row in rows):
            raise forms.ValidationError("Every row needs one value per column of the header.")
        return [{name.strip(): _number_or_text(value.strip()) for name, value in row.items()}
                for row in rows]  # fmt: skip

    def sweep_plan(self) -> dict | None:
        """The sweep the form describes: {"grid": ...}, {"rows": ...}, {"random": ...} or
        None for a single job."""
        data = self.cleaned_data
        if data.get("sweep_grid"):
            return {"grid": data["sweep_grid"]}
        if data.get("sweep_rows") is not None:
            return {"rows": data["sweep_rows"]}
        if data.get("sweep_random"):
            return {"random": data["sweep_random"], "count": data.get("sweep_count"),
                    "seed": data.get("sweep_seed") or 0}  # fmt: skip
        return None

    def clean_keep_outputs(self) -> list[str]:
        text = self.cleaned_data.get("keep_outputs") or "outputs"
        names = [name.strip().strip("/") for name in text.split(",") if name.strip()]
        if len(names) != len(set(names)):
            raise forms.ValidationError("A name appears twice.")
        return names or ["outputs"]

    def clean(self):
        cleaned = super().clean()
        script = cleaned.get("script")
        kept_script = self.staged_names.get("script")
        if not script and not cleaned.get("source_job") and not kept_script:
            self.add_error("script", "Choose a Python script (.py) or a project archive to upload.")
        given = [name for name in ("sweep_grid", "sweep_rows", "sweep_random")
                 if cleaned.get(name) not in (None, "", {}, [])]  # fmt: skip
        if len(given) > 1:
            self.add_error("sweep_grid", "Describe the sweep one way: a grid, a CSV of "
                           "parameter sets, or random samples.")  # fmt: skip
        if cleaned.get("sweep_random") and not cleaned.get("sweep_count"):
            self.add_error("sweep_count", "Say how many random samples to run.")
        named = script.name if script else (kept_script or "")
        if named and is_archive(named) and not cleaned.get("entry_command"):
            self.add_error(
                "entry_command", "Say how to start the project, e.g. python train.py --epochs 10."
            )
        if not (cleaned.get("name") or "").strip() and "name" in self.fields:
            cleaned["name"] = job_default_name(
                uploaded_name=named, source=self._source_job(cleaned.get("source_job"))
            )
        return cleaned

    def _source_job(self, public_id) -> Job | None:
        if not public_id or self.user is None:
            return None
        return job_list_for_user(self.user).filter(public_id=public_id).first()

    def max_runtime_s(self) -> int | None:
        minutes = self.cleaned_data.get("max_runtime_minutes")
        return minutes * 60 if minutes else None

    def to_spec(self, *, name: str | None = None) -> JobSpec:
        """The plain-terms request the cleaned form describes."""
        data = self.cleaned_data
        preset = data.get("environment_preset")
        return JobSpec(
            name=name if name is not None else data["name"],
            arguments=self.arguments_list(),
            entry_command=(data.get("entry_command") or "").strip() or None,
            environment=data.get("environment") or {},
            python=preset.python if preset else None,
            container_image=preset.image_or_none if preset else None,
            gpus=data["gpus"],
            gpu_memory_gb=data.get("gpu_memory_gb"),
            gpu_capability=data.get("gpu_capability"),
            cpus=data["cpus"],
            memory_mb=round(data["memory_gb"] * 1024),
            max_runtime_s=self.max_runtime_s(),
            output_paths=data.get("keep_outputs") or ["outputs"],
            notify_by_email=bool(data.get("notify_by_email")),
            lab_id=data["lab"].pk if data.get("lab") else None,
        )

    def arguments_list(self) -> list[str]:
        text = self.cleaned_data.get("arguments") or ""
        return [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]


MATRIX_ROWS = 4
SWEEP_FIELDS = ("sweep_grid", "sweep_rows", "sweep_random", "sweep_count", "sweep_seed")


class MatrixForm(JobSubmitForm):
    """An evaluation matrix: the job form's resources and arguments, with systems and
    datasets as rows (system_name_N, system_file_N, system_entry_N; dataset_name_N,
    dataset_path_N, dataset_file_N) instead of one script."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in ("script", "requirements", "entry_command", *SWEEP_FIELDS, "source_job",
                     "staged_upload", "staged_requirements", "notify_by_email"):  # fmt: skip
            del self.fields[name]
        self.fields["name"].label = "Evaluation name"
        self.fields["arguments"].help_text = (
            "One argument per line, for every system; {system} and {dataset} become the "
            "system's name and the dataset's path."
        )

    def rows(self, prefix: str, fields: tuple[str, ...]) -> list[dict]:
        """What was typed in each row, for showing the form again."""
        rows = []
        for number in range(MATRIX_ROWS):
            rows.append({"number": number, **{field: self.data.get(f"{prefix}_{field}_{number}", "")
                                              for field in fields}})  # fmt: skip
        return rows

    def system_rows(self) -> list[dict]:
        return self.rows("system", ("name", "entry"))

    def dataset_rows(self) -> list[dict]:
        return self.rows("dataset", ("name", "path"))

    def clean(self):
        cleaned = forms.Form.clean(self)
        systems, datasets = [], []
        for number in range(MATRIX_ROWS):
            name = self.data.get(f"system_name_{number}", "").strip()
            upload = self.files.get(f"system_file_{number}")
            entry = self.data.get(f"system_entry_{number}", "").strip() or None
            if name or upload:
                if not (name and upload):
                    self.add_error(None, f"System row {number + 1}: give a name and a file.")
                    continue
                systems.append((name, upload, entry))
            name = self.data.get(f"dataset_name_{number}", "").strip()
            path = self.data.get(f"dataset_path_{number}", "").strip() or None
            upload = self.files.get(f"dataset_file_{number}")
            if name or path or upload:
                if not name or (path is None) == (upload is None):
                    self.add_error(None, f"Dataset row {number + 1}: give a name, and a path "
                                   "or a file (not both).")  # fmt: skip
                    continue
                datasets.append((name, path, upload))
        cleaned["systems"], cleaned["datasets"] = systems, datasets
        return cleaned


class StudyForm(JobSubmitForm):
    """A hyperparameter study: the job form, with a search space and a budget instead of a
    sweep grid."""

    space = forms.CharField(
        label="Search space", max_length=5000,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder":
                                     "lr = log_uniform 1e-5 0.1\nlayers = int_uniform 2 8\n"
                                     "optimizer = choice adam sgd"}),
        help_text="One hyperparameter per line: name = uniform, log_uniform or int_uniform "
        "with its lowest and highest value, or choice with its options. Write {name} in the "
        "arguments where its value goes.",
    )  # fmt: skip
    objective = forms.CharField(
        label="Objective", max_length=40,
        help_text="The metric to optimise, as your script logs it with nightshift.log().",
    )  # fmt: skip
    direction = forms.ChoiceField(choices=[("minimize", "Minimise"), ("maximize", "Maximise")])
    max_trials = forms.IntegerField(label="Trials", min_value=1, initial=20)
    parallel = forms.IntegerField(label="At once", min_value=1, max_value=50, initial=4)
    sampler = forms.ChoiceField(choices=[("tpe", "TPE"), ("random", "Random")])
    pruner = forms.ChoiceField(choices=[("median", "Median"), ("asha", "Successive halving"),
                                        ("none", "None")])  # fmt: skip
    gpu_hours = forms.FloatField(label="GPU-hour budget", required=False, min_value=0.01)
    deadline_minutes = forms.IntegerField(label="Deadline (minutes)", required=False,
                                          min_value=1)  # fmt: skip

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in (*SWEEP_FIELDS, "source_job", "notify_by_email"):
            del self.fields[name]
        self.fields["name"].label = "Study name"

    def clean_space(self) -> dict:
        return parse_space(self.cleaned_data["space"])

    def plan(self) -> dict:
        data = self.cleaned_data
        return {key: data.get(key) for key in ("space", "objective", "direction", "max_trials",
                                                 "parallel", "sampler", "pruner", "gpu_hours",
                                                 "deadline_minutes")}  # fmt: skip
