#!/usr/bin/python3
"""Integration: GET /metrics of a real carreld on libvirt's test driver.

Starts carreld (test:///default, TCP on 127.0.0.1) and checks that:
- /metrics answers 401 without a token and 403 to an agent, 200 to the admin, as
  text/plain; version=0.0.4;
- every scrape parses under a strict parser of the text exposition format 0.0.4 written here
  (names, label syntax and escapes, numbers, HELP/TYPE before a family's samples and once,
  families not interleaved, no repeated series, histograms with increasing le ending in +Inf,
  cumulative counts, +Inf equal to _count, _sum present, counters not negative);
- carreld's families are there with their types (sessions by state, the four duration
  histograms, requests, errors, egress denials, free disk, process figures);
- a create bumps the create histogram's count and puts a session in carrel_sessions{running};
- a 404 (unknown route, and a missing session) shows in requests by status under the route's
  pattern, never the path, and in errors by code; a 401 shows too;
- no label carries the session's id.

Usage: test-metrics.py CARREL_DAEMON
"""

import http.client
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class ParseError(Exception):
    pass


def parse_value(text, where):
    if text in ("+Inf", "Inf"):
        return math.inf
    if text == "-Inf":
        return -math.inf
    if text == "NaN":
        return math.nan
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise ParseError(f"{where}: '{text}' is not a number")
    return float(text)


def parse_labels(text, pos, where):
    """Labels from text[pos] == '{' up to its '}': (dict, position after '}')."""
    labels = {}
    pos += 1
    while True:
        if text[pos:pos + 1] == "}":
            return labels, pos + 1
        m = LABEL_NAME.match(text, pos)
        if not m:
            raise ParseError(f"{where}: bad label name at column {pos}")
        name = m.group(0)
        pos = m.end()
        if text[pos:pos + 2] != '="':
            raise ParseError(f"{where}: label '{name}' without =\"")
        pos += 2
        value = []
        while True:
            if pos >= len(text):
                raise ParseError(f"{where}: unterminated value of label '{name}'")
            c = text[pos]
            if c == "\\":
                esc = text[pos + 1:pos + 2]
                if esc not in ("\\", '"', "n"):
                    raise ParseError(f"{where}: bad escape \\{esc} in label '{name}'")
                value.append("\n" if esc == "n" else esc)
                pos += 2
            elif c == '"':
                pos += 1
                break
            else:
                value.append(c)
                pos += 1
        if name in labels:
            raise ParseError(f"{where}: label '{name}' twice")
        labels[name] = "".join(value)
        if text[pos:pos + 1] == ",":
            pos += 1
        elif text[pos:pos + 1] != "}":
            raise ParseError(f"{where}: expected ',' or '}}' after label '{name}'")


def family_of(name, types):
    """The declared family a sample name belongs to (histogram suffixes included)."""
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[:-len(suffix)]
        if name.endswith(suffix) and types.get(base) == "histogram":
            return base
    return name


def parse(text):
    """{family: {"type", "help", "samples": [(name, labels, value)]}}, strictly."""
    if not text.endswith("\n"):
        raise ParseError("the text does not end with a line feed")
    families, types, order = {}, {}, []
    current = None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {n}"
        if line == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not METRIC_NAME.fullmatch(name):
                    raise ParseError(f"{where}: bad metric name '{name}'")
                fam = families.setdefault(name, {"type": None, "help": None, "samples": []})
                if fam["samples"]:
                    raise ParseError(f"{where}: {parts[1]} of '{name}' after its samples")
                if parts[1] == "TYPE":
                    if fam["type"] is not None or len(parts) != 4 or parts[3] not in TYPES:
                        raise ParseError(f"{where}: bad or repeated TYPE of '{name}'")
                    fam["type"] = types[name] = parts[3]
                else:
                    if fam["help"] is not None:
                        raise ParseError(f"{where}: HELP of '{name}' twice")
                    fam["help"] = parts[3] if len(parts) == 4 else ""
                if name not in order:
                    order.append(name)
                current = name
            continue
        m = METRIC_NAME.match(line)
        if not m:
            raise ParseError(f"{where}: no metric name")
        name, pos = m.group(0), m.end()
        labels = {}
        if line[pos:pos + 1] == "{":
            labels, pos = parse_labels(line, pos, where)
        rest = line[pos:]
        if not rest.startswith(" "):
            raise ParseError(f"{where}: no space before the value")
        fields = rest.split()
        if len(fields) not in (1, 2):
            raise ParseError(f"{where}: expected a value and an optional timestamp")
        value = parse_value(fields[0], where)
        if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
            raise ParseError(f"{where}: bad timestamp")
        fam_name = family_of(name, types)
        if fam_name != current:
            if fam_name in families and families[fam_name]["samples"]:
                raise ParseError(f"{where}: samples of '{fam_name}' are not together")
            current = fam_name
        fam = families.setdefault(fam_name, {"type": None, "help": None, "samples": []})
        if fam_name not in order:
            order.append(fam_name)
        key = (name, tuple(sorted(labels.items())))
        if any((s[0], tuple(sorted(s[1].items()))) == key for s in fam["samples"]):
            raise ParseError(f"{where}: series {key} twice")
        fam["samples"].append((name, labels, value))
    for name, fam in families.items():
        check_family(name, fam)
    return families


