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


def rendered() -> list[dict]:
    """The kit as `kubectl apply -k` sends it to a cluster: kustomize's rendering."""
    done = subprocess.run(
        ["kubectl", "kustomize", str(KIT)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_kit_as_kustomize_renders_it_is_valid_in_its_namespace_with_its_image(version):
    found = rendered()
    assert sorted((doc["kind"], doc["metadata"]["name"]) for doc in found) == sorted(
        (doc["kind"], doc["metadata"]["name"]) for doc in documents()
    )
    for doc in found:
        assert doc["metadata"]["namespace"] == "nightshift"
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "nightshift"
        kubernetes_validate.validate(doc, version, strict=True)
    pods = [doc["spec"]["template"]["spec"] for doc in found if doc["kind"] == "Deployment"]
    images = {
        container["image"]
        for pod in pods
        for container in pod["containers"] + pod.get("initContainers", [])
    }
    assert images == {"nightshift:latest"}


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


def test_every_pod_shares_one_read_write_many_folder_where_the_settings_put_it():
    """Datasets, uploads in progress and job folders live on one claim that every web, worker
    and live pod mounts at NIGHTSHIFT_SHARED_DIR: nothing the portal keeps is per pod."""
    settings = next(doc for doc in documents() if doc["kind"] == "ConfigMap")["data"]
    [claim] = [doc for doc in documents() if doc["kind"] == "PersistentVolumeClaim"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert "NIGHTSHIFT_JOBS_DIR" not in settings and "NIGHTSHIFT_DATASETS_DIR" not in settings
    for name in deployments():
        pod = pod_of(name)
        volumes = {volume["name"]: volume for volume in pod["volumes"]}
        assert volumes["shared"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        for container in pod["containers"]:
            mounted = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            assert mounted["shared"] == settings["NIGHTSHIFT_SHARED_DIR"], name


def test_web_and_live_run_twice_with_probes_requests_and_a_disruption_budget():
    budgets = {
        doc["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]: doc["spec"]
        for doc in documents()
        if doc["kind"] == "PodDisruptionBudget"
    }
    for name in ("nightshift-web", "nightshift-live"):
        assert deployments()[name]["spec"]["replicas"] >= 2
        assert budgets[name] == {
            "minAvailable": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
        }
        [container] = pod_of(name)["containers"]
        assert container["readinessProbe"] and container["livenessProbe"], name
    for name in deployments():
        for container in pod_of(name)["containers"]:
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), name


def test_the_live_proxy_runs_as_systemd_runs_it_and_reaches_jobs_with_condor_ssh_to_job():
    unit = (ROOT / "deploy/production/systemd/nightshift-live.service").read_text()
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    [container] = pod_of("nightshift-live")["containers"]
    assert container["command"][:2] == ["uvicorn", "portal.asgi_live:application"]
    options = (
        "--ws websockets-sansio",
        "--lifespan on",
        "--no-server-header",
        "--timeout-keep-alive 75",
    )
    for option in options:
        assert option in exec_start and option.replace(" ", "=") in container["command"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["NIGHTSHIFT_LIVE_SSH_TO_JOB"].startswith("condor_ssh_to_job -name ")
    dockerfile = (ROOT / "deploy/production/container/Dockerfile").read_text()
    final = dockerfile.split("\nFROM ")[-1]
    assert "condor openssh-client" in final  # condor_ssh_to_job, and the ssh it runs
    ingress = next(
        doc
        for doc in documents()
        if doc["kind"] == "Ingress" and doc["metadata"]["name"] == "nightshift-live"
    )
    [rule] = ingress["spec"]["rules"]
    settings = next(doc for doc in documents() if doc["kind"] == "ConfigMap")["data"]
    live_host = settings["NIGHTSHIFT_LIVE_URL"].removeprefix("https://").replace("{job}", "*")
    assert rule["host"] == live_host
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/upstream-hash-by"]


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
