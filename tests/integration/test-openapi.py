#!/usr/bin/python3
"""Integration: real replies of carreld against the response schemas of its OpenAPI description.

Starts carreld on libvirt's test driver (TCP on 127.0.0.1, --test-hooks), reads the description
it serves at GET /v1/openapi.json (which must be manager/api/openapi.json), then makes requests
over as many routes as the test driver allows, successes and refusals alike. Each reply is
checked against the operation's response for its status (or "default"): the content type must
be one the description names, and a JSON body must validate against its schema (JSON Schema
2020-12, python3-jsonschema). A reply that does not fit fails the test; so does a success that a
request expects and does not get. At the end it lists the operations no reply exercised.

Usage: test-openapi.py CARREL_DAEMON OPENAPI_JSON
"""

import copy
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import jsonschema
except ImportError:
    # Not a skip: the install list has it, so a machine without it is set up wrong.
    print("FAIL: python3-jsonschema is not installed (scripts/lib/common.sh lists it)")
    sys.exit(1)


class Description:
    """The served OpenAPI description: finds an operation and checks replies against it."""

    def __init__(self, doc):
        self.doc = doc
        self.templates = []
        for path, item in doc["paths"].items():
            for method, operation in item.items():
                self.templates.append((method.upper(), path, operation))
        self.seen = {}  # "METHOD /path/{template}" -> statuses replied

    def operation(self, method, path):
        """The operation of a concrete request path: literal segments beat {parameters}."""
        segments = path.split("?")[0].split("/")
        best = None
        for m, template, operation in self.templates:
            parts = template.split("/")
            if m != method or len(parts) != len(segments):
                continue
            literal = 0
            for want, got in zip(parts, segments):
                if want.startswith("{") and want.endswith("}"):
                    continue
                if want != got:
                    break
                literal += 1
            else:
                if best is None or literal > best[0]:
                    best = (literal, template, operation)
        return (best[1], best[2]) if best else (None, None)

    def response(self, operation, status):
        spec = operation["responses"].get(str(status), operation["responses"].get("default"))
        while spec is not None and "$ref" in spec:
            spec = self.pointer(spec["$ref"])
        return spec

    def pointer(self, ref):
        node = self.doc
        for key in ref.lstrip("#/").split("/"):
            node = node[key]
        return node

    def validate_json(self, schema, body):
        """Errors of body against schema, whose $refs point into the description."""
        root = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                "$ref": "#/$defs/reply", "$defs": {"reply": schema},
                "components": self.doc["components"]}
        validator = jsonschema.Draft202012Validator(root)
        return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
                for e in validator.iter_errors(body)]

    def check(self, method, path, status, ctype, raw):
        """Problems of one reply (an empty list when it fits the description)."""
        template, operation = self.operation(method, path)
        if operation:
            self.seen.setdefault(f"{method} {template}", set()).add(status)
            spec = self.response(operation, status)
        elif status in (404, 405):
            # No route (404), or not this method on it (405): the envelope as everywhere.
            spec = self.pointer("#/components/responses/Error")
        else:
            return [f"no operation for {method} {path}, yet status {status}"]
        if spec is None:
            return [f"status {status} is not described"]
        content = spec.get("content")
        if not content:
            return [f"status {status} has no body in the description, got {len(raw)} bytes"] \
                if raw else []
        media = (ctype or "").split(";")[0].strip()
        if media not in content:
            return [f"content type '{media}' is not one of {sorted(content)}"]
        if media != "application/json":
            return []
        try:
            body = json.loads(raw)
        except ValueError as e:
            return [f"not JSON: {e}"]
        return self.validate_json(content[media]["schema"], body)


