#!/usr/bin/env python3
"""Writes link/symbol-order.txt: the binary's functions that a relay runs
as it starts and as it serves a little of everything, in the order it
first runs them. build.rs has the linker put them first, together, in a
release build (lld's --symbol-ordering-file): starting the relay then
maps 3.5 to 5 MB of its code instead of 12, which pages scattered over all
of it took with their neighbours (bench/README.md).

    python3 bench/symbol_order.py        (needs valgrind: apt-get install valgrind)

Run it again whenever Cargo.lock or the compiler changes: the names carry
hashes of both, and a test (`tests/relay/layout.rs`) fails when the file was
made for another Cargo.lock. Names that no longer exist are skipped by the
linker; a stale file costs memory, never correctness.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import outside  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "link", "symbol-order.txt")


def build_with_symbols():
    """The release binary with its symbol table: the same names as the
    stripped build (flags given to `cargo rustc` are not hashed into them)."""
    subprocess.run(
        ["cargo", "rustc", "--release", "--bin", "crosstalk", "--", "-C", "strip=none"],
        cwd=ROOT, check=True,
    )
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "crosstalk")


def workload(relay):
    """A little of everything a team's relay serves."""
    alice, bob = relay.tokens["alice"], relay.tokens["bob"]
    relay.request("GET", "/healthz", alice)
    relay.request("GET", "/readyz", alice)
    for n in range(20):
        relay.request("POST", "/api/channels/general/messages", alice, {"body": f"note {n}"})
    for _ in range(5):
        relay.request("GET", "/api/channels/general/messages?limit=100", bob)
    relay.request("GET", "/api/channels", bob)
    for n in range(5):
        relay.request("POST", "/api/messages", alice, {"to": "bob", "body": f"question {n}?"})
    relay.request("GET", "/api/inbox", bob)
    relay.request("GET", "/api/channels/general/wait?since_id=1&timeout_s=1", bob)
    relay.request("GET", "/api/people", bob)
    relay.request("GET", "/api/open", bob)
    relay.request("GET", "/", bob)
    session, version = outside.open_session(relay)
    headers = {"Accept": "application/json, text/event-stream",
               "Mcp-Session-Id": session, "Mcp-Protocol-Version": version}
    relay.request("POST", "/mcp", alice, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "post_message", "arguments": {"channel": "general", "body": "over MCP"}}}
    for _ in range(10):
        relay.request("POST", "/mcp", alice, call, headers)
    stateless, stateless_headers = outside.stateless_mcp(call)
    for _ in range(5):
        relay.request("POST", "/mcp", alice, stateless, stateless_headers)


def executed(profile, binary):
    """The binary's functions in the callgrind profile, in the order they
    first ran. A function's name is given where it first appears, as a
    caller (`fn=`) or as a callee (`cfn=`); later lines name it by number."""
    names, objects, owner, order = {}, {}, {}, {}
    current = callee_object = None
    with open(profile, errors="replace") as lines:
        for line in lines:
            line = line.rstrip("\n")
            found = re.match(r"(c?ob)=\((\d+)\)(?: (.*))?$", line)
            if found:
                kind, number, name = found.groups()
                if name:
                    objects[number] = name
                if kind == "ob":
                    current, callee_object = number, None
                else:
                    callee_object = number
                continue
            found = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?$", line)
            if not found:
                continue
            kind, number, name = found.groups()
            if name:
                names[number] = name
            if kind == "fn":
                owner[number] = current
                callee_object = None
                order.setdefault(number, None)
            else:
                owner.setdefault(number, callee_object or current)
    functions, listed = [], set()
    for number in order:
        if number not in names or objects.get(owner.get(number)) != binary:
            continue
        # Callgrind marks a function's recursive calls `name'2`; names of
        # its own, `0x…` and `(below main)`, are no symbol's.
        name = re.sub(r"'\d+$", "", names[number])
        if re.fullmatch(r"[A-Za-z_.$][\w.$]*", name) and name not in listed:
            listed.add(name)
            functions.append(name)
    return functions


def main():
    if not shutil.which("valgrind"):
        raise SystemExit("needs valgrind: apt-get install valgrind")
    binary = build_with_symbols()
    work = tempfile.mkdtemp(prefix="crosstalk-order-")
    try:
        copy = os.path.join(work, "crosstalk")
        shutil.copy(binary, copy)
        profile = os.path.join(work, "callgrind.out")
        # `serve` under callgrind; every other command as itself.
        wrapper = os.path.join(work, "run")
        with open(wrapper, "w") as script:
            script.write(f"""#!/bin/sh
if [ "$1" = serve ]; then
    exec valgrind -q --tool=callgrind --demangle=no --callgrind-out-file={profile} {copy} "$@"
fi
exec {copy} "$@"
""")
        os.chmod(wrapper, 0o755)
        relay = outside.Relay(wrapper, {})
        try:
            workload(relay)
        finally:
            relay.stop()
        functions = executed(profile, copy)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rustc = subprocess.run(["rustc", "-V"], capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as lock:
        digest = hashlib.sha256(lock.read()).hexdigest()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as out:
        out.write("# The functions a relay runs first, in that order: made by bench/symbol_order.py\n")
        out.write(f"# with {rustc}\n")
        out.write(f"# for Cargo.lock sha256 {digest}\n")
        out.write("\n".join(functions) + "\n")
    print(f"{len(functions)} functions written to {OUT}; `cargo build --release` links them first")


if __name__ == "__main__":
    main()
