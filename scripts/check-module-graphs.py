#!/usr/bin/env python3
"""Fails unless two module graphs stay as small as the architecture says.

Reads `swift package describe --type json` on stdin and walks the target dependencies of:

- the SDK (`Gatehouse`): the SDK and the wire types only, no package product. App developers must be able to build
  it for iOS without compiling the server's dependencies.
- the domain (`GatehouseDomain`): the wire types, Argon2, and swift-crypto, swift-log, swift-mustache and
  swift-metrics' API (`CoreMetrics`: the server gives it a factory; never a backend such as Prometheus); no HTTP
  server, NIO or database driver. The compiler then keeps the flow one way: façades call the domain, the domain
  calls the store protocol, and nothing in the domain can reach for a request or a connection.

Then it reads the domain's sources (Sources/GatehouseDomain) for two things the package graph cannot show:

- every `import` line, whatever its spelling (`public`/`package`/`internal`/`fileprivate`/`private import`,
  `@preconcurrency`, `@_exported`, `@testable`, `@_implementationOnly import`, `import struct M.T`): the module
  must be one the domain may use;
- no `package` or `public` function, property, subscript or initializer of the domain (nor a requirement of one of
  its `package`/`public` protocols) returns, or has as its type, a type declared in Sources/GatehouseWire (a
  `public struct|enum|class|protocol|typealias|actor`): the domain never returns wire types, the façades map to
  them. WIRE_TYPES_ALLOWED lists, each with why, the ones the domain may hand out.

Before reading the sources it checks its own parsers on samples (a broken regex would pass everything), and it
prints what it checked. `--self-test` runs only those checks.
"""
import json
import pathlib
import re
import sys

GRAPHS = {
    "Gatehouse": ({"Gatehouse", "GatehouseWire"}, set()),
    "GatehouseDomain": ({"GatehouseDomain", "GatehouseWire", "GatehouseArgon2"}, {"Crypto", "CryptoExtras", "Logging", "Mustache", "CoreMetrics"}),
}

# SwiftPM can let a file import a module its target does not declare (it is in the build folder anyway): read the
# domain's imports too, and the types its declarations hand out.

ALLOWED_IMPORTS = {
    "Foundation", "Dispatch", "Crypto", "CryptoExtras", "Logging", "Mustache", "CoreMetrics", "GatehouseWire", "GatehouseArgon2",
}

# Wire types the domain may return, and why. Everything else from GatehouseWire stays on the façades' side.
WIRE_TYPES_ALLOWED = {
    # A JSON value: the plain data of custom user data, identity data, a session's `options.device`, function
    # arguments and answers. It is the domain's own vocabulary for "what a client or function sent", not an envelope.
    "JSONValue": "plain JSON value type, the domain's data as well as the wire's",
    # The challenge types a native client says it supports (`oob`, `password`, `redirect`): the domain decides the
    # flow's next step from them and keeps them with the flow; a closed set of protocol words, not a response shape.
    "NativeAuthChallengeType": "closed set of protocol words the native flows decide on and store",
}

# `(@attr )* (access )? import (kind )? Module(.Sub)*`
IMPORT = re.compile(
    r"^\s*(?:@[\w]+(?:\([^)]*\))?\s+)*"
    r"(?:(?:public|package|internal|fileprivate|private)\s+)?"
    r"import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func|actor)\s+)?"
    r"([A-Za-z_][\w]*(?:\.[\w]+)*)"
)
WIRE_DECLARATION = re.compile(r"^(\s*)(?:@\w+\s+)*public\s+(?:final\s+|indirect\s+)*(?:struct|enum|class|protocol|typealias|actor)\s+(\w+)")
OUTER_DECLARATION = re.compile(r"^(?:@\w+\s+)*(?:public\s+|package\s+)?(?:final\s+|indirect\s+)*(?:struct|enum|class|protocol|actor|extension)\s+([\w.]+)")
EXPORTED_MEMBER = re.compile(
    r"\b(public|package)\s+(?:(?:static|class|final|override|nonisolated|mutating|nonmutating|lazy|convenience|required|weak|unowned|dynamic"
    r"|(?:private|fileprivate|internal|package)\(set\))\s+)*(func|var|let|subscript|init)\b"
)
PROTOCOL_MEMBER = re.compile(r"^\s*(?:(?:static|mutating|nonisolated)\s+)*(func|var|subscript|init)\b")
EXPORTED_PROTOCOL = re.compile(r"^\s*(?:@\w+\s+)*(?:public|package)\s+protocol\s+\w+")


