"""The deploy/ files against the code: every flag, variable, port, path and signal is real.

Offline: no docker, no kubectl (one test builds the kustomizations when kubectl is there).
The Dockerfile, compose.yaml and the Kubernetes manifests are parsed here; each way of
starting the server (the image's default command, compose's command, the Deployment's args,
and each process of compose's cluster profile and of the StatefulSet) is turned into a
:class:`Launch` -- its argument list, environment, mounted files and health URLs -- and
checked against the real ``frontier`` command, the real settings and the real aiohttp
application. The last tests start the server with each single-process launch's own arguments
(on 127.0.0.1 and a free port) and stop it with the image's stop signal.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

import api.cli.serving
import api.server.app
import api.server.auth
from api.cli import main, serve
from api.server import create_app
from service.app import Cluster, Limits, Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
CLUSTER = K8S / "cluster"

PORT = 8080
"""The port every deploy file uses (the CLI's default too)."""
CONFIG = "/etc/frontier/config.yaml"
DATA = "/data"
FABRIC_PORT = 7000
"""The cluster's fabric port (every process listens on its own peer entry's port)."""
SAMPLE_TOKENS = "s3cret=alice,0ther=bob"
"""What the tests put into compose's required ``${FRONTIER_TOKENS}``."""
RUNTIME_VARIABLES = {"PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED"}
"""Variables the deploy files may set that are the interpreter's, not the server's."""

STARTUP = 20.0
SHUTDOWN = 10.0


# --------------------------------------------------------------------------- the Dockerfile


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword, the rest of its line and its build stage."""

    keyword: str
    value: str
    stage: int


def dockerfile() -> list[Instruction]:
    """The instructions, with continuation lines joined and comment lines dropped."""
    instructions: list[Instruction] = []
    stage = -1
    pending = ""
    for raw in (DEPLOY / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        keyword, _, value = line.partition(" ")
        if keyword.upper() == "FROM":
            stage += 1
        instructions.append(Instruction(keyword.upper(), value.strip(), stage))
    assert not pending, "the Dockerfile ends in a continuation line"
    return instructions


def final_stage() -> list[Instruction]:
    instructions = dockerfile()
    last = max(i.stage for i in instructions)
    return [i for i in instructions if i.stage == last]


def only(keyword: str, instructions: list[Instruction] | None = None) -> str:
    """The value of the one instruction ``keyword`` (of the final stage by default)."""
    values = [i.value for i in instructions or final_stage() if i.keyword == keyword]
    assert len(values) == 1, f"expected one {keyword} in the final stage, found {values}"
    return values[0]


def exec_form(value: str) -> list[str]:
    """A JSON array instruction value (exec form); shell form is refused."""
    parsed = json.loads(value)
    assert isinstance(parsed, list), f"not exec form: {value}"
    assert all(isinstance(part, str) for part in parsed), value
    return parsed


def image_entrypoint() -> list[str]:
    return exec_form(only("ENTRYPOINT"))


def image_command() -> list[str]:
    return exec_form(only("CMD"))


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for instruction in final_stage():
        if instruction.keyword == "ENV":
            for pair in shlex.split(instruction.value):
                name, equals, value = pair.partition("=")
                assert equals, f"ENV needs NAME=value pairs: {instruction.value}"
                env[name] = value
    return env


def image_healthcheck() -> tuple[dict[str, str], list[str]]:
    """The HEALTHCHECK's options and its exec-form command."""
    options, marker, command = only("HEALTHCHECK").partition("CMD ")
    assert marker, "HEALTHCHECK must have a CMD"
    parsed: dict[str, str] = {}
    for option in options.split():
        name, _, value = option.removeprefix("--").partition("=")
        parsed[name] = value
    return parsed, exec_form(command)


def copied_sources() -> set[str]:
    """What the image's COPY instructions take from the build context."""
    return {
        source.removeprefix("./").rstrip("/")
        for i in dockerfile()
        if i.keyword == "COPY" and "--from" not in i.value
        for source in i.value.split()[:-1]
    }


def image_uid() -> str:
    user = only("USER")
    return user.partition(":")[0]


# --------------------------------------------------------------------------- YAML files


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def manifests(directory: Path = K8S) -> list[dict[str, Any]]:
    return [
        document
        for path in sorted(directory.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if isinstance(document, dict)
    ]


def k8s(kind: str, directory: Path = K8S) -> dict[str, Any]:
    """The one manifest of ``kind`` in ``directory`` (deploy/k8s by default)."""
    found = [document for document in manifests(directory) if document.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind} in {directory}, found {len(found)}"
    return found[0]


def cluster_service(*, headless: bool) -> dict[str, Any]:
    """The cluster's Service for clients, or its headless one (the StatefulSet's)."""
    found = [
        document
        for document in manifests(CLUSTER)
        if document["kind"] == "Service"
        and (document["spec"].get("clusterIP") == "None") == headless
    ]
    assert len(found) == 1, f"expected one {'headless ' * headless}Service, found {len(found)}"
    return found[0]


def statefulset() -> dict[str, Any]:
    return k8s("StatefulSet", CLUSTER)


def pod_spec(workload: str = "Deployment") -> dict[str, Any]:
    """The pod template's spec of the Deployment, or of the cluster's StatefulSet."""
    manifest = k8s("Deployment") if workload == "Deployment" else statefulset()
    spec: dict[str, Any] = manifest["spec"]["template"]["spec"]
    return spec


def container(workload: str = "Deployment") -> dict[str, Any]:
    containers = pod_spec(workload)["containers"]
    assert len(containers) == 1
    first: dict[str, Any] = containers[0]
    return first


def compose_services() -> dict[str, Any]:
    services: dict[str, Any] = load(DEPLOY / "compose.yaml")["services"]
    return services


def compose_service(name: str = "frontier") -> dict[str, Any]:
    services = compose_services()
    # The default profile (the services without profiles) is the one process.
    assert [n for n, s in services.items() if not s.get("profiles")] == ["frontier"]
    service: dict[str, Any] = services[name]
    return service


def cluster_services() -> dict[str, dict[str, Any]]:
    """compose's services of the profile "cluster", in file order."""
    services = {n: s for n, s in compose_services().items() if s.get("profiles")}
    assert all(s["profiles"] == ["cluster"] for s in services.values()), "one profile: cluster"
    return services


def container_port(port: int | str, workload: str = "Deployment") -> int:
    """A probe's or the Service's port: a number, or the name of a container port."""
    if isinstance(port, int):
        return port
    named = [p["containerPort"] for p in container(workload)["ports"] if p.get("name") == port]
    assert len(named) == 1, f"no container port is named {port!r}"
    number: int = named[0]
    return number


def seconds(duration: str) -> float:
    """A compose duration such as ``20s`` or ``1m30s``."""
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert parts is not None and duration, f"not a duration: {duration!r}"
    return int(parts[1] or 0) * 60 + int(parts[2] or 0)


HEALTH_URL = re.compile(r"http://127\.0\.0\.1:(\d+)(/[\w/]*)")


# --------------------------------------------------------------------------- the code


def function(module: Any, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    """A top-level function's syntax tree, decorators included."""
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node
    raise AssertionError(f"{module.__name__} has no function {name}")


def _is_environ(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _environ_key(node: ast.AST) -> ast.expr | None:
    """What ``os.environ.get(key)``, ``os.getenv(key)`` or ``os.environ[key]`` reads."""
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        if isinstance(func, ast.Attribute) and (
            (func.attr == "get" and _is_environ(func.value))
            or (func.attr == "getenv" and isinstance(func.value, ast.Name))
        ):
            return node.args[0]
    elif isinstance(node, ast.Subscript) and _is_environ(node.value):
        return node.slice
    return None


def _serve_functions() -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """``serve`` and the functions of api.cli.serving it calls, directly or not."""
    tree = ast.parse(inspect.getsource(api.cli.serving))
    top = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    found = [top["serve"]]
    for fn in found:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                callee = top.get(node.func.id)
                if callee is not None and callee not in found:
                    found.append(callee)
    return found


def server_env_names() -> set[str]:
    """The environment variables ``frontier serve`` reads: its options' defaults and body and
    the functions it calls (``_cluster`` reads $FRONTIER_CLUSTER_SECRET and $HOSTNAME),
    also through a helper that reads the variable its first parameter names (``_env_int``)."""
    functions = _serve_functions()
    readers = set()
    for fn in functions:
        first = fn.args.args[0].arg if fn.args.args else None
        for node in ast.walk(fn):
            key = _environ_key(node)
            if isinstance(key, ast.Name) and key.id == first:
                readers.add(fn.name)
    names: set[str] = set()
    for fn in functions:
        for node in ast.walk(fn):
            key = _environ_key(node)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in readers
                and node.args
            ):
                key = node.args[0]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.add(key.value)
    return names


def handled_signals() -> set[str]:
    """The ``signal.SIG*`` names the server's run loop refers to (it handles them)."""
    return {
        node.attr
        for node in ast.walk(function(api.cli.serving, "_serve"))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("SIG")
        and isinstance(node.value, ast.Name)
        and node.value.id == "signal"
    }


def drain_seconds() -> float:
    """The longest a graceful shutdown takes: closing WebSockets, then requests in flight."""
    timeouts = [
        keyword.value.value
        for node in ast.walk(function(api.cli.serving, "_serve"))
        if isinstance(node, ast.Call)
        for keyword in node.keywords
        if keyword.arg == "shutdown_timeout"
        and isinstance(keyword.value, ast.Constant)
        and isinstance(keyword.value.value, int | float)
    ]
    assert len(timeouts) == 1, timeouts
    going_away = [
        node.right.value
        for node in ast.walk(function(api.server.app, "_going_away"))
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Add)
        and isinstance(node.right, ast.Constant)
        and isinstance(node.right.value, int | float)
    ]
    assert len(going_away) == 1, going_away
    return float(timeouts[0]) + float(going_away[0])


def get_routes() -> set[str]:
    app = create_app(Settings())
    return {
        route.resource.canonical
        for route in app.router.routes()
        if route.method == "GET" and route.resource is not None
    }


def serve_options() -> dict[str, click.Option]:
    """``frontier serve``'s options by their long flag."""
    options: dict[str, click.Option] = {}
    for param in serve.params:
        if isinstance(param, click.Option):
            for opt in param.opts:
                if opt.startswith("--"):
                    options[opt] = param
    return options


# --------------------------------------------------------------------------- launches


@dataclass
class Launch:
    """One way the deploy files start the server."""

    name: str
    argv: list[str]
    """The container's whole command line (entry point and arguments)."""
    env: dict[str, str]
    """Its environment, as the deploy files set it (secrets and required values filled in)."""
    files: dict[str, Path] = field(default_factory=dict)
    """Files mounted into the container: container path -> where the content is here."""
    writable: set[str] = field(default_factory=set)
    """Writable directories mounted into the container."""
    health: list[str] = field(default_factory=list)
    """Health-check URLs (as seen inside the container)."""
    health_commands: list[list[str]] = field(default_factory=list)
    """Health-check commands run inside the container."""
    stop_signal: str = "SIGTERM"

    def option(self, flag: str) -> str:
        args = self.argv
        assert args.count(flag) == 1, f"{self.name}: expected {flag} once in {args}"
        return args[args.index(flag) + 1]

    def local_argv(self, port: int, data_dir: Path) -> list[str]:
        """The argument list for a run here: this Python, 127.0.0.1, a free port, local files."""
        args = list(self.argv)
        assert args[0] == "python"
        args[0] = sys.executable
        replacements = {"--host": "127.0.0.1", "--port": str(port), "--data-dir": str(data_dir)}
        for flag, value in replacements.items():
            args[args.index(flag) + 1] = value
        return [str(self.files[a]) if a in self.files else a for a in args]


def example_secrets() -> dict[str, dict[str, str]]:
    """The example Secrets (deploy/k8s and deploy/k8s/cluster) by name: their string data."""
    secrets: dict[str, dict[str, str]] = {}
    for directory in (K8S, CLUSTER):
        for document in manifests(directory):
            if document["kind"] == "Secret":
                name = document["metadata"]["name"]
                assert name not in secrets, f"two example Secrets {name!r}"
                secrets[name] = document["stringData"]
    return secrets


def _secret_value(name: str, key: str) -> str:
    secrets = example_secrets()
    assert name in secrets, f"a manifest refers to Secret {name!r}, which has no example"
    value: str = secrets[name][key]
    return value


def docker_run_tokens() -> str:
    """The tokens deploy/README.md's ``docker run`` gives the image (it needs some)."""
    docker = (DEPLOY / "README.md").read_text().split("## Docker\n", 1)[1]
    found = re.search(r"-e FRONTIER_TOKENS='([^']+)'", docker)
    assert found, "deploy/README.md runs the image without tokens"
    return found.group(1)


def dockerfile_launch(tokens: bool = True) -> Launch:
    """The image as deploy/README.md runs it: with ``FRONTIER_TOKENS`` (or, to see the
    refusal, without)."""
    _options, command = image_healthcheck()
    env = {k: v for k, v in image_env().items() if k != "PATH"}
    if tokens:
        env["FRONTIER_TOKENS"] = docker_run_tokens()
    return Launch(
        "dockerfile",
        image_entrypoint() + image_command(),
        env,
        health=health_urls(command),
        health_commands=[command],
        stop_signal=only("STOPSIGNAL"),
    )


def health_urls(command: list[str]) -> list[str]:
    urls = [m.group(0) for part in command for m in HEALTH_URL.finditer(part)]
    assert urls, f"no http://127.0.0.1:<port>/<path> in {command}"
    return urls


COMPOSE_DEFAULT = re.compile(r"\$\{(\w+):-([^}]*)\}")
"""``${NAME:-default}``: the variable, or the default when it is unset or empty."""


def compose_launch(service_name: str = "frontier") -> Launch:
    service = compose_service(service_name)
    assert "entrypoint" not in service, "compose must keep the image's ENTRYPOINT"
    env: dict[str, str] = {k: v for k, v in image_env().items() if k != "PATH"}
    for name, value in service["environment"].items():
        required = re.fullmatch(r"\$\{(\w+):\?[^}]*\}", str(value))
        defaulted = COMPOSE_DEFAULT.fullmatch(str(value))
        if required:
            assert required[1] == name, f"{name} is interpolated from {required[1]}"
            env[name] = SAMPLE_TOKENS if name == "FRONTIER_TOKENS" else "x"
        elif defaulted:
            assert defaulted[1] == name, f"{name} is interpolated from {defaulted[1]}"
            assert "$" not in defaulted[2], f"{name}: a nested interpolation {value!r}"
            env[name] = defaulted[2]  # what compose uses without the variable
        else:
            assert "$" not in str(value), f"{name}: unexpected interpolation {value!r}"
            env[name] = str(value)
    files: dict[str, Path] = {}
    writable: set[str] = set()
    named_volumes = set(load(DEPLOY / "compose.yaml").get("volumes") or {})
    for volume in service["volumes"]:
        source, target, *mode = volume.split(":")
        if source in named_volumes:
            assert mode == [], f"the volume {source} must be writable"
            writable.add(target)
        else:
            local = (DEPLOY / source).resolve()
            assert local.is_file(), f"compose mounts {source}, which does not exist"
            assert mode == ["ro"], f"{source} should be mounted read-only"
            files[target] = local
    test = service["healthcheck"]["test"]
    assert test[0] == "CMD", "compose's healthcheck must be exec form (CMD)"
    return Launch(
        "compose" if service_name == "frontier" else f"compose {service_name}",
        image_entrypoint() + [str(a) for a in service["command"]],
        env,
        files=files,
        writable=writable,
        health=health_urls(test[1:]),
        health_commands=[test[1:]],
        stop_signal=service["stop_signal"],
    )


def k8s_launch(workdir: Path, ordinal: int | None = None) -> Launch:
    """The Deployment's pod, or (with ``ordinal``) the StatefulSet's pod of that ordinal."""
    workload = "Deployment" if ordinal is None else "StatefulSet"
    directory = K8S if ordinal is None else CLUSTER
    spec = container(workload)
    assert "command" not in spec, f"the {workload} must keep the image's ENTRYPOINT"
    env: dict[str, str] = {k: v for k, v in image_env().items() if k != "PATH"}
    if ordinal is not None:
        # Kubernetes sets HOSTNAME to the pod's name, <StatefulSet>-<ordinal>.
        env["HOSTNAME"] = f"{statefulset()['metadata']['name']}-{ordinal}"
    for variable in spec["env"]:
        if "value" in variable:
            env[variable["name"]] = str(variable["value"])
        else:
            ref = variable["valueFrom"]["secretKeyRef"]
            assert ref.get("optional") is not True, f"{variable['name']} must not be optional"
            env[variable["name"]] = _secret_value(ref["name"], ref["key"])
    volumes = {v["name"]: v for v in pod_spec(workload)["volumes"]}
    if ordinal is not None:
        for claim in statefulset()["spec"]["volumeClaimTemplates"]:
            assert claim["metadata"]["name"] not in volumes
            volumes[claim["metadata"]["name"]] = {"persistentVolumeClaim": claim["spec"]}
    files: dict[str, Path] = {}
    writable: set[str] = set()
    for mount in spec["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            config_map = k8s("ConfigMap", directory)
            assert config_map["metadata"]["name"] == volume["configMap"]["name"]
            assert mount.get("readOnly") is True
            for key, text in config_map["data"].items():
                local = workdir / mount["name"] / key
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_text(text)
                files[f"{mount['mountPath']}/{key}"] = local
        elif "emptyDir" in volume or "persistentVolumeClaim" in volume:
            assert mount.get("readOnly") is not True
            writable.add(mount["mountPath"])
    probes = [spec[probe]["httpGet"] for probe in ("readinessProbe", "livenessProbe")]
    return Launch(
        "k8s" if ordinal is None else f"k8s {env['HOSTNAME']}",
        image_entrypoint() + [str(a) for a in spec["args"]],
        env,
        files=files,
        writable=writable,
        health=[
            f"http://127.0.0.1:{container_port(probe['port'], workload)}{probe['path']}"
            for probe in probes
        ],
        stop_signal=only("STOPSIGNAL"),
    )


def launch(name: str, workdir: Path) -> Launch:
    if name == "dockerfile":
        return dockerfile_launch()
    if name == "compose":
        return compose_launch()
    return k8s_launch(workdir)


LAUNCHES = ["dockerfile", "compose", "k8s"]


def cluster_launches(name: str, workdir: Path) -> list[Launch]:
    """Every process of compose's cluster profile, or every pod of the StatefulSet."""
    if name == "compose":
        return [compose_launch(service) for service in cluster_services()]
    replicas: int = statefulset()["spec"]["replicas"]
    return [k8s_launch(workdir / str(ordinal), ordinal) for ordinal in range(replicas)]


CLUSTERS = ["compose", "k8s"]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No FRONTIER_* variable of the test's own environment leaks into the CLI."""
    for name in list(os.environ):
        if name.startswith("FRONTIER_"):
            monkeypatch.delenv(name)


# --------------------------------------------------------------------------- the files


def test_every_yaml_file_parses_and_the_manifests_are_complete() -> None:
    paths = sorted(DEPLOY.rglob("*.yaml"))
    assert [p.relative_to(DEPLOY).as_posix() for p in paths] == [
        "compose.yaml",
        "config.yaml",
        "k8s/cluster/configmap.yaml",
        "k8s/cluster/kustomization.yaml",
        "k8s/cluster/peers-service.yaml",
        "k8s/cluster/rescale-move.example.yaml",
        "k8s/cluster/secret.example.yaml",
        "k8s/cluster/service.yaml",
        "k8s/cluster/statefulset.yaml",
        "k8s/configmap.yaml",
        "k8s/deployment.yaml",
        "k8s/kustomization.yaml",
        "k8s/pvc.yaml",
        "k8s/secret.example.yaml",
        "k8s/service.yaml",
    ]
    kinds = {}
    cluster_kinds = {}
    for path in paths:
        documents = list(yaml.safe_load_all(path.read_text()))
        assert len(documents) == 1 and isinstance(documents[0], dict), path
        if path.parent == K8S:
            kinds[path.name] = documents[0]["kind"]
        if path.parent == CLUSTER:
            cluster_kinds[path.name] = documents[0]["kind"]
    assert kinds == {
        "configmap.yaml": "ConfigMap",
        "deployment.yaml": "Deployment",
        "kustomization.yaml": "Kustomization",
        "pvc.yaml": "PersistentVolumeClaim",
        "secret.example.yaml": "Secret",
        "service.yaml": "Service",
    }
    # kubectl apply -k applies everything but the example Secret (never real tokens).
    assert load(K8S / "kustomization.yaml")["resources"] == [
        "configmap.yaml",
        "deployment.yaml",
        "pvc.yaml",
        "service.yaml",
    ]
    # The cluster is a kustomization of its own, applied instead of the single process.
    assert cluster_kinds == {
        "configmap.yaml": "ConfigMap",
        "kustomization.yaml": "Kustomization",
        "peers-service.yaml": "Service",
        "rescale-move.example.yaml": "Job",
        "secret.example.yaml": "Secret",
        "service.yaml": "Service",
        "statefulset.yaml": "StatefulSet",
    }
    assert load(CLUSTER / "kustomization.yaml")["resources"] == [
        "configmap.yaml",
        "peers-service.yaml",
        "service.yaml",
        "statefulset.yaml",
    ]
    # ConfigMap data is mounted as files: each value is itself valid YAML.
    for directory in (K8S, CLUSTER):
        for text in k8s("ConfigMap", directory)["data"].values():
            assert isinstance(yaml.safe_load(text), dict)


def test_image_is_slim_non_root_and_installs_the_package_without_spark() -> None:
    instructions = dockerfile()
    froms = [i.value for i in instructions if i.keyword == "FROM"]
    assert froms == ["python:3.11-slim AS build", "python:3.11-slim"]
    assert only("USER") == "10001:10001"
    assert image_uid() not in {"0", "root"}
    useradd = [i.value for i in final_stage() if i.keyword == "RUN" and "useradd" in i.value]
    assert len(useradd) == 1 and "--uid 10001" in useradd[0] and "--gid 10001" in useradd[0]
    # The data directory exists and belongs to that user (a fresh named volume copies it).
    setup = useradd[0].split(" && ")
    assert [step.strip() for step in setup[2:]] == [f"mkdir {DATA}", f"chown {only('USER')} {DATA}"]
    assert only("WORKDIR") == DATA
    runs = " ".join(i.value for i in instructions if i.keyword == "RUN")
    assert "pip install ." in runs
    assert "spark" not in runs.lower()
    # Everything the package is built from is copied in: the top-level package directories of
    # pyproject's explicit package list, pyproject.toml and the readme it names.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    tops = {name.split(".")[0] for name in project["tool"]["setuptools"]["packages"]}
    assert copied_sources() == tops | {"pyproject.toml", project["project"]["readme"]}


def test_dockerignore_lets_in_exactly_what_the_image_copies() -> None:
    lines = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "the .dockerignore must exclude everything first"
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert allowed == copied_sources()


@pytest.mark.parametrize("name", LAUNCHES)
@pytest.mark.usefixtures("clean_env")
def test_container_arguments_are_accepted_by_the_real_cli(name: str, tmp_path: Path) -> None:
    started = launch(name, tmp_path)
    assert started.argv[:4] == ["python", "-m", "api", "serve"]
    group = main.make_context("frontier", started.argv[3:4])
    command = main.get_command(group, started.argv[3])
    assert command is serve
    # make_context parses (and converts) every option: an unknown or renamed flag fails here.
    context = serve.make_context("serve", started.argv[4:], parent=group)
    params = context.params
    assert params["host"] == "0.0.0.0"
    assert params["port"] == PORT
    assert params["data_dir"] == DATA
    assert params["config_file"] == (None if name == "dockerfile" else CONFIG)
    assert params["tokens"] == ()
    assert params["demo"] is False


@pytest.mark.usefixtures("clean_env")
def test_the_image_without_tokens_refuses_to_serve_beyond_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No open door (issue 22): listening on 0.0.0.0 needs tokens or --allow-anonymous."""
    started = dockerfile_launch(tokens=False)
    for variable, value in started.env.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setattr("api.server.logs.configure_logging", lambda fmt: None)
    with pytest.raises(click.UsageError) as refused:
        main.main(args=started.argv[3:], prog_name="frontier", standalone_mode=False)
    assert refused.value.message == (
        "listening on 0.0.0.0 with no token would give anyone who reaches it full access "
        "(create, push, drop): give tokens (--token TOKEN=TENANT, $FRONTIER_TOKENS, or "
        "tokens: in --config), or allow anonymous access explicitly (--allow-anonymous)"
    )


@pytest.mark.parametrize("name", LAUNCHES)
@pytest.mark.usefixtures("clean_env")
def test_settings_each_container_runs_with(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run ``frontier serve`` up to the moment it would serve, with the container's
    arguments, environment and mounted files: the settings are the ones the files mean."""
    started = launch(name, tmp_path)
    for variable, value in started.env.items():
        monkeypatch.setenv(variable, value)
    captured: list[Settings] = []

    def fake_serve(settings: Settings, *_rest: Any) -> None:
        captured.append(settings)

    monkeypatch.setattr(api.cli.serving, "_serve", fake_serve)
    monkeypatch.setattr(api.cli.serving, "asyncio_run", lambda coroutine: coroutine)
    monkeypatch.setattr("api.server.logs.configure_logging", lambda fmt: None)
    args = [str(started.files.get(a, a)) for a in started.argv[3:]]
    if name != "dockerfile":
        assert started.option("--config") in started.files, "the --config file is not mounted"
    main.main(args=args, prog_name="frontier", standalone_mode=False)
    (settings,) = captured
    assert (settings.host, settings.port, settings.workers) == ("0.0.0.0", PORT, 1)
    assert settings.data_dir == DATA
    if name == "dockerfile":
        pairs = [pair.partition("=") for pair in docker_run_tokens().split(",")]
        assert settings.tokens == {token: tenant for token, _, tenant in pairs}
        assert settings.limits == Limits()
    else:
        assert DATA in started.writable, "the data directory must be a writable volume"
        expected = (
            SAMPLE_TOKENS if name == "compose" else _secret_value("frontier-tokens", "tokens")
        )
        pairs = [pair.partition("=") for pair in expected.split(",")]
        assert settings.tokens == {token: tenant for token, _, tenant in pairs}
        limits = load(started.files[CONFIG])["limits"]
        assert settings.limits == Limits(**limits)
        # Every limit is spelt out in the shipped file.
        assert set(limits) == {f.name for f in dataclasses.fields(Limits)}


def test_environment_variables_are_ones_the_server_reads(tmp_path: Path) -> None:
    read = server_env_names()
    # The names the manifests rely on, with the flag each one is the default of.
    assert {"FRONTIER_HOST", "FRONTIER_PORT", "FRONTIER_DATA_DIR", "FRONTIER_TOKENS"} <= read
    named = set(image_env())
    named |= set(compose_service()["environment"])
    named |= {variable["name"] for variable in container()["env"]}
    assert {n for n in named if not n.startswith("FRONTIER_")} <= RUNTIME_VARIABLES
    assert {n for n in named if n.startswith("FRONTIER_")} <= read
    for name in ("compose", "k8s"):
        assert "FRONTIER_TOKENS" in launch(name, tmp_path).env


def test_probe_and_health_paths_are_routes_of_the_app() -> None:
    routes = get_routes()
    spec = container()
    assert spec["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert spec["livenessProbe"]["httpGet"]["path"] == "/healthz"
    annotations = k8s("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(PORT),
        "prometheus.io/path": "/metrics",
    }
    paths = {"/readyz", "/healthz", "/metrics"}
    assert paths <= routes
    # The probes send no token: these paths must be the ones the server leaves public.
    assert paths <= set(api.server.auth.PUBLIC)
    for started in (dockerfile_launch(), compose_launch()):
        assert [url.rsplit(":", 1)[1] for url in started.health] == [f"{PORT}/healthz"]


def test_ports_agree_everywhere(tmp_path: Path) -> None:
    assert only("EXPOSE") == str(PORT)
    for name in LAUNCHES:
        started = launch(name, tmp_path)
        assert started.option("--port") == str(PORT)
        for url in started.health:
            match = HEALTH_URL.fullmatch(url)
            assert match is not None and int(match[1]) == PORT, url
    assert compose_service()["ports"] == [f"{PORT}:{PORT}"]
    spec = container()
    assert spec["ports"] == [{"name": "http", "containerPort": PORT, "protocol": "TCP"}]
    service = k8s("Service")
    (service_port,) = service["spec"]["ports"]
    assert container_port(service_port["targetPort"]) == PORT
    assert service_port["port"] == PORT
    # The Service selects the Deployment's pods.
    labels = k8s("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


def test_compose_health_check_is_the_image_one() -> None:
    options, command = image_healthcheck()
    assert options == {"interval": "10s", "timeout": "3s", "start-period": "10s", "retries": "3"}
    healthcheck = compose_service()["healthcheck"]
    assert healthcheck == {
        "test": ["CMD", *command],
        "interval": options["interval"],
        "timeout": options["timeout"],
        "start_period": options["start-period"],
        "retries": int(options["retries"]),
    }
    # urlopen's own timeout ends before docker's.
    (code,) = [part for part in command if "urlopen" in part]
    assert "timeout=2)" in code and seconds(options["timeout"]) > 2


def test_stop_signal_is_handled_and_the_grace_periods_cover_the_drain() -> None:
    assert only("STOPSIGNAL") == "SIGTERM"
    assert compose_service()["stop_signal"] == "SIGTERM"
    assert "SIGTERM" in handled_signals()
    drain = drain_seconds()
    assert drain == 12.0
    assert seconds(compose_service()["stop_grace_period"]) > drain
    spec = pod_spec()
    pre_stop = container()["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    assert spec["terminationGracePeriodSeconds"] >= int(pre_stop[1]) + drain + 5


def test_kubernetes_deployment_is_single_replica_and_locked_down() -> None:
    deployment = k8s("Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    spec = pod_spec()
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert str(spec["securityContext"]["runAsUser"]) == image_uid()
    assert spec["automountServiceAccountToken"] is False
    security = container()["securityContext"]
    assert security == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    resources = container()["resources"]
    assert set(resources) == {"requests", "limits"}
    assert set(resources["requests"]) == set(resources["limits"]) == {"cpu", "memory"}
    # Service links would set <SERVICE>_PORT=tcp://ip:port; for the Service "frontier" that
    # is FRONTIER_PORT, the server's port variable.
    service_name = k8s("Service")["metadata"]["name"].upper().replace("-", "_")
    if f"{service_name}_PORT" in server_env_names():
        assert spec["enableServiceLinks"] is False


def test_image_tags_are_the_project_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert compose_service()["image"] == f"frontier:{version}"
    assert container()["image"] == f"frontier:{version}"
    build = compose_service()["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_config_file_and_configmap_agree() -> None:
    shipped = load(DEPLOY / "config.yaml")
    for directory in (K8S, CLUSTER):
        (text,) = k8s("ConfigMap", directory)["data"].values()
        assert yaml.safe_load(text) == shipped, directory
    # The StatefulSet mounts the cluster's own copy, under the same name.
    assert k8s("ConfigMap", CLUSTER)["metadata"]["name"] == k8s("ConfigMap")["metadata"]["name"]
    # Only limits: any other key would override the containers' flags.
    assert list(shipped) == ["limits"]


def test_readme_tables_match_the_code() -> None:
    readme = (DEPLOY / "README.md").read_text()
    limit_rows = dict(re.findall(r"^\| `(\w+)` \| ([\d.]+) \|", readme, flags=re.M))
    assert limit_rows == {f.name: str(f.default) for f in dataclasses.fields(Limits)}
    flag_rows = re.findall(r"^\| `(--[\w-]+)[^|]*\| ([^|]*)\|", readme, flags=re.M)
    assert {flag for flag, _ in flag_rows} == set(serve_options())
    variables = {v for _, cell in flag_rows for v in re.findall(r"`(FRONTIER_\w+)`", cell)}
    assert variables == {name for name in server_env_names() if name.startswith("FRONTIER_")}


# --------------------------------------------------------------------------- the cluster


def _env_of(service: dict[str, Any]) -> dict[str, str]:
    return {name: str(value) for name, value in service["environment"].items()}


def _k8s_env() -> dict[str, dict[str, Any]]:
    """The StatefulSet container's env entries by name."""
    return {variable["name"]: variable for variable in container("StatefulSet")["env"]}


def startup_timeout() -> float:
    """How long a process waits for its peers at start-up when nothing sets it."""
    (default,) = [f.default for f in dataclasses.fields(Cluster) if f.name == "startup_timeout"]
    assert isinstance(default, float)
    return default


@pytest.mark.parametrize("name", CLUSTERS)
@pytest.mark.usefixtures("clean_env")
def test_cluster_arguments_and_environment_are_accepted_by_the_real_cli(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each process's command line parses, and the cluster options it gets from its
    environment are the cluster's size and its peers."""
    launches = cluster_launches(name, tmp_path)
    assert len(launches) >= 2
    for started in launches:
        for variable in [*os.environ]:
            if variable.startswith("FRONTIER_"):
                monkeypatch.delenv(variable)
        for variable, value in started.env.items():
            monkeypatch.setenv(variable, value)
        assert started.argv[:4] == ["python", "-m", "api", "serve"]
        group = main.make_context("frontier", started.argv[3:4])
        assert main.get_command(group, started.argv[3]) is serve
        params = serve.make_context("serve", started.argv[4:], parent=group).params
        assert params["host"] == "0.0.0.0"
        assert params["port"] == PORT
        assert params["data_dir"] == DATA
        assert params["config_file"] == CONFIG
        assert params["processes"] == len(launches)
        assert params["peers"] == started.env["FRONTIER_PEERS"]
        assert params["apis"] is None  # each peer's host with --port
        assert params["cluster_secret_file"] is None  # the secret is in the environment


@pytest.mark.parametrize("name", CLUSTERS)
@pytest.mark.usefixtures("clean_env")
def test_settings_each_cluster_process_runs_with(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run ``frontier serve`` up to the moment it would serve, once per process, with its
    arguments, environment (HOSTNAME too) and mounted files: process i of N, the same peers
    and secret everywhere, and each process's API at its peer's host on the API port."""
    launches = cluster_launches(name, tmp_path)
    if name == "compose":
        hosts = list(cluster_services())
        secret = COMPOSE_DEFAULT.fullmatch(
            str(cluster_services()[hosts[0]]["environment"]["FRONTIER_CLUSTER_SECRET"])
        )
        assert secret is not None
        expected_secret = secret[2]
    else:
        sts = statefulset()
        hosts = [
            f"{sts['metadata']['name']}-{i}.{sts['spec']['serviceName']}"
            for i in range(sts["spec"]["replicas"])
        ]
        ref = _k8s_env()["FRONTIER_CLUSTER_SECRET"]["valueFrom"]["secretKeyRef"]
        expected_secret = _secret_value(ref["name"], ref["key"])
    captured: list[Settings] = []

    def fake_serve(settings: Settings, *_rest: Any) -> None:
        captured.append(settings)

    monkeypatch.setattr(api.cli.serving, "_serve", fake_serve)
    monkeypatch.setattr(api.cli.serving, "asyncio_run", lambda coroutine: coroutine)
    monkeypatch.setattr("api.server.logs.configure_logging", lambda fmt: None)
    for started in launches:
        for variable in [*os.environ]:
            if variable.startswith("FRONTIER_"):
                monkeypatch.delenv(variable)
        # A container's own host name (compose: the container id) unless the file sets one.
        monkeypatch.setenv("HOSTNAME", "3f2a1b9c0d4e")
        for variable, value in started.env.items():
            monkeypatch.setenv(variable, value)
        assert started.option("--config") in started.files, "the --config file is not mounted"
        assert DATA in started.writable, "the data directory must be a writable volume"
        args = [str(started.files.get(a, a)) for a in started.argv[3:]]
        main.main(args=args, prog_name="frontier", standalone_mode=False)
    assert len(captured) == len(launches) == len(hosts)
    for index, settings in enumerate(captured):
        assert (settings.host, settings.port, settings.data_dir) == ("0.0.0.0", PORT, DATA)
        pairs = [pair.partition("=") for pair in launches[index].env["FRONTIER_TOKENS"].split(",")]
        assert settings.tokens == {token: tenant for token, _, tenant in pairs}
        assert settings.limits == Limits(**load(launches[index].files[CONFIG])["limits"])
        assert settings.cluster == Cluster(
            processes=len(hosts),
            process=index,
            peers=tuple((host, FABRIC_PORT) for host in hosts),
            apis=tuple(f"{host}:{PORT}" for host in hosts),
            secret=expected_secret.encode(),
            startup_timeout=startup_timeout(),
        )
        # As shipped, a start on a directory of another shape is refused, not rescaled.
        assert settings.rescale is False


def test_cluster_environment_variables_are_ones_the_server_reads() -> None:
    read = server_env_names()
    cluster = {"FRONTIER_PROCESSES", "FRONTIER_PEERS", "FRONTIER_CLUSTER_SECRET"}
    assert cluster | {"FRONTIER_PROCESS", "HOSTNAME"} <= read
    k8s_names = set(_k8s_env())
    # One pod template for every process: its index comes from the pod's name (HOSTNAME).
    assert cluster <= k8s_names and "FRONTIER_PROCESS" not in k8s_names
    for service in cluster_services().values():
        assert cluster | {"FRONTIER_PROCESS"} <= set(service["environment"])
        k8s_names |= set(service["environment"])
    assert {n for n in k8s_names if not n.startswith("FRONTIER_")} <= RUNTIME_VARIABLES
    assert {n for n in k8s_names if n.startswith("FRONTIER_")} <= read


def test_statefulset_peers_are_its_pods_behind_the_headless_service() -> None:
    sts = statefulset()
    spec = sts["spec"]
    replicas = spec["replicas"]
    assert replicas >= 2
    # Every process waits for all the others: they start together.
    assert spec["podManagementPolicy"] == "Parallel"
    headless = cluster_service(headless=True)
    assert spec["serviceName"] == headless["metadata"]["name"]
    assert headless["spec"]["clusterIP"] == "None"
    # Peers must resolve each other before any of them is ready.
    assert headless["spec"]["publishNotReadyAddresses"] is True
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert headless["spec"]["selector"].items() <= labels.items()
    # The headless Service's fabric port is the container's, and the one every peer names.
    ports = {p["name"]: p for p in headless["spec"]["ports"]}
    assert set(ports) == {"fabric", "http"}
    for port_name, number in (("fabric", FABRIC_PORT), ("http", PORT)):
        assert ports[port_name]["port"] == number
        assert container_port(ports[port_name]["targetPort"], "StatefulSet") == number
    assert FABRIC_PORT != PORT
    env = _k8s_env()
    assert env["FRONTIER_PROCESSES"]["value"] == str(replicas)
    peers = env["FRONTIER_PEERS"]["value"].split(",")
    assert peers == [
        f"{sts['metadata']['name']}-{i}.{headless['metadata']['name']}:{ports['fabric']['port']}"
        for i in range(replicas)
    ]
    assert "FRONTIER_APIS" not in env, "the default (each peer's host, --port) is the API"
    # The pod's name ends in its ordinal, which is the index the CLI takes from HOSTNAME.
    assert not re.search(r"-\d+$", sts["metadata"]["name"])


def test_cluster_secret_and_tokens_come_from_secrets() -> None:
    env = _k8s_env()
    cluster_ref = env["FRONTIER_CLUSTER_SECRET"]["valueFrom"]["secretKeyRef"]
    tokens_ref = env["FRONTIER_TOKENS"]["valueFrom"]["secretKeyRef"]
    for ref in (cluster_ref, tokens_ref):
        assert set(ref) == {"name", "key"}, "not optional: the pod does not start without it"
        assert _secret_value(ref["name"], ref["key"])
    assert tokens_ref == container()["env"][0]["valueFrom"]["secretKeyRef"]
    # The cluster's example Secret is in its directory, and (like the tokens') not applied.
    example = k8s("Secret", CLUSTER)
    assert example["metadata"]["name"] == cluster_ref["name"]
    assert "secret.example.yaml" not in load(CLUSTER / "kustomization.yaml")["resources"]
    # compose: one secret for both processes, from $FRONTIER_CLUSTER_SECRET or a default
    # for local use that deploy/README.md names.
    values = {
        str(service["environment"]["FRONTIER_CLUSTER_SECRET"])
        for service in cluster_services().values()
    }
    (value,) = values
    default = COMPOSE_DEFAULT.fullmatch(value)
    assert default is not None and default[1] == "FRONTIER_CLUSTER_SECRET" and default[2]
    assert f"`{default[2]}`" in (DEPLOY / "README.md").read_text()


def test_statefulset_pod_is_the_deployment_pod_with_a_place_in_the_cluster() -> None:
    """The same image, arguments, security, resources, probes and grace period as the
    Deployment; its own data volume per pod and a fabric port."""
    single, cluster = pod_spec(), pod_spec("StatefulSet")
    for key in (
        "automountServiceAccountToken",
        "enableServiceLinks",
        "terminationGracePeriodSeconds",
        "securityContext",
    ):
        assert cluster[key] == single[key], key
    assert cluster["enableServiceLinks"] is False
    one, each = container(), container("StatefulSet")
    for key in (
        "image",
        "imagePullPolicy",
        "args",
        "readinessProbe",
        "livenessProbe",
        "lifecycle",
        "resources",
        "securityContext",
        "volumeMounts",
    ):
        assert each[key] == one[key], key
    assert each["ports"] == [
        *one["ports"],
        {"name": "fabric", "containerPort": FABRIC_PORT, "protocol": "TCP"},
    ]
    single_env = {v["name"]: v for v in one["env"]}
    assert {k: v for k, v in _k8s_env().items() if k in single_env} == single_env
    sts = statefulset()
    template = sts["spec"]["template"]["metadata"]
    single_template = k8s("Deployment")["spec"]["template"]["metadata"]
    assert template["annotations"] == single_template["annotations"]
    # Not the single process's pods: the cluster's Services never select the Deployment's.
    for headless in (True, False):
        selector = cluster_service(headless=headless)["spec"]["selector"]
        assert not selector.items() <= single_template["labels"].items()
    # The data directory: a claim per pod, like the single process's PersistentVolumeClaim.
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    data_mount = [m for m in each["volumeMounts"] if m["mountPath"] == DATA]
    assert [m["name"] for m in data_mount] == [claim["metadata"]["name"]]
    assert claim["spec"] == k8s("PersistentVolumeClaim")["spec"]
    volumes = [v for v in single["volumes"] if v["name"] != claim["metadata"]["name"]]
    assert cluster["volumes"] == volumes
    # Start-up waits for every peer: liveness only begins once the server answers, and the
    # startup probe allows longer than the processes wait for each other.
    startup = each["startupProbe"]
    assert startup["httpGet"] == one["livenessProbe"]["httpGet"]
    assert startup["periodSeconds"] * startup["failureThreshold"] > startup_timeout()
    # A change reaches the pods when they are deleted (together), not one by one.
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_cluster_service_for_clients_spreads_them_over_every_process() -> None:
    service = cluster_service(headless=False)
    assert service["metadata"]["name"] == k8s("Service")["metadata"]["name"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == statefulset()["spec"]["selector"]["matchLabels"]
    (port,) = service["spec"]["ports"]
    assert port["port"] == PORT
    assert container_port(port["targetPort"], "StatefulSet") == PORT


def test_compose_cluster_profile_is_two_processes_with_matching_peers() -> None:
    services = cluster_services()
    names = list(services)
    assert names == ["frontier-0", "frontier-1"]
    single = compose_service()
    envs = [_env_of(service) for service in services.values()]
    assert [env["FRONTIER_PROCESS"] for env in envs] == ["0", "1"]
    for env in envs:
        assert env["FRONTIER_PROCESSES"] == str(len(names))
        assert env["FRONTIER_PEERS"].split(",") == [f"{n}:{FABRIC_PORT}" for n in names]
        assert "FRONTIER_APIS" not in env
        # Apart from the index and the cluster, what the single process has.
        rest = {k: v for k, v in env.items() if k in _env_of(single)}
        assert rest == _env_of(single)
    assert {k: v for k, v in envs[0].items() if k != "FRONTIER_PROCESS"} == {
        k: v for k, v in envs[1].items() if k != "FRONTIER_PROCESS"
    }
    # Each process its own named volume at /data; the rest mounted as the single one's.
    named = set(load(DEPLOY / "compose.yaml")["volumes"])
    data_volumes = []
    for service in services.values():
        data = [v.split(":")[0] for v in service["volumes"] if v.split(":")[1] == DATA]
        assert len(data) == 1 and data[0] in named
        data_volumes.append(data[0])
        others = [v for v in service["volumes"] if v.split(":")[1] != DATA]
        assert others == [v for v in single["volumes"] if v.split(":")[1] != DATA]
    single_data = [v.split(":")[0] for v in single["volumes"] if v.split(":")[1] == DATA]
    assert len(set(data_volumes + single_data)) == len(names) + 1
    # Each API on a host port of its own (the single process's too: they may run together);
    # the fabric port is not published.
    host_ports = [p.split(":")[0] for s in [single, *services.values()] for p in s["ports"]]
    assert len(set(host_ports)) == len(host_ports) == len(names) + 1
    for service in services.values():
        assert [p.split(":")[1] for p in service["ports"]] == [str(PORT)]
        assert all(str(FABRIC_PORT) not in p for p in service["ports"])
        for key in ("build", "image", "command", "read_only", "tmpfs", "cap_drop"):
            assert service[key] == single[key], key
        for key in ("security_opt", "stop_signal", "stop_grace_period", "restart"):
            assert service[key] == single[key], key
        check = service["healthcheck"]
        assert {k: v for k, v in check.items() if k != "start_period"} == {
            k: v for k, v in single["healthcheck"].items() if k != "start_period"
        }
        # Health counts only once the processes have had time to find each other.
        assert seconds(check["start_period"]) > startup_timeout()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_builds_the_single_process_and_the_cluster() -> None:
    built = {}
    for directory in (K8S, CLUSTER):
        done = subprocess.run(
            ["kubectl", "kustomize", str(directory)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        built[directory] = sorted(
            (d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(done.stdout) if d
        )
    assert built[K8S] == [
        ("ConfigMap", "frontier-config"),
        ("Deployment", "frontier"),
        ("PersistentVolumeClaim", "frontier-data"),
        ("Service", "frontier"),
    ]
    assert built[CLUSTER] == [
        ("ConfigMap", "frontier-config"),
        ("Service", "frontier"),
        ("Service", "frontier-peers"),
        ("StatefulSet", "frontier"),
    ]


# --------------------------------------------------------------------------- a real server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str, token: str | None = None) -> int:
    """The status of a GET (0 if nothing answers)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as r:
            status: int = r.status
            return status
    except urllib.error.HTTPError as error:
        code: int = error.code
        error.close()
        return code
    except (urllib.error.URLError, OSError):
        return 0


@dataclass
class Running:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Launch, Running]]:
    """The server started with a launch's arguments; killed at the end if still running."""
    started = launch(request.param, tmp_path / "mounts")
    data = tmp_path / "data"
    data.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FRONTIER_")}
    env.update(started.env)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    running: Running | None = None
    try:
        for _attempt in range(3):
            port = _free_port()
            log = tmp_path / f"server-{port}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    started.local_argv(port, data),
                    cwd=data,  # like the image's WORKDIR: not the repository
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            running = Running(process, port, log)
            deadline = time.monotonic() + STARTUP
            while process.poll() is None and time.monotonic() < deadline:
                if _get(f"http://127.0.0.1:{port}/readyz") == 200:
                    break
                time.sleep(0.05)
            if process.poll() is None:
                break
            if "address already in use" not in running.tail().lower():
                raise AssertionError(f"the server exited at startup:\n{running.tail()}")
        assert running is not None and running.process.poll() is None
        assert _get(f"http://127.0.0.1:{running.port}/readyz") == 200, running.tail()
        yield started, running
    finally:
        if running is not None and running.process.poll() is None:
            running.process.kill()
        if running is not None:
            running.process.wait(SHUTDOWN)


def _inside(url: str, port: int) -> str:
    """A container URL (port 8080) as it is reached here."""
    assert f"127.0.0.1:{PORT}/" in url
    return url.replace(f"127.0.0.1:{PORT}/", f"127.0.0.1:{port}/")


def _health_command(command: list[str], port: int) -> list[str]:
    """A container health-check command as it runs here: this Python, the test's port."""
    local = [sys.executable if part == "python" else part for part in command]
    return [_inside(part, port) if HEALTH_URL.search(part) else part for part in local]


@pytest.mark.parametrize("server", LAUNCHES, indirect=True)
def test_server_starts_answers_health_and_stops_with_the_stop_signal(
    server: tuple[Launch, Running],
) -> None:
    started, running = server
    for url in started.health:
        assert _get(_inside(url, running.port)) == 200, running.tail()
    base = f"http://127.0.0.1:{running.port}"
    for path in ("/healthz", "/readyz", "/metrics"):
        assert _get(base + path) == 200
    tokens = started.env.get("FRONTIER_TOKENS")
    if tokens:
        # The tokens reached the server: the API wants one of them.
        assert _get(base + "/v1/operators") == 401
        assert _get(base + "/v1/operators", tokens.split(",")[0].split("=")[0]) == 200
    else:
        assert _get(base + "/v1/operators") == 200
    for command in started.health_commands:
        local = _health_command(command, running.port)
        assert subprocess.run(local, timeout=10, check=False).returncode == 0

    running.process.send_signal(signal.Signals[started.stop_signal])
    begun = time.monotonic()
    code = running.process.wait(SHUTDOWN)
    assert code == 0, running.tail()
    assert time.monotonic() - begun < 5.0, "an idle server should stop at once"
    # Stopped, the health check fails (exit 1: "unhealthy" to docker).
    for command in started.health_commands:
        local = _health_command(command, running.port)
        done = subprocess.run(local, timeout=10, capture_output=True, check=False)
        assert done.returncode == 1


# --------------------------------------------------------------------------- changing N


@pytest.mark.usefixtures("clean_env")
def test_the_statefulset_rescales_only_when_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``FRONTIER_RESCALE`` is in the pod template, off ("0"), and the server reads it:
    set to "1" for the start that changes N, the process starts with ``--rescale``."""
    assert _k8s_env()["FRONTIER_RESCALE"]["value"] == "0"
    assert "FRONTIER_RESCALE" in server_env_names()
    assert "--rescale" in serve_options()
    captured: list[Settings] = []

    def fake_serve(settings: Settings, *_rest: Any) -> None:
        captured.append(settings)

    monkeypatch.setattr(api.cli.serving, "_serve", fake_serve)
    monkeypatch.setattr(api.cli.serving, "asyncio_run", lambda coroutine: coroutine)
    monkeypatch.setattr("api.server.logs.configure_logging", lambda fmt: None)
    launch = cluster_launches("k8s", tmp_path)[0]
    monkeypatch.setenv("HOSTNAME", f"{statefulset()['metadata']['name']}-0")
    for value in ("0", "1"):
        for variable, setting in {**launch.env, "FRONTIER_RESCALE": value}.items():
            monkeypatch.setenv(variable, setting)
        args = [str(launch.files.get(a, a)) for a in launch.argv[3:]]
        main.main(args=args, prog_name="frontier", standalone_mode=False)
    assert [settings.rescale for settings in captured] == [False, True]


def test_the_rescale_job_moves_the_last_pod_s_inputs_between_the_statefulset_s_claims(
    tmp_path: Path,
) -> None:
    """The shrink's Job (not applied by kustomize) runs the image's ``frontier rescale move``
    as the server's user, from the last pod's claim to a kept one's (``--to-process`` its
    ordinal), every other claim's catalogue told; the real CLI accepts its arguments."""
    sts = statefulset()
    replicas = sts["spec"]["replicas"]
    job = k8s("Job", CLUSTER)
    spec = job["spec"]["template"]["spec"]
    [mover] = spec["containers"]
    assert "command" not in mover, "the Job keeps the image's ENTRYPOINT (python -m api)"
    assert mover["image"] == container("StatefulSet")["image"]
    assert spec["securityContext"] == pod_spec("StatefulSet")["securityContext"]
    assert mover["securityContext"] == container("StatefulSet")["securityContext"]
    assert spec["restartPolicy"] == "Never"
    template = sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"]}
    mounts = {m["mountPath"]: claims[m["name"]] for m in mover["volumeMounts"]}
    ordinals = {}
    for path, claim in mounts.items():
        found = re.fullmatch(rf"{template}-{sts['metadata']['name']}-(\d+)", claim)
        assert found, f"{claim} is not a claim of the StatefulSet"
        ordinals[path] = int(found[1])
    args = mover["args"]
    assert args[:2] == ["rescale", "move"]
    options = dict(zip(args[2::2], args[3::2], strict=True))
    assert set(options) == {"--from", "--to", "--to-process", "--catalogue"}
    assert ordinals[options["--from"]] == replicas - 1, "a scale-down removes the last pod"
    assert ordinals[options["--to"]] == int(options["--to-process"]) < replicas - 1
    # Every claim's catalogue is told (process 0's among them).
    assert sorted(ordinals[options[o]] for o in ("--from", "--to", "--catalogue")) == list(
        range(replicas)
    )
    for path in mounts:
        (tmp_path / path.strip("/")).mkdir()
    local = [str(tmp_path / a.strip("/")) if a in mounts else a for a in args]
    move = main.commands["rescale"]
    assert isinstance(move, click.Group)
    context = move.commands["move"].make_context("move", local[2:])
    assert context.params["to_process"] == int(options["--to-process"])
    # deploy/README.md runs it, with the rescale switch, to shrink.
    readme = (DEPLOY / "README.md").read_text()
    assert "kubectl apply -f deploy/k8s/cluster/rescale-move.example.yaml" in readme
    assert "FRONTIER_RESCALE" in readme
    assert "rescale-move.example.yaml" not in load(CLUSTER / "kustomization.yaml")["resources"]
