#!/usr/bin/env python3
"""Offline check of deploy/: parses every manifest, the compose file and the Dockerfiles, and
checks their structure against the real binaries: images, ports, probes, the environment
variables and flags the binaries read, config keys, references between objects, and that the
example sidecar config is the file the sidecar tests load.

Containers cannot be built here, so this is what stands between a renamed flag or config key
and a broken deployment. Run from anywhere: python3 deploy/check.py
Needs PyYAML (Debian: python3-yaml) and Python 3.11+ (tomllib). When target/debug/xjob-executor
exists, every sidecar config is also validated by the binary itself (--check).
"""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
EXAMPLE_CONFIG = DEPLOY / "sidecar" / "xjob-executor.toml"
errors = []


def fail(where, message):
    errors.append(f"{where}: {message}")


def read(path):
    return (ROOT / path).read_text()


# ---- what the binaries really read, taken from their source


def struct_fields(source, struct):
    body = re.search(r"pub struct " + struct + r" \{(.*?)\n\}", source, re.S)
    return set(re.findall(r"^\s+pub (\w+):", body.group(1), re.M)) if body else set()


def clap_flags(source):
    """--long flags of every clap struct field marked #[arg(long ...)]."""
    flags = set()
    for match in re.finditer(r"#\[arg\(long[^\]]*\)\]\s*(?:///[^\n]*\n\s*)*(\w+):", source):
        flags.add("--" + match.group(1).replace("_", "-"))
    return flags


ADMIN_CONFIG = read("admin/src/config.rs")
ADMIN_MAIN = read("admin/src/main.rs")
ADMIN_ENV = set(re.findall(r'lookup\("(XJOB_\w+)"\)', ADMIN_CONFIG)) | set(
    re.findall(r'env = "(XJOB_\w+)"', ADMIN_MAIN)
)
ADMIN_FLAGS = clap_flags(ADMIN_MAIN)
ADMIN_SUBCOMMANDS = {
    name.lower()
    for name in re.findall(r"^\s+(\w+)\(ServeArgs\),", ADMIN_MAIN, re.M)
}
ADMIN_CONFIG_KEYS = struct_fields(ADMIN_CONFIG, "Config")

SIDECAR_CONFIG = read("sidecar/src/config.rs")
SIDECAR_ENV = set(
    re.findall(r'"(XJOB_\w+)"', re.search(r"ENV_VARS[^=]*= \[(.*?)\];", SIDECAR_CONFIG, re.S).group(1))
)
SIDECAR_FLAGS = clap_flags(read("sidecar/src/main.rs"))
SIDECAR_KEYS = struct_fields(SIDECAR_CONFIG, "Config")
SIDECAR_BINARY = ROOT / "target" / "debug" / "xjob-executor"
SIDECAR_CRATE = read("sidecar/Cargo.toml")
BINARIES = set(re.findall(r'^name = "([\w-]+)"', read("admin/Cargo.toml") + SIDECAR_CRATE, re.M))

ADMIN_PORT = 8080
EXECUTOR_PORT = 9999
HEALTH_SERVICES = {"", "xjob.v1.JobAdmin", "xjob.v1.Registry", "xjob.v1.ExecutorService"}

for name, found in [
    ("admin env vars", ADMIN_ENV),
    ("admin flags", ADMIN_FLAGS),
    ("admin subcommands", ADMIN_SUBCOMMANDS),
    ("admin config keys", ADMIN_CONFIG_KEYS),
    ("sidecar env vars", SIDECAR_ENV),
    ("sidecar flags", SIDECAR_FLAGS),
    ("sidecar config keys", SIDECAR_KEYS),
]:
    if not found:
        fail("check.py", f"found no {name} in the source: the patterns here are out of date")


# ---- shared checks


def check_args(where, args, flags, subcommands=None):
    args = list(args or [])
    if subcommands is not None:
        if not args or args[0] not in subcommands:
            fail(where, f"first argument {args[:1]} is not one of {sorted(subcommands)}")
        args = args[1:]
    for arg in args:
        if arg.startswith("--") and arg.split("=")[0] not in flags:
            fail(where, f"flag {arg} is not a flag of the binary ({sorted(flags)})")


