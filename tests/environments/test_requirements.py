"""Only package requirements are accepted: what reaches beyond the index is refused with the
line and the reason, unless the site allows that kind; hostile and huge input is refused."""

import pytest

from environments.locking import LockError, explain_failure, lock_resolve
from environments.requirements import RequirementsError, requirements_check


@pytest.mark.parametrize(
    "text",
    [
        "numpy>=1.26\npandas==2.2.*  # data frames\n",
        "torch ; sys_platform == 'linux'\n",
        "scikit-learn[alldeps]>=1.4 \\\n  --hash=sha256:abc\n",
        "# only a comment\nsix\n",
    ],
)
def test_package_requirements_are_accepted(text):
    assert requirements_check(text).lockable


@pytest.mark.parametrize(
    "line, kind",
    [
        ("--index-url https://evil.example/simple", "index"),
        ("-i https://evil.example/simple", "index"),
        ("--extra-index-url https://evil.example/simple", "index"),
        ("--trusted-host evil.example", "index"),
        ("--find-links https://evil.example/wheels", "index"),
        ("-f ./wheels", "index"),
        ("numpy @ https://evil.example/numpy.whl", "index"),
        ("-e git+https://github.com/x/y.git#egg=y", "vcs"),
        ("git+https://github.com/x/y.git", "vcs"),
        ("y @ git+https://github.com/x/y.git", "vcs"),
        ("-e ./src", "local"),
        ("./wheels/tinypkg-0.1-py3-none-any.whl", "local"),
        ("/etc/passwd", "local"),
        ("file:///etc/passwd", "local"),
        ("y @ file:///tmp/y", "local"),
        ("../outside.tar.gz", "local"),
    ],
)
def test_what_reaches_beyond_the_index_is_refused_unless_the_site_allows_it(line, kind):
    with pytest.raises(RequirementsError) as refused:
        requirements_check(f"numpy\n{line}\n")
    assert str(refused.value).startswith("Line 2: ")
    assert f"NIGHTSHIFT_REQUIREMENTS_ALLOW={kind}" in str(refused.value)
    allowed = requirements_check(f"numpy\n{line}\n", allowed=frozenset({kind}))
    assert not allowed.lockable  # installed per job, never locked


@pytest.mark.parametrize(
    "text, message",
    [
        ("-r other.txt\n", "names another file"),
        ("--pre\n", "the option --pre is not accepted"),
        ("numpy; rm -rf /\n", "is not a package requirement"),
        ("$(reboot)\n", "is not a package requirement"),
        ("numpy\x00\n", "not a text file"),
        ("numpy\x1b[2J\n", "control characters"),
        ("", "list no package"),
        ("x" * 70_000, "larger than 64 KB"),
        ("six\n" * 501, "At most 500 requirements"),
    ],
)
def test_hostile_or_huge_requirements_are_refused_with_the_reason(text, message):
    with pytest.raises(RequirementsError, match=message):
        requirements_check(text)


# uv's own reports, as it printed them (uv 0.13, --no-build), and what the student reads.
@pytest.mark.parametrize(
    "report, explained",
    [
        (
            "error: No solution found when resolving dependencies\n  cause: Because nightshift-no-"
            "such-pkg was not found in the package registry and you require nightshift-no-such-pkg"
            "==1.0, we can conclude that your requirements are unsatisfiable.",
            "No package called nightshift-no-such-pkg exists on the package index",
        ),
        (
            "  cause: Because there is no version of numpy==99.0 and you require numpy==99.0, "
            "we can conclude that your requirements are unsatisfiable.",
            "No version of numpy==99.0 matches what you asked for",
        ),
        (
            "  cause: Because numpy==2.4.6 has no usable wheels and you require numpy==2.4.6, "
            "we can conclude that your requirements are unsatisfiable.\n\nhint: Wheels are "
            "required for "
            "`numpy` because building from source is disabled",
            "numpy==2.4.6 has no ready-built package for Python 3.9 on Linux",
        ),
        (
            "  × Failed to build `pyyaml==5.3`\n  error: command 'gcc' failed: No such file",
            "has to be compiled from source, and building it failed: it needs a compiler",
        ),
        (
            "error: Failed to fetch: `https://pypi.org/simple/numpy/`\n  Caused by: dns error",
            "The package index could not be reached from the portal",
        ),
    ],
)
def test_a_failure_is_explained_in_plain_words(report, explained):
    assert explained in explain_failure(report, python_version="3.9")


def test_a_lock_pins_every_package_with_its_hashes():
    lock = lock_resolve(requirements_check("tomli-w==1.2.0\n"), python_version="3.11")
    assert lock.packages == (("tomli-w", "1.2.0"),)
    assert "--hash=sha256:" in lock.text
    assert "requirements.in" not in lock.text  # no temporary path in what is shown


def test_a_package_that_does_not_exist_is_explained_before_any_job_runs():
    with pytest.raises(LockError) as failed:
        lock_resolve(
            requirements_check("nightshift-no-such-package-xyz==1.0\n"), python_version="3.11"
        )
    assert "No package called nightshift-no-such-package-xyz exists" in failed.value.explanation
    assert "not found in the package registry" in failed.value.output
