"""The deploy/ files against the code: every flag, variable, port, path and signal is real.

Offline: no docker, no kubectl. The Dockerfile, compose.yaml and the Kubernetes manifests are
parsed here; each way of starting the server (the image's default command, compose's command,
the Deployment's args) is turned into a :class:`Launch` -- its argument list, environment,
mounted files and health URLs -- and checked against the real ``frontier`` command, the real
settings and the real aiohttp application. The last tests start the server with each launch's
own arguments (on 127.0.0.1 and a free port) and stop it with the image's stop signal.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import re
import shlex
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

import api.cli
import api.server.app
import api.server.auth
from api.cli import main, serve
from api.server import create_app
from service.app import Limits, Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"

PORT = 8080
"""The port every deploy file uses (the CLI's default too)."""
CONFIG = "/etc/frontier/config.yaml"
DATA = "/data"
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


def k8s(kind: str) -> dict[str, Any]:
    """The one manifest of ``kind`` under deploy/k8s."""
    found = [
        document
        for path in sorted(K8S.glob("*.yaml"))
        for document in yaml.safe_load_all(path.read_text())
        if isinstance(document, dict) and document.get("kind") == kind
    ]
    assert len(found) == 1, f"expected one {kind} under deploy/k8s, found {len(found)}"
    return found[0]


def pod_spec() -> dict[str, Any]:
    spec: dict[str, Any] = k8s("Deployment")["spec"]["template"]["spec"]
    return spec


def container() -> dict[str, Any]:
    containers = pod_spec()["containers"]
    assert len(containers) == 1
    first: dict[str, Any] = containers[0]
    return first


def compose_service() -> dict[str, Any]:
    services = load(DEPLOY / "compose.yaml")["services"]
    assert list(services) == ["frontier"]
    service: dict[str, Any] = services["frontier"]
    return service


def container_port(port: int | str) -> int:
    """A probe's or the Service's port: a number, or the name of a container port."""
    if isinstance(port, int):
        return port
    named = [p["containerPort"] for p in container()["ports"] if p.get("name") == port]
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


def server_env_names() -> set[str]:
    """The environment variables ``frontier serve`` reads (its options' defaults and body)."""
    names: set[str] = set()
    for node in ast.walk(function(api.cli, "serve")):
        key: ast.expr | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if isinstance(func, ast.Attribute) and (
                (func.attr == "get" and _is_environ(func.value))
                or (func.attr == "getenv" and isinstance(func.value, ast.Name))
            ):
                key = node.args[0]
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            names.add(key.value)
    return names


def handled_signals() -> set[str]:
    """The ``signal.SIG*`` names the server's run loop refers to (it handles them)."""
    return {
        node.attr
        for node in ast.walk(function(api.cli, "_serve"))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("SIG")
        and isinstance(node.value, ast.Name)
        and node.value.id == "signal"
    }


def drain_seconds() -> float:
    """The longest a graceful shutdown takes: closing WebSockets, then requests in flight."""
    timeouts = [
        keyword.value.value
        for node in ast.walk(function(api.cli, "_serve"))
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


def _secret_value(name: str, key: str) -> str:
    secret = k8s("Secret")
    assert secret["metadata"]["name"] == name, f"the Deployment refers to Secret {name!r}"
    value: str = secret["stringData"][key]
    return value


def dockerfile_launch() -> Launch:
    _options, command = image_healthcheck()
    env = {k: v for k, v in image_env().items() if k != "PATH"}
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


def compose_launch() -> Launch:
    service = compose_service()
    assert "entrypoint" not in service, "compose must keep the image's ENTRYPOINT"
    env: dict[str, str] = {k: v for k, v in image_env().items() if k != "PATH"}
    for name, value in service["environment"].items():
        required = re.fullmatch(r"\$\{(\w+):\?[^}]*\}", str(value))
        if required:
            assert required[1] == name, f"{name} is interpolated from {required[1]}"
            env[name] = SAMPLE_TOKENS if name == "FRONTIER_TOKENS" else "x"
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
        "compose",
        image_entrypoint() + [str(a) for a in service["command"]],
        env,
        files=files,
        writable=writable,
        health=health_urls(test[1:]),
        health_commands=[test[1:]],
        stop_signal=service["stop_signal"],
    )


def k8s_launch(workdir: Path) -> Launch:
    spec = container()
    assert "command" not in spec, "the Deployment must keep the image's ENTRYPOINT"
    env: dict[str, str] = {k: v for k, v in image_env().items() if k != "PATH"}
    for variable in spec["env"]:
        if "value" in variable:
            env[variable["name"]] = str(variable["value"])
        else:
            ref = variable["valueFrom"]["secretKeyRef"]
            assert ref.get("optional") is not True, "the tokens must not be optional"
            env[variable["name"]] = _secret_value(ref["name"], ref["key"])
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    files: dict[str, Path] = {}
    writable: set[str] = set()
    for mount in spec["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            config_map = k8s("ConfigMap")
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
    base = f"http://127.0.0.1:{container_port(spec['readinessProbe']['httpGet']['port'])}"
    return Launch(
        "k8s",
        image_entrypoint() + [str(a) for a in spec["args"]],
        env,
        files=files,
        writable=writable,
        health=[
            base + spec["readinessProbe"]["httpGet"]["path"],
            f"http://127.0.0.1:{container_port(spec['livenessProbe']['httpGet']['port'])}"
            + spec["livenessProbe"]["httpGet"]["path"],
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
        "k8s/configmap.yaml",
        "k8s/deployment.yaml",
        "k8s/kustomization.yaml",
        "k8s/pvc.yaml",
        "k8s/secret.example.yaml",
        "k8s/service.yaml",
    ]
    kinds = {}
    for path in paths:
        documents = list(yaml.safe_load_all(path.read_text()))
        assert len(documents) == 1 and isinstance(documents[0], dict), path
        if path.parent == K8S:
            kinds[path.name] = documents[0]["kind"]
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
    # ConfigMap data is mounted as files: each value is itself valid YAML.
    for text in k8s("ConfigMap")["data"].values():
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

    monkeypatch.setattr(api.cli, "_serve", fake_serve)
    monkeypatch.setattr(api.cli, "asyncio_run", lambda coroutine: coroutine)
    monkeypatch.setattr("api.server.logs.configure_logging", lambda fmt: None)
    args = [str(started.files.get(a, a)) for a in started.argv[3:]]
    if name != "dockerfile":
        assert started.option("--config") in started.files, "the --config file is not mounted"
    main.main(args=args, prog_name="frontier", standalone_mode=False)
    (settings,) = captured
    assert (settings.host, settings.port, settings.workers) == ("0.0.0.0", PORT, 1)
    assert settings.data_dir == DATA
    if name == "dockerfile":
        assert settings.tokens == {}
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
    (text,) = k8s("ConfigMap")["data"].values()
    assert yaml.safe_load(text) == shipped
    # Only limits: any other key would override the containers' flags.
    assert list(shipped) == ["limits"]


def test_readme_tables_match_the_code() -> None:
    readme = (DEPLOY / "README.md").read_text()
    limit_rows = dict(re.findall(r"^\| `(\w+)` \| ([\d.]+) \|", readme, flags=re.M))
    assert limit_rows == {f.name: str(f.default) for f in dataclasses.fields(Limits)}
    flag_rows = re.findall(r"^\| `(--[\w-]+)[^|]*\| ([^|]*)\|", readme, flags=re.M)
    assert {flag for flag, _ in flag_rows} == set(serve_options())
    variables = {v for _, cell in flag_rows for v in re.findall(r"`(FRONTIER_\w+)`", cell)}
    assert variables == server_env_names()


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
