#!/usr/bin/python3
"""What bench/all, bench/report and bench/chart share (standard library only): a bench's JSON
object found in its output, the results file of a run, the goals of bench/goals.json evaluated
against it, and the side-by-side comparisons each bench reports.

  benchlib.py assemble --run-dir DIR --out FILE --goals FILE --date D --commit C [--accel A]
                       [--accel-probe A]
                       NAME:EXIT_STATUS:SECONDS:ARGS ...
      reads DIR/NAME.log of each bench, writes the results file (see bench/all)
  benchlib.py goals RESULTS.json
      prints the goals as a plain-text table
"""
import argparse
import json
import mmap
import os
import platform
import re
import sys

OPS = {
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
}
TAIL_LINES = 15

# The side-by-side figures of each bench: (label, carrel's path, the baseline's path, unit, kind).
# kind "time": lower is better, the speed ratio is baseline / carrel; "rate": higher is better,
# the speed ratio is carrel / baseline. Either way above 1 means carrel is faster.
COMPARISONS = {
    "warm": [
        ("create: warm restore vs cold boot", "warm_median_ms", "cold_median_ms", "ms", "time"),
    ],
    "create": [
        ("create --cold vs virt-clone + virsh start", "carrel_median_ms", "virt_clone_median_ms",
         "ms", "time"),
    ],
    "computer": [
        ("screenshot vs virsh screenshot", "screenshot.carrel_p50_ms",
         "screenshot.baseline_p50_ms", "ms", "time"),
        ("click + screenshot vs virsh input + screenshot", "click.carrel_p50_ms",
         "click.baseline_p50_ms", "ms", "time"),
        ("exec vs guest-exec + status polling", "exec.carrel_p50_ms", "exec.baseline_p50_ms",
         "ms", "time"),
    ],
    "lifecycle": [
        ("pause + resume vs virsh suspend + resume", "pause.carrel_p50_ms",
         "pause.baseline_p50_ms", "ms", "time"),
        ("hibernate + resume vs virsh save + restore", "hibernate.carrel_p50_ms",
         "hibernate.baseline_p50_ms", "ms", "time"),
        ("snapshot vs virsh save + restore", "snapshot.carrel_p50_ms",
         "snapshot.baseline_p50_ms", "ms", "time"),
        ("revert vs virsh destroy + restore", "revert.carrel_p50_ms", "revert.baseline_p50_ms",
         "ms", "time"),
        ("pool take vs warm create", "pool_take.carrel_ms", "pool_take.warm_create_ms", "ms",
         "time"),
        ("fork x4 vs four bare virsh restores at once", "fork.x4_median_ms",
         "fork.bare_x4_median_ms", "ms", "time"),
    ],
    "console": [
        ("console to first frame vs straight SPICE", "first_frame.carrel_p50_ms",
         "first_frame.baseline_p50_ms", "ms", "time"),
    ],
    "sdk": [
        ("SDK screenshot vs curl (kept-alive)", "screenshot.p50.sdk", "screenshot.p50.curl", "ms",
         "time"),
        ("SDK exec vs curl (kept-alive)", "exec.p50.sdk", "exec.p50.curl", "ms", "time"),
    ],
    "a11y": [
        ("accessibility tree (whole desktop) vs one AT-SPI call through exec",
         "tree_desktop.p50_ms", "atspi_call.p50_ms", "ms", "time"),
        ("accessibility tree of Firefox's window vs one AT-SPI call through exec",
         "tree_firefox.p50_ms", "atspi_call.p50_ms", "ms", "time"),
    ],
    "recording": [
        ("exec, recording on vs off", "exec.on_p50_ms", "exec.off_p50_ms", "ms", "time"),
        ("screenshot, recording on vs off", "screenshot.on_p50_ms", "screenshot.off_p50_ms", "ms",
         "time"),
        ("QEMU + carreld CPU, idle desktop, recording on vs off", "cpu.idle.on_s_per_min",
         "cpu.idle.off_s_per_min", "s/min", "time"),
        ("QEMU + carreld CPU, scrolling xterm, recording on vs off", "cpu.scroll.on_s_per_min",
         "cpu.scroll.off_s_per_min", "s/min", "time"),
    ],
    "exec-stream": [
        ("exec streamed first chunk vs whole", "stream_first_p50_ms", "whole_p50_ms", "ms",
         "time"),
    ],
    "api": [
        ("GET /v1/sessions vs GET /v1/healthz", "rps.sessions", "rps.healthz", "req/s", "rate"),
    ],
    "audit": [
        ("pause or resume, after vs before the door", "verb_us.after", "verb_us.before", "us",
         "time"),
        ("GET /v1/sessions, after vs before the door", "list_rps.after", "list_rps.before",
         "req/s", "rate"),
    ],
    "egress": [
        (f"egress {label}: path vs straight", f"{name}.p50.path", f"{name}.p50.straight", "ms",
         "time")
        for name, label in (("HTTP GET", "HTTP GET"), ("TLS connect + handshake", "TLS connect"),
                            ("DNS + HTTP GET (path)", "DNS + HTTP GET"))
    ],
    "artifacts": [
        (f"{verb} {what}, {how} vs {tool}", f"{verb}_{how}_{kind}.carrel_s",
         f"{verb}_{how}_{kind}.baseline_s", "s", "time")
        for kind, what in (("one", "1 file"), ("many", "1,000 files"))
        for verb, tool, hows in (("inject", "virt-copy-in", ("warm", "cold")),
                                 ("extract", "virt-copy-out", ("running", "stopped")))
        for how in hows
    ],
}


