#!/usr/bin/python3
"""bench/load's traffic: CLIENTS threads, each on its own kept-alive connection to carreld's Unix
socket, send mixed requests for SECONDS (list, show, events, screenshot, exec on the given
sessions, and create + destroy of `tiny` sessions, at most --creates cycles at once), while a
separate process probes GET /v1/healthz every --probe-ms on its own connection. Prints per route
count, p50/p99/max and statuses, the health p99 against its goal (met or missed, not asserted),
and one JSON line. Exits 1 when any request (health probes included) got a 5xx or failed outright.

Usage: load.py --socket S --token T --session ID [--session ID...] [--clients 16]
               [--seconds 300] [--creates 2] [--routes list,show,...] [--template tiny]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import sys
import threading
import time

import httpx

# Relative weights of the routes in the mix; create runs create + destroy as one cycle.
WEIGHTS = {"list": 30, "show": 30, "events": 15, "screenshot": 10, "exec": 10, "create": 5}
HEALTH_GOAL_MS = 100.0


def client(socket: str, token: str | None, timeout: float) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(
        transport=httpx.HTTPTransport(uds=socket),
        base_url="http://carreld",
        headers=headers,
        timeout=timeout,
    )


class Stats:
    """Per route: latencies (ms) and statuses; shared by the client threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ms: dict[str, list[float]] = {}
        self.status: dict[str, dict[str, int]] = {}
        self.failures: list[str] = []

    def add(self, route: str, ms: float, status: str) -> None:
        with self.lock:
            self.ms.setdefault(route, []).append(ms)
            counts = self.status.setdefault(route, {})
            counts[status] = counts.get(status, 0) + 1
            if status.startswith("5") or status == "error":
                if len(self.failures) < 20:
                    self.failures.append(f"{route}: {status}")


def timed(stats: Stats, route: str, fn) -> httpx.Response | None:
    t = time.perf_counter()
    try:
        r = fn()
    except httpx.HTTPError as e:
        stats.add(route, (time.perf_counter() - t) * 1000, "error")
        print(f"load: {route}: {type(e).__name__}: {e}", file=sys.stderr)
        return None
    stats.add(route, (time.perf_counter() - t) * 1000, str(r.status_code))
    if r.status_code >= 500:
        print(f"load: {route}: {r.status_code} {r.text[:200]}", file=sys.stderr)
    return r


def create_cycle(c: httpx.Client, stats: Stats, template: str) -> None:
    r = timed(stats, "create", lambda: c.post("/v1/sessions", json={"template": template}))
    if r is None or r.status_code != 201:
        return
    sid = r.json()["id"]
    timed(stats, "destroy", lambda: c.delete(f"/v1/sessions/{sid}"))


def worker(args, stats: Stats, deadline: float, creates: threading.Semaphore, seed: int) -> None:
    rng = random.Random(seed)
    routes = [r for r in args.routes if r in WEIGHTS]
    weights = [WEIGHTS[r] for r in routes]
    with client(args.socket, args.token, 600) as c:
        while time.monotonic() < deadline:
            route = rng.choices(routes, weights)[0]
            sid = rng.choice(args.session)
            if route == "create":
                # A bounded number of VMs come and go at once: the others keep reading.
                if not creates.acquire(blocking=False):
                    route = "show"
                else:
                    try:
                        create_cycle(c, stats, args.template)
                    finally:
                        creates.release()
                    continue
            if route == "list":
                timed(stats, route, lambda: c.get("/v1/sessions"))
            elif route == "show":
                timed(stats, route, lambda: c.get(f"/v1/sessions/{sid}"))
            elif route == "events":
                timed(stats, route, lambda: c.get(f"/v1/sessions/{sid}/events?limit=50"))
            elif route == "screenshot":
                timed(stats, route, lambda: c.get(f"/v1/sessions/{sid}/screenshot"))
            elif route == "exec":
                timed(stats, route, lambda: c.post(f"/v1/sessions/{sid}/exec", json={"argv": ["true"]}))


