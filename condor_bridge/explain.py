"""Plain-language explanations of why HTCondor holds a job, and what to do about it.

Codes from HTCondor's condor_holdcodes.h; each explanation is keyed on the code (and
subcode where it matters), never on the wording of the reason, which varies by version.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class HoldExplanation:
    title: str
    advice: str
    # A request that would fit what the job reached, for a "submit again with it" button:
    # {"memory_mb": 4096} or {"disk_mb": 10240}; empty when there is nothing to suggest.
    suggested: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class HoldUsage:
    """What a held job had used when it was stopped, beside what it asked for (MB)."""

    memory_mb: int | None = None
    memory_requested_mb: int | None = None
    disk_mb: int | None = None
    disk_requested_mb: int | None = None


def request_that_fits(peak_mb: float) -> int:
    """A request with room above a measured peak: a quarter more and 256 MB, rounded up to a
    half GB, so that the next run's own variation does not stop it again."""
    return int(math.ceil((peak_mb * 1.25 + 256) / 512) * 512)


def size_text(mb: float) -> str:
    """2048 -> '2 GB', 4608 -> '4.5 GB', 700 -> '700 MB'."""
    if mb < 1024:
        return f"{mb:,.0f} MB"
    gb = mb / 1024
    return f"{gb:,.0f} GB" if abs(gb - round(gb)) < 0.05 else f"{gb:,.1f} GB"


def _exceeded(what: str, used: int | None, requested: int | None, field: str) -> HoldExplanation:
    """A job stopped for using more memory (or disk) than it asked for, with its figures."""
    remedy = "use smaller batches" if what == "memory" else "write less to the job folder"
    if not used or not requested:
        return HoldExplanation(
            f"It used more {what} than it asked for.",
            f"Submit again with more {what} (the job page shows what you asked for), or {remedy}.",
        )
    fits = max(request_that_fits(used), requested + 512)
    return HoldExplanation(
        f"It used more {what} than it asked for: {size_text(used)} at its peak, against the "
        f"{size_text(requested)} it asked for.",
        f"Submit again asking for {size_text(fits)} of {what} (its peak and a margin), or "
        f"{remedy}.",
        suggested=((field, fits),),
    )


USER_REQUEST = 1
JOB_POLICY = 3
FAILED_TO_CREATE_PROCESS = 6
UNABLE_TO_OPEN_OUTPUT = 7
UNABLE_TO_OPEN_INPUT = 8
TRANSFER_OUTPUT_ERROR = 12
TRANSFER_INPUT_ERROR = 13
IWD_ERROR = 14
SPOOLING_INPUT = 16
STARTD_HELD_JOB = 21
SYSTEM_POLICY = 26
MAX_TRANSFER_INPUT_SIZE = 32
MAX_TRANSFER_OUTPUT_SIZE = 33
JOB_OUT_OF_RESOURCES = 34
INVALID_CONTAINER_IMAGE = 35
FAILED_TO_CHECKPOINT = 36
JOB_DURATION_EXCEEDED = 46
JOB_EXECUTE_EXCEEDED = 47
SUBCODE_MEMORY = 102
SUBCODE_DISK = 104
# Nightshift's own runtime limit (periodic_hold_subcode 1 with code JOB_POLICY).
SUBCODE_NIGHTSHIFT_RUNTIME = 1
# Nightshift's guard against a job that is evicted again and again (see submit.py).
SUBCODE_NIGHTSHIFT_TOO_MANY_STARTS = 2
# The portal's hold of a job evicted again and again without saving a checkpoint
# (HoldReasonCode USER_REQUEST with this subcode; jobs/services.py).
SUBCODE_NIGHTSHIFT_NO_PROGRESS = 2

# How the dataset plugin (jobs/runtime/nightshift_data.py) begins the error it gives HTCondor.
DATASET_TRANSFER_FAILED = "Nightshift could not put a dataset in place"
_MISSING_FILE = re.compile(r"no such file or directory|does not exist|failed to send file", re.I)