def check_env(where, names, allowed):
    for name in names:
        if name.startswith("XJOB_") and name not in allowed:
            fail(where, f"environment variable {name} is not read by the binary")


def check_sidecar_toml(where, text):
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        fail(where, f"not TOML: {error}")
        return
    for key in config:
        if key not in SIDECAR_KEYS:
            fail(where, f"unknown sidecar config key {key}")
    if SIDECAR_BINARY.exists():
        path = ROOT / "target" / "deploy-check.toml"
        path.write_text(text)
        env = {k: v for k, v in os.environ.items() if not k.startswith("XJOB_")}
        result = subprocess.run(
            [str(SIDECAR_BINARY), "--config", str(path), "--check"],
            env=env, capture_output=True, text=True,
        )
        path.unlink()
        if result.returncode != 0:
            fail(where, f"xjob-executor --check refused it: {result.stderr.strip()}")


def check_admin_toml(where, text):
    for key in tomllib.loads(text):
        if key not in ADMIN_CONFIG_KEYS:
            fail(where, f"unknown admin config key {key}")


def kind_of_image(image):
    name = image.split(":")[0].split("/")[-1]
    return {"xjob-admin": "admin", "xjob-executor": "executor"}.get(name)


# ---- Dockerfiles


def check_dockerfile(path, binaries, port):
    where = str(path.relative_to(ROOT))
    text = path.read_text()
    if len(re.findall(r"^FROM ", text, re.M)) < 2:
        fail(where, "not multi-stage (one FROM)")
    users = re.findall(r"^USER (\S+)", text, re.M)
    if not users or users[-1].split(":")[0] in ("0", "root"):
        fail(where, "the runtime image must run as a non-root USER")
    if "HEALTHCHECK" not in text or "xjob-probe" not in text:
        fail(where, "no HEALTHCHECK with xjob-probe")
    if f"EXPOSE {port}" not in text:
        fail(where, f"does not EXPOSE {port}")
    for binary in binaries:
        if binary not in BINARIES:
            fail(where, f"builds {binary}, which no Cargo.toml defines")
        if f"--bin {binary}" not in text:
            fail(where, f"does not build {binary}")
    for source in re.findall(r"^COPY (?!--from)(\S+) \S+$", text, re.M):
        if source != "." and not (ROOT / source).exists():
            fail(where, f"COPY source {source} does not exist")
    for name in re.findall(r"\b(XJOB_\w+)=", text):
        check_env(where, [name], ADMIN_ENV if port == ADMIN_PORT else SIDECAR_ENV)


check_dockerfile(DEPLOY / "docker" / "admin.Dockerfile", ["xjob", "xjob-probe"], ADMIN_PORT)
check_dockerfile(DEPLOY / "docker" / "executor.Dockerfile", ["xjob-executor", "xjob-probe"], EXECUTOR_PORT)


# ---- compose


