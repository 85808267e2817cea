"""The API's shapes for the pool: its workstations, software, and what a request matches."""

from __future__ import annotations

from rest_framework import serializers


class MatchSummarySerializer(serializers.Serializer):
    machines_total = serializers.IntegerField(help_text="Workstations in the pool.")
    machines_matching = serializers.IntegerField(help_text="Workstations that could run it.")
    machines_free_now = serializers.IntegerField(help_text="Of those, free right now.")
    gpus_matching = serializers.IntegerField(help_text="GPUs on the matching workstations.")
    gpus_free_now = serializers.IntegerField(help_text="Of those, free right now.")
    can_ever_run = serializers.BooleanField(help_text="Some workstation could run it.")
    reason = serializers.CharField(help_text="Why nothing matches; empty when something does.")
    busy_reason = serializers.CharField(help_text="Why nothing that matches is free now.")
    blocking_field = serializers.CharField(help_text="The request field to change.")


class GpuSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The GPU model, e.g. NVIDIA A100-SXM4-40GB.")
    memory_mb = serializers.IntegerField(help_text="Memory of each GPU, in MB.")
    capability = serializers.FloatField(help_text="CUDA compute capability.")


class WorkstationSerializer(serializers.Serializer):
    name = serializers.CharField(source="machine.name", help_text="The workstation's name.")
    status = serializers.ChoiceField(
        choices=["free", "nightshift", "busy", "owner", "unlent", "offline"],
        help_text="free, nightshift (running our jobs), busy, owner (in use), unlent (free, "
        "but its owners' terms lend it to no job now) or offline.",
    )
    status_label = serializers.CharField(help_text="The status, for people.")
    terms_text = serializers.CharField(
        help_text='Its owners\' lending terms in words ("to Vision only, at most 1 GPU"); '
        "empty where they set none."
    )
    nightshift_jobs = serializers.IntegerField(help_text="Nightshift jobs running there.")
    total_gpus = serializers.IntegerField(source="machine.total_gpus", help_text="GPUs it has.")
    free_gpus = serializers.IntegerField(source="machine.free_gpus", help_text="GPUs free now.")
    gpu = GpuSerializer(
        source="machine.gpu", allow_null=True, help_text="Its GPU model; null for none."
    )
    total_cpus = serializers.IntegerField(source="machine.total_cpus", help_text="CPU cores.")
    free_cpus = serializers.IntegerField(source="machine.free_cpus", help_text="Free cores.")
    total_memory_mb = serializers.IntegerField(
        source="machine.total_memory_mb", help_text="Main memory, in MB."
    )
    free_memory_mb = serializers.IntegerField(
        source="machine.free_memory_mb", help_text="Free main memory, in MB."
    )
    runs_containers = serializers.BooleanField(
        source="machine.runs_containers", help_text="It can run container environments."
    )


class SoftwareChoiceSerializer(serializers.Serializer):
    name = serializers.SerializerMethodField(help_text="The environment's name.")
    reference = serializers.CharField(
        help_text="NAME@VERSION: pass as software_environment when submitting."
    )
    label = serializers.CharField(help_text="How the job form shows it.")
    description = serializers.CharField(help_text="What it offers.")
    container_image = serializers.CharField(
        allow_null=True, help_text="For a container environment: its image; else null."
    )
    is_default = serializers.BooleanField(help_text="Used when a job names none.")

    def get_name(self, choice) -> str:
        return choice.reference.rsplit("@", 1)[0]


class PoolSerializer(serializers.Serializer):
    total_gpus = serializers.IntegerField(help_text="GPUs in the pool.")
    free_gpus = serializers.IntegerField(help_text="GPUs free now.")
    nightshift_gpus = serializers.IntegerField(help_text="GPUs running Nightshift jobs.")
    offline = serializers.IntegerField(help_text="Workstations seen this week, gone now.")
    error = serializers.CharField(help_text="Why the pool could not be asked; empty if it was.")
    workstations = WorkstationSerializer(many=True, help_text="Every workstation, by name.")
    environments = SoftwareChoiceSerializer(
        many=True, help_text="The software environments you may use (their latest versions)."
    )
