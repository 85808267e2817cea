"""The Kubernetes kit (deploy/production/kubernetes): no cluster runs here, so every manifest
is validated against the Kubernetes API's own schemas, and the kit is held to what the
image and the compose file already promise."""

import copy
import os
import secrets
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "deploy" / "production" / "kubernetes"
COMPOSE = ROOT / "deploy" / "production" / "container" / "compose.yaml"
# The oldest release still maintained upstream when the kit was written, and the newest the
# schemas know: a field either one lacks fails here.
VERSIONS = ("1.32", kubernetes_validate.latest_version())


def documents() -> list[dict]:
    docs = []
    for path in sorted(KIT.glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def deployments() -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in documents() if doc["kind"] == "Deployment"}


def pod_of(name: str) -> dict:
    return deployments()[name]["spec"]["template"]["spec"]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_for_the_kubernetes_api(version):
    found = documents()
    assert {doc["kind"] for doc in found} >= {
        "Deployment",
        "Service",
        "ConfigMap",
        "PersistentVolumeClaim",
    }
    for doc in found:
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_validation_would_catch_a_misspelt_field():
    broken = copy.deepcopy(deployments()["nightshift-web"])
    broken["spec"]["template"]["spec"]["containers"][0]["comand"] = ["gunicorn"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[0], strict=True)


def test_the_kustomization_lists_every_manifest_in_the_folder():
    kustomization = yaml.safe_load((KIT / "kustomization.yaml").read_text())
    files = {path.name for path in KIT.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)
    assert kustomization["namespace"] == "nightshift"
    assert [image["name"] for image in kustomization["images"]] == ["nightshift"]


def test_web_worker_and_beat_run_what_the_compose_file_runs():
    compose = yaml.safe_load(COMPOSE.read_text())["services"]
    dockerfile_cmd = next(
        line
        for line in (ROOT / "deploy/production/container/Dockerfile").read_text().splitlines()
        if line.startswith("CMD ")
    )
    assert pod_of("nightshift-web")["containers"][0]["command"] == yaml.safe_load(
        dockerfile_cmd.removeprefix("CMD ")
    )
    for name in ("worker", "beat"):
        assert pod_of(f"nightshift-{name}")["containers"][0]["command"] == compose[name]["command"]
    assert (
        pod_of("nightshift-web")["initContainers"][-1]["command"] == compose["migrate"]["command"]
    )


def test_only_one_beat_runs_even_while_it_is_replaced():
    beat = deployments()["nightshift-beat"]["spec"]
    assert beat["replicas"] == 1
    assert beat["strategy"] == {"type": "Recreate"}


def test_every_container_runs_as_the_images_account_without_privileges():
    for name in deployments():
        pod = pod_of(name)
        assert pod["securityContext"]["runAsUser"] == 10001  # the Dockerfile's USER
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"] + pod.get("initContainers", []):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, (name, container["name"])
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["readOnlyRootFilesystem"] is True


def test_the_token_reaches_htcondor_readable_by_the_pods_account_alone():
    """A Secret's files are group-readable (fsGroup), and HTCondor ignores such a token: each
    pod copies it, mode 0600, into the folder CONDOR_TOKEN_DIR names."""
    settings = next(doc for doc in documents() if doc["kind"] == "ConfigMap")["data"]
    for name in deployments():
        pod = pod_of(name)
        tokens = pod["initContainers"][0]
        assert tokens["name"] == "tokens"
        assert "install -m 0600" in tokens["command"][-1]
        assert tokens["command"][-1].endswith(f" {settings['CONDOR_TOKEN_DIR']}/")
        for container in pod["containers"]:
            mounted = {m["mountPath"]: m for m in container["volumeMounts"]}
            assert mounted[settings["CONDOR_TOKEN_DIR"]]["readOnly"] is True


def test_the_settings_are_production_settings_that_pass_check_deploy(tmp_path):
    """The ConfigMap plus the two secrets, as the pods get them: `check --deploy` is clean."""
    data = next(doc for doc in documents() if doc["kind"] == "ConfigMap")["data"]
    env = {
        "PATH": os.environ["PATH"],
        "LANG": "C.UTF-8",
        **data,
        "DATABASE_URL": "postgres://nightshift:pw-9f3a@127.0.0.1:5432/nightshift",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "NIGHTSHIFT_VAR_DIR": str(tmp_path / "var"),
        "CONDOR_TOKEN_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