def last_json_object(text):
    """The last JSON object of a bench's output: one that starts at the beginning of a line,
    on one line (printf) or over several (jq's pretty printing); None when there is none."""
    decoder = json.JSONDecoder()
    starts = [0] if text.startswith("{") else []
    starts += [i + 1 for i in range(len(text) - 1) if text[i] == "\n" and text[i + 1] == "{"]
    for start in reversed(starts):
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def lookup(obj, path):
    """The number at a dotted path of a JSON object, or None."""
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        return None
    return obj


def resident_bytes():
    with open("/proc/self/statm", encoding="utf-8") as f:
        return int(f.read().split()[1]) * mmap.PAGESIZE


def zero_page():
    """True when a read of untouched private memory maps the kernel's shared zero page, False
    when it allocates a page (a kernel booted with pvm_no_zero_page=1), None when unknown. Where
    it allocates, QEMU's load of a memory state, which reads each guest page before writing it,
    makes all of guest RAM resident. CARREL_BENCH_ZERO_PAGE=yes|no says instead (the tests)."""
    forced = os.environ.get("CARREL_BENCH_ZERO_PAGE", "")
    if forced in ("yes", "no"):
        return forced == "yes"
    size = 64 << 20
    try:
        area = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
        before = resident_bytes()
        for offset in range(0, size, mmap.PAGESIZE):
            area[offset]  # pylint: disable=pointless-statement
        grown = resident_bytes() - before
        area.close()
    except (OSError, ValueError):
        return None
    return grown < size // 2


def machine(accel, results, probe):
    """This host's figures; the accelerator from carreld when one answered, else from the
    benches' own reports, else carreld's probe, else unknown."""
    cpu_model = "unknown"
    mem_kib = 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    mem_kib = int(line.split()[1])
    except OSError:
        pass
    if not accel:
        reported = {r.get("accel") for r in results if isinstance(r, dict)} - {None}
        accel = reported.pop() if len(reported) == 1 else probe or "unknown"
    return {"cpus": os.cpu_count(), "mem_gib": round(mem_kib / 1024 / 1024, 1),
            "kernel": platform.release(), "cpu_model": cpu_model, "accel": accel,
            "zero_page": zero_page()}