def check_family(name, fam):
    if fam["type"] == "counter":
        for s in fam["samples"]:
            if s[2] < 0 or math.isnan(s[2]):
                raise ParseError(f"counter {s[0]} is {s[2]}")
    if fam["type"] != "histogram":
        return
    groups = {}
    for sample, labels, value in fam["samples"]:
        rest = tuple(sorted((k, v) for k, v in labels.items() if k != "le"))
        g = groups.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if sample == name + "_bucket":
            if "le" not in labels:
                raise ParseError(f"{sample}{dict(rest)} has no le")
            g["buckets"].append((parse_value(labels["le"], sample), value))
        elif sample == name + "_sum":
            g["sum"] = value
        elif sample == name + "_count":
            g["count"] = value
        else:
            raise ParseError(f"histogram {name} has a sample {sample}")
    for rest, g in groups.items():
        les = [le for le, _ in g["buckets"]]
        counts = [c for _, c in g["buckets"]]
        if not les or les[-1] != math.inf:
            raise ParseError(f"{name}{dict(rest)}: the last bucket is not le=\"+Inf\"")
        if les != sorted(les) or len(set(les)) != len(les):
            raise ParseError(f"{name}{dict(rest)}: le not increasing")
        if counts != sorted(counts):
            raise ParseError(f"{name}{dict(rest)}: buckets are not cumulative")
        if g["count"] is None or g["sum"] is None:
            raise ParseError(f"{name}{dict(rest)}: no _count or _sum")
        if counts[-1] != g["count"]:
            raise ParseError(f"{name}{dict(rest)}: +Inf {counts[-1]} != _count {g['count']}")


def self_test():
    """The parser refuses what it must: each of these texts is broken in one way."""
    good = ('# HELP a_seconds x\n# TYPE a_seconds histogram\n'
            'a_seconds_bucket{le="1"} 1\na_seconds_bucket{le="+Inf"} 2\n'
            'a_seconds_sum 3.5\na_seconds_count 2\n# TYPE b gauge\nb{x="q\\"\\\\\\n"} -1e-3\n')
    fams = parse(good)
    assert fams["b"]["samples"][0][1] == {"x": 'q"\\\n'}, fams["b"]
    broken = [
        good.replace('le="1"} 1', 'le="1"} 3'),                 # not cumulative
        good.replace('a_seconds_count 2', 'a_seconds_count 5'),  # +Inf != count
        good.replace('le="+Inf"', 'le="2"'),                    # no +Inf
        good.replace('a_seconds_sum 3.5\n', ''),                # no sum
        good.replace('-1e-3', 'one'),                           # not a number
        good.replace('\\\\\\n', '\\t'),                          # bad escape
        good + "b{x=\"other\"} 1\n# TYPE c gauge\nc 1\nb{x=\"again\"} 1\n",  # interleaved
        good + "# TYPE b gauge\n",                              # TYPE after samples
        good.rstrip("\n"),                                      # no final line feed
        good + 'b{x="q\\"\\\\\\n"} 2\n',                         # repeated series
        good + "# TYPE c counter\nc -1\n",                      # negative counter
        good + "1bad 1\n",                                      # bad name
    ]
    for i, text in enumerate(broken):
        try:
            parse(text)
        except ParseError:
            continue
        raise AssertionError(f"the parser accepted broken text #{i}:\n{text}")


