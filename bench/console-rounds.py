#!/usr/bin/python3
"""bench/console's measuring half (standard library only): the time from asking for the console
to the first frame, through carreld's websocket proxy and straight to QEMU's SPICE server,
alternating in one process. Both sides link and authenticate with tests/e2e/console-client.py's
code; only the transport differs.

  carrel  POST /v1/sessions/ID/console (cookie from one login before the rounds, as the web page
          has), WS /v1/console/TICKET: main link + auth + MAIN_INIT + ATTACH_CHANNELS, then a
          display channel on the same ticket: link + auth + DISPLAY_INIT until the first message
          that draws
  direct  the same SPICE exchange over TCP to SPICE_HOST:SPICE_PORT, with the password the
          carrel side's POST of the same round set (read from libvirt: carreld never hands it out)

usage: console-rounds.py URL TOKEN SESSION SPICE_HOST SPICE_PORT ROUNDS
One untimed pair runs first. Prints one line per sample: "carrel MICROSECONDS",
"post MICROSECONDS" (the console POST alone, part of carrel's) or "direct MICROSECONDS".
"""
import importlib.util
import os
import sys
import time

CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e",
                      "console-client.py")
_spec = importlib.util.spec_from_file_location("console_client", CLIENT)
cc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cc)

# Untimed pause after each side, so the proxy and SPICE have seen the close before the next
# viewer links (SPICE serves one client at a time).
SETTLE_S = 0.5


def first_frame(open_channel, password):
    """Main + display channels until the first frame; open_channel(password, type, conn_id)
    returns (conn, stream, link error, auth result)."""
    main, stream, link, auth = open_channel(password, cc.SPICE_CHANNEL_MAIN, 0)
    if link != "0" or auth != 0:
        raise RuntimeError("main channel: link=%s auth=%s" % (link, auth))
    conn_id = cc.main_init_session(main, stream)
    disp, disp_stream, link, auth = open_channel(password, cc.SPICE_CHANNEL_DISPLAY, conn_id)
    if link != "0" or auth != 0:
        raise RuntimeError("display channel: link=%s auth=%s" % (link, auth))
    cc.display_start(disp, disp_stream, cc.DISPLAY_DRAWS)
    return main, disp


def carrel_round(api, session):
    t0 = time.monotonic()
    ticket = api.ticket(session)
    post = time.monotonic() - t0

    def open_channel(password, channel_type, conn_id):
        return cc.spice_channel(api, ticket["ticket"], password, channel_type, conn_id)

    main, disp = first_frame(open_channel, cc.VIEWER_PASSWORD)
    elapsed = time.monotonic() - t0
    disp.close()
    main.close()
    # The direct side needs the password carreld keeps to itself: libvirt has it (as root).
    return elapsed, post, cc.domain_password(session)


def direct_round(host, port, password):
    t0 = time.monotonic()

    def open_channel(pw, channel_type, conn_id):
        return cc.tcp_channel(host, port, pw, channel_type, conn_id)

    main, disp = first_frame(open_channel, password)
    elapsed = time.monotonic() - t0
    disp.close()
    main.close()
    return elapsed


def main():
    url, token, session, host, port, rounds = sys.argv[1:7]
    api = cc.Api(url, token)
    # One untimed pair first: the session's first console sets its SPICE password.
    _, _, password = carrel_round(api, session)
    time.sleep(SETTLE_S)
    direct_round(host, int(port), password)
    time.sleep(SETTLE_S)
    for _ in range(int(rounds)):
        elapsed, post, password = carrel_round(api, session)
        print("carrel %d\npost %d" % (elapsed * 1e6, post * 1e6), flush=True)
        time.sleep(SETTLE_S)
        print("direct %d" % (direct_round(host, int(port), password) * 1e6), flush=True)
        time.sleep(SETTLE_S)


if __name__ == "__main__":
    main()
