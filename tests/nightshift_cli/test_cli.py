"""The `nightshift` console script against a live server (with the in-memory pool)."""

import json

import pytest

from environments.models import Environment
from jobs.models import Job
from nightshift_cli.client import ApiError, safe_destination

from .conftest import mode_of

pytestmark = pytest.mark.usefixtures("fake_bridge")


def test_login_with_a_password_saves_a_token_only_its_owner_can_read(
    nightshift, live_server, django_user_model, tmp_path
):
    django_user_model.objects.create_user("grace", password="a-long-test-password")
    done = nightshift(
        "--server", live_server.url, "login", "--username", "grace", input="a-long-test-password\n"
    )
    assert done.status == 0, done.stderr
    assert f"Logged in to {live_server.url} as grace" in done.stdout
    config = tmp_path / "config" / "nightshift" / "config.json"
    assert mode_of(config) == 0o600
    assert mode_of(config.parent) == 0o700
    assert json.loads(config.read_text())["server"] == live_server.url
    whoami = nightshift("whoami", NIGHTSHIFT_URL=live_server.url)
    assert whoami.status == 0, whoami.stderr
    assert whoami.stdout.startswith("grace on")


def test_login_with_a_pasted_token_and_logout_revokes_it(nightshift, logged_in, cli_env):
    secret = cli_env.pop("NIGHTSHIFT_TOKEN")
    assert nightshift("login", "--with-token", input=secret + "\n").status == 0
    done = nightshift("logout")
    assert done.status == 0
    assert "Logged out" in done.stdout
    assert logged_in.access_tokens.get().status == "revoked"
    assert "Not logged in" in nightshift("list").stderr


def test_a_wrong_password_is_the_servers_message_not_a_traceback(nightshift, live_server, db):
    done = nightshift("--server", live_server.url, "login", "--username", "nobody", input="wrong\n")
    assert done.status == 1
    assert "The username or password is not right." in done.stderr
    assert "Traceback" not in done.stderr


def test_submit_list_status_and_json(nightshift, logged_in, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    done = nightshift(
        "submit",
        "train.py",
        "--gpus",
        "0",
        "--arg",
        "--epochs=5",
        "--arg",
        "-v",
        "--env",
        "WANDB_MODE=offline",
        "--name",
        "first try [/]",
    )
    assert done.status == 0, done.stderr
    job = Job.objects.get()
    assert job.request["arguments"] == ["--epochs=5", "-v"]
    assert job.request["environment"] == [["WANDB_MODE", "offline"]]
    assert "Submitted “first try [/]”" in done.stderr  # names are never read as markup
    listing = nightshift("list")
    assert str(job.public_id)[:8] in listing.stdout
    assert "first try [/]" in listing.stdout
    status = nightshift("status", str(job.public_id)[:8])
    job.refresh_from_db()
    assert f"first try [/] ({job.public_id})" in status.stdout
    assert job.get_state_display() in status.stdout
    as_json = json.loads(nightshift("list", "--json").stdout)
    assert as_json[0]["id"] == str(job.public_id)


def test_submit_asks_for_live_services(nightshift, logged_in, tmp_path):
    (tmp_path / "serve.py").write_text("print('hi')\n")
    done = nightshift(
        "submit", "serve.py", "--gpus", "0", "--live", "tensorboard", "--live", "serve"
    )
    assert done.status == 0, done.stderr
    assert Job.objects.get().live_services == ("tensorboard", "serve")
    refused = nightshift("submit", "serve.py", "--gpus", "0", "--live", "ssh")
    assert refused.status == 2 and "'ssh' is not one of" in refused.stderr


def test_submit_with_a_deadline_and_a_clear_refusal_of_a_past_one(nightshift, logged_in, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    done = nightshift(
        "submit",
        "train.py",
        "--gpus",
        "0",
        "--max-runtime",
        "60",
        "--finish-by",
        "2099-12-04T17:00+00:00",
    )
    assert done.status == 0, done.stderr
    assert Job.objects.get().request["finish_by_s"] == 4_100_086_800
    refused = nightshift("submit", "train.py", "--gpus", "0", "--finish-by", "2020-01-02T00:00Z")
    assert refused.status == 2  # a usage error: the option's value
    assert "Choose a time to finish by that is still to come." in refused.stderr


def test_a_project_folder_is_archived_without_its_caches(nightshift, logged_in, tmp_path):
    project = tmp_path / "proj"
    (project / "data").mkdir(parents=True)
    (project / "train.py").write_text("print('hi')\n")
    (project / "data" / "x.csv").write_text("1\n")
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref")
    (project / "__pycache__").mkdir()
    (project / "link").symlink_to("/etc/passwd")
    done = nightshift("submit", "proj", "--gpus", "0")
    assert done.status == 0, done.stderr
    job = Job.objects.get()
    assert sorted(job.request["input_files"]) == ["data", "train.py"]
    assert job.source["entry_command"] == "python train.py"
    assert "Left out 1 symbolic link" in done.stderr


def test_server_validation_errors_name_the_field_and_exit_2(nightshift, logged_in, tmp_path):
    (tmp_path / "train.py").write_text("print('hi')\n")
    done = nightshift("submit", "train.py", "--gpus", "99")
    assert done.status == 2
    assert "gpus" in done.stderr and "less than or equal to 8" in done.stderr
    assert "Traceback" not in done.stderr
    assert not Job.objects.exists()


def test_an_unreachable_server_is_said_plainly(nightshift, db):
    done = nightshift("list", NIGHTSHIFT_URL="http://127.0.0.1:9", NIGHTSHIFT_TOKEN="nst_x")
    assert done.status == 1
    assert "Cannot reach Nightshift at http://127.0.0.1:9" in done.stderr


def test_a_bad_token_says_how_to_sign_in_again(nightshift, logged_in):
    done = nightshift("list", NIGHTSHIFT_TOKEN="nst_wrong")
    assert done.status == 1
    assert "That token is not valid" in done.stderr
    assert "nightshift login" in done.stderr


def test_another_users_job_is_not_found(nightshift, logged_in, other_student, fake_bridge):
    from jobs import specs, submission
    from tests.conftest import script_upload

    theirs = submission.job_submit(
        user=other_student, spec=specs.JobSpec(name="theirs"), script=script_upload()
    )
    for command in ("status", "logs", "download", "cancel"):
        done = nightshift(command, str(theirs.public_id))
        assert done.status == 1, command
        assert "No such job" in done.stderr


def test_the_pool_is_a_table_of_workstations(nightshift, logged_in):
    site = Environment.objects.create(name="PyTorch [cuda]", visibility="site", is_default=True)
    site.versions.create(number=1)
    done = nightshift("pool")
    assert done.status == 0, done.stderr
    assert "ws-ampere" in done.stdout
    assert "Software environments: PyTorch [cuda]@1 (default)" in done.stdout


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "a/../../x", "", "./.."])
def test_downloads_never_write_outside_the_target_folder(tmp_path, path):
    with pytest.raises(ApiError):
        safe_destination(tmp_path, path)


def test_a_plain_output_path_lands_under_the_target(tmp_path):
    assert safe_destination(tmp_path, "outputs/model.pt") == tmp_path / "outputs" / "model.pt"


def test_the_cli_never_imports_django(nightshift):
    import subprocess
    import sys

    probe = (
        "import sys, nightshift_cli.main; print(any(m.startswith('django') for m in sys.modules))"
    )
    assert (
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True
        ).stdout.strip()
        == "False"
    )
