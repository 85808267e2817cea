"""The probe that runs inside a job and names the sockets (or ports) its own services listen
on, and the condor_ssh_to_job command lines built around it: a job cannot point the portal
elsewhere."""

import json
import os
import subprocess
import sys

import pytest

from condor_bridge.live import ProbeError, forward_command, parse_probe, probe_command
from condor_bridge.live_probe import probe
from tests.helpers import free_port

LISTENER = """
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
print("listening", flush=True); time.sleep(60)
"""
UNIX_LISTENER = """
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()
print("listening", flush=True); time.sleep(60)
"""


@pytest.fixture
def listening():
    started = []

    def start(where: int | str, **environment: str) -> int | str:
        program = UNIX_LISTENER if isinstance(where, str) else LISTENER
        process = subprocess.Popen(
            [sys.executable, "-c", program, str(where)],
            stdout=subprocess.PIPE,
            env={"PATH": os.environ["PATH"], **environment},
        )
        started.append(process)
        assert process.stdout.readline().startswith(b"listening")
        return where

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_a_service_of_this_job_on_its_own_port_is_found(listening):
    port = listening(
        free_port(),
        _CONDOR_SCRATCH_DIR="/scratch/ours",
        NIGHTSHIFT_LIVE_SERVICE="serve",
        NIGHTSHIFT_LIVE_PORT="0",
    )
    assert probe("/scratch/ours")["services"] == {}  # not the port it was given
    port = free_port()
    listening(
        port,
        _CONDOR_SCRATCH_DIR="/scratch/ours",
        NIGHTSHIFT_LIVE_SERVICE="serve",
        NIGHTSHIFT_LIVE_PORT=str(port),
    )
    assert probe("/scratch/ours")["services"] == {"serve": port}


@pytest.fixture
def private_folder(tmp_path):
    folder = tmp_path / "live"
    folder.mkdir(mode=0o700)
    return folder


def test_a_service_of_this_job_on_its_own_socket_in_a_private_folder_is_found(
    listening, private_folder
):
    listening(
        str(private_folder / "other.sock"),
        _CONDOR_SCRATCH_DIR="/scratch/ours",
        NIGHTSHIFT_LIVE_SERVICE="tensorboard",
        NIGHTSHIFT_LIVE_SOCKET=str(private_folder / "tensorboard.sock"),
    )
    assert probe("/scratch/ours")["services"] == {}  # not the socket it was given
    path = listening(
        str(private_folder / "notebook.sock"),
        _CONDOR_SCRATCH_DIR="/scratch/ours",
        NIGHTSHIFT_LIVE_SERVICE="notebook",
        NIGHTSHIFT_LIVE_SOCKET=str(private_folder / "notebook.sock"),
    )
    assert probe("/scratch/ours")["services"] == {"notebook": path}
    assert "notebook" not in probe("/scratch/theirs")["services"]


def test_a_socket_in_a_folder_other_accounts_may_enter_is_reported_not_used(listening, tmp_path):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o755)
    path = str(folder / "serve.sock")
    listening(
        path,
        _CONDOR_SCRATCH_DIR="/scratch/ours",
        NIGHTSHIFT_LIVE_SERVICE="serve",
        NIGHTSHIFT_LIVE_SOCKET=path,
    )
    answer = probe("/scratch/ours")
    assert answer["services"] == {}
    assert answer["problems"] == ["serve's socket is in a folder other accounts may enter"]


def test_a_served_job_on_both_its_socket_and_its_port_is_reached_by_the_socket(
    listening, private_folder
):
    port, path = free_port(), str(private_folder / "serve.sock")
    environment = {
        "_CONDOR_SCRATCH_DIR": "/scratch/ours",
        "NIGHTSHIFT_LIVE_SERVICE": "serve",
        "NIGHTSHIFT_LIVE_SOCKET": path,
        "NIGHTSHIFT_LIVE_PORT": str(port),
    }
    listening(port, **environment)
    assert probe("/scratch/ours")["services"] == {"serve": port}
    listening(path, **environment)
    assert probe("/scratch/ours")["services"] == {"serve": path}


def test_another_jobs_tensorboard_on_the_same_desktop_is_never_this_jobs(listening):
    port = free_port()
    listening(
        port,
        _CONDOR_SCRATCH_DIR="/scratch/theirs",
        NIGHTSHIFT_LIVE_SERVICE="tensorboard",
        NIGHTSHIFT_LIVE_PORT=str(port),
    )
    assert "tensorboard" not in probe("/scratch/ours")["services"]
    assert probe("/scratch/theirs")["services"] == {"tensorboard": port}


def test_a_process_that_is_no_live_service_is_ignored(listening):
    listening(free_port(), _CONDOR_SCRATCH_DIR="/scratch/ours")
    assert probe("/scratch/ours") == {"services": {}, "problems": []}


