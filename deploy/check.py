#!/usr/bin/env python3
"""Offline check of deploy/: parses every manifest, the compose file, the Dockerfiles and
.dockerignore, and checks them against the real binaries (images, ports, probes, the environment
variables and flags the binaries read, config keys), against each other (references, matching
tokens) and against what a cluster expects (the restricted Pod Security rules, stable admin node
ids, disruption budgets, anti-affinity, NetworkPolicies, scrape annotations, the app outliving
the sidecar at shutdown). Schemas are kubeconform's job (.ci/deploy-check.sh runs both).

Containers cannot be built here, so this is what stands between a renamed flag or config key
and a broken deployment. Run from anywhere: python3 deploy/check.py [--rendered=NAME=FILE[:SECRET=KEY,…]]
(--rendered adds a rendered Helm chart; the listed Secrets exist outside it.)
Needs PyYAML (Debian: python3-yaml) and Python 3.11+ (tomllib). When xjob-executor is built
(in $CARGO_TARGET_DIR or target/), every sidecar config is also validated by the binary itself
(--check), with the container's environment.
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
# --rendered NAME=FILE[:SECRET=KEY,KEY;…]: a rendered Helm chart to check like the manifests;
# the Secrets listed exist outside it (secrets.existingSecret) with those keys.
RENDERED = [arg.split("=", 1)[1] for arg in sys.argv[1:] if arg.startswith("--rendered=")]
# --prometheus-rule=FILE: the chart rendered with metrics.prometheusRule.enabled.
PROMETHEUS_RULES = [arg.split("=", 1)[1] for arg in sys.argv[1:] if arg.startswith("--prometheus-rule=")]


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
ADMIN_ENV = (
    set(re.findall(r'lookup\("(XJOB_\w+)"\)', ADMIN_CONFIG))
    | set(re.findall(r'\("(XJOB_\w+)", &mut self', ADMIN_CONFIG))
    | set(re.findall(r'env = "(XJOB_\w+)"', ADMIN_MAIN))
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
SIDECAR_BINARY = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "xjob-executor"
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


# The [tls] files of a pod come from a Secret mounted at run time, so they do not exist here.
# --check reads them (as the start does), so each is replaced by a throwaway self-signed
# certificate and key made once with openssl: the rest of the config is still checked for real.
TLS_STAND_IN = {}


def stand_in_tls_files():
    if not TLS_STAND_IN:
        directory = SIDECAR_BINARY.parent / "deploy-check-tls"
        directory.mkdir(exist_ok=True)
        cert, key = directory / "cert.pem", directory / "key.pem"
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
             "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True,
        )
        TLS_STAND_IN.update(cert=cert, key=key)
    return TLS_STAND_IN


def with_stand_in_tls_files(text, tls):
    files = {"cert": "cert", "ca": "cert", "client_cert": "cert", "key": "key", "client_key": "key"}
    for name, kind in files.items():
        value = tls.get(name)
        if isinstance(value, str) and value and not Path(value).exists():
            text = text.replace(f'"{value}"', f'"{stand_in_tls_files()[kind]}"')
    return text


def check_sidecar_toml(where, text, env=None):
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        fail(where, f"not TOML: {error}")
        return
    for key in config:
        if key not in SIDECAR_KEYS:
            fail(where, f"unknown sidecar config key {key}")
    if SIDECAR_BINARY.exists():
        path = SIDECAR_BINARY.parent / "deploy-check.toml"
        path.write_text(with_stand_in_tls_files(text, config.get("tls", {})))
        env = {k: v for k, v in os.environ.items() if not k.startswith("XJOB_")} | (env or {})
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
    # Build arguments are read by the build (option_env!), not by the binary at run time.
    build_args = set(re.findall(r"^ARG (\w+)", text, re.M))
    if "XJOB_GIT_SHA" not in build_args:
        fail(where, "no ARG XJOB_GIT_SHA: the build-info metric would not name the commit")
    for name in re.findall(r"\b(XJOB_\w+)=", text):
        if name not in build_args:
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
            for published in service.get("ports", []):
                if not str(published).startswith("127.0.0.1:"):
                    fail(spot, f"publishes {published} on every interface: the README promises loopback (127.0.0.1:…)")
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

WORKLOADS = ("Deployment", "StatefulSet")
# The "restricted" Pod Security Standard allows these volume types only.
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}


def load_documents(path, where=None):
    where = where or str(path.relative_to(ROOT))
    try:
        return [(where, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    except yaml.YAMLError as error:
        fail(where, f"not YAML: {error}")
        return []


def documented_secrets(text):
    """Secrets a manifest's header says to create (`kubectl create secret generic NAME
    --from-literal=KEY=…`): {name: {keys}}."""
    secrets = {}
    for command in re.findall(r"kubectl create secret generic (\S+)((?:.|\n)*?)(?:\n#\s*\n|\n[^#])", text):
        name, rest = command
        secrets[name] = set(re.findall(r"--from-literal=([\w.-]+)=", rest))
    return secrets


def pod_containers(spec):
    return spec.get("initContainers", []) + spec.get("containers", [])


def check_restricted(where, pod):
    """The rules of the "restricted" Pod Security Standard (v1.34) that a pod spec can break."""
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            fail(where, f"{field} is not allowed (restricted)")
    for volume in pod.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            fail(where, f"volume {volume['name']} is {sorted(kinds)} (restricted allows {sorted(RESTRICTED_VOLUMES)})")
    pod_context = pod.get("securityContext", {})
    for container in pod_containers(pod):
        spot = f"{where} container {container['name']}"
        context = container.get("securityContext", {})
        merged = pod_context | context
        if not merged.get("runAsNonRoot"):
            fail(spot, "runAsNonRoot must be true (restricted)")
        if merged.get("runAsUser") == 0:
            fail(spot, "runAsUser 0 (restricted)")
        seccomp = merged.get("seccompProfile", {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            fail(spot, "seccompProfile must be RuntimeDefault (restricted)")
        if context.get("privileged"):
            fail(spot, "privileged (restricted)")
        if context.get("allowPrivilegeEscalation") is not False:
            fail(spot, "allowPrivilegeEscalation must be false (restricted)")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            fail(spot, "capabilities must drop ALL (restricted)")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            fail(spot, f"adds capabilities {capabilities['add']} (restricted)")
        for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
            probe = container.get(probe_name, {})
            if "httpGet" in probe and probe["httpGet"].get("host"):
                fail(spot, f"{probe_name} sets a host")


def port_of(container, port):
    """A probe or policy port (number or name) resolved to the container's port number."""
    for declared in container.get("ports", []):
        if port in (declared["containerPort"], declared.get("name")):
            return declared["containerPort"]
    return None


def check_probe(where, container, probe_name, tcp_allowed):
    probe = container.get(probe_name)
    if not probe:
        fail(where, f"no {probe_name}")
        return
    if "tcpSocket" in probe and tcp_allowed:
        if port_of(container, probe["tcpSocket"].get("port")) is None:
            fail(where, f"{probe_name} port {probe['tcpSocket'].get('port')} is not a container port")
        return
    grpc = probe.get("grpc")
    if not grpc:
        fail(where, f"{probe_name} is not a gRPC probe")
        return
    if port_of(container, grpc.get("port")) is None:
        fail(where, f"{probe_name} port {grpc.get('port')} is not a container port")
    if grpc.get("service", "") not in HEALTH_SERVICES:
        fail(where, f"{probe_name} service {grpc.get('service')!r} is not served ({sorted(HEALTH_SERVICES)})")


def selects(selector, labels):
    return selector.items() <= labels.items()


def duration_seconds(text):
    match = re.fullmatch(r"(\d+)(ms|s|m|h)", str(text).strip())
    if not match:
        return None
    return int(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def sidecar_env(container):
    """The container's XJOB_* variables as the process would see them: literal values, with
    $(POD_IP) filled in, and a stand-in token for values read from Secrets."""
    env = {}
    for entry in container.get("env", []):
        if "value" in entry:
            env[entry["name"]] = entry["value"].replace("$(POD_IP)", "10.0.0.7")
        elif "secretKeyRef" in entry.get("valueFrom", {}):
            env[entry["name"]] = "stand-in-secret-value-0123456789"
    return {k: v for k, v in env.items() if k.startswith("XJOB_")}


def check_kubernetes(label, documents, external_secrets):
    """One set of manifests that is applied together: `label` names it in messages."""
    objects = {}
    for where, doc in documents:
        for field in ("apiVersion", "kind", "metadata"):
            if field not in doc:
                fail(where, f"a document has no {field}")
        objects[(doc.get("kind"), doc.get("metadata", {}).get("name"))] = doc
    kinds = {kind for kind, _ in objects}
    for needed in ("Service", "ConfigMap", "PodDisruptionBudget", "NetworkPolicy"):
        if needed not in kinds:
            fail(label, f"no {needed}")

    def data_keys(kind, name):
        if kind == "Secret" and name in external_secrets:
            return external_secrets[name]
        doc = objects.get((kind, name))
        if doc is None:
            return None
        return set(doc.get("data", {})) | set(doc.get("stringData", {}))

    workloads = [(name, doc) for (kind, name), doc in objects.items() if kind in WORKLOADS]
    policies = [doc for (kind, _), doc in objects.items() if kind == "NetworkPolicy"]
    budgets = [doc for (kind, _), doc in objects.items() if kind == "PodDisruptionBudget"]
    images = set()
    for (kind, name), doc in objects.items():
        where = f"{label}: {kind}/{name}"
        if kind == "ConfigMap":
            for key, text in doc.get("data", {}).items():
                if key == "admin.toml":
                    check_admin_toml(f"{where} {key}", text)
        if kind == "Service":
            selector = doc["spec"]["selector"]
            backends = [d for _, d in workloads if selects(selector, d["spec"]["template"]["metadata"]["labels"])]
            if not backends:
                fail(where, f"selector {selector} matches no workload")
            names = {
                p.get("name") for d in backends
                for c in d["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])
            }
            for port in doc["spec"]["ports"]:
                if isinstance(port.get("targetPort"), str) and port["targetPort"] not in names:
                    fail(where, f"targetPort {port['targetPort']} is no container port name")
        if kind == "NetworkPolicy":
            pods = [d for _, d in workloads if selects(doc["spec"]["podSelector"].get("matchLabels", {}), d["spec"]["template"]["metadata"]["labels"])]
            if not pods:
                fail(where, "podSelector matches no workload")
            containers = [c for d in pods for c in d["spec"]["template"]["spec"]["containers"]]
            for rule in doc["spec"].get("ingress", []):
                for port in rule.get("ports", []):
                    if not any(port_of(c, port["port"]) for c in containers):
                        fail(where, f"port {port['port']} is no port of the selected pods")
        if kind not in WORKLOADS:
            continue
        spec = doc["spec"]
        template = spec["template"]
        pod = template["spec"]
        pod_labels = template["metadata"]["labels"]
        if not selects(spec["selector"]["matchLabels"], pod_labels):
            fail(where, "selector does not match the pod labels")
        check_restricted(where, pod)
        if not any(selects(p["spec"]["podSelector"].get("matchLabels", {}), pod_labels) for p in policies):
            fail(where, "no NetworkPolicy selects its pods")
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        roles = {kind_of_image(c.get("image", "")) for c in pod["containers"]}
        for container in pod["containers"]:
            spot = f"{where} container {container['name']}"
            role = kind_of_image(container.get("image", ""))
            images.add(role)
            ports = [p["containerPort"] for p in container.get("ports", [])]
            env_names = [e["name"] for e in container.get("env", [])]
            env_values = {e["name"]: e.get("value") for e in container.get("env", [])}
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
                # The app next to a sidecar: it must outlive the sidecar's running HTTP jobs.
                if "executor" in roles:
                    check_app_outlives_sidecar(spot, pod, container, objects, volumes)
                continue
            expected_port = ADMIN_PORT if role == "admin" else EXECUTOR_PORT
            if expected_port not in ports:
                fail(spot, f"does not declare containerPort {expected_port}")
            check_metrics(spot, template, container, env_values)
            tls = any(name.startswith("XJOB_TLS_") for name in env_names)
            check_probe(spot, container, "readinessProbe", tcp_allowed=tls)
            check_probe(spot, container, "livenessProbe", tcp_allowed=tls or role == "executor")
            args = container.get("args", [])
            if role == "admin":
                check_env(spot, env_names, ADMIN_ENV)
                check_args(spot, args, ADMIN_FLAGS, ADMIN_SUBCOMMANDS)
                check_admin_workload(spot, kind, doc, container, budgets)
                for needed in ("XJOB_DATABASE_URL", "XJOB_EXECUTOR_TOKEN", "XJOB_BOOTSTRAP_TOKEN"):
                    if needed not in env_names:
                        fail(spot, f"no {needed} (from a Secret)")
            else:
                check_env(spot, env_names, SIDECAR_ENV)
                check_args(spot, args, SIDECAR_FLAGS)
                if "XJOB_ACCESS_TOKEN" not in env_names:
                    fail(spot, "no XJOB_ACCESS_TOKEN: the admins refuse executors without a token off loopback")
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
                    map_name = volume.get("configMap", {}).get("name")
                    keys = data_keys("ConfigMap", map_name)
                    if keys is None or key not in keys:
                        fail(spot, f"--config {config_path}: its ConfigMap has no key {key}")
                    elif role == "executor":
                        text = objects[("ConfigMap", map_name)]["data"][key]
                        check_sidecar_toml(f"{spot} {key}", text, sidecar_env(container))
    check_tokens_match(label, workloads, external_secrets)
    for role in ("admin", "executor"):
        if role not in images:
            fail(label, f"no container runs the xjob-{role} image")


def check_metrics(spot, template, container, env_values):
    """A metrics listener is a declared port, and the scrape annotations name it."""
    annotations = template["metadata"].get("annotations", {})
    metrics = env_values.get("XJOB_METRICS_LISTEN")
    if metrics:
        port = int(metrics.rsplit(":", 1)[1])
        if port_of(container, port) is None:
            fail(spot, f"metrics port {port} is not a container port")
        if annotations.get("prometheus.io/scrape") == "true" and annotations.get("prometheus.io/port") != str(port):
            fail(spot, f"prometheus.io/port {annotations.get('prometheus.io/port')} is not the metrics port {port}")
    elif annotations.get("prometheus.io/scrape") == "true" and not any(
        "XJOB_METRICS_LISTEN" in [e["name"] for e in c.get("env", [])]
        for c in template["spec"]["containers"]
    ):
        fail(spot, "scrape annotations but no container sets XJOB_METRICS_LISTEN")


def check_admin_workload(spot, kind, doc, container, budgets):
    """Stable node ids, spread replicas and a disruption budget."""
    template = doc["spec"]["template"]
    node_id = next((e for e in container.get("env", []) if e["name"] == "XJOB_NODE_ID"), None)
    if kind != "StatefulSet" or not node_id or node_id.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "metadata.name":
        fail(spot, "admins must be a StatefulSet with XJOB_NODE_ID from metadata.name (stable node ids)")
    labels = template["metadata"]["labels"]
    if doc["spec"].get("replicas", 1) > 1:
        if not any(selects(b["spec"]["selector"].get("matchLabels", {}), labels) for b in budgets):
            fail(spot, "no PodDisruptionBudget selects the admins")
        anti = template["spec"].get("affinity", {}).get("podAntiAffinity", {})
        terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution", []) + [
            t["podAffinityTerm"] for t in anti.get("preferredDuringSchedulingIgnoredDuringExecution", [])
        ]
        if not any(selects(t["labelSelector"].get("matchLabels", {}), labels) for t in terms):
            fail(spot, "no pod anti-affinity between the admins")


def check_app_outlives_sidecar(spot, pod, container, objects, volumes):
    """Every container gets SIGTERM at once: the app's preStop must hold it past the sidecar's
    shutdown_grace, and the grace period must cover both."""
    sidecar = next(c for c in pod["containers"] if kind_of_image(c.get("image", "")) == "executor")
    grace = 30
    config_path = (sidecar.get("args") or ["", ""])[-1]
    for mount in sidecar.get("volumeMounts", []):
        volume = volumes.get(mount["name"], {})
        if config_path.startswith(mount["mountPath"].rstrip("/") + "/") and "configMap" in volume:
            config_map = objects.get(("ConfigMap", volume["configMap"]["name"]), {})
            text = config_map.get("data", {}).get(config_path.rsplit("/", 1)[1], "")
            configured = duration_seconds(tomllib.loads(text).get("shutdown_grace", "30s"))
            grace = configured if configured is not None else grace
    sleep = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds")
    if sleep is None or sleep <= grace:
        fail(spot, f"needs a preStop sleep longer than the sidecar's shutdown_grace ({grace} s), found {sleep}")
    total = pod.get("terminationGracePeriodSeconds", 30)
    if sleep is not None and total <= max(sleep, grace):
        fail(spot, f"terminationGracePeriodSeconds {total} does not cover the preStop ({sleep} s)")


def check_tokens_match(label, workloads, external_secrets):
    """The admins' executor token and every sidecar's access token come from the same Secret key,
    so the admins accept the sidecars as shipped."""
    def source(container, name):
        for entry in container.get("env", []):
            if entry["name"] == name:
                ref = entry.get("valueFrom", {}).get("secretKeyRef")
                return (ref["name"], ref["key"]) if ref else ("literal", entry.get("value"))
        return None

    admin_tokens, sidecar_tokens = set(), []
    for name, doc in workloads:
        for container in doc["spec"]["template"]["spec"]["containers"]:
            role = kind_of_image(container.get("image", ""))
            if role == "admin":
                admin_tokens.add(source(container, "XJOB_EXECUTOR_TOKEN"))
            elif role == "executor":
                sidecar_tokens.append((name, source(container, "XJOB_ACCESS_TOKEN")))
    for name, token in sidecar_tokens:
        if token not in admin_tokens or token is None or token[0] == "literal":
            fail(label, f"{name}'s XJOB_ACCESS_TOKEN {token} is not the admins' XJOB_EXECUTOR_TOKEN {sorted(map(str, admin_tokens))}")


manifests = []
for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
    manifests += load_documents(path)
check_kubernetes("deploy/kubernetes", manifests, documented_secrets((DEPLOY / "kubernetes" / "admin.yaml").read_text()))
for rendered in RENDERED:
    name, _, rest = rendered.partition("=")
    path, _, secrets = rest.partition(":")
    external = {}
    for item in filter(None, secrets.split(";")):
        secret, _, keys = item.partition("=")
        external[secret] = set(keys.split(","))
    check_kubernetes(f"chart ({name})", load_documents(Path(path), f"chart ({name})"), external)


# ---- .dockerignore: the build context holds what the images need and nothing else


def docker_ignored(path, patterns):
    """Docker's rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        if any(re.fullmatch(regex, "/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            ignored = not negate
    return ignored


def check_dockerignore():
    where = ".dockerignore"
    path = ROOT / ".dockerignore"
    if not path.exists():
        fail(where, "missing: COPY . . would send target/ and .git to the build")
        return
    patterns = [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    for unwanted in ("target/debug/xjob", "admin/target/x", ".git/HEAD", "xjob-data/xjob.db", "docs/operations.md"):
        if not docker_ignored(unwanted, patterns):
            fail(where, f"{unwanted} would be sent to the build")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    members = re.search(r"members = \[(.*?)\]", read("Cargo.toml"), re.S).group(1)
    crates = [m for m in re.findall(r'"([^"]+)"', members) if m != "."]
    for file in tracked:
        top = file.split("/")[0]
        rust = (
            file in ("Cargo.toml", "Cargo.lock", "build.rs")
            or top in ("src", "proto")
            or (top in crates and not (top == "examples" and file.count("/") > 1 and not file.startswith("examples/src/")))
        )
        copied = file in re.findall(r"^COPY (?!--from)(\S+) \S+$", read("deploy/docker/executor.Dockerfile"), re.M)
        if (rust or copied) and docker_ignored(file, patterns):
            fail(where, f"{file} is needed by the image build but ignored")


check_dockerignore()


# ---- the example sidecar config is the one the sidecar tests load

check_sidecar_toml("deploy/sidecar/xjob-executor.toml", EXAMPLE_CONFIG.read_text())
if "/../deploy/sidecar/xjob-executor.toml" not in read("sidecar/tests/sidecar.rs"):
    fail("sidecar/tests/sidecar.rs", "does not load deploy/sidecar/xjob-executor.toml")
if "COPY deploy/sidecar/xjob-executor.toml" not in read("deploy/docker/executor.Dockerfile"):
    fail("deploy/docker/executor.Dockerfile", "does not ship deploy/sidecar/xjob-executor.toml")


# ---- monitoring: the alert rules and the dashboard parse and have the shape their tools load
# (the metric names in them are checked against a real /metrics by the Rust test suite:
# tests/tests/e2e/metrics.rs)


def check_monitoring():
    import json

    where = "deploy/monitoring/xjob-alerts.yaml"
    rules = yaml.safe_load(read(where))
    names = set()
    for group in rules.get("groups", []) if isinstance(rules, dict) else []:
        if not group.get("name") or not group.get("rules"):
            fail(where, f"group without a name or rules: {group}")
        for rule in group.get("rules", []):
            alert = rule.get("alert")
            if not alert or alert in names:
                fail(where, f"rule without a unique alert name: {rule}")
            names.add(alert)
            unknown = set(rule) - {"alert", "expr", "for", "labels", "annotations"}
            if unknown or not str(rule.get("expr", "")).strip():
                fail(where, f"{alert}: unknown keys {sorted(unknown)} or no expr")
            if "for" in rule and duration_seconds(rule["for"]) is None:
                fail(where, f"{alert}: for: {rule['for']!r} is not a duration")
            if (rule.get("labels") or {}).get("severity") not in ("critical", "warning"):
                fail(where, f"{alert}: severity must be critical or warning")
            if not (rule.get("annotations") or {}).get("summary"):
                fail(where, f"{alert}: no summary")
    if not names:
        fail(where, "no rules")
    where = "deploy/monitoring/xjob-dashboard.json"
    dashboard = json.loads(read(where))
    panels = dashboard.get("panels") or []
    if not panels or len({panel.get("id") for panel in panels}) != len(panels):
        fail(where, "no panels, or repeated panel ids")
    for panel in panels:
        if not panel.get("targets") or not all(t.get("expr") for t in panel["targets"]):
            fail(where, f"panel {panel.get('title')!r} has a target without a query")


check_monitoring()


def check_prometheus_rule():
    """The chart's copy of the rules is deploy/monitoring's, and its PrometheusRule renders
    exactly those groups."""
    copy = "deploy/helm/xjob/files/xjob-alerts.yaml"
    if read(copy) != read("deploy/monitoring/xjob-alerts.yaml"):
        fail(copy, "differs from deploy/monitoring/xjob-alerts.yaml: copy it again")
    expected = yaml.safe_load(read("deploy/monitoring/xjob-alerts.yaml"))["groups"]
    for path in PROMETHEUS_RULES:
        rules = [doc for _, doc in load_documents(Path(path), path) if doc.get("kind") == "PrometheusRule"]
        if len(rules) != 1:
            fail(path, f"{len(rules)} PrometheusRule objects rendered, expected 1")
            continue
        rule = rules[0]
        if rule.get("apiVersion") != "monitoring.coreos.com/v1" or not rule["metadata"].get("name"):
            fail(path, "PrometheusRule without monitoring.coreos.com/v1 or a name")
        if rule.get("spec", {}).get("groups") != expected:
            fail(path, "PrometheusRule groups differ from deploy/monitoring/xjob-alerts.yaml")


check_prometheus_rule()

if errors:
    print("deploy/ check failed:", file=sys.stderr)
    for error in errors:
        print(f"  {error}", file=sys.stderr)
    sys.exit(1)
binary_note = "with" if SIDECAR_BINARY.exists() else "without (not built)"
print(f"deploy/ ok: Dockerfiles, compose, Kubernetes manifests; sidecar configs checked {binary_note} xjob-executor --check")