def read_bench(run_dir, spec):
    """One bench's entry from NAME:EXIT_STATUS:SECONDS:ARGS (ARGS space-separated) and its
    log."""
    name, status, seconds, args = spec.split(":", 3)
    log = os.path.join(run_dir, name + ".log")
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    entry = {"ok": int(status) == 0, "seconds": int(seconds), "exit_status": int(status),
             "args": args.split(),
             "log": os.path.join(os.path.basename(run_dir), name + ".log"),
             "result": last_json_object(text)}
    reasons = [f"exited with status {status}"] if int(status) != 0 else []
    if entry["result"] is None:
        entry["ok"] = False
        reasons.append("no JSON object in its output")
    if reasons:
        entry["reason"] = "; ".join(reasons)
    if not entry["ok"]:
        entry["log_tail"] = text.splitlines()[-TAIL_LINES:]
    return name, entry


def figure(benches, bench, path):
    """(number, None) from a bench that ran well, or (None, why not)."""
    entry = benches.get(bench)
    if entry is None:
        return None, f"bench/{bench} was not run"
    if not entry["ok"]:
        return None, f"bench/{bench} failed"
    value = lookup(entry["result"], path)
    if value is None:
        return None, f"bench/{bench} reports no {path}"
    return value, None


def evaluate(goal, benches, host=None):
    """One goal against the benches of a run: met, missed or not measured (saying why), and a
    miss with the reasons its goal names for a run like this one (missed_because: rules that
    hold by a machine figure or a figure of the run, see rule_holds). Keeps where its figures
    come from (bench, value, baseline_path, ratio_of) for bench/report."""
    out = {"id": goal["id"], "text": goal["text"], "op": goal["op"], "target": goal["target"]}
    for key, name in (("unit", "unit"), ("bench", "bench"), ("value", "value"),
                      ("baseline", "baseline_path"), ("ratio", "ratio_of")):
        if goal.get(key):
            out[name] = goal[key]
    if not goal.get("bench"):
        return dict(out, measured=None, status="not measured", reason=goal["reason"])
    measured, why = figure(benches, goal["bench"], goal["value"])
    out["measured"] = measured
    # A goal of a given size (40 sessions): a smaller run measures something else.
    need = goal.get("requires")
    if why is None and need:
        have, why = figure(benches, goal["bench"], need["path"])
        if why is None and have < need["min"]:
            why = f"bench/{goal['bench']} ran with {need['path']} {have}; the goal needs {need['min']}"
            # A bench that stopped short of its size says why (bench/density: host memory).
            stopped = benches[goal["bench"]]["result"].get("stopped")
            if isinstance(stopped, str) and stopped:
                why += f" (it stopped: {stopped})"
    compared = measured
    if why is None and goal.get("baseline"):
        base_bench, base_path = goal["baseline"].split(".", 1)
        out["baseline"], why = figure(benches, base_bench, base_path)
        if why is None:
            num, den = ((out["baseline"], measured) if goal["ratio"] == "baseline/value"
                        else (measured, out["baseline"]))
            if den == 0:
                why = f"{goal['ratio']} divides by zero"
            else:
                compared = out["ratio"] = round(num / den, 3)
    if why is not None:
        return dict(out, status="not measured", reason=why)
    out["status"] = "met" if OPS[goal["op"]](compared, goal["target"]) else "missed"
    reasons = [with_figures(rule["reason"], benches)
               for rule in goal.get("missed_because", []) if out["status"] == "missed"
               and rule_holds(rule, benches, host)]
    if reasons:
        out["reason"] = "; ".join(reasons)
    return out


def rule_holds(rule, benches, host):
    """Whether a missed_because rule names this run: a machine figure of the host with its value
    (machine, is), or a figure of the run's benches (figure: BENCH.PATH) against a value by op."""
    if "machine" in rule:
        return (host or {}).get(rule["machine"]) == rule["is"]
    value, why = figure(benches, *rule["figure"].split(".", 1))
    return why is None and OPS[rule["op"]](value, rule["value"])