def strip_comments_and_strings(text):
    """Blanks `//` and `/* */` comments and string literals (keeping line breaks), so braces and names in them do not count."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('"""', i):
            j = text.find('"""', i + 3)
            j = n if j < 0 else j + 3
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j - 2]) + '""')
            i = j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            out.append('"' + " " * (min(j, n) - i - 1) + '"')
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def imported_module(line):
    match = IMPORT.match(line)
    return match.group(1).split(".")[0] if match else None


def wire_types(sources):
    """`public` type names of GatehouseWire: top-level ones, and nested ones as `Outer.Inner`."""
    names, outer = set(), None
    for text in sources:
        for line in strip_comments_and_strings(text).splitlines():
            if (match := OUTER_DECLARATION.match(line)):
                outer = match.group(1)
            if (match := WIRE_DECLARATION.match(line)):
                names.add(match.group(2) if not match.group(1) else f"{outer}.{match.group(2)}")
    return names


def signature_end(text, start):
    """Where a declaration's signature ends: a `{` or `=` at depth 0, or a line break at depth 0 after a type."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "([<":
            depth += 1
        elif c in ")]>" and not (c == ">" and text[i - 1] == "-"):
            depth -= 1
        elif depth <= 0 and (c in "{=" or (c == "\n" and not text[i + 1:].lstrip(" \t").startswith(("->", "throws", "async", "where", ".", "&")))
                              and not text[start:i].rstrip().endswith(("->", ":", ",", "&"))):
            return i
        i += 1
    return i


def declared_type(kind, signature):
    """The type a declaration hands out: a function's or subscript's return type, a property's type."""
    if kind in ("func", "subscript"):
        # The `->` after the parameter list (a closure parameter may hold one of its own).
        depth, arrow = 0, None
        for index, c in enumerate(signature):
            if c in "([":
                depth += 1
            elif c in ")]":
                depth -= 1
            elif depth == 0 and signature.startswith("->", index):
                arrow = index
                break
        if arrow is None:
            return ""
        returned = signature[arrow + 2:]
        return re.split(r"\bwhere\b", returned)[0]
    if kind in ("var", "let"):
        match = re.match(r"\s*\w+\s*:\s*(.*)", signature, re.S)
        return match.group(1) if match else ""
    return ""


def exported_declarations(text):
    """(line, kind, declared type) of each `package`/`public` member, and each requirement of an exported protocol."""
    clean = strip_comments_and_strings(text)
    found = []
    for match in EXPORTED_MEMBER.finditer(clean):
        end = signature_end(clean, match.end())
        found.append((clean.count("\n", 0, match.start()) + 1, match.group(2), declared_type(match.group(2), clean[match.end():end])))
    # Requirements of an exported protocol are as visible as the protocol.
    lines = clean.splitlines(keepends=True)
    offset, depth, protocol_depth = 0, 0, None
    for number, line in enumerate(lines, 1):
        if protocol_depth is None and EXPORTED_PROTOCOL.match(line):
            protocol_depth = depth
        elif protocol_depth is not None and depth == protocol_depth + 1 and (match := PROTOCOL_MEMBER.match(line)):
            start = offset + match.end()
            end = signature_end(clean, start)
            found.append((number, match.group(1), declared_type(match.group(1), clean[start:end])))
        depth += line.count("{") - line.count("}")
        if protocol_depth is not None and depth <= protocol_depth and "}" in line:
            protocol_depth = None
        offset += len(line)
    return found


def wire_types_in(type_text, wire):
    named = set(re.findall(r"\b[A-Z]\w*(?:\.[A-Z]\w*)*", type_text))
    hits = set()
    for name in named:
        parts = name.split(".")
        for index in range(len(parts)):
            candidate = ".".join(parts[index:])
            if candidate in wire:
                hits.add(candidate)
                break
            if ".".join(parts[:index + 1]) in wire and index + 1 == len(parts):
                hits.add(".".join(parts[:index + 1]))
    # `Outer.Inner` names its outer type too.
    hits |= {part for name in named for part in name.split(".")[:1] if part in wire}
    return hits