def test_a_service_on_another_port_than_its_own_is_reported_not_used(listening):
    wrong = listening(
        free_port(),
        _CONDOR_SCRATCH_DIR="/scratch/ours",
        NIGHTSHIFT_LIVE_SERVICE="serve",
        NIGHTSHIFT_LIVE_PORT="8000",
    )
    answer = probe("/scratch/ours")
    assert answer["services"] == {}
    assert answer["problems"] == [f"serve listens on port {wrong}, not its port 8000"]


def test_the_remote_command_runs_the_probe_through_a_shell_unchanged(listening):
    port = free_port()
    listening(
        port,
        _CONDOR_SCRATCH_DIR="/scratch/ours",
        NIGHTSHIFT_LIVE_SERVICE="serve",
        NIGHTSHIFT_LIVE_PORT=str(port),
    )
    remote = probe_command(["condor_ssh_to_job"], 7, 0, python=sys.executable)[-1]
    # What sshd does with the remote command: the job's shell runs it.
    out = subprocess.run(
        ["/bin/sh", "-c", remote],
        capture_output=True,
        text=True,
        check=True,
        env={"_CONDOR_SCRATCH_DIR": "/scratch/ours", "PATH": "/usr/bin:/bin"},
    )
    assert parse_probe(out.stdout) == {"serve": port}
    assert set(remote.split('"')[1]) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
    )


def test_the_probe_command_names_the_job_and_nothing_else():
    command = probe_command(["pool", "ssh-to-job"], 12, 3)
    assert command[:4] == ["pool", "ssh-to-job", "-auto-retry", "12.3"]
    assert len(command) == 5
    for bad in (
        "python3; rm -rf /",
        "/usr/bin/python3 -c x",
        "/opt/$(id)/python",
        "relative/python",
    ):
        with pytest.raises(ValueError):
            probe_command(["ssh"], 12, 3, python=bad)
    for cluster, proc in ((0, 0), (-1, 0), ("12", 0), (12, -1)):
        with pytest.raises(ValueError):
            probe_command(["ssh"], cluster, proc)


def test_a_tunnel_forwards_to_the_jobs_own_socket():
    command = forward_command(
        ["condor_ssh_to_job"], 5, 0, {"/run/live/a.sock": "/var/lib/condor/execute/dir_9/b.sock"}
    )
    ssh = command[command.index("-ssh") + 1].split()
    assert ssh[-2:] == ["-L", "/run/live/a.sock:/var/lib/condor/execute/dir_9/b.sock"]


def test_a_tunnel_only_ever_forwards_to_the_jobs_own_loopback():
    command = forward_command(["condor_ssh_to_job"], 5, 0, {"/run/live/a.sock": 41234})
    ssh = command[command.index("-ssh") + 1]
    assert ssh.split() == [
        "ssh",
        "-N",
        "-o",
        "ExitOnForwardFailure=yes",
        "-o",
        "StreamLocalBindUnlink=yes",
        "-L",
        "/run/live/a.sock:127.0.0.1:41234",
    ]
    assert command[-1] == "5.0"


@pytest.mark.parametrize(
    "socket_path, port",
    [
        ("/run/live/a.sock -R 22:evil:22", 41234),
        ("/run/live/../../etc/x.sock", 41234),
        ("relative.sock", 41234),
        ("/run/live/a.sock:evil.example", 41234),
        ("/run/live/a.sock", 22),
        ("/run/live/a.sock", 70000),
        ("/run/live/a.sock", "41234 -R 1:x:1"),
        ("/run/live/a.sock", True),
        ("/run/live/a.sock", "/job/b.sock -R 22:evil:22"),
        ("/run/live/a.sock", "/job/../../var/run/docker.sock"),
        ("/run/live/a.sock", "evil.example:22"),
        ("/run/live/a.sock", "b.sock"),
        ("/run/live/a.sock", "/" + "a" * 120),
    ],
)
def test_hostile_forwards_are_refused(socket_path, port):
    with pytest.raises(ValueError):
        forward_command(["condor_ssh_to_job"], 5, 0, {socket_path: port})


def test_the_portal_reads_only_sockets_and_ports_of_known_services_from_the_probe():
    answer = json.dumps(
        {
            "services": {
                "serve": 41234,
                "notebook": "/scratch/dir_1/.nightshift-live/notebook.sock",
                "tensorboard": "evil.example:22",
                "ssh": 2222,
                "jupyter": 8888,
            }
        }
    )
    assert parse_probe("motd from the workstation\n" + answer) == {
        "serve": 41234,
        "notebook": "/scratch/dir_1/.nightshift-live/notebook.sock",
    }
    assert parse_probe(json.dumps({"services": {"serve": "/a/../b.sock"}})) == {}
    assert parse_probe(json.dumps({"services": {"serve": 22}})) == {}
    assert parse_probe(json.dumps({"services": {"serve": True}})) == {}
    with pytest.raises(ProbeError):
        parse_probe("Permission denied (publickey)")
