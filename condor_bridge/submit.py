"""Pure translation of a JobRequest into an HTCondor submit description.

User text enters a submit description in exactly two places, `arguments` and
`environment`. Both use HTCondor's "new" quoted syntax: the whole value is in
double quotes, each item in single quotes, with `'` and `"` doubled. Dollars are
escaped so that no macro expands, neither at submit time ($(...), $ENV(...),
$RANDOM_CHOICE(...)) nor when the job is matched ($$(...)): see escape_macros. Line
breaks and other control characters are refused by JobRequest, so no text can start a
new submit command.
"""

from __future__ import annotations

import posixpath
import re

from .explain import SUBCODE_NIGHTSHIFT_RUNTIME, SUBCODE_NIGHTSHIFT_TOO_MANY_STARTS
from .placement import rank_expression
from .types import JOB_ID_PATTERN, FileMode, JobRequest

STDOUT = "stdout.txt"
STDERR = "stderr.txt"
USER_LOG = "condor.log"
JOB_ID_ATTR = "NightshiftJobId"
FINISH_BY_ATTR = "NightshiftFinishBy"
# Above every deadline's minute since 1970 until 2100 (LATEST_DEADLINE_S // 60 is 68.4 million).
DEADLINE_PRIORITY_BASE = 100_000_000
INSTANCE_ATTR = "NightshiftInstance"
# The runtime limit a quota set, kept in the ad so that a removal can be explained.
RUNTIME_LIMIT_ATTR = "NightshiftRuntimeLimit"
# A notebook session's limit: the job's helper ends it there, saving first; HTCondor
# removes it a grace later whatever runs in it (a student who stops the helper keeps no GPU).
SESSION_LIMIT_ATTR = "NightshiftSessionLimit"
# Inside every job sandbox: the helper module (importable as `nightshift`) and its metrics.
HELPER_DIR = ".nightshift"
DEFAULT_OUTPUT_DIR = "outputs"
METRICS_FILE = f"{HELPER_DIR}/metrics.jsonl"
# Installs requirements.txt into a virtual environment, then runs the script in it.
LAUNCHER = f"{HELPER_DIR}/launch.py"
INSTALL_LOG = f"{HELPER_DIR}/install.log"
# Where nightshift.checkpoint_dir() points. The whole helper folder is the checkpoint that
# HTCondor keeps (spool mode), so the metrics logged before an eviction survive it too.
CHECKPOINT_DIR = f"{HELPER_DIR}/checkpoint"
# One JSON line per checkpoint the helper saved, {"time": ...}: what the portal's accounting
# reads to know how much of an evicted run was kept.
CHECKPOINT_LOG = f"{HELPER_DIR}/checkpoints.jsonl"
# A job's datasets, where HTCondor moves its files (spool mode): nightshift://PORTAL/SHA256
# URLs, which this plugin (jobs/runtime/dataset_plugin.py, which every such job brings) puts
# in place; where the execute-node kit installed it, it hands over to the kit's copy.
DATA_TRANSFER_SCHEME = "nightshift"
DATA_PLUGIN = f"{HELPER_DIR}/nightshift_dataset_plugin.py"
# HTCondor's self-checkpointing: a job that exits with this code has saved its state and is
# started again at once, on the same workstation, with its checkpoint.
CHECKPOINT_EXIT_CODE = 85
# The live services a job runs, "tensorboard,serve": what the job page offers to open.
LIVE_ATTR = "NightshiftLive"
# The path each service is served under, through the portal's live proxy: the launcher
# gives it to Jupyter's base_url and TensorBoard's --path_prefix.
LIVE_PATH = "/live/{job_id}/"


def quote_item(text: str) -> str:
    """One argument or environment value, single-quoted in the new syntax."""
    return "'" + text.replace("'", "''").replace('"', '""') + "'"


_DOLLARS = re.compile(r"\$+")


def _escape_dollars(run: re.Match) -> str:
    pairs, single = divmod(len(run.group()), 2)
    return "$$(DOLLARDOLLAR)" * pairs + "$(DOLLAR)" * single


