"""deploy/README.md says what the code does, beyond its tables (tests/deploy/test_deploy.py).

* the ``--config`` keys it lists are exactly the keys ``frontier serve`` reads;
* the ``/metrics`` row names every metric family the server exports, as Prometheus names it
  (counters end in ``_total``);
* the ``/readyz`` row names every status the readiness probe answers;
* no line, nor a comment of a manifest, says a restart loses the dataflows: the server
  recovers them from its data directory (docs/durability.md), as the manifests' volumes
  (the Deployment's ``/data`` is a claim) let it.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "deploy" / "README.md"
SERVING = ROOT / "api" / "cli" / "serving.py"
METRICS = ROOT / "api" / "server" / "metrics.py"
HEALTH = ROOT / "api" / "server" / "health.py"


def text() -> str:
    return " ".join(README.read_text(encoding="utf-8").split())


def row(path: str) -> str:
    """The health table's row of ``path``."""
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{path}` |"):
            return line
    raise AssertionError(f"no row for {path}")


def test_the_config_keys_are_the_ones_serve_reads() -> None:
    code = SERVING.read_text(encoding="utf-8")
    read = set(re.findall(r'(?:chosen|config\.get)\("(\w+)"', code))
    start = text().index("The `--config` file (YAML or JSON) may hold")
    paragraph = text()[start : text().index("A flag given on the command line", start)]
    named = set(re.findall(r"`(\w+)`", paragraph)) - {"host:port"}
    assert named == read


def test_every_metric_is_named() -> None:
    code = METRICS.read_text(encoding="utf-8")
    families = re.findall(r'(Counter|Gauge)MetricFamily\(\s*"(frontier_\w+)"', code)
    assert len(families) >= 10
    exported = {name + ("_total" if kind == "Counter" else "") for kind, name in families}
    named = set(re.findall(r"`(frontier_\w+)`", row("/metrics")))
    assert named == exported


def test_every_readiness_status_is_named() -> None:
    statuses = set(re.findall(r'"status": "([\w ]+)"', HEALTH.read_text(encoding="utf-8")))
    assert {"ready", "recovering", "unavailable", "not ready", "ok", "failed"} <= statuses
    for status in statuses - {"ok", "failed"}:
        assert f'"status": "{status}"' in row("/readyz"), status
    for status in ("ok", "failed"):
        assert f'"status": "{status}"' in row("/healthz"), status


def test_no_line_says_a_restart_loses_the_dataflows() -> None:
    stale = re.compile(
        r"drops every dataflow|loses every dataflow|starts empty|in memory:|memory: replicas", re.I
    )
    assert stale.findall(text()) == []
    assert "recovers every dataflow" in text()
    for manifest in sorted((ROOT / "deploy").rglob("*.yaml")):
        comments = " ".join(
            line.split("#", 1)[1] for line in manifest.read_text().splitlines() if "#" in line
        )
        assert stale.findall(" ".join(comments.split())) == [], manifest.name


def test_the_deployment_volumes_are_as_described() -> None:
    import yaml

    deployment = yaml.safe_load((ROOT / "deploy" / "k8s" / "deployment.yaml").read_text())
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    claim = volumes["data"]["persistentVolumeClaim"]["claimName"]
    assert f"`/data` is the PersistentVolumeClaim `{claim}` (`pvc.yaml`)" in text()
    assert volumes["tmp"]["emptyDir"]["medium"] == "Memory"
    assert "`/tmp` a small in-memory `emptyDir`" in text()