def check_compose():
    where = "deploy/compose.yaml"
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose.get("services", {})
    for name in ("postgres", "admin-1", "admin-2", "app", "xjob-executor"):
        if name not in services:
            fail(where, f"service {name} is missing")
    admins = {}
    for name, service in services.items():
        spot = f"{where}: services.{name}"
        kind = kind_of_image(service.get("image", ""))
        build = service.get("build")
        if build and not (DEPLOY / build.get("context", ".") / build["dockerfile"]).exists():
            fail(spot, f"dockerfile {build['dockerfile']} does not exist")
        if "build" in service and kind is None:
            fail(spot, "builds an image that is neither xjob-admin nor xjob-executor")
        env = service.get("environment", {})
        for other in service.get("depends_on", []):
            if other not in services:
                fail(spot, f"depends on unknown service {other}")
        if kind == "admin":
            check_env(spot, env, ADMIN_ENV)
            check_args(spot, service.get("command"), ADMIN_FLAGS, ADMIN_SUBCOMMANDS)
            listen_port = int(str(env.get("XJOB_LISTEN", f"0.0.0.0:{ADMIN_PORT}")).rsplit(":", 1)[1])
            targets = [int(str(p).rsplit(":", 1)[1]) for p in service.get("ports", [])]
            if listen_port not in targets:
                fail(spot, f"publishes {targets}, but the admin listens on {listen_port}")
            admins[name] = listen_port
            database = str(env.get("XJOB_DATABASE_URL", ""))
            host = re.search(r"@([\w-]+):", database)
            if not host or host.group(1) not in services:
                fail(spot, f"XJOB_DATABASE_URL {database!r} names no service")
        if kind == "executor":
            check_env(spot, env, SIDECAR_ENV)
            check_args(spot, service.get("command"), SIDECAR_FLAGS)
            network = service.get("network_mode", "")
            if not network.startswith("service:") or network.split(":", 1)[1] not in services:
                fail(spot, "must share the app's network (network_mode: service:APP)")
            mounted = [v.split(":")[0] for v in service.get("volumes", [])]
            if "./sidecar/xjob-executor.toml" not in mounted:
                fail(spot, "does not mount the example config ./sidecar/xjob-executor.toml")
            for address in str(env.get("XJOB_ADMIN_ADDRS", "")).split(","):
                match = re.fullmatch(r"http://([\w-]+):(\d+)", address.strip())
                if not match or admins.get(match.group(1)) != int(match.group(2)):
                    fail(spot, f"admin address {address!r} is not an admin service and port")
            advertised = re.fullmatch(r"http://([\w-]+):(\d+)", str(env.get("XJOB_ADVERTISE_ADDRESS", "")))
            if not advertised or advertised.group(1) != network.split(":", 1)[-1] or int(advertised.group(2)) != EXECUTOR_PORT:
                fail(spot, "XJOB_ADVERTISE_ADDRESS must be http://APP:9999 (the shared network)")


check_compose()


# ---- Kubernetes


def check_probe(where, container, probe_name, allowed_ports):
    probe = container.get(probe_name)
    if not probe:
        fail(where, f"no {probe_name}")
        return
    grpc = probe.get("grpc")
    if not grpc:
        fail(where, f"{probe_name} is not a gRPC probe")
        return
    if grpc.get("port") not in allowed_ports:
        fail(where, f"{probe_name} port {grpc.get('port')} is not a container port {allowed_ports}")
    if grpc.get("service", "") not in HEALTH_SERVICES:
        fail(where, f"{probe_name} service {grpc.get('service')!r} is not served ({sorted(HEALTH_SERVICES)})")


