#!/usr/bin/python3
"""The stand-in internet's web server and a DNS probe, for tests/e2e/standin.sh (stdlib only).

usage: standin-server.py serve --tag TAG --addr ADDR --log FILE --cert CRT --key KEY
                               [--http PORT]... [--https PORT]...
       standin-server.py resolve SERVER NAME [TIMEOUT_S]

serve: HTTP and HTTPS (one certificate) on ADDR's ports. Every request is logged to FILE as one
  JSON line: {"t", "server": TAG, "addr", "port", "tls", "sni", "client", "request" (the request
  line), "method", "path", "host", "headers": [[name, value], ...]} with every header in the order
  received, repeats kept (a secret added by a proxy shows up next to a forged one). The body never
  echoes a header, so a secret seen by this server does not reach the client through it.
  Body: "HOST says hello" (HOST: the Host header without port, else the SNI, else ADDR); the
  server tagged "evil" answers "the evil server answers for HOST" instead, so a request that
  reaches it by forgery can't pass for the real one. GET /bytes/N adds N bytes of "x". GET /page
  is that line as an HTML page in large type, titled "stand-in HOST" (for a browser in a guest
  and OCR of its screenshot).
  Header X-Standin-Server: TAG. Connection errors (a failed TLS handshake) go to stderr, not to
  FILE; a client that gives up after the handshake (certificate refused) leaves no trace at all.
resolve: one A query over UDP; prints the addresses, one a line; "NXDOMAIN" and exit 3 for a
  name that does not exist; exit 2 for no answer or another error.
"""
import argparse
import html
import json
import os
import random
import socket
import socketserver
import ssl
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BYTES = 64 << 20


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "standin"
    sys_version = ""
    # Header and body leave in one write, without Nagle: as two segments, Nagle and the client's
    # delayed ACK add ~40 ms to every response (seen in the egress prototype's first bench).
    wbufsize = -1
    disable_nagle_algorithm = True
    # An idle keep-alive connection ends, so no thread waits on a client forever.
    timeout = 30

    def _do(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        srv = self.server
        sni = getattr(self.connection, "standin_sni", None)
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            host = host.split("]")[0] + "]"
        else:
            host = host.split(":")[0]
        host = host or sni or srv.addr
        srv.log({"t": round(time.time(), 3), "server": srv.tag, "addr": srv.addr,
                 "port": srv.port, "tls": srv.ctx is not None, "sni": sni,
                 "client": self.client_address[0], "request": self.requestline,
                 "method": self.command, "path": self.path, "host": host,
                 "headers": [[k, v] for k, v in self.headers.items()]})
        if srv.tag == "evil":
            line = "the evil server answers for %s\n" % host
        else:
            line = "%s says hello\n" % host
        body = line.encode()
        ctype = "text/plain"
        if self.path == "/page":
            ctype = "text/html; charset=utf-8"
            body = ("<!doctype html><html><head><title>stand-in %s</title></head>"
                    "<body style=\"font: bold 64px sans-serif; background: #fff; color: #000\">"
                    "<p>%s</p></body></html>\n" % (html.escape(host), html.escape(line.strip()))).encode()
        if self.path.startswith("/bytes/"):
            try:
                body += b"x" * min(int(self.path.split("/")[2]), MAX_BYTES)
            except ValueError:
                pass
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Standin-Server", srv.tag)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_OPTIONS = _do

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, addr, port, tag, logpath, ctx):
        self.addr, self.port, self.tag, self.logpath, self.ctx = addr, port, tag, logpath, ctx
        self.lock = threading.Lock()
        super().__init__((addr, port), Handler)

    def server_bind(self):
        # Not HTTPServer's: it calls getfqdn(), which waits for the resolver's timeout before
        # listen() in a namespace whose resolv.conf points nowhere.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.addr, self.port

    def finish_request(self, request, client_address):
        # The TLS handshake runs here, in the connection's thread: done in accept() (a wrapped
        # listening socket), one client that connects and says nothing stops the whole server.
        if self.ctx is not None:
            request.settimeout(10)
            try:
                request = self.ctx.wrap_socket(request, server_side=True)
            except (OSError, ssl.SSLError) as e:
                self.note("tls handshake from %s failed: %s" % (client_address[0], e))
                request.close()
                return
        try:
            super().finish_request(request, client_address)
        finally:
            if self.ctx is not None:
                self.shutdown_request(request)

    def handle_error(self, request, client_address):
        self.note("error with %s: %s" % (client_address[0], sys.exc_info()[1]))

    def note(self, text):
        sys.stderr.write("%s %s:%d %s\n" % (time.strftime("%H:%M:%S"), self.addr, self.port, text))
        sys.stderr.flush()

    def log(self, rec):
        # One write on an O_APPEND descriptor per line: the servers share the file.
        line = (json.dumps(rec) + "\n").encode()
        with self.lock:
            fd = os.open(self.logpath, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


def serve(args):
    # Whatever the caller left open (a test runner's pipe) is not held for the server's lifetime.
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    ctx = None
    if args.https:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        ctx.set_alpn_protocols(["http/1.1"])

        def remember_sni(sslsock, name, _ctx):
            sslsock.standin_sni = name

        ctx.sni_callback = remember_sni
    servers = [Server(args.addr, p, args.tag, args.log, None) for p in args.http]
    servers += [Server(args.addr, p, args.tag, args.log, ctx) for p in args.https]
    for s in servers:
        threading.Thread(target=s.serve_forever, daemon=True).start()
    sys.stderr.write("%s %s serving %s http %s https %s\n" % (
        time.strftime("%H:%M:%S"), args.tag, args.addr, args.http, args.https))
    sys.stderr.flush()
    threading.Event().wait()


def resolve(server, name, timeout):
    qid = random.randrange(1 << 16)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.rstrip(".").split(".")) + b"\0"
    q += struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(timeout)
        s.sendto(q, (server, 53))
        while True:
            data = s.recv(4096)
            if len(data) >= 12 and struct.unpack(">H", data[:2])[0] == qid:
                break
    _, flags, qd, an, _, _ = struct.unpack(">HHHHHH", data[:12])
    rcode = flags & 0xF
    if rcode == 3:
        return None
    if rcode:
        raise OSError("rcode %d" % rcode)

    def skip_name(i):
        while data[i]:
            if data[i] & 0xC0 == 0xC0:
                return i + 2
            i += data[i] + 1
        return i + 1

    i = 12
    for _ in range(qd):
        i = skip_name(i) + 4
    out = []
    for _ in range(an):
        i = skip_name(i)
        rtype, _, _, rdlen = struct.unpack(">HHIH", data[i:i + 10])
        i += 10
        if rtype == 1 and rdlen == 4:
            out.append(socket.inet_ntoa(data[i:i + 4]))
        i += rdlen
    return out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "resolve":
        if len(sys.argv) not in (4, 5):
            sys.exit(__doc__)
        try:
            addrs = resolve(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 1)
        except OSError as e:
            print("no answer: %s" % e, file=sys.stderr)
            sys.exit(2)
        if addrs is None:
            print("NXDOMAIN")
            sys.exit(3)
        print("\n".join(addrs))
        return
    p = argparse.ArgumentParser(usage=__doc__)
    p.add_argument("cmd", choices=["serve"])
    p.add_argument("--tag", required=True)
    p.add_argument("--addr", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--cert")
    p.add_argument("--key")
    p.add_argument("--http", type=int, action="append", default=[])
    p.add_argument("--https", type=int, action="append", default=[])
    args = p.parse_args()
    if args.https and not (args.cert and args.key):
        p.error("--https needs --cert and --key")
    serve(args)


if __name__ == "__main__":
    main()