def prober(socket: str, interval_ms: float, stop, out) -> None:
    """In its own process: the clients' threads cannot delay its measurements."""
    ms: list[float] = []
    bad = 0
    with client(socket, None, 60) as c:
        while not stop.is_set():
            t = time.perf_counter()
            try:
                ok = c.get("/v1/healthz").status_code == 200
            except httpx.HTTPError:
                ok = False
            took = (time.perf_counter() - t) * 1000
            ms.append(took)
            bad += 0 if ok else 1
            time.sleep(max(0.0, interval_ms - took) / 1000)
    out.send((ms, bad))


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return 0.0
    i = max(1, int(len(s) * p / 100 + 0.999))
    return s[min(i, len(s)) - 1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--session", action="append", required=True, help="session for reads and exec")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=300)
    ap.add_argument("--creates", type=int, default=2, help="create/destroy cycles at once, at most")
    ap.add_argument("--routes", default=",".join(WEIGHTS), type=lambda s: s.split(","))
    ap.add_argument("--template", default="tiny")
    ap.add_argument("--probe-ms", type=float, default=50)
    args = ap.parse_args()
    unknown = [r for r in args.routes if r not in WEIGHTS]
    if unknown:
        ap.error(f"unknown routes: {', '.join(unknown)} (known: {', '.join(WEIGHTS)})")

    stop = multiprocessing.Event()
    parent, child = multiprocessing.Pipe()
    probe = multiprocessing.Process(target=prober, args=(args.socket, args.probe_ms, stop, child))
    probe.start()
    stats = Stats()
    creates = threading.Semaphore(args.creates)
    start = time.monotonic()
    deadline = start + args.seconds
    threads = [
        threading.Thread(target=worker, args=(args, stats, deadline, creates, i), daemon=True)
        for i in range(args.clients)
    ]
    for t in threads:
        t.start()
    print(f"load: {args.clients} clients for {args.seconds:.0f} s, routes {','.join(args.routes)}",
          file=sys.stderr)
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    stop.set()
    health_ms, health_bad = parent.recv()
    probe.join()

    print(f"\n{'route':<12} {'count':>7} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9} {'4xx':>5} "
          f"{'5xx':>5} {'err':>5}")
    report = {}
    total_5xx = total_err = 0
    for route in sorted(stats.ms):
        ms, st = stats.ms[route], stats.status[route]
        c4 = sum(n for s, n in st.items() if s.startswith("4"))
        c5 = sum(n for s, n in st.items() if s.startswith("5"))
        err = st.get("error", 0)
        total_5xx += c5
        total_err += err
        print(f"{route:<12} {len(ms):>7} {pct(ms, 50):>9.1f} {pct(ms, 99):>9.1f} {max(ms):>9.1f} "
              f"{c4:>5} {c5:>5} {err:>5}")
        report[route] = {"count": len(ms), "p50_ms": round(pct(ms, 50), 1),
                         "p99_ms": round(pct(ms, 99), 1), "statuses": st}
    h99 = pct(health_ms, 99)
    met = h99 <= HEALTH_GOAL_MS and health_bad == 0
    print(f"\nhealth: {len(health_ms)} probes, p50 {pct(health_ms, 50):.1f} ms, p99 {h99:.1f} ms, "
          f"max {max(health_ms, default=0):.1f} ms, {health_bad} failed; goal p99 <= "
          f"{HEALTH_GOAL_MS:.0f} ms: {'met' if met else 'missed'}")
    total = sum(len(v) for v in stats.ms.values())
    print(f"requests: {total} in {elapsed:.0f} s ({total / elapsed:.1f}/s); 5xx: {total_5xx}; "
          f"failed outright: {total_err}")
    for f in stats.failures:
        print(f"  {f}")
    print(json.dumps({
        "bench": "load", "clients": args.clients, "seconds": round(elapsed),
        "routes": report, "5xx": total_5xx, "errors": total_err,
        "health": {"count": len(health_ms), "p50_ms": round(pct(health_ms, 50), 1),
                   "p99_ms": round(h99, 1), "failed": health_bad, "goal_ms": HEALTH_GOAL_MS,
                   "goal": "met" if met else "missed"},
    }))
    # A probe that got no 200 is a failed request too; only the probes' latency goal is not asserted.
    return 1 if total_5xx or total_err or health_bad else 0


if __name__ == "__main__":
    sys.exit(main())
