#!/usr/bin/env python3
"""Turns the Kubernetes OpenAPI document (api/openapi-spec/swagger.json of the k8s.io/kubernetes
module) into the JSON schemas kubeconform reads, one file per kind, named as kubeconform's
`{{ .ResourceKind }}{{ .KindSuffix }}.json` template expects (deployment-apps-v1.json,
service-v1.json, networkpolicy-networking-v1.json).

The schemas are strict: every object that lists its properties refuses others, so a
misspelled field (`seccompProfil`, `readinesProbe`) fails instead of being ignored. Like the
community schema sets, int-or-string fields accept both, and quantities accept numbers.
Each kind file holds the definitions it refers to (and only those), so it stands alone.

Usage: kube-schemas.py SWAGGER_JSON OUT_DIR   (writes OUT_DIR/*.json, then OUT_DIR/.complete)
"""

import json
import sys
from pathlib import Path

INT_OR_STRING = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
QUANTITY = {"oneOf": [{"type": "string"}, {"type": "number"}]}


def tighten(schema):
    """Strict objects and the int-or-string/quantity unions, throughout one definition."""
    if isinstance(schema, list):
        return [tighten(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    if schema.get("format") == "int-or-string":
        return dict(INT_OR_STRING, description=schema.get("description", ""))
    out = {key: tighten(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def refs(schema, found):
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/definitions/"):
            found.add(ref[len("#/definitions/"):])
        for value in schema.values():
            refs(value, found)
    elif isinstance(schema, list):
        for value in schema:
            refs(value, found)


def closure(name, definitions):
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in definitions:
            continue
        seen.add(current)
        found = set()
        refs(definitions[current], found)
        todo.extend(found - seen)
    return seen


def main():
    swagger, out = Path(sys.argv[1]), Path(sys.argv[2])
    definitions = json.loads(swagger.read_text())["definitions"]
    definitions = {name: tighten(schema) for name, schema in definitions.items()}
    definitions["io.k8s.apimachinery.pkg.api.resource.Quantity"] = QUANTITY
    definitions["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = INT_OR_STRING
    out.mkdir(parents=True, exist_ok=True)
    written = 0
    for name, schema in definitions.items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            group = gvk["group"].split(".")[0]
            suffix = f"-{group}-{gvk['version']}" if group else f"-{gvk['version']}"
            used = closure(name, definitions)
            document = {
                "$schema": "http://json-schema.org/draft-04/schema#",
                "definitions": {key: definitions[key] for key in sorted(used)},
                "allOf": [{"$ref": f"#/definitions/{name}"}],
            }
            path = out / f"{gvk['kind'].lower()}{suffix}.json"
            path.write_text(json.dumps(document))
            written += 1
    (out / ".complete").write_text(f"{written}\n")
    print(f"{written} kind schemas in {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
