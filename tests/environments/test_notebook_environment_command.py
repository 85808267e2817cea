"""manage.py notebook_environment: the site's environment for notebook sessions, made once
(JupyterLab and a scientific stack, locked against the real package index), by make run
and a production install."""

import io

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEntry
from environments.models import Environment, EnvironmentVersion

pytestmark = pytest.mark.django_db


def run() -> str:
    out = io.StringIO()
    call_command("notebook_environment", stdout=out)
    return out.getvalue()


def test_it_is_made_once_with_jupyterlab_locked_and_then_left_alone(settings):
    settings.NOTEBOOK_REQUIREMENTS = "jupyterlab\nnumpy"
    said = run()
    environment = Environment.objects.get(name="Notebook")
    version = environment.versions.get()
    assert (environment.visibility, environment.owner) == ("site", None)
    assert "jupyterlab==" in version.lock and "numpy==" in version.lock
    assert f"notebooks: Notebook@1 ({version.package_count} packages), made now" in said
    entry = AuditEntry.objects.get(action="environment.create")
    assert entry.actor is None and "notebook environment" in entry.detail
    assert "already there" in run()
    assert environment.versions.count() == 1


def test_a_site_notebook_environment_without_jupyterlab_gets_a_version_with_it(settings):
    old = Environment.objects.create(name="Notebook", visibility="site", is_active=False)
    EnvironmentVersion.objects.create(
        environment=old, number=1, requirements="six", python_version="3.13", lock="six==1.0\n"
    )
    settings.NOTEBOOK_REQUIREMENTS = "jupyterlab"
    assert "Notebook@2" in run()
    old.refresh_from_db()
    assert old.is_active and "jupyterlab==" in old.versions.first().lock


def test_requirements_the_index_cannot_satisfy_stop_it_with_the_reason(settings):
    settings.NOTEBOOK_REQUIREMENTS = "jupyterlab\nnightshift-no-such-package"
    with pytest.raises(CommandError) as failed:
        run()
    assert "could not be made" in str(failed.value)
    assert "nightshift-no-such-package" in str(failed.value)
    assert not Environment.objects.filter(name="Notebook").exists()


def test_requirements_without_jupyterlab_are_refused(settings):
    settings.NOTEBOOK_REQUIREMENTS = "numpy\npandas"
    with pytest.raises(CommandError) as failed:
        run()
    assert "must include jupyterlab" in str(failed.value)
