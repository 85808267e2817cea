"""The code keeps the shape docs/architecture.md describes: apps in one-way layers with no
import loops (import-linter's contracts in pyproject.toml), no module reaching into another's
underscore names, and modules short enough to read."""

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).with_name("lint-imports"))
# Every package import-linter reads: the apps, portal, plumbing, the bridge and the CLI.
PACKAGES = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"][
    "root_packages"
]
MAX_LINES = 600


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


def python_files(*roots: str, migrations: bool = False):
    for root in roots:
        for path in sorted((REPO / root).rglob("*.py")):
            if migrations or "migrations" not in path.parts:
                yield path


# Suites of the whole portal, not of one package (docs/architecture.md), and what tests share.
WHOLE_PORTAL_SUITES = {"security", "faults", "scale", "bench"}
SHARED = {"kits", "fixtures", "workloads"}


def test_the_tests_mirror_the_packages_with_whole_portal_suites_beside_them():
    folders = {path.name for path in (REPO / "tests").iterdir() if path.is_dir()} - {"__pycache__"}
    assert folders - WHOLE_PORTAL_SUITES - SHARED == set(PACKAGES), (
        "a test folder that is no package's (or a package without tests)"
    )
    loose = sorted(path.name for path in (REPO / "tests").glob("test_*.py"))
    assert loose == ["test_architecture.py"], loose


def test_the_import_contracts_hold():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.fixture
def copy_of_the_code(tmp_path):
    """The project's packages and its import-linter settings, to break on purpose."""
    for package in PACKAGES:
        shutil.copytree(
            REPO / package,
            tmp_path / package,
            ignore=shutil.ignore_patterns("__pycache__", "*.html", "*.js"),
        )
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    return tmp_path


def test_every_package_the_contracts_read_is_one_the_install_ships():
    """A new app missing from setuptools' list imports here, from the checkout, and then
    fails in every process started from the installed package (a Celery worker)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    shipped = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(set(PACKAGES) - {name.rstrip("*") for name in shipped}) == []


def test_every_app_offers_only_its_interface_to_the_others():
    """A new app left out of the interfaces contract could be reached into unseen."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    (interfaces,) = [contract for contract in contracts if contract["type"] == "interfaces"]
    libraries = {"portal", "plumbing", "condor_bridge", "nightshift_cli"}
    assert sorted(interfaces["apps"]) == sorted(set(PACKAGES) - libraries)


@pytest.mark.parametrize(
    ("module", "line", "complaint"),
    [
        (
            "jobs/timeline.py",
            "from experiments import sweeps",
            "jobs is not allowed to import experiments",
        ),
        (
            "labs/models.py",
            "from accounting.quotas import quota_check",
            "labs is not allowed to import accounting",
        ),
        ("jobs/forms.py", "from jobs import views", "No cycles are allowed in jobs"),
        (
            "condor_bridge/states.py",
            "import django.conf",
            "condor_bridge imports no Django and nothing of the project BROKEN",
        ),
        (
            "jobs/sync.py",
            "import htcondor2",
            "Only condor_bridge imports HTCondor's bindings BROKEN",
        ),
        ("portal/settings.py", "import jobs.models", "The settings import no app BROKEN"),
        (
            "nightshift_cli/client.py",
            "import plumbing.api",
            "The CLI is a client of the API: it imports nothing of the portal BROKEN",
        ),
        (
            "usage/views.py",
            "from jobs.staging import stage_files",
            "usage.views imports jobs.staging",
        ),
        (
            "jobs/runtime/launch.py",
            "from django.conf import settings",
            "What runs on the workstations is the standard library",
        ),
    ],
)
def test_a_deliberate_violation_breaks_its_contract(copy_of_the_code, module, line, complaint):
    target = copy_of_the_code / module
    target.write_text(target.read_text() + f"\n{line}  # the violation\n")
    result = lint_imports(copy_of_the_code)
    assert result.returncode != 0
    assert complaint in result.stdout, result.stdout


def project_module_of(path: Path) -> str:
    relative = path.relative_to(REPO).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(parts)


def imported_module(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, node.module] if node.module else base)


def underscore_imports(path: Path) -> list[str]:
    """`from other import _name`, and `other._name` where `other` is a project module
    this file imported, for any module other than the file itself."""
    importer = project_module_of(path)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text())
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = imported_module(node, importer, is_package)
            if source.split(".")[0] not in PACKAGES or source == importer:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {source} import {alias.name}")
                modules[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and node.attr != "_meta"  # Django's documented model API
        ):
            found.append(f"line {node.lineno}: {modules[node.value.id]}.{node.attr}")
    return found


def test_no_module_imports_another_modules_underscore_names():
    offenders = {
        str(path.relative_to(REPO)): found
        for path in python_files(*PACKAGES, "tests", "bench")
        if (found := underscore_imports(path))
    }
    assert offenders == {}


def test_the_underscore_check_sees_both_ways_in(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    (tmp_path / "jobs").mkdir()
    module = tmp_path / "jobs" / "reach.py"
    module.write_text("from jobs.sync import _describe\nfrom jobs import sync\nsync._outcome()\n")
    assert underscore_imports(module) == [
        "line 1: from jobs.sync import _describe",
        "line 3: jobs.sync._outcome",
    ]


def test_no_module_is_longer_than_about_600_lines_unless_it_is_declarations():
    too_long = {}
    for path in python_files(*PACKAGES):
        lines = len(path.read_text().splitlines())
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        if lines > MAX_LINES and not docstring.startswith("Declarations"):
            too_long[str(path.relative_to(REPO))] = lines
    assert too_long == {}


def test_the_formatter_owns_the_layout():
    """No line is kept out of `ruff format` to squeeze a module under the length limit: a
    module that grows past it is split instead. (A table laid out as a grid may turn the
    formatter off around itself.)"""
    held_back = [
        f"{path.relative_to(REPO)}:{number}"
        for path in python_files(*PACKAGES, "tests", "bench", "deploy", migrations=True)
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if line.rstrip().endswith("# fmt: " + "skip")
    ]
    assert held_back == []


def test_every_registration_in_an_apps_ready_is_in_the_extension_point_table():
    """docs/architecture.md lists each interface a higher app hands its part to, with the app
    that does: a new registration without its row fails here."""
    table = [
        line
        for line in (REPO / "docs" / "architecture.md").read_text().splitlines()
        if line.startswith("| `") and "_register(" in line
    ]
    missing = []
    for app in PACKAGES:
        ready = REPO / app / "apps.py"
        if not ready.exists():
            continue
        for node in ast.walk(ast.parse(ready.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                name = node.func.id
                if name.endswith("_register") and not any(
                    f"{name}(" in row and app in row.split("|")[2].replace(",", " ").split()
                    for row in table
                ):
                    missing.append(f"{app}: {name}")
    assert missing == []