class Daemon:
    """A carreld on test:///default in a temporary folder."""

    def __init__(self, program):
        self.dir = tempfile.mkdtemp(prefix="carrel-metrics-")
        self.disk = os.path.join(self.dir, "disk.qcow2")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", self.disk, "64M"], check=True)
        self.state = os.path.join(self.dir, "state")
        for sub in ("recipes", "cache"):
            os.makedirs(os.path.join(self.dir, sub))
        self.log = open(os.path.join(self.dir, "carreld.log"), "wb")
        self.proc = subprocess.Popen(
            [program, "--state-dir", self.state, "--socket", "", "--libvirt-uri",
             "test:///default", "--listen", "127.0.0.1:0", "--recipes-dir",
             os.path.join(self.dir, "recipes"), "--cache-dir", os.path.join(self.dir, "cache")],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        url = wait_for_file(os.path.join(self.state, "web.url"))
        self.admin = wait_for_file(os.path.join(self.state, "admin.token"))
        m = re.match(r"http://([^:/]+):(\d+)$", url)
        self.host, self.port = m.group(1), int(m.group(2))

    def request(self, method, path, body=None, token=None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        headers = {}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if body is not None:
            body = json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=body, headers=headers)
        reply = conn.getresponse()
        data = reply.read()
        conn.close()
        return reply.status, reply.getheader("Content-Type"), data

    def call(self, method, path, body=None, token=None, expect=None):
        status, _, data = self.request(method, path, body, token)
        if expect is not None and status != expect:
            raise AssertionError(f"{method} {path}: expected {expect}, got {status}: {data!r}")
        return json.loads(data) if data else None

    def scrape(self):
        status, ctype, data = self.request("GET", "/metrics", token=self.admin)
        if status != 200:
            raise AssertionError(f"GET /metrics: {status}: {data!r}")
        if ctype != "text/plain; version=0.0.4; charset=utf-8":
            raise AssertionError(f"GET /metrics: content type '{ctype}'")
        text = data.decode("utf-8")
        return text, parse(text)

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


def value(fams, family, sample, **labels):
    """The sample's value, or 0 when the series does not exist (yet)."""
    for name, have, v in fams.get(family, {}).get("samples", []):
        if name == sample and have == labels:
            return v
    return 0


def total(fams, family, sample):
    return sum(v for name, _, v in fams.get(family, {}).get("samples", []) if name == sample)


EXPECTED_TYPES = {
    "carrel_http_requests_total": "counter",
    "carrel_errors_total": "counter",
    "carrel_create_duration_seconds": "histogram",
    "carrel_restore_duration_seconds": "histogram",
    "carrel_snapshot_duration_seconds": "histogram",
    "carrel_revert_duration_seconds": "histogram",
    "carrel_egress_denials_total": "counter",
    "carrel_sessions": "gauge",
    "carrel_pool_members": "gauge",
    "carrel_state_dir_free_bytes": "gauge",
    "carrel_state_dir_size_bytes": "gauge",
    "process_resident_memory_bytes": "gauge",
    "process_open_fds": "gauge",
}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0])


def refused_body(d, size):
    """Sends a body over the route's limit, without Expect: 100-continue (libsoup then reads it
    before it replies): the reply's status; the daemon must not keep what it read."""
    before = rss_kib(d.proc.pid)
    conn = http.client.HTTPConnection(d.host, d.port, timeout=120)
    conn.putrequest("POST", "/v1/sessions")
    conn.putheader("Authorization", f"Bearer {d.admin}")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(size))
    conn.endheaders()
    chunk = b"\0" * (1 << 20)
    for _ in range(size >> 20):
        conn.send(chunk)
    reply = conn.getresponse()
    reply.read()
    conn.close()
    grown = rss_kib(d.proc.pid) - before
    # AddressSanitizer keeps freed memory in quarantine (256 MiB): its RSS says nothing here;
    # the plain integration tier checks it.
    if "ASAN_OPTIONS" not in os.environ and grown > 16 << 10:
        raise AssertionError(f"a refused {size >> 20} MiB body grew carreld by {grown} KiB")
    return reply.status


