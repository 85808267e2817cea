from django import forms

from condor_bridge.types import MAX_CPUS, MAX_GPU_MEMORY_GB, MAX_GPUS, MAX_RUNTIME_S
from jobs.archives import is_archive
from jobs.inputs import data_choices, model_choices
from jobs.models import Job
from jobs.selectors import job_list_for_user
from jobs.software import SoftwareNotFound, software_choices, software_lookup
from jobs.specs import LIVE_SERVICE_CHOICES, JobSpec, job_default_name
from labs.models import Lab


class JobSubmitForm(forms.Form):
    name = forms.CharField(
        label="Job name",
        max_length=200,
        required=False,
        help_text="A name you will recognise, e.g. “resnet18 lr 0.1”. Left empty, the job is "
        "named after its file.",
    )
    lab = forms.ModelChoiceField(
        label="Lab",
        queryset=Lab.objects.none(),
        required=False,
        empty_label=None,
        help_text="The lab whose quota and fair share the job counts against.",
    )
    script = forms.FileField(
        label="Training script or project",
        required=False,
        help_text="A Python file (.py), or a project archive (.zip, .tar.gz). A project with a "
        "requirements.txt at its top gets those packages installed first.",
    )
    requirements = forms.FileField(
        label="requirements.txt (optional)",
        required=False,
        help_text="For a single script: packages pip installs into a virtual environment "
        "before it runs. A project keeps its requirements.txt in the archive.",
    )
    entry_command = forms.CharField(
        label="Entry command",
        required=False,
        max_length=4096,
        help_text="For a project: how to start it, e.g. python train.py --epochs 10.",
    )
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
    software_environment = forms.CharField(
        label="Software environment",
        required=False,
        max_length=120,
        widget=forms.Select,
        help_text="Packages installed once on each workstation and reused: the site's, your "
        "lab's or your own environments. Or leave this as it is and add a requirements.txt.",
    )
    datasets = forms.MultipleChoiceField(
        label="Datasets",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Each appears read-only in the job at datasets/NAME/ "
        '(nightshift.dataset_path("NAME")). It is fetched once per workstation and reused '
        "by every later job there.",
    )
    models = forms.MultipleChoiceField(
        label="Published models",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="To fine-tune or evaluate: each appears read-only in the job at "
        'models/NAME/ (nightshift.model_path("NAME")), fetched as datasets are.',
    )
    keep_outputs = forms.CharField(
        label="Outputs to keep",
        required=False,
        initial="outputs",
        max_length=1000,
        help_text="Files or folders at the top of the job's folder, separated by commas. "
        "By default everything the job writes under outputs/ is kept.",
    )
    # Rendered as key/value rows (inputs env_key and env_value); errors attach here.
    environment = forms.CharField(
        label="Environment variables",
        required=False,
        widget=forms.HiddenInput,
        help_text="Set for your script, e.g. WANDB_MODE = offline.",
    )
    gpus = forms.IntegerField(
        label="GPUs",
        min_value=0,
        max_value=MAX_GPUS,
        initial=1,
        help_text="How many GPUs on one workstation. 0 runs on CPUs only.",
    )
    gpu_memory_gb = forms.FloatField(
        label="Minimum GPU memory (GB)",
        required=False,
        min_value=0.1,
        max_value=MAX_GPU_MEMORY_GB,
        help_text="Each GPU must have at least this much memory. Leave empty for any.",
    )
    gpu_capability = forms.FloatField(
        label="Minimum compute capability",
        required=False,
        min_value=1.0,
        max_value=20.0,
        help_text="Only for code that needs newer GPUs, e.g. 7.0 for bfloat16 tensor cores. "
        "Leave empty for any.",
    )
    cpus = forms.IntegerField(
        label="CPUs",
        min_value=1,
        max_value=MAX_CPUS,
        initial=1,
        help_text="CPU cores for data loading and the rest of your script.",
    )
    memory_gb = forms.FloatField(
        label="Memory (GB)",
        min_value=0.125,
        max_value=1024,
        initial=2,
        help_text="Main memory for your script.",
    )

    max_runtime_minutes = forms.IntegerField(
        label="Maximum runtime (minutes)",
        required=False,
        min_value=1,
        max_value=MAX_RUNTIME_S // 60,
        help_text="HTCondor holds the job if it runs longer. Leave empty for no limit.",
    )

    finish_by = forms.DateTimeField(
        label="Finish by",
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Optional, in the campus time zone: the portal says whether that is likely, "
        "and your lab's jobs with deadlines go ahead of its others, the earliest first.",
    )

    live_services = forms.MultipleChoiceField(
        label="While it runs",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        choices=LIVE_SERVICE_CHOICES,
        help_text="Reached through the portal, by you alone unless you share it. TensorBoard "
        "needs tensorboard in the job's environment and reads nightshift.tensorboard_dir(); "
        "a served endpoint listens on its own socket, $NIGHTSHIFT_SERVE_SOCKET "
        "(nightshift.serve_socket()), or binds 127.0.0.1:$NIGHTSHIFT_SERVE_PORT.",
    )
    notify_by_email = forms.BooleanField(
        label="Email me when it completes, fails or is held",
        required=False,
        help_text="Sent to the address on your account.",
    )

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
        self.software = {c.reference: c for c in software_choices(user)} if user else {}
        options = [("", "The site's default (or my requirements.txt)")] + [
            (c.reference, c.label + (f" — {c.description}" if c.description else ""))
            for c in self.software.values()
        ]
        # A clone of a job whose version is no longer the latest: offered as it ran.
        kept = self.data.get("software_environment") or self.initial.get("software_environment")
        if kept and kept not in self.software:
            options.append((kept, kept))
        self.fields["software_environment"].widget.choices = options
        datasets = [(c.reference, c.label) for c in data_choices(user)] if user else []
        # A clone's datasets as it ran them (NAME@VERSION), each offered beside the latest.
        for kept_reference in self.initial.get("datasets") or []:
            if kept_reference not in dict(datasets):
                datasets.append((kept_reference, f"{kept_reference} (as the cloned job used it)"))
        self.fields["datasets"].choices = datasets
        models = [(c.reference, c.label) for c in model_choices(user)] if user else []
        for kept_reference in self.initial.get("models") or []:
            if kept_reference not in dict(models):
                models.append((kept_reference, kept_reference))
        self.fields["models"].choices = models

    def clean_software_environment(self) -> str:
        reference = (self.cleaned_data.get("software_environment") or "").strip()
        if reference:
            try:
                self.software[reference] = software_lookup(self.user, reference)
            except SoftwareNotFound as exc:
                raise forms.ValidationError(str(exc)) from None
        return reference

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
        reference = data.get("software_environment") or None
        choice = self.software.get(reference) if reference else None
        return JobSpec(
            name=name if name is not None else data["name"],
            arguments=self.arguments_list(),
            entry_command=(data.get("entry_command") or "").strip() or None,
            environment=data.get("environment") or {},
            software=reference,
            python=choice.python if choice else None,
            container_image=choice.container_image if choice else None,
            gpus=data["gpus"],
            gpu_memory_gb=data.get("gpu_memory_gb"),
            gpu_capability=data.get("gpu_capability"),
            cpus=data["cpus"],
            memory_mb=round(data["memory_gb"] * 1024),
            max_runtime_s=self.max_runtime_s(),
            finish_by=data.get("finish_by"),
            output_paths=data.get("keep_outputs") or ["outputs"],
            notify_by_email=bool(data.get("notify_by_email")),
            lab_id=data["lab"].pk if data.get("lab") else None,
            datasets=list(data.get("datasets") or []) if "datasets" in self.fields else [],
            models=list(data.get("models") or []) if "models" in self.fields else [],
            live_services=list(data.get("live_services") or []),
        )

    def arguments_list(self) -> list[str]:
        text = self.cleaned_data.get("arguments") or ""
        return [line for line in text.replace("\r\n", "\n").split("\n") if line.strip()]
