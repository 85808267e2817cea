"""nightshift env: make, list, show, extend, use, test-build and delete environments."""

import pytest

from environments.models import Environment, EnvironmentBuild
from jobs.models import Job


@pytest.fixture
def requirements(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_text("tomli-w==1.2.0\n")
    return path


def test_a_student_makes_an_environment_and_a_job_uses_it(
    nightshift, logged_in, tmp_path, requirements, fake_bridge
):
    done = nightshift("env", "create", "tomli", "-r", str(requirements), "--description", "TOML")
    assert done.status == 0, done.stderr
    assert "Created tomli@1: 1 packages for Python 3.13" in done.stdout
    listing = nightshift("env", "list")
    assert "tomli" in listing.stdout and "tomli@1" in listing.stdout
    shown = nightshift("env", "show", "tomli")
    assert "tomli-w==1.2.0" in shown.stdout
    lock = nightshift("env", "show", "tomli@1", "--lock")
    assert lock.stdout == Environment.objects.get(name="tomli").versions.get().lock

    (tmp_path / "train.py").write_text("import tomli_w\n")
    submitted = nightshift("submit", "train.py", "--gpus", "0", "--environment", "tomli@1")
    assert submitted.status == 0, submitted.stderr
    assert Job.objects.get().source["environment"]["reference"] == "tomli@1"


def test_versions_are_added_and_test_built(nightshift, logged_in, requirements, fake_bridge):
    nightshift("env", "create", "tomli", "-r", str(requirements))
    requirements.write_text("tomli-w==1.1.0\n")
    added = nightshift("env", "add-version", "tomli", "-r", str(requirements))
    assert added.status == 0, added.stderr
    assert "Locked tomli@2" in added.stdout
    built = nightshift("env", "build", "tomli")
    assert built.status == 0, built.stderr
    build = EnvironmentBuild.objects.get()
    assert build.version.number == 2
    assert f"submitted as job {build.job.public_id}" in built.stdout


def test_a_refused_requirement_says_why_and_exits_2(nightshift, logged_in, requirements):
    requirements.write_text("git+https://github.com/x/y.git\n")
    done = nightshift("env", "create", "vcs", "-r", str(requirements))
    assert done.status == 2
    assert "a version-control URL is not accepted here" in done.stderr


def test_an_environment_is_deleted(nightshift, logged_in, requirements):
    nightshift("env", "create", "tomli", "-r", str(requirements))
    done = nightshift("env", "delete", "tomli", "--yes")
    assert done.status == 0, done.stderr
    assert not Environment.objects.filter(name="tomli").exists()
    missing = nightshift("env", "show", "tomli")
    assert missing.status == 1 and "No environment called 'tomli'" in missing.stderr