def with_figures(text, benches):
    """A reason with each {BENCH.PATH} replaced by that figure of the run ("?" when missing), so
    that it says what was measured."""
    def one(match):
        value, why = figure(benches, *match.group(1).split(".", 1))
        if why is not None:
            return "?"
        return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"
    return re.sub(r"\{([a-z0-9-]+\.[a-z0-9_.]+)\}", one, text)


def comparisons(results):
    """Every side-by-side figure of a run's benches that ran well, in run order:
    dicts with bench, label, carrel, baseline, unit and speed (above 1: carrel faster)."""
    rows = []
    for bench, entry in results["benches"].items():
        if not entry["ok"]:
            continue
        for label, cpath, bpath, unit, kind in COMPARISONS.get(bench, []):
            c, b = lookup(entry["result"], cpath), lookup(entry["result"], bpath)
            if c is None or b is None or c <= 0 or b <= 0:
                continue
            speed = b / c if kind == "time" else c / b
            rows.append({"bench": bench, "label": label, "carrel": c, "baseline": b,
                         "unit": unit, "speed": speed, "carrel_path": cpath,
                         "baseline_path": f"{bench}.{bpath}"})
    return rows


def goal_speed_target(goal):
    """A ratio goal's target as a speed ratio (above 1: carrel faster), or None."""
    if not goal.get("baseline_path"):
        return None
    if goal["ratio_of"] == "baseline/value":
        return goal["target"]
    return 1 / goal["target"]


def number(x):
    """A figure as people read it: thousands whole, smaller ones to 4 significant digits."""
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def times(x):
    """A ratio, e.g. "2.55x"."""
    return "-" if x is None else f"{x:.2f}x"


def condition(goal):
    """A goal's condition, e.g. "<= 30 ms" or "baseline/value >= 3"."""
    if goal.get("ratio_of"):
        return f"{goal['ratio_of']} {goal['op']} {number(goal['target'])}"
    unit = f" {goal['unit']}" if goal.get("unit") else ""
    return f"{goal['op']} {number(goal['target'])}{unit}"


def status_word(status):
    return {"met": "met", "missed": "MISSED"}.get(status, status)


def print_goals(results):
    rows = [("goal", "figure", "baseline", "ratio", "target", "status")]
    for g in results["goals"]:
        unit = f" {g['unit']}" if g.get("unit") and g.get("measured") is not None else ""
        rows.append((g["id"], number(g.get("measured")) + unit, number(g.get("baseline")),
                     times(g.get("ratio")), condition(g), status_word(g["status"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    for g in results["goals"]:
        if g.get("reason"):
            print(f"  {g['id']}: {g['reason']}")


def assemble(args):
    with open(args.goals, encoding="utf-8") as f:
        goals = json.load(f)["goals"]
    benches = dict(read_bench(args.run_dir, spec) for spec in args.benches)
    results = {
        "date": args.date,
        "commit": args.commit,
        "machine": machine(args.accel, [b["result"] for b in benches.values()],
                           args.accel_probe),
        "benches": benches,
    }
    results["goals"] = [evaluate(goal, benches, results["machine"]) for goal in goals]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
        f.write("\n")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("assemble")
    a.add_argument("--run-dir", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--goals", required=True)
    a.add_argument("--date", required=True)
    a.add_argument("--commit", required=True)
    a.add_argument("--accel", default="", help="carreld's, when one answered")
    a.add_argument("--accel-probe", default="", help="carreld --probe-accel's")
    a.add_argument("benches", nargs="*")
    g = sub.add_parser("goals")
    g.add_argument("results")
    args = parser.parse_args()
    if args.command == "assemble":
        assemble(args)
    else:
        print_goals(load(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