def check_kubernetes():
    documents = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                documents.append((str(path.relative_to(ROOT)), doc))
    objects = {}
    for where, doc in documents:
        for field in ("apiVersion", "kind", "metadata"):
            if field not in doc:
                fail(where, f"a document has no {field}")
        objects[(doc.get("kind"), doc.get("metadata", {}).get("name"))] = doc
    kinds = {kind for kind, _ in objects}
    for needed in ("Deployment", "Service", "ConfigMap", "Secret"):
        if needed not in kinds:
            fail("deploy/kubernetes", f"no {needed}")

    def data_keys(kind, name):
        doc = objects.get((kind, name))
        if doc is None:
            return None
        return set(doc.get("data", {})) | set(doc.get("stringData", {}))

    images = set()
    for (kind, name), doc in objects.items():
        where = f"deploy/kubernetes: {kind}/{name}"
        if kind == "ConfigMap":
            for key, text in doc.get("data", {}).items():
                if key == "admin.toml":
                    check_admin_toml(f"{where} {key}", text)
                elif key == "xjob-executor.toml":
                    check_sidecar_toml(f"{where} {key}", text)
        if kind == "Service":
            selector = doc["spec"]["selector"]
            backends = [
                d for (k, _), d in objects.items()
                if k == "Deployment" and d["spec"]["template"]["metadata"]["labels"].items() >= selector.items()
            ]
            if not backends:
                fail(where, f"selector {selector} matches no Deployment")
            for port in doc["spec"]["ports"]:
                names = {
                    p.get("name") for d in backends
                    for c in d["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])
                }
                if isinstance(port.get("targetPort"), str) and port["targetPort"] not in names:
                    fail(where, f"targetPort {port['targetPort']} is no container port name")
        if kind != "Deployment":
            continue
        spec = doc["spec"]
        template = spec["template"]
        if spec["selector"]["matchLabels"].items() > template["metadata"]["labels"].items():
            fail(where, "selector does not match the pod labels")
        volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
        for container in template["spec"]["containers"]:
            spot = f"{where} container {container['name']}"
            role = kind_of_image(container.get("image", ""))
            images.add(role)
            ports = [p["containerPort"] for p in container.get("ports", [])]
            env_names = [e["name"] for e in container.get("env", [])]
            for entry in container.get("env", []):
                ref = entry.get("valueFrom", {})
                for ref_kind, field in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                    if field in ref:
                        keys = data_keys(ref_kind, ref[field]["name"])
                        if keys is None or ref[field]["key"] not in keys:
                            fail(spot, f"{entry['name']} refers to missing {ref_kind} key {ref[field]}")
            for mount in container.get("volumeMounts", []):
                volume = volumes.get(mount["name"])
                if volume is None:
                    fail(spot, f"mounts unknown volume {mount['name']}")
                elif "configMap" in volume and ("ConfigMap", volume["configMap"]["name"]) not in objects:
                    fail(spot, f"volume {mount['name']} uses missing ConfigMap {volume['configMap']['name']}")
            if role is None:
                continue
            context = container.get("securityContext", {}) | template["spec"].get("securityContext", {})
            if not context.get("runAsNonRoot"):
                fail(spot, "must run as non-root (runAsNonRoot)")
            expected_port = ADMIN_PORT if role == "admin" else EXECUTOR_PORT
            if expected_port not in ports:
                fail(spot, f"does not declare containerPort {expected_port}")
            check_probe(spot, container, "readinessProbe", ports)
            check_probe(spot, container, "livenessProbe", ports)
            args = container.get("args", [])
            if role == "admin":
                check_env(spot, env_names, ADMIN_ENV)
                check_args(spot, args, ADMIN_FLAGS, ADMIN_SUBCOMMANDS)
                if "XJOB_DATABASE_URL" not in env_names:
                    fail(spot, "no XJOB_DATABASE_URL (from a Secret)")
            else:
                check_env(spot, env_names, SIDECAR_ENV)
                check_args(spot, args, SIDECAR_FLAGS)
            if "--config" in args:
                config_path = args[args.index("--config") + 1]
                mounted = [
                    m for m in container.get("volumeMounts", [])
                    if config_path.startswith(m["mountPath"].rstrip("/") + "/")
                ]
                if not mounted:
                    fail(spot, f"--config {config_path} is not in a mounted volume")
                else:
                    volume = volumes.get(mounted[0]["name"], {})
                    key = config_path.rsplit("/", 1)[1]
                    keys = data_keys("ConfigMap", volume.get("configMap", {}).get("name"))
                    if keys is None or key not in keys:
                        fail(spot, f"--config {config_path}: its ConfigMap has no key {key}")
    for role in ("admin", "executor"):
        if role not in images:
            fail("deploy/kubernetes", f"no container runs the xjob-{role} image")


check_kubernetes()


# ---- the example sidecar config is the one the sidecar tests load

check_sidecar_toml("deploy/sidecar/xjob-executor.toml", EXAMPLE_CONFIG.read_text())
if "/../deploy/sidecar/xjob-executor.toml" not in read("sidecar/tests/sidecar.rs"):
    fail("sidecar/tests/sidecar.rs", "does not load deploy/sidecar/xjob-executor.toml")
if "COPY deploy/sidecar/xjob-executor.toml" not in read("deploy/docker/executor.Dockerfile"):
    fail("deploy/docker/executor.Dockerfile", "does not ship deploy/sidecar/xjob-executor.toml")

if errors:
    print("deploy/ check failed:", file=sys.stderr)
    for error in errors:
        print(f"  {error}", file=sys.stderr)
    sys.exit(1)
binary_note = "with" if SIDECAR_BINARY.exists() else "without (not built)"
print(f"deploy/ ok: Dockerfiles, compose, Kubernetes manifests; sidecar configs checked {binary_note} xjob-executor --check")
