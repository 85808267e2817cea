"""The execute node's owner-GPU probe, run as the startd runs it, with a stand-in nvidia-smi.

The stand-in prints the PIDs a real `nvidia-smi --query-compute-apps=pid` would: real
processes started here, some under a process named condor_starter (an HTCondor job), some
not (the owner's programs).
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[2] / "deploy" / "execute-node" / "owner-gpu-probe"


def probe(tmp_path: Path, *, override: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    args = [sys.executable, str(PROBE), "--override", str(override or tmp_path / "no-override")]
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=30, check=True)
    return dict(line.split(" = ", 1) for line in result.stdout.splitlines())


@pytest.fixture
def gpu_users(tmp_path):
    """Processes that hold "the GPU": what the stand-in nvidia-smi lists."""
    (tmp_path / "bin").mkdir()
    listed = tmp_path / "gpu-pids"
    listed.write_text("")
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\ncat {listed}\n")
    smi.chmod(0o755)
    # A script's process is named after its file: this one is what HTCondor's starter looks like.
    starter = tmp_path / "condor_starter"
    starter.write_text("#!/bin/sh\nsleep 60 &\necho $!\nwait\n")
    starter.chmod(0o755)
    started = []

    class GpuUsers:
        def owner_program(self) -> int:
            process = subprocess.Popen(["sleep", "60"])
            started.append(process)
            return process.pid

        def htcondor_job(self) -> int:
            process = subprocess.Popen([str(starter)], stdout=subprocess.PIPE, text=True)
            started.append(process)
            return int(process.stdout.readline())

        def listed(self, *pids: int | str) -> None:
            listed.write_text("".join(f"{pid}\n" for pid in pids))

    yield GpuUsers()
    for process in started:
        process.kill()
        process.wait()


def test_an_owner_program_on_the_gpu_means_the_owner_is_back(tmp_path, gpu_users):
    gpu_users.listed(gpu_users.owner_program())
    ad = probe(tmp_path)
    assert ad == {
        "OwnerGpuActive": "True",
        "OwnerGpuProcesses": "1",
        "OwnerGpuSource": '"nvidia-smi"',
    }


def test_htcondor_jobs_on_the_gpu_are_not_the_owner(tmp_path, gpu_users):
    gpu_users.listed(gpu_users.htcondor_job(), gpu_users.htcondor_job())
    ad = probe(tmp_path)
    assert (ad["OwnerGpuActive"], ad["OwnerGpuProcesses"]) == ("False", "0")


def test_only_the_owners_processes_are_counted_beside_a_job(tmp_path, gpu_users):
    gpu_users.listed(gpu_users.htcondor_job(), gpu_users.owner_program(), gpu_users.owner_program())
    ad = probe(tmp_path)
    assert (ad["OwnerGpuActive"], ad["OwnerGpuProcesses"]) == ("True", "2")


def test_an_idle_gpu_is_free(tmp_path, gpu_users):
    gpu_users.listed()
    assert probe(tmp_path)["OwnerGpuActive"] == "False"


def test_lines_that_are_not_pids_are_ignored(tmp_path, gpu_users):
    gpu_users.listed("No running processes found", "[Not Supported]")
    assert probe(tmp_path)["OwnerGpuActive"] == "False"


def test_the_override_file_decides_before_nvidia_smi(tmp_path, gpu_users):
    gpu_users.listed(gpu_users.owner_program())
    override = tmp_path / "owner"
    override.write_text("away\n")
    assert probe(tmp_path, override=override)["OwnerGpuSource"] == '"override"'
    assert probe(tmp_path, override=override)["OwnerGpuActive"] == "False"
    override.write_text("active\n")
    assert probe(tmp_path, override=override)["OwnerGpuActive"] == "True"


def test_without_nvidia_smi_the_keyboard_policy_alone_applies(tmp_path):
    (tmp_path / "bin").mkdir()
    ad = probe(tmp_path)
    assert ad == {"OwnerGpuActive": "False", "OwnerGpuProcesses": "0", "OwnerGpuSource": '"none"'}


def test_a_failing_nvidia_smi_is_reported_as_no_source(tmp_path):
    (tmp_path / "bin").mkdir()
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(
        textwrap.dedent("""\
        #!/bin/sh
        echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" >&2
        exit 9
        """)
    )
    smi.chmod(0o755)
    assert probe(tmp_path)["OwnerGpuSource"] == '"none"'


def test_kept_running_it_reports_every_period_and_follows_the_override(tmp_path, gpu_users):
    """As the kit runs it (--every, the startd's WaitForExit mode): one process, an ad ended
    by a "-" line each period, read afresh each time."""
    gpu_users.listed()
    override = tmp_path / "owner"
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    args = [sys.executable, str(PROBE), "--override", str(override), "--every", "0.2"]
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)

    def next_ad() -> dict[str, str]:
        ad = {}
        while (line := process.stdout.readline().rstrip("\n")) != "-":
            assert line, "the probe stopped reporting"
            name, value = line.split(" = ", 1)
            ad[name] = value
        return ad

    try:
        assert next_ad()["OwnerGpuSource"] == '"nvidia-smi"'
        override.write_text("active\n")
        # Ads printed before the file was written may still wait in the pipe, however long
        # this process was held up; the probe's next ones, 0.2 s apart, must say "override".
        seen = next_ad()
        for _ in range(50):
            if seen["OwnerGpuSource"] == '"override"':
                break
            seen = next_ad()
        assert seen == {
            "OwnerGpuActive": "True",
            "OwnerGpuProcesses": "1",
            "OwnerGpuSource": '"override"',
        }
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()
