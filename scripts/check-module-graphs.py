#!/usr/bin/env python3
"""Fails unless two module graphs stay as small as the architecture says.

Reads `swift package describe --type json` on stdin and walks the target dependencies of:

- the SDK (`Gatehouse`): the SDK and the wire types only, no package product. App developers must be able to build
  it for iOS without compiling the server's dependencies.
- the domain (`GatehouseDomain`): the wire types, Argon2, and swift-crypto, swift-log, swift-mustache and
  swift-metrics' API (`CoreMetrics`: the server gives it a factory; never a backend such as Prometheus); no HTTP
  server, NIO or database driver. The compiler then keeps the flow one way: façades call the domain, the domain
  calls the store protocol, and nothing in the domain can reach for a request or a connection.
"""
import json
import sys

GRAPHS = {
    "Gatehouse": ({"Gatehouse", "GatehouseWire"}, set()),
    "GatehouseDomain": ({"GatehouseDomain", "GatehouseWire", "GatehouseArgon2"}, {"Crypto", "CryptoExtras", "Logging", "Mustache", "CoreMetrics"}),
}

package = json.load(sys.stdin)
targets = {t["name"]: t for t in package["targets"]}
failed = False
for root, (allowed_targets, allowed_products) in GRAPHS.items():
    seen, stack, problems = set(), [root], []
    while stack:
        name = stack.pop()
        if name in seen or targets[name].get("type") == "plugin":
            # A plugin (EmbedResources) runs while building and links nothing into the module.
            continue
        seen.add(name)
        if name not in allowed_targets:
            problems.append(f"target {name}")
        for product in targets[name].get("product_dependencies") or []:
            if product not in allowed_products:
                problems.append(f"package product {product} (from {name})")
        stack.extend(targets[name].get("target_dependencies") or [])
    if problems:
        print(f"{root} depends on more than it may:", ", ".join(problems))
        failed = True
    else:
        print(f"{root} module graph: {sorted(seen)}, products {sorted(allowed_products)} at most")
# SwiftPM can let a file import a module its target does not declare (it is in the build folder anyway): read the
# domain's imports too.
import pathlib
import re

ALLOWED_IMPORTS = {
    "Foundation", "Dispatch", "Crypto", "CryptoExtras", "Logging", "Mustache", "CoreMetrics", "GatehouseWire", "GatehouseArgon2",
}
root = pathlib.Path(__file__).resolve().parent.parent / "Sources" / "GatehouseDomain"
for path in sorted(root.rglob("*.swift")):
    for number, line in enumerate(path.read_text().splitlines(), 1):
        match = re.match(r"^\s*(?:@\w+\s+)?(?:public\s+|package\s+)?import\s+(?:\w+\s+)?([\w.]+)", line)
        if match and match.group(1).split(".")[0] not in ALLOWED_IMPORTS:
            print(f"{path.relative_to(root.parent.parent)}:{number}: the domain imports {match.group(1)}")
            failed = True
sys.exit(1 if failed else 0)
