"""The execute-node kit's starter shim (nightshift-starter): it gives each slot's job an account
of its own, and hands the real starter every descriptor the startd gave it, untouched.

HTCondor's own tools are stood in for by scripts on PATH, so that these tests make no account
on the machine that runs them: `id` says whether the account exists, `useradd` records what
it was asked, and the "real" starter records what it received."""

import subprocess
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "deploy" / "execute-node"
SHIM = KIT / "nightshift-starter"
CONNECTION = "the startd's connection to the shadow\n"


@pytest.fixture
def host(tmp_path):
    """A workstation's tools, stood in for; `existing` lists the accounts `id` knows."""
    bin_dir, sbin = tmp_path / "bin", tmp_path / "sbin"
    bin_dir.mkdir()
    sbin.mkdir()
    existing = tmp_path / "existing-accounts"
    existing.write_text("")
    tools = {
        bin_dir / "condor_config_val": f'[ "$1" = SBIN ] && echo {sbin} && exit 0\nexit 1\n',
        bin_dir / "id": f'grep -qx -- "$2" {existing}\n',
        bin_dir / "useradd": f'echo "$@" >> {tmp_path}/useradd.log\n',
        # What reached the real starter: descriptor 9 as it was read, and its slot's user.
        sbin / "condor_starter": (
            f"cat <&9 > {tmp_path}/descriptor-9 2>&1 || echo unreadable > {tmp_path}/descriptor-9\n"
            f'echo "$_CONDOR_NOBODY_SLOT_USER" > {tmp_path}/slot-user\n'
            f'echo "$@" > {tmp_path}/arguments\n'
        ),
    }
    for path, body in tools.items():
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return tmp_path, existing


def start_starter(folder: Path, *arguments: str) -> subprocess.CompletedProcess:
    """The shim, as the startd of ws-fermi starts it, with descriptor 9 inherited open."""
    connection = folder / "connection"
    connection.write_text(CONNECTION)
    return subprocess.run(
        ["sh", "-c", 'exec 9<"$1"; shift; exec "$@"', "startd", str(connection), str(SHIM)]
        + list(arguments),
        env={
            "PATH": f"{folder / 'bin'}:/usr/bin:/bin",
            "_CONDOR_EXECUTE": "/var/lib/condor/execute-ws-fermi",
        },
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_slots_first_job_gets_a_new_account_and_the_starter_keeps_its_descriptors(host):
    folder, _ = host
    done = start_starter(folder, "-f", "-a", "slot1_1")
    assert done.returncode == 0, done.stderr
    assert "nsjob-fermi-slot1_1" in (folder / "useradd.log").read_text()
    assert (folder / "slot-user").read_text().strip() == "nsjob-fermi-slot1_1"
    # The descriptor the shim locks with in its subshell is not the starter's.
    assert (folder / "descriptor-9").read_text() == CONNECTION
    assert (folder / "arguments").read_text().split() == ["-f", "-a", "slot1_1"]


def test_a_slot_whose_account_exists_makes_none_and_keeps_its_descriptors(host):
    folder, existing = host
    existing.write_text("nsjob-fermi-slot1_2\n")
    done = start_starter(folder, "-f", "-a", "slot1_2")
    assert done.returncode == 0, done.stderr
    assert not (folder / "useradd.log").exists()
    assert (folder / "slot-user").read_text().strip() == "nsjob-fermi-slot1_2"
    assert (folder / "descriptor-9").read_text() == CONNECTION


def test_a_slot_name_of_unexpected_characters_runs_the_starter_as_htcondor_would(host):
    folder, _ = host
    done = start_starter(folder, "-f", "-a", "slot1_1;rm")
    assert done.returncode == 0, done.stderr
    assert not (folder / "useradd.log").exists()
    assert (folder / "slot-user").read_text().strip() == ""
    assert (folder / "descriptor-9").read_text() == CONNECTION
