#!/usr/bin/env python3
"""Fails unless the Gatehouse SDK's module graph is the SDK and the wire types only.

Reads `swift package describe --type json` on stdin and walks the target dependencies of the `Gatehouse`
library: any package product (NIO, Hummingbird, ...) or server target in that closure is an error. App
developers must be able to build the SDK for iOS without compiling the server's dependencies.
"""
import json
import sys

ALLOWED = {"Gatehouse", "GatehouseWire"}

package = json.load(sys.stdin)
targets = {t["name"]: t for t in package["targets"]}
seen, stack, problems = set(), ["Gatehouse"], []
while stack:
    name = stack.pop()
    if name in seen:
        continue
    seen.add(name)
    target = targets[name]
    if name not in ALLOWED:
        problems.append(f"target {name}")
    for product in target.get("product_dependencies") or []:
        problems.append(f"package product {product} (from {name})")
    stack.extend(target.get("target_dependencies") or [])

if problems:
    print("the Gatehouse SDK depends on more than Foundation and GatehouseWire:", ", ".join(problems))
    sys.exit(1)
print(f"SDK module graph: {sorted(seen)} (no server dependency)")