_RUNTIME = HoldExplanation(
    "It ran longer than its maximum runtime.",
    "Raise the maximum runtime when you submit again, or make your script save checkpoints "
    "so that it can continue where it stopped.",
)
_BY_CODE = {
    USER_REQUEST: HoldExplanation(
        "Someone put it on hold.", "Release it when you want it to continue, or cancel it."
    ),
    FAILED_TO_CREATE_PROCESS: HoldExplanation(
        "The workstation could not start it.",
        "The Python interpreter or your environment is missing on that workstation. Choose "
        "another environment, or tell the pool's administrators.",
    ),
    UNABLE_TO_OPEN_OUTPUT: HoldExplanation(
        "It could not write its log files.",
        "This is a problem with Nightshift's job folder, not with your script: tell the "
        "administrators, then release the job.",
    ),
    UNABLE_TO_OPEN_INPUT: HoldExplanation(
        "One of its input files could not be read.",
        "Check the files you uploaded and submit again.",
    ),
    TRANSFER_INPUT_ERROR: HoldExplanation(
        "Its files could not be copied to the workstation.",
        "Usually a network or disk problem on the workstation. Release the job to try again.",
    ),
    IWD_ERROR: HoldExplanation(
        "Its job folder could not be reached.",
        "This is a problem with Nightshift's storage: tell the administrators.",
    ),
    SPOOLING_INPUT: HoldExplanation(
        "Its files are still being uploaded.", "Nothing to do: it starts once they arrive."
    ),
    STARTD_HELD_JOB: HoldExplanation(
        "The workstation stopped it for breaking the workstation's rules.",
        "Most often the job used more memory or disk than it asked for. Submit again with "
        "larger requests.",
    ),
    SYSTEM_POLICY: HoldExplanation(
        "The pool's rules stopped it.",
        "The pool's administrators limit jobs (for example how long they may run). Read "
        "HTCondor's message below, adjust the request, and submit again.",
    ),
    MAX_TRANSFER_INPUT_SIZE: HoldExplanation(
        "Its input files are larger than the pool allows.",
        "Upload less data with the job, or ask the administrators where large data sets go.",
    ),
    MAX_TRANSFER_OUTPUT_SIZE: HoldExplanation(
        "It wrote more output than the pool allows.",
        "Keep only what you need under outputs/ (for example the last checkpoint).",
    ),
    INVALID_CONTAINER_IMAGE: HoldExplanation(
        "Its container image could not be used.",
        "Choose another environment, or tell the administrators which image failed.",
    ),
    FAILED_TO_CHECKPOINT: HoldExplanation(
        "It failed while saving a checkpoint.",
        "Check that your script saves checkpoints quickly and exits cleanly, then release it.",
    ),
    JOB_DURATION_EXCEEDED: _RUNTIME,
    JOB_EXECUTE_EXCEEDED: _RUNTIME,
}


def explain_hold(
    code: int | None, subcode: int | None, reason: str, *, used: HoldUsage | None = None
) -> HoldExplanation:
    """What a student should read about a hold, from HTCondor's code, subcode and reason;
    with `used` (what the job had used), a hold for exceeding a request gives the peak it
    reached and a request that would fit."""
    used = used or HoldUsage()
    memory = _exceeded("memory", used.memory_mb, used.memory_requested_mb, "memory_mb")
    disk = _exceeded("disk", used.disk_mb, used.disk_requested_mb, "disk_mb")
    if code in (JOB_OUT_OF_RESOURCES, STARTD_HELD_JOB) and subcode == SUBCODE_MEMORY:
        return memory
    if code in (JOB_OUT_OF_RESOURCES, STARTD_HELD_JOB) and subcode == SUBCODE_DISK:
        return disk
    if code == JOB_POLICY and subcode == SUBCODE_NIGHTSHIFT_RUNTIME:
        return _RUNTIME
    if code == USER_REQUEST and subcode == SUBCODE_NIGHTSHIFT_NO_PROGRESS:
        return HoldExplanation(
            "It was evicted again and again without saving a checkpoint, so every run started "
            "from the beginning and none could finish.",
            "Make your script save checkpoints with the nightshift helper (see the job-writing "
            "guide), or ask for a GPU that more workstations have, then release it.",
        )
    if code == JOB_POLICY and subcode == SUBCODE_NIGHTSHIFT_TOO_MANY_STARTS:
        return HoldExplanation(
            "It was evicted too many times to finish: workstation owners kept coming back.",
            "Make your script save checkpoints with the nightshift helper, so that each run "
            "continues where the last one stopped, then release it. Asking for fewer or "
            "smaller GPUs also lets it run on more workstations.",
        )
    if code == JOB_OUT_OF_RESOURCES:
        return memory
    if code == TRANSFER_OUTPUT_ERROR:
        if _MISSING_FILE.search(reason or ""):
            return HoldExplanation(
                "An output file or folder it should have made is missing.",
                "Make sure your script writes its results under outputs/ and does not stop "
                "early. Its stderr log usually shows why.",
            )
        return HoldExplanation(
            "Its outputs could not be copied back.",
            "Usually a network or disk problem. Release the job to try the copy again.",
        )
    if code == TRANSFER_INPUT_ERROR and DATASET_TRANSFER_FAILED in (reason or ""):
        return HoldExplanation(
            "One of its datasets could not be brought to the workstation.",
            "The portal's reason is in HTCondor's message below. A dataset that has been "
            "deleted, or that you may no longer use, cannot be fetched: submit again without "
            "it. Otherwise release the job to try again.",
        )
    if code == JOB_POLICY:
        return HoldExplanation(
            "One of its own limits stopped it.",
            "Read HTCondor's message below, change the request and submit again.",
        )
    return _BY_CODE.get(
        code or 0,
        HoldExplanation(
            "HTCondor put it on hold.",
            "Read HTCondor's message below. Release the job to try again, or cancel it.",
        ),
    )
