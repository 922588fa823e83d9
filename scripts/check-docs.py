#!/usr/bin/env python3
"""Fails when a public symbol of the Gatehouse SDK has no documentation comment.

Reads the symbol graphs `swift package generate-documentation --target Gatehouse` extracted (the module's own and
its extensions of other modules' types) and lists every public or open symbol declared in Sources/Gatehouse without
a doc comment. Synthesized members (no source location) and members inherited from other modules are not counted.
"""
import json
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
graphs = sorted(root.glob(".build/*/extracted-symbols/*/Gatehouse/Gatehouse*.symbols.json"))
if not graphs:
    sys.exit("check-docs: no symbol graph; run `swift package generate-documentation --target Gatehouse` first")
missing = []
counted = 0
for graph in graphs:
    for symbol in json.loads(graph.read_text())["symbols"]:
        if symbol.get("accessLevel") not in ("public", "open") or symbol["kind"]["identifier"] == "swift.extension":
            continue
        uri = symbol.get("location", {}).get("uri", "")
        if "/Sources/Gatehouse/" not in uri:
            continue
        counted += 1
        if not symbol.get("docComment"):
            line = symbol["location"]["position"]["line"] + 1
            missing.append(f"  {uri.split('/Sources/')[-1]}:{line}  {'.'.join(symbol['pathComponents'])}")
if missing:
    print(f"check-docs: {len(missing)} of {counted} public symbols have no documentation comment:", file=sys.stderr)
    print("\n".join(sorted(set(missing))), file=sys.stderr)
    sys.exit(1)
print(f"check-docs: all {counted} public symbols of Gatehouse are documented")
