"""`manage.py condor_doctor` against the personal pool: healthy, then each way of breaking the
connection gives its own diagnosis and fix, and a non-zero exit."""

import shutil
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

# The doctor also reads the portal's database (its idle jobs, for the matching check).
pytestmark = [pytest.mark.condor, pytest.mark.django_db]

BAD_TOKEN = (  # well formed, names the portal, signed by nobody this pool trusts
    "eyJhbGciOiJIUzI1NiIsImtpZCI6IlBPT0wifQ."
    "eyJpYXQiOjE3MDAwMDAwMDAsImlzcyI6InZtIiwic3ViIjoicG9ydGFsQHZtIn0."
    "c2lnbmF0dXJlLW5vdC12YWxpZA"
)


def doctor() -> tuple[str, str | None]:
    """What it printed, and its error (None when everything passed)."""
    out = StringIO()
    try:
        call_command("condor_doctor", stdout=out)
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), None


def line(said: str, check: str) -> str:
    found = [text for text in said.splitlines() if text[7:].startswith(check + " ")]
    assert found, f"no {check} line in:\n{said}"
    return found[0]


def fix_after(said: str, check: str) -> str:
    lines = said.splitlines()
    at = lines.index(line(said, check))
    return lines[at + 1] if at + 1 < len(lines) and "fix:" in lines[at + 1] else ""


def test_a_healthy_pool_passes_every_check(pool_is_up):
    said, error = doctor()
    assert error is None, said
    for check in (
        "jobs folder",
        "token",
        "collector",
        "schedd",
        "authentication",
        "authorization",
        "submit",
        "clock",
        "gpus",
        "negotiator",
        "matching",
    ):
        assert line(said, check).startswith("[ok  ]"), said
    assert "cycles every" in line(said, "negotiator")
    assert "portal@" in line(said, "authentication")
    assert "submitted and removed" in line(said, "submit")
    assert " GPUs on " in line(said, "gpus")
    assert said.rstrip().endswith("The portal can use this pool.")


def test_a_token_the_pool_did_not_sign_is_named(pool_is_up, settings, tmp_path):
    (tmp_path / "portal.token").write_text(BAD_TOKEN)
    (tmp_path / "portal.token").chmod(0o600)
    settings.CONDOR_TOKEN_DIR = tmp_path
    said, error = doctor()
    assert error == "1 check failed: authentication."
    assert line(said, "token").startswith("[ok  ]")  # it looks like a token
    assert "did not accept the portal's token" in line(said, "authentication")
    assert "condor_token_create" in fix_after(said, "authentication")
    assert "submit" not in said.split("authentication", 1)[1]


def test_a_token_others_can_read_is_named_as_ignored(pool_is_up, settings, tmp_path):
    shutil.copy(settings.CONDOR_TOKEN_DIR / "portal.token", tmp_path / "portal.token")
    (tmp_path / "portal.token").chmod(0o644)
    settings.CONDOR_TOKEN_DIR = tmp_path
    said, error = doctor()
    assert error is not None and "token" in error
    assert "readable by others (mode 644)" in line(said, "token")
    assert "chmod 600" in fix_after(said, "token")


def test_no_token_at_all_says_how_to_make_one(pool_is_up, settings, tmp_path):
    settings.CONDOR_TOKEN_DIR = tmp_path / "missing"
    said, error = doctor()
    assert "does not exist" in line(said, "token")
    assert "condor_token_create -identity" in fix_after(said, "token")
    assert error == "2 checks failed: token, authentication."


def test_a_stopped_schedd_is_named(pool_is_up, schedd_stopped):
    stop, start = schedd_stopped
    stop()
    said, error = doctor()
    assert error == "1 check failed: schedd."
    assert line(said, "collector").startswith("[ok  ]")
    assert "knows no schedd" in line(said, "schedd")
    assert "condor_on -daemon schedd" in fix_after(said, "schedd")


def test_an_unreachable_collector_is_named(pool_is_up, settings):
    settings.CONDOR_COLLECTOR = "127.0.0.1:9"
    said, error = doctor()
    assert error == "1 check failed: collector."
    assert "does not answer" in line(said, "collector")
    assert "CONDOR_COLLECTOR" in fix_after(said, "collector")


def test_the_portal_keeps_its_own_token_after_the_doctor_tried_another(
    pool_is_up, settings, tmp_path
):
    import htcondor2

    (tmp_path / "portal.token").write_text(BAD_TOKEN)
    (tmp_path / "portal.token").chmod(0o600)
    real_dir = settings.CONDOR_TOKEN_DIR
    settings.CONDOR_TOKEN_DIR = tmp_path
    doctor()
    settings.CONDOR_TOKEN_DIR = real_dir
    # The bridge relies on the process's HTCondor configuration: a write still authenticates.
    collector = htcondor2.Collector(settings.CONDOR_COLLECTOR)
    schedd = htcondor2.Schedd(collector.locate(htcondor2.DaemonType.Schedd))
    probe = htcondor2.Submit({"executable": "/bin/true", "hold": "true"})
    try:
        held = schedd.submit(probe)
    except htcondor2.HTCondorException as exc:
        # After the earlier test's schedd restart, the first call renews a stale session.
        assert "rejected our session id" in str(exc)
        held = schedd.submit(probe)
    schedd.act(htcondor2.JobAction.Remove, str(held.cluster()))


def limited_token(folder, *authz: str) -> None:
    from tests.helpers import pool_command

    folder.mkdir(exist_ok=True)
    limits = [arg for level in authz for arg in ("-authz", level)]
    made = pool_command("condor_token_create", "-identity", "portal@vm", *limits)
    (folder / "portal.token").write_text(made.stdout)
    (folder / "portal.token").chmod(0o600)


def test_read_and_write_are_all_the_authorization_the_portal_needs(pool_is_up, settings, tmp_path):
    limited_token(tmp_path / "rw", "READ", "WRITE")
    settings.CONDOR_TOKEN_DIR = tmp_path / "rw"
    said, error = doctor()
    assert error is None, said
    assert "limited to condor:/READ condor:/WRITE" in line(said, "token")


def test_a_read_only_token_is_named_at_authorization(pool_is_up, settings, tmp_path):
    limited_token(tmp_path / "ro", "READ")
    settings.CONDOR_TOKEN_DIR = tmp_path / "ro"
    said, error = doctor()
    assert error == "1 check failed: authorization."
    assert line(said, "authentication").startswith("[ok  ]")
    assert "may read the queue but not submit" in line(said, "authorization")
    assert "ALLOW_WRITE" in fix_after(said, "authorization")