class Daemon:
    """A carreld on test:///default in a temporary folder."""

    def __init__(self, program):
        self.dir = tempfile.mkdtemp(prefix="carrel-openapi-")
        self.disk = os.path.join(self.dir, "disk.qcow2")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", self.disk, "64M"], check=True)
        state = os.path.join(self.dir, "state")
        for sub in ("recipes", "cache"):
            os.makedirs(os.path.join(self.dir, sub))
        self.log = open(os.path.join(self.dir, "carreld.log"), "wb")
        # A process group of its own, so that teardown ends what it started (libguestfs).
        self.proc = subprocess.Popen(
            [program, "--state-dir", state, "--socket", "", "--libvirt-uri", "test:///default",
             "--listen", "127.0.0.1:0", "--test-hooks", "--recipes-dir",
             os.path.join(self.dir, "recipes"), "--cache-dir", os.path.join(self.dir, "cache")],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = wait_for_file(os.path.join(state, "web.url"))
        self.admin = wait_for_file(os.path.join(state, "admin.token"))
        match = re.match(r"http://([^:/]+):(\d+)$", self.url)
        self.host, self.port = match.group(1), int(match.group(2))

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.log.close()
        if not os.environ.get("CARREL_TEST_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def log_text(self):
        with open(self.log.name, "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]


def wait_for_file(path, timeout_s=60):
    until = time.monotonic() + timeout_s
    while time.monotonic() < until:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read().strip()
            if text:
                return text
        except FileNotFoundError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"carreld wrote no {path} within {timeout_s} s")


class Client:
    """Requests to the daemon; every reply is checked against the description once it is read."""

    def __init__(self, daemon):
        self.daemon = daemon
        self.desc = None
        self.failures = []
        self.count = 0

    def raw(self, method, path, body=None, token=None, ctype="application/json", stream=False):
        conn = http.client.HTTPConnection(self.daemon.host, self.daemon.port,
                                          timeout=5 if stream else 120)
        headers = {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            if not isinstance(body, (bytes, str)):
                body = json.dumps(body)
            headers["Content-Type"] = ctype
        conn.request(method, path, body=body, headers=headers)
        reply = conn.getresponse()
        # The event stream never ends: read until its first messages are in.
        data = read_events(reply, stream) if stream else reply.read()
        result = (reply.status, reply.getheader("Content-Type"), data, reply)
        conn.close()
        return result

    def call(self, method, path, body=None, token=None, expect=None, **kw):
        """The reply's JSON (or None), checked; expect: the status the request must get."""
        status, ctype, data, _ = self.raw(method, path, body, token, **kw)
        self.count += 1
        problems = self.desc.check(method, path, status, ctype, data)
        if expect is not None and status != expect:
            problems.append(f"expected {expect}, got {status}")
        for p in problems:
            self.failures.append(f"{method} {path} -> {status}: {p}\n    {data[:300]!r}")
        if ctype and ctype.startswith("application/json") and data:
            try:
                return json.loads(data)
            except ValueError:
                return None
        return None


def read_events(reply, names):
    """The stream's bytes once a message of each of names came (or 5 s passed)."""
    data = b""
    until = time.monotonic() + 5
    while time.monotonic() < until and not all(
            f"event: {n}\n".encode() in data[:data.rfind(b"\n\n")] for n in names):
        try:
            chunk = reply.read1(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data


def check_stream(c, token, session):
    """GET /v1/stream: the content type, and each message's data against x-carrel-events."""
    path = f"/v1/stream?session={session}"
    status, ctype, data, _ = c.raw("GET", path, token=token,
                                   stream=("sessions", "approvals", "timeline"))
    c.count += 1
    problems = c.desc.check("GET", path, status, ctype, b"")
    _, operation = c.desc.operation("GET", path)
    events = operation["responses"]["200"]["x-carrel-events"]
    seen = set()
    # Whole messages only: the last read may have stopped inside one.
    for message in data.decode("utf-8", "replace").split("\n\n")[:-1]:
        fields = dict(line.split(": ", 1) for line in message.splitlines() if ": " in line)
        if "event" not in fields:
            continue
        name = fields["event"]
        seen.add(name)
        if name not in events:
            problems.append(f"event '{name}' is not described")
            continue
        for p in c.desc.validate_json(events[name], json.loads(fields.get("data", "null"))):
            problems.append(f"event '{name}': {p}")
    if seen != set(events):
        problems.append(f"events seen {sorted(seen)}, described {sorted(events)}")
    for p in problems:
        c.failures.append(f"GET {path} -> {status}: {p}")


def check_schemas(doc):
    """Every schema of the description is a valid JSON Schema 2020-12 and its $refs resolve."""
    validator = jsonschema.Draft202012Validator
    for name, schema in doc["components"]["schemas"].items():
        validator.check_schema(schema)
    refs = re.findall(r'"\$ref": "([^"]+)"', json.dumps(doc))
    for ref in set(refs):
        node = doc
        for key in ref.lstrip("#/").split("/"):
            assert key in node, f"$ref {ref} does not resolve"
            node = node[key]


def self_test(desc):
    """The checks can fail: a session without its id, and an unknown member, do not validate."""
    session = {"id": "s-1", "name": "n"}
    schema = {"$ref": "#/components/schemas/Session"}
    bad = desc.validate_json(schema, session)
    assert any("'template' is a required property" in p for p in bad), bad
    env = {"error": {"code": "not_found", "message": "m", "extra": 1}}
    assert desc.validate_json({"$ref": "#/components/schemas/Error"}, env), "extra member passed"
    assert desc.check("GET", "/v1/sessions/s-1", 200, "text/plain", b"x"), "wrong type passed"
    desc.seen.clear()


def exercise(c, d):
    """Requests over the routes, in an order that gives each a subject; each reply is checked."""
    admin = d.admin
    c.call("GET", "/v1/healthz", expect=200)
    c.call("GET", "/v1/version", token=admin, expect=200)
    c.call("GET", "/metrics", token=admin, expect=200)
    c.call("GET", "/metrics", expect=401)
    c.call("GET", "/v1/whoami", token=admin, expect=200)
    c.call("GET", "/v1/roles", token=admin, expect=200)
    c.call("GET", "/v1/sessions", expect=401)
    c.call("GET", "/v1/nothing/here", token=admin, expect=404)
    c.call("PATCH", "/v1/sessions", {}, admin, expect=405)
    imp = {"name": "tiny", "disk": d.disk, "format": "qcow2"}
    c.call("POST", "/v1/templates", imp, admin, expect=201)
    c.call("POST", "/v1/templates", dict(imp, name="spare"), admin, expect=201)
    c.call("POST", "/v1/templates", dict(imp, color="red"), admin, expect=400)
    c.call("GET", "/v1/templates", token=admin, expect=200)
    c.call("GET", "/v1/templates/tiny", token=admin, expect=200)
    c.call("GET", "/v1/templates/tiny@1", token=admin, expect=200)
    c.call("DELETE", "/v1/templates/spare", token=admin, expect=200)
    c.call("POST", "/v1/templates/tiny/build", {}, admin)
    job = c.call("POST", "/v1/templates/tiny/warm", {}, admin)
    if job and "id" in job:
        c.call("GET", f"/v1/jobs/{job['id']}", token=admin, expect=200)
    c.call("GET", "/v1/jobs/j-nope", token=admin, expect=404)
    c.call("PUT", "/v1/templates/tiny/pool", {"size": 0}, admin, expect=200)
    c.call("PUT", "/v1/templates/tiny/pool", {"size": 99}, admin, expect=400)
    c.call("GET", "/v1/pools", token=admin, expect=200)
    c.call("GET", "/v1/policies", token=admin, expect=200)
    c.call("GET", "/v1/policies/default", token=admin)

    agent = c.call("POST", "/v1/tokens", {"role": "agent", "name": "agent-a"}, admin, expect=201)
    rita = c.call("POST", "/v1/tokens", {"role": "reviewer", "name": "rita"}, admin, expect=201)
    c.call("POST", "/v1/tokens", {"role": "agent", "name": "gone", "expires": "1h"}, admin,
           expect=201)
    c.call("GET", "/v1/tokens", token=admin, expect=200)
    c.call("DELETE", "/v1/tokens/gone", token=admin, expect=200)
    a, r = agent["token"], rita["token"]
    c.call("GET", "/v1/tokens", token=a, expect=403)
    c.call("POST", "/v1/login", {"token": r}, expect=200)
    c.call("POST", "/v1/login", {"token": "wrong"}, expect=401)
    c.call("POST", "/v1/logout", token=r, expect=204)

    s = c.call("POST", "/v1/sessions", {"template": "tiny", "name": "one", "ttl_s": 3600}, a,
               expect=201)
    c.call("POST", "/v1/sessions", {"template": "tiny", "vcpus": 99}, a, expect=400)
    sid = s["id"]
    base = f"/v1/sessions/{sid}"
    c.call("GET", "/v1/sessions", token=a, expect=200)
    c.call("GET", "/v1/sessions?all=1", token=admin, expect=200)
    c.call("GET", base, token=a, expect=200)
    c.call("GET", "/v1/sessions/one", token=r, expect=200)
    c.call("GET", "/v1/sessions/s-nope", token=a, expect=404)
    c.call("GET", f"{base}/control", token=a, expect=200)
    c.call("POST", f"{base}/control", {"action": "take"}, r, expect=200)
    c.call("GET", base, token=a, expect=200)  # with the lease held
    c.call("POST", f"{base}/control", {"action": "release"}, r, expect=200)
    c.call("POST", f"{base}/control", {"action": "grab"}, r, expect=400)

    ask = {"session_id": sid, "action": "a.test", "detail": {"why": "test"}}
    ap = c.call("POST", "/v1/test/approvals", ask, a, expect=201)
    c.call("GET", "/v1/approvals", token=r, expect=200)
    c.call("POST", f"/v1/approvals/{ap['id']}/approve", {"reason": "fine"}, r, expect=200)
    ap = c.call("POST", "/v1/test/approvals", ask, a, expect=201)
    c.call("POST", f"/v1/approvals/{ap['id']}/deny", None, r, expect=200)
    c.call("GET", "/v1/approvals?state=all", token=r, expect=200)
    c.call("POST", f"/v1/approvals/{ap['id']}/deny", None, a, expect=403)

    snap = c.call("POST", f"{base}/snapshots", {"name": "s1"}, a)
    c.call("GET", f"{base}/snapshots", token=a, expect=200)
    if snap and "id" in snap:
        c.call("POST", f"{base}/revert", {"snapshot": "s1"}, a)
        c.call("DELETE", f"{base}/snapshots/s1", token=a)
    c.call("DELETE", f"{base}/snapshots/nope", token=a)
    c.call("POST", f"{base}/revert", {"snapshot": "nope"}, a)
    c.call("POST", f"{base}/fork", {"count": 1}, a)
    c.call("POST", f"{base}/exec", {"argv": ["true"], "timeout_s": 5}, a)
    c.call("POST", f"{base}/exec", {"argv": []}, a, expect=400)
    c.call("GET", f"{base}/files?path=/tmp/x", token=a)
    c.call("PUT", f"{base}/files?path=/tmp/x", b"bytes", a, ctype="application/octet-stream")
    c.call("GET", f"{base}/files", token=a, expect=400)
    c.call("GET", f"{base}/events", token=a, expect=200)
    c.call("GET", f"{base}/events?after=1&limit=5", token=a, expect=200)
    c.call("GET", f"{base}/events?limit=x", token=a, expect=400)
    c.call("GET", f"{base}/egress", token=a, expect=200)
    c.call("GET", f"{base}/screenshot", token=a)
    c.call("GET", f"{base}/screenshot?format=jpeg&scale=0.5", token=a)
    c.call("GET", f"{base}/screenshots/shot-000000000000.png", token=a, expect=404)
    c.call("POST", f"{base}/computer", {"action": "left_click", "coordinate": [1, 1]}, a)
    shot = c.call("POST", f"{base}/computer", {"action": "screenshot"}, a, expect=200)
    ref = shot["results"][0]["output"]["ref"] if shot else None
    if ref:
        c.call("GET", f"{base}/screenshots/{ref}", token=r, expect=200)
    c.call("POST", "/v1/uploads", b"not a tar", a, ctype="application/x-tar")
    c.call("POST", f"{base}/artifacts", {"paths": ["/tmp"]}, a)
    c.call("GET", f"{base}/artifacts", token=a, expect=200)
    c.call("GET", "/v1/artifacts/a-nope", token=a, expect=404)
    c.call("GET", f"{base}/diff", token=a)
    c.call("POST", f"{base}/console", None, r)
    c.call("GET", f"{base}/console.vv", token=r)
    c.call("POST", f"{base}/pause", None, a)
    c.call("POST", f"{base}/resume", None, a)
    c.call("POST", f"{base}/hibernate", None, a)
    c.call("POST", f"{base}/resume", None, a)
    c.call("POST", f"{base}/stop", {"timeout_s": 0}, a)
    c.call("POST", f"{base}/start", None, a)
    c.call("POST", f"{base}/stop", {"timeout_s": 9999}, a, expect=400)

    c.call("POST", "/v1/test/approvals", ask, a, expect=201)  # pending: in the stream
    check_stream(c, r, sid)

    mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    c.call("POST", "/mcp", mcp, a, expect=200)
    c.call("POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, a,
           expect=202)
    c.call("POST", "/mcp", "{not json", a, expect=400)

    c.call("GET", "/v1/audit", token=r, expect=200)
    c.call("GET", "/v1/audit?limit=2&session=" + sid, token=admin, expect=200)
    c.call("GET", "/v1/audit?limit=0", token=admin, expect=400)
    c.call("GET", "/v1/audit/verify", token=admin, expect=200)
    c.call("DELETE", base, token=a, expect=200)
    c.call("DELETE", base, token=a)
    c.call("POST", "/v1/tokens/admin/rotate", None, admin, expect=200)


def main():
    program, source = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as f:
        in_tree = json.load(f)
    d = Daemon(program)
    c = Client(d)
    try:
        status, ctype, data, _ = c.raw("GET", "/v1/openapi.json", token=d.admin)
        if status != 200 or not ctype.startswith("application/json"):
            raise AssertionError(f"GET /v1/openapi.json: {status} {ctype}")
        served = json.loads(data)
        if served != in_tree:
            raise AssertionError(f"carreld serves another description than {source}")
        check_schemas(served)
        c.desc = Description(copy.deepcopy(served))
        self_test(c.desc)
        c.call("GET", "/v1/openapi.json", token=d.admin, expect=200)
        exercise(c, d)
    except Exception:
        print(d.log_text(), file=sys.stderr)
        d.stop()
        raise
    d.stop()
    all_ops = {f"{m} {p}" for m, p, _ in c.desc.templates}
    missed = sorted(all_ops - set(c.desc.seen))
    print(f"{c.count} replies checked; {len(all_ops) - len(missed)} of {len(all_ops)} operations")
    for op in sorted(c.desc.seen):
        print(f"  {op}: {sorted(c.desc.seen[op])}")
    if missed:
        print("not exercised: " + ", ".join(missed))
    if c.failures:
        print(f"{len(c.failures)} replies do not fit the description:", file=sys.stderr)
        for f in c.failures:
            print("  " + f, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
