#!/usr/bin/python3
"""bench/kept-alive.py: one request timed on a kept-alive connection, as the SDKs send it.

Usage: kept-alive.py SOCKET TOKEN METHOD PATH [BODY]
Opens one connection (httpx, Debian's python3-httpx) to carreld's socket, sends GET
/v1/healthz on it first (the floor: a request that does nothing, on the same warm connection),
then METHOD PATH with BODY (JSON), and prints one JSON object: {"healthz_ms", "ms", "status",
"reply"}. One curl per request costs about 50 ms of its own start here, more than a pool take.
"""
import json
import sys
import time

from load import client  # bench/load.py's kept-alive client on carreld's socket


def main() -> int:
    socket, token, method, path = sys.argv[1:5]
    body = sys.argv[5] if len(sys.argv) > 5 else None
    with client(socket, token, 600) as c:
        c.get("/v1/healthz").raise_for_status()
        t0 = time.perf_counter()
        c.get("/v1/healthz").raise_for_status()
        t1 = time.perf_counter()
        r = c.request(method, path, content=body,
                      headers={"Content-Type": "application/json"} if body else None)
        t2 = time.perf_counter()
    try:
        reply = r.json()
    except ValueError:
        reply = r.text
    print(json.dumps({"healthz_ms": round((t1 - t0) * 1000, 2), "ms": round((t2 - t1) * 1000, 2),
                      "status": r.status_code, "reply": reply}))
    return 0 if r.status_code < 400 else 1


if __name__ == "__main__":
    sys.exit(main())