def self_test():
    problems = []
    for line, module in [
        ("import Foundation", "Foundation"),
        ("public import GatehouseArgon2", "GatehouseArgon2"),
        ("package import NIOCore", "NIOCore"),
        ("internal import Hummingbird", "Hummingbird"),
        ("private import PostgresNIO", "PostgresNIO"),
        ("fileprivate import SQLiteNIO", "SQLiteNIO"),
        ("@preconcurrency import NIOPosix", "NIOPosix"),
        ("@preconcurrency internal import NIOHTTP1", "NIOHTTP1"),
        ("@_exported import Hummingbird", "Hummingbird"),
        ("@_spi(Private) @testable import HummingbirdCore", "HummingbirdCore"),
        ("import struct NIOCore.ByteBuffer", "NIOCore"),
        ("  @preconcurrency public import class Foundation.NSRegularExpression", "Foundation"),
        ("let important = 1", None),
        ("// import NIOCore", None),
    ]:
        if imported_module(line) != module:
            problems.append(f"import scan: {line!r} gave {imported_module(line)!r}, expected {module!r}")
    wire = wire_types([
        "public struct ProfileResponse: Codable {\n    public struct Inner {}\n}\npublic enum JSONValue {}\n"
        "public typealias Claims = [String: JSONValue]\nstruct Hidden {}\nextension ProfileResponse {\n    public enum Kind {}\n}\n"
    ])
    if wire != {"ProfileResponse", "ProfileResponse.Inner", "JSONValue", "Claims", "ProfileResponse.Kind"}:
        problems.append(f"wire type scan: {sorted(wire)}")
    sample = """
package struct S {
    package func profile(_ id: String) async throws -> ProfileResponse { fatalError() }
    package func list(
        _ id: String, then: (Int) -> Int
    ) async throws(AuthError) -> [ProfileResponse.Inner] {
        fatalError()
    }
    package func fine(_ request: ProfileResponse) -> String { "-> ProfileResponse" }  // -> ProfileResponse
    public var data: [String: JSONValue]
    package private(set) var claims: Claims?
    package static let shared: Int = 1
    func hidden() -> ProfileResponse { fatalError() }
    package var computed: Result<ProfileResponse, Error> { fatalError() }
}
package protocol Store: Sendable {
    func session(id: String) async throws -> ProfileResponse?
    var name: String { get }
}
"""
    found = {(number, kind): wire_types_in(returned, wire) for number, kind, returned in exported_declarations(sample)}
    expected = {
        (3, "func"): {"ProfileResponse"}, (4, "func"): {"ProfileResponse.Inner", "ProfileResponse"}, (9, "func"): set(),
        (10, "var"): {"JSONValue"}, (11, "var"): {"Claims"}, (12, "let"): set(), (14, "var"): {"ProfileResponse"},
        (17, "func"): {"ProfileResponse"}, (18, "var"): set(),
    }
    if found != expected:
        problems.append(f"declaration scan: {found}, expected {expected}")
    return problems


problems = self_test()
for problem in problems:
    print(f"check-module-graphs.py self-test failed: {problem}")
if problems or "--self-test" in sys.argv:
    if not problems:
        print("check-module-graphs.py self-test passed")
    sys.exit(1 if problems else 0)

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

here = pathlib.Path(__file__).resolve().parent.parent
root = here / "Sources" / "GatehouseDomain"
files = sorted(root.rglob("*.swift"))
imports = {}
for path in files:
    for number, line in enumerate(strip_comments_and_strings(path.read_text()).splitlines(), 1):
        module = imported_module(line)
        if module is None:
            continue
        imports[module] = imports.get(module, 0) + 1
        if module not in ALLOWED_IMPORTS:
            print(f"{path.relative_to(here)}:{number}: the domain imports {module}")
            failed = True
print(f"GatehouseDomain imports ({len(files)} files): " + ", ".join(f"{name} ×{count}" for name, count in sorted(imports.items())))

wire = wire_types(path.read_text() for path in sorted((here / "Sources" / "GatehouseWire").rglob("*.swift")))
declarations, allowed_seen = 0, {}
for path in files:
    for number, kind, returned in exported_declarations(path.read_text()):
        declarations += 1
        for name in sorted(wire_types_in(returned, wire)):
            if name in WIRE_TYPES_ALLOWED:
                allowed_seen[name] = allowed_seen.get(name, 0) + 1
            else:
                print(f"{path.relative_to(here)}:{number}: a {kind} of the domain hands out the wire type {name} ({returned.strip()})")
                failed = True
print(
    f"GatehouseDomain wire types handed out: {declarations} package/public declarations read against {len(wire)} GatehouseWire types; "
    "allowed: " + (", ".join(f"{name} ×{count}" for name, count in sorted(allowed_seen.items())) or "none")
)
for name in sorted(set(WIRE_TYPES_ALLOWED) - set(allowed_seen)):
    print(f"WIRE_TYPES_ALLOWED lists {name}, which the domain no longer hands out: take it off the list")
    failed = True
sys.exit(1 if failed else 0)
