"""Holds a server.json to the MCP Registry's schema (2025-12-11), as the
registry's own copy ships in the PyPI package `skillsaw` (pinned in
requirements.txt), with jsonschema's format checks on; and, since the
schema allows any extra key, every key to one the schema names. Then makes
sure the check can fail: a copy with a misspelt key and one without its
description must not pass. Prints one JSON line.

  python server_json.py PATH
"""

import copy
import json
import sys
from importlib.resources import files

from jsonschema import Draft7Validator, FormatChecker

SCHEMA = json.loads(
    (files("skillsaw.schemas.mcp_registry.v2025_12_11") / "server.schema.json").read_text()
)
VALIDATOR = Draft7Validator(SCHEMA, format_checker=FormatChecker())


def resolve(node):
    while "$ref" in node:
        node = SCHEMA["definitions"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def branches(node, instance):
    """The schema's nodes that speak of `instance`: the node, what it
    refers to, each of its allOf, and those of its anyOf/oneOf it fits."""
    node = resolve(node)
    found = [node]
    for part in node.get("allOf", []):
        found += branches(part, instance)
    for part in node.get("anyOf", []) + node.get("oneOf", []):
        if Draft7Validator({"definitions": SCHEMA["definitions"], **resolve(part)}).is_valid(instance):
            found += branches(part, instance)
    return found


def unknown_keys(instance, node, path="$"):
    nodes = branches(node, instance)
    unknown = []
    if isinstance(instance, dict):
        named = {k: v for n in nodes for k, v in n.get("properties", {}).items()}
        maps = [n["additionalProperties"] for n in nodes if isinstance(n.get("additionalProperties"), dict)]
        for key, value in instance.items():
            if key in named:
                unknown += unknown_keys(value, named[key], f"{path}.{key}")
            elif maps:
                unknown += unknown_keys(value, maps[0], f"{path}.{key}")
            else:
                unknown.append(f"{path}.{key}")
    elif isinstance(instance, list):
        items = [n["items"] for n in nodes if isinstance(n.get("items"), dict)]
        for i, value in enumerate(instance):
            if items:
                unknown += unknown_keys(value, items[0], f"{path}[{i}]")
    return unknown


def problems(document):
    errors = [f"{list(e.path)}: {e.message}" for e in VALIDATOR.iter_errors(document)]
    return errors + [f"{key}: not a key the schema names" for key in unknown_keys(document, SCHEMA)]


document = json.load(open(sys.argv[1]))
misspelt = copy.deepcopy(document)
misspelt["remotes"][0]["headers"][0]["isSecrett"] = misspelt["remotes"][0]["headers"][0].pop("isSecret")
undescribed = copy.deepcopy(document)
del undescribed["description"]
print(json.dumps({
    "problems": problems(document),
    "misspelt": problems(misspelt),
    "undescribed": problems(undescribed),
}))