def check(d):
    status, _, _ = d.request("GET", "/metrics")
    if status != 401:
        raise AssertionError(f"GET /metrics without a token: {status}, not 401")
    _, fams = d.scrape()
    for name, kind in EXPECTED_TYPES.items():
        got = fams.get(name, {}).get("type")
        if got != kind:
            raise AssertionError(f"{name}: type {got}, expected {kind}")
        if not fams[name]["help"]:
            raise AssertionError(f"{name} has no help")
    for name in ("carrel_state_dir_free_bytes", "carrel_state_dir_size_bytes",
                 "process_resident_memory_bytes", "process_open_fds"):
        if not value(fams, name, name) > 0:
            raise AssertionError(f"{name} is {value(fams, name, name)}")
    # Every state but destroyed is there, at 0 before any session.
    states = {labels["state"]: v for _, labels, v in fams["carrel_sessions"]["samples"]}
    if states.get("running") != 0 or "stopped" not in states or "destroyed" in states:
        raise AssertionError(f"carrel_sessions before any session: {states}")
    # The 401 above was counted under the route's pattern.
    if not value(fams, "carrel_http_requests_total", "carrel_http_requests_total",
                 method="GET", route="/metrics", status="401") >= 1:
        raise AssertionError("the 401 of /metrics is not in carrel_http_requests_total")
    if not value(fams, "carrel_errors_total", "carrel_errors_total", code="unauthorized") >= 1:
        raise AssertionError("the 401 is not in carrel_errors_total")

    imp = {"name": "tiny", "disk": d.disk, "format": "qcow2"}
    d.call("POST", "/v1/templates", imp, d.admin, expect=201)
    agent = d.call("POST", "/v1/tokens", {"role": "agent", "name": "agent-a"}, d.admin,
                   expect=201)["token"]
    status, _, _ = d.request("GET", "/metrics", token=agent)
    if status != 403:
        raise AssertionError(f"GET /metrics as an agent: {status}, not 403")

    _, before = d.scrape()
    creates = total(before, "carrel_create_duration_seconds",
                    "carrel_create_duration_seconds_count")
    s = d.call("POST", "/v1/sessions", {"template": "tiny", "name": "one"}, agent, expect=201)
    text, after = d.scrape()
    got = total(after, "carrel_create_duration_seconds", "carrel_create_duration_seconds_count")
    if got != creates + 1:
        raise AssertionError(f"create histogram count {creates} -> {got}, expected +1")
    if value(after, "carrel_create_duration_seconds", "carrel_create_duration_seconds_count",
             **{"from": "cold"}) < 1:
        raise AssertionError("the create is not under from=\"cold\"")
    if value(after, "carrel_sessions", "carrel_sessions", state="running") != 1:
        raise AssertionError(f"carrel_sessions{{running}} is not 1:\n{text}")

    requests = "carrel_http_requests_total"
    unmatched = value(after, requests, requests, method="GET", route="unmatched", status="404")
    missing = value(after, requests, requests, method="GET", route="/v1/sessions/*",
                    status="404")
    not_found = value(after, "carrel_errors_total", "carrel_errors_total", code="not_found")
    d.call("GET", "/v1/nothing/here", token=d.admin, expect=404)
    d.call("GET", "/v1/sessions/s-nope", token=d.admin, expect=404)
    d.call("GET", f"/v1/sessions/{s['id']}", token=agent, expect=200)
    text, fams = d.scrape()
    if value(fams, requests, requests, method="GET", route="unmatched",
             status="404") != unmatched + 1:
        raise AssertionError(f"the unknown route's 404 is not counted:\n{text}")
    if value(fams, requests, requests, method="GET", route="/v1/sessions/*",
             status="404") != missing + 1:
        raise AssertionError(f"the missing session's 404 is not counted:\n{text}")
    if value(fams, "carrel_errors_total", "carrel_errors_total",
             code="not_found") != not_found + 2:
        raise AssertionError(f"the 404s are not in carrel_errors_total:\n{text}")
    if value(fams, requests, requests, method="GET", route="/v1/sessions/*", status="200") < 1:
        raise AssertionError("the 200 of GET /v1/sessions/* is not counted")
    # A body refused before it is read (413, no handler ran) is counted too.
    too_big = value(fams, requests, requests, method="POST", route="/v1/sessions", status="413")
    limits = value(fams, "carrel_errors_total", "carrel_errors_total", code="limit_exceeded")
    status = refused_body(d, 64 << 20)
    if status != 413:
        raise AssertionError(f"a 64 MiB body sent: {status}, not 413")
    text, fams = d.scrape()
    if value(fams, requests, requests, method="POST", route="/v1/sessions",
             status="413") != too_big + 1:
        raise AssertionError(f"the 413 refused before its body is not counted:\n{text}")
    if value(fams, "carrel_errors_total", "carrel_errors_total",
             code="limit_exceeded") != limits + 1:
        raise AssertionError(f"the 413 is not in carrel_errors_total:\n{text}")
    # Paths never become labels: nothing says the session's id or the unknown path.
    for needle in (s["id"], "/v1/nothing", "s-nope"):
        if needle in text:
            raise AssertionError(f"'{needle}' appears in /metrics")


def main():
    self_test()
    d = Daemon(sys.argv[1])
    try:
        check(d)
    except Exception:
        print(d.log_text(), file=sys.stderr)
        d.stop()
        raise
    d.stop()
    print("metrics: parsed, counted and authenticated as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
