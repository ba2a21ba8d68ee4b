"""The deployment files in infra/ are valid and say what an operator relies on: the Kubernetes manifests
against the Kubernetes API schemas (kubernetes-validate bundles them: no download), the compose file against
the compose-spec schema (check-jsonschema bundles it), and each against what Perdura needs (probes,
budgets, autoscaling, one beat, a migration first, the secrets). A broken manifest fails these checks: the
negative cases below prove the validators are not rubber stamps."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

INFRA = Path(__file__).resolve().parents[2] / "infra"
KUBERNETES = INFRA / "kubernetes"
COMPOSE = INFRA / "compose.yaml"
OLDEST_KUBERNETES = "1.29.0"
"""The oldest Kubernetes the manifests are for (gRPC probes are GA from 1.27; 1.29 is the oldest still
served by the large providers); they are checked against it and the newest the validator knows."""
SECRETS = {"PERDURA_MASTER_KEY", "PERDURA_EXPORT_SIGNING_KEY", "PERDURA_SECRET_KEY", "PERDURA_DATABASE_URL"}


def manifest_files() -> list[Path]:
    return sorted(p for p in KUBERNETES.glob("*.yaml") if p.name != "kustomization.yaml")


def resources() -> list[dict]:
    return [doc for path in manifest_files() for doc in yaml.safe_load_all(path.read_text()) if doc]


def find(kind: str, name: str) -> dict:
    matches = [r for r in resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} found"
    return matches[0]


def validate(resource: dict) -> None:
    for version in (OLDEST_KUBERNETES, kubernetes_validate.latest_version()):
        kubernetes_validate.validate(resource, version, strict=True)


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: p.name)
def test_manifests_follow_the_kubernetes_schemas(path):
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert docs
    for doc in docs:
        validate(doc)


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(p.name for p in manifest_files())


@pytest.mark.parametrize(
    ("breakage", "path"),
    [
        ("a misspelt field", ("spec", "replica")),
        ("a field of the wrong type", ("spec", "replicas")),
        ("a required field left out", ("spec", "selector")),
    ],
)
def test_a_broken_manifest_is_refused(breakage, path):
    broken = copy.deepcopy(find("Deployment", "perdura-api"))
    spec = broken["spec"]
    if breakage == "a misspelt field":
        spec["replica"] = spec.pop("replicas")
    elif breakage == "a field of the wrong type":
        spec["replicas"] = "two"
    else:
        del spec["selector"]
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)


@pytest.mark.parametrize("component", ["api", "web", "worker"])
def test_stateless_processes_have_probes_requests_budgets_and_autoscaling(component):
    name = f"perdura-{component}"
    deployment = find("Deployment", name)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"][0] == component
    assert container["readinessProbe"]
    assert container["livenessProbe"]
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys()
    labels = deployment["spec"]["selector"]["matchLabels"]
    assert find("PodDisruptionBudget", name)["spec"]["selector"]["matchLabels"] == labels
    autoscaler = find("HorizontalPodAutoscaler", name)["spec"]
    assert autoscaler["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    (metric,) = autoscaler["metrics"]
    assert metric["resource"]["name"] == "cpu"
    assert autoscaler["minReplicas"] >= 2  # a budget of one available needs two to drain a node


def test_probes_ask_the_health_endpoints():
    api = find("Deployment", "perdura-api")["spec"]["template"]["spec"]["containers"][0]
    assert api["readinessProbe"]["grpc"]["port"] == 7233
    web = find("Deployment", "perdura-web")["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_beat_runs_once_and_migration_is_a_job():
    beat = find("Deployment", "perdura-beat")["spec"]
    assert beat["replicas"] == 1
    assert beat["strategy"] == {"type": "Recreate"}
    job = find("Job", "perdura-migrate")["spec"]["template"]["spec"]
    assert job["containers"][0]["args"] == ["migrate"]
    for name in ("api", "web"):
        assert find("Service", f"perdura-{name}")


def test_every_process_reads_the_secrets_and_runs_as_a_user():
    secret = find("Secret", "perdura")
    assert secret["stringData"].keys() >= SECRETS
    pods = [r["spec"]["template"]["spec"] for r in resources() if r["kind"] in ("Deployment", "Job")]
    assert len(pods) == 5
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            assert {"secretRef": {"name": "perdura"}} in container["envFrom"]


def check_compose(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compose_file_follows_the_compose_spec():
    done = check_compose(COMPOSE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_compose_file_is_refused(tmp_path):
    compose = yaml.safe_load(COMPOSE.read_text())
    compose["services"]["api"]["depends_on"]["migrate"]["condition"] = "when_it_feels_like_it"
    broken = tmp_path / "compose.yaml"
    broken.write_text(yaml.safe_dump(compose))
    done = check_compose(broken)
    assert done.returncode != 0, done.stdout


def test_compose_runs_the_whole_stack_after_its_migration():
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    assert {"postgres", "redis", "opensearch", "minio", "migrate", "api", "web", "worker", "beat"} <= set(
        services
    )
    for name in ("postgres", "redis", "opensearch", "minio", "api", "web", "worker"):
        assert "healthcheck" in services[name], name
    for name in ("api", "web", "worker", "beat"):
        assert services[name]["command"][0] == name
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
        assert services[name]["environment"].keys() >= SECRETS
    assert services["migrate"]["command"] == ["migrate"]
    assert services["migrate"]["depends_on"]["postgres"] == {"condition": "service_healthy"}


def test_image_runs_perdura_as_an_unprivileged_user():
    lines = [line.strip() for line in (INFRA / "Dockerfile").read_text().splitlines()]
    assert lines[next(i for i, line in enumerate(lines) if line.startswith("FROM"))].startswith(
        "FROM python:3.11-slim"
    )
    user = [line for line in lines if line.startswith("USER ")]
    assert user
    assert user[-1].split()[1].split(":")[0] not in ("0", "root")
    assert 'ENTRYPOINT ["perdura"]' in lines