def escape_macros(text: str) -> str:
    """Text that reaches the job exactly as given, through both of HTCondor's expansions.

    A lone `$` becomes `$(DOLLAR)`, which condor_submit turns into `$`. Two in a row cannot:
    `$(DOLLAR)$(DOLLAR)` comes out as `$$(DOLLAR)`, a match-time macro that no machine
    defines, and the job is held. So each pair becomes `$$(DOLLARDOLLAR)`, which
    condor_submit leaves alone and the match expands to `$$` (seen on the personal pool;
    tests/security/test_hostile_submissions.py checks it there).
    """
    return _DOLLARS.sub(_escape_dollars, text)


def quote_arguments(arguments: tuple[str, ...] | list[str]) -> str:
    return escape_macros('"' + " ".join(quote_item(a) for a in arguments) + '"')


def quote_environment(environment: dict[str, str] | tuple[tuple[str, str], ...]) -> str:
    items = environment.items() if isinstance(environment, dict) else environment
    return escape_macros('"' + " ".join(f"{k}={quote_item(v)}" for k, v in items) + '"')


def classad_string(text: str) -> str:
    """A ClassAd string literal for text already restricted to safe characters."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def format_duration(seconds: int) -> str:
    """3600 -> "1 hour"; 90 -> "90 seconds"."""
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return f"{hours} hour{'s' if hours != 1 else ''}"
    if seconds % 60 == 0:
        minutes = seconds // 60
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds} seconds"


def gpu_requirement(request: JobRequest) -> str | None:
    """The `require_gpus` expression that each assigned GPU must satisfy."""
    clauses = []
    if request.gpu_memory_gb is not None:
        clauses.append(f"GlobalMemoryMb >= {round(request.gpu_memory_gb * 1024)}")
    if request.gpu_capability is not None:
        clauses.append(f"Capability >= {request.gpu_capability:.1f}")
    return " && ".join(clauses) or None


def reused_slot_requirement(gpus: int) -> str:
    """The job runs on an already claimed slot only if that slot holds exactly its GPUs.

    The schedd hands a finished job's claim, slot and all, to the same submitter's next idle
    job that fits it. A job asking for no GPU would then keep a GPU from every GPU job for as
    long as it runs (and be charged for it); one asking for one GPU would sit on a two-GPU
    slot. A slot the negotiator offers fresh (partitionable or static) is not concerned.

    The slot's GPUs are read from TotalSlotGPUs (a claimed slot's own count), not from GPUs:
    a requirements expression that names TARGET.GPUs makes condor_submit leave out its own
    GPU clauses (TARGET.GPUs >= RequestGPUs, and require_gpus's countMatches), and a GPU job
    would then match workstations without a GPU, or without the GPU it asked for.
    """
    slot_gpus = "ifThenElse(isUndefined(TARGET.TotalSlotGPUs), 0, TARGET.TotalSlotGPUs)"
    return f"(TARGET.DynamicSlot =!= true || {slot_gpus} == {int(gpus)})"


def _first_match(cases: list[tuple[str, str]]) -> str:
    """A ClassAd expression worth the value of the first case whose condition holds."""
    expression = cases[-1][1]
    for condition, value in reversed(cases[:-1]):
        expression = f"ifThenElse({condition}, {value}, {expression})"
    return expression


def build_submit_description(
    request: JobRequest, *, mode: FileMode, instance: str = "default"
) -> dict[str, str]:
    """The submit description for `request`, as the mapping htcondor2.Submit takes.

    `instance` tags the job so that several portals (or a test run) can share a pool.
    """
    if not JOB_ID_PATTERN.fullmatch(instance):
        raise ValueError(f"instance {instance!r} must be letters, digits and dashes")
    environment = (
        ("PYTHONUNBUFFERED", "1"),
        ("NIGHTSHIFT_JOB_ID", request.job_id),
        ("NIGHTSHIFT_OUTPUT_DIR", request.output_paths[0] if request.output_paths else "."),
        ("NIGHTSHIFT_HELPER_DIR", HELPER_DIR),
        ("NIGHTSHIFT_METRICS_FILE", METRICS_FILE),
        ("NIGHTSHIFT_CHECKPOINT_DIR", CHECKPOINT_DIR),
        ("NIGHTSHIFT_CHECKPOINT_EXIT_CODE", str(CHECKPOINT_EXIT_CODE)),
        ("NIGHTSHIFT_CHECKPOINT_INTERVAL_S", str(request.checkpoint_interval_s)),
        ("PYTHONPATH", HELPER_DIR),
        *((("NIGHTSHIFT_SEED", str(request.seed)),) if request.seed is not None else ()),
        *(
            (
                ("NIGHTSHIFT_LIVE", ",".join(request.live_services)),
                ("NIGHTSHIFT_LIVE_PATH", LIVE_PATH.format(job_id=request.job_id)),
            )
            if request.live_services
            else ()
        ),
        *(
            (("NIGHTSHIFT_SESSION_LIMIT_S", str(request.session_limit_s)),)
            if request.session_limit_s
            else ()
        ),
        *(
            (("NIGHTSHIFT_SESSION_IDLE_S", str(request.session_idle_s)),)
            if request.session_idle_s
            else ()
        ),
        *request.environment,
    )
    description = {
        "universe": "container" if request.container_image else "vanilla",
        "executable": request.python,
        "transfer_executable": "false",
        "arguments": quote_arguments(
            # The launcher installs the job's packages, starts its live services and samples
            # its GPUs; a plain CPU script runs as it is.
            (LAUNCHER,)
            * bool(request.install_requirements or request.live_services or request.gpus)
            + (request.script_name, *request.arguments)
        ),
        "environment": quote_environment(environment),
        "initialdir": request.job_dir,
        "output": STDOUT,
        "error": STDERR,
        "log": USER_LOG,
        "request_cpus": str(request.cpus),
        "request_memory": str(request.memory_mb),
        "request_disk": str(request.disk_mb * 1024),
        "accounting_group": request.accounting_group,
        "batch_name": "nightshift",
        "checkpoint_exit_code": str(CHECKPOINT_EXIT_CODE),
        # SIGTERM first, then this long to save a checkpoint before SIGKILL.
        "job_max_vacate_time": str(request.vacate_grace_s),
        f"My.{JOB_ID_ATTR}": classad_string(request.job_id),
        f"My.{INSTANCE_ATTR}": classad_string(instance),
    }
    if request.live_services:
        description[f"My.{LIVE_ATTR}"] = classad_string(",".join(request.live_services))
    requirements = [reused_slot_requirement(request.gpus)]
    if "notebook" in request.live_services:
        # A session does not move: once it has run, no workstation matches it again, and
        # the portal ends it (the owner of its workstation came back) with its files kept.
        requirements.append("(MY.NumJobStarts =?= 0 || MY.NumJobStarts =?= undefined)")
    description["requirements"] = " && ".join(requirements)
    if request.job_lease_s:
        description["job_lease_duration"] = str(request.job_lease_s)
    if request.container_image:
        description["container_image"] = request.container_image
    if request.accounting_user:
        description["accounting_group_user"] = request.accounting_user
    if request.gpus:
        description["request_gpus"] = str(request.gpus)
        # Copies the matched workstation's GPU model into the job ad
        # (MachineAttrGPUs_DeviceName0), so the timeline can name it.
        description["job_machine_attrs"] = "GPUs_DeviceName"
        requirement = gpu_requirement(request)
        if requirement:
            description["require_gpus"] = requirement
    # A job that says how long it runs prefers the workstations likely to stay free that
    # long (condor_bridge.placement); the negotiator still decides.
    rank = rank_expression(request.max_runtime_s / 3600 if request.max_runtime_s else None)
    if rank:
        description["rank"] = rank
    if request.finish_by_s is not None:
        # Among one user's jobs the negotiator takes the highest priority first: the earlier
        # the deadline, the higher (a minute's difference counts); jobs without one have 0.
        description["priority"] = str(DEADLINE_PRIORITY_BASE - request.finish_by_s // 60)
        description[f"My.{FINISH_BY_ATTR}"] = str(request.finish_by_s)
    holds = []
    if request.max_runtime_s:
        holds.append(
            (
                f"JobStatus == 2 && (time() - JobCurrentStartDate) > {request.max_runtime_s}",
                f"The job ran longer than its maximum runtime of "
                f"{format_duration(request.max_runtime_s)}.",
                SUBCODE_NIGHTSHIFT_RUNTIME,
            )
        )
    if request.max_starts:
        holds.append(
            (
                f"JobStatus == 1 && NumJobStarts >= {request.max_starts}",
                f"The job was stopped after starting {request.max_starts} times: its "
                "workstations kept being reclaimed before it could finish.",
                SUBCODE_NIGHTSHIFT_TOO_MANY_STARTS,
            )
        )
    if holds:
        description["periodic_hold"] = " || ".join(f"({when})" for when, _, _ in holds)
        description["periodic_hold_reason"] = _first_match(
            [(when, classad_string(reason)) for when, reason, _ in holds]
        )
        description["periodic_hold_subcode"] = _first_match(
            [(when, str(code)) for when, _, code in holds]
        )
    removals = []
    if request.remove_after_s:
        removals.append(request.remove_after_s)
        description[f"My.{RUNTIME_LIMIT_ATTR}"] = str(request.remove_after_s)
    if request.session_limit_s:
        removals.append(request.session_limit_s + session_grace_s(request.session_limit_s))
        description[f"My.{SESSION_LIMIT_ATTR}"] = str(request.session_limit_s)
    if removals:
        description["periodic_remove"] = (
            f"JobStatus == 2 && (time() - JobCurrentStartDate) > {min(removals)}"
        )
    if mode is FileMode.SHARED:
        description["should_transfer_files"] = "NO"
    else:
        description["should_transfer_files"] = "YES"
        description["when_to_transfer_output"] = "ON_EXIT"
        # The output folders travel in (empty) so that they exist to travel back: a
        # missing entry in transfer_output_files puts the job on hold. The helper folder
        # comes back too, with the job's metrics.
        inputs = request.input_files or (request.script_name,)
        # Only the outputs folder, which the portal makes, exists before the job runs.
        made_by_portal = [p for p in request.output_paths if p == DEFAULT_OUTPUT_DIR]
        description["transfer_input_files"] = ", ".join(
            dict.fromkeys((*inputs, HELPER_DIR, *made_by_portal, *request.dataset_urls))
        )
        if request.dataset_urls:
            # The job brings the plugin, so no workstation needs one to match; HTCondor
            # runs it after the other inputs (the job's manifest and credential) are in.
            description["transfer_plugins"] = f"{DATA_TRANSFER_SCHEME}={DATA_PLUGIN}"
        description["transfer_output_files"] = ", ".join((*request.output_paths, HELPER_DIR))
        description["transfer_checkpoint_files"] = HELPER_DIR
        # A finished spooled job waits in the queue until its outputs are retrieved
        # (StageOutFinish is set then), and at most 10 days, then leaves for the history.
        description["leave_in_queue"] = (
            "JobStatus == 4 && (StageOutFinish =?= undefined || StageOutFinish == 0)"
            " && (time() - EnteredCurrentStatus) < 864000"
        )
    return description


def session_grace_s(limit_s: int) -> int:
    """How long past its limit a session may take to end itself before HTCondor removes
    it: a tenth of the limit, at least 5 s and at most 5 minutes."""
    return max(5, min(300, limit_s // 10))


SWEEP_ID_ATTR = "NightshiftSweepId"
# False while a run's folder is still being made: HTCondor queues the run but starts it only
# once the portal says its folder is ready (the schedd refuses a run whose folder does not
# exist, but an empty one will do until it starts).
FOLDER_READY_ATTR = "NightshiftFolderReady"


def build_cluster_description(
    requests: list[JobRequest],
    *,
    mode: FileMode,
    sweep_id: str,
    instance: str = "default",
    descriptions: list[dict[str, str]] | None = None,
    folders_ready: bool = True,
    materialize_at_most: int | None = None,
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """One submit description and its itemdata for many runs of the same job: one cluster.

    Each run's own description is built as for a single job (or given, as
    build_submit_description made it for the same mode and instance, by a caller that keeps
    them too); the commands whose values differ between runs (job id, folder, arguments,
    environment for a sweep) become `$(nsvN)` macros whose values come from the itemdata,
    already quoted and escaped exactly as a single job's would be. All runs must use the
    same commands. `folders_ready=False`: the runs wait in the queue until their folders are
    made (release_runs); each run's own description is unchanged. `materialize_at_most`:
    the schedd keeps the items and makes the runs' jobs itself after the submit, at most
    that many in its queue at once (late materialization): the submit then costs a tenth
    of making every job in it, and a run's folder need not exist until its job is made.
    """
    if not requests:
        raise ValueError("a cluster needs at least one run")
    if not JOB_ID_PATTERN.fullmatch(sweep_id):
        raise ValueError(f"not a Nightshift sweep id: {sweep_id!r}")
    if not folders_ready and mode is FileMode.SPOOL:
        raise ValueError(
            "spooled runs take their files when submitted: their folders must be ready"
        )
    if materialize_at_most is not None and (mode is FileMode.SPOOL or materialize_at_most < 1):
        raise ValueError("runs are made late only from the portal's folders, at least one at once")
    if descriptions is None:
        descriptions = [build_submit_description(r, mode=mode, instance=instance) for r in requests]
    elif len(descriptions) != len(requests):
        raise ValueError("one description for each run of the cluster")
    first = descriptions[0]
    for description in descriptions[1:]:
        if description.keys() != first.keys():
            raise ValueError("the runs of one cluster must use the same submit commands")
    varying = [key for key in first if any(d[key] != first[key] for d in descriptions[1:])]
    if len(requests) > 1 and f"My.{JOB_ID_ATTR}" not in varying:
        raise ValueError("the runs of one cluster must have different job ids")
    template = dict(first)
    macros = {key: f"nsv{number}" for number, key in enumerate(varying)}
    for key, macro in macros.items():
        template[key] = f"$({macro})"
    values = [{key: d[key] for key in macros} for d in descriptions]
    if "initialdir" in macros:
        # Each run's folder as a name under the folder they share, written out in the
        # template: a late cluster's schedd takes an initialdir that does not start with
        # "/" as relative to the submitter's folder, and computes a log path that does not
        # vary with the items once for the whole cluster (both seen on the personal pool).
        folders = [value["initialdir"] for value in values]
        parent = posixpath.commonpath(folders)
        base = parent.rstrip("/")
        template["initialdir"] = f"{base}/$({macros['initialdir']})"
        if not first["log"].startswith("/"):
            template["log"] = f"{base}/$({macros['initialdir']})/{first['log']}"
        for value in values:
            value["initialdir"] = posixpath.relpath(value["initialdir"], parent)
    template[f"My.{SWEEP_ID_ATTR}"] = classad_string(sweep_id)
    if not folders_ready:
        template[f"My.{FOLDER_READY_ATTR}"] = "false"
        template["requirements"] = (
            f"({template['requirements']}) && (MY.{FOLDER_READY_ATTR} =?= true)"
        )
    if materialize_at_most is not None:
        template["max_materialize"] = str(int(materialize_at_most))
    items = [{macro: value[key] for key, macro in macros.items()} for value in values]
    return template, items


def description_text(description: dict[str, str]) -> str:
    """A submit description as condor_submit reads it, one command per line: what the
    reproducibility record keeps."""
    return "".join(f"{key} = {value}\n" for key, value in description.items()) + "queue\n"
