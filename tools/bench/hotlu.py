#!/usr/bin/env python3
"""One hot LU, many sessions, several reactors: two isertd builds side by side.

Every session's READ and WRITE checks the LU's shared state (unit
attentions, reservations, ALUA changes).  When that check takes the LU's
mutex, sessions on different reactors contend for it; with the I_T_L
entry it reads a few flags instead (docs/architecture.md, "Threads and
ownership").  This runs the same load against --base (a build before the
change) and --isertd (this build), in turns, one RAM LU behind one
portal, SESSIONS iserbench sessions of THREADS outstanding 4 KiB random
I/Os each (70 % reads), and prints per build: I/O per second, isertd's
CPU time per I/O and its futex calls per I/O (a contended mutex sleeps
and wakes through futex(2); an uncontended one makes no call), then the
ratios.  Nothing is asserted: it measures.

usage: sudo tools/bench/hotlu.py --base OLD/target/isertd [--isertd build/target/isertd]
       [--sessions 8] [--threads 4] [--reactors 2] [--secs 5] [--rounds 3]

Run as root: perf counts the futex calls (perf stat -e syscalls:sys_enter_futex).
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import cpu_seconds, free_port, iserbench_parm, log, run_figures, wait_port  # noqa: E402

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IQN = "iqn.2026-11.org.isert:hotlu"
SIZE = 256 << 20


def start_isertd(binary, reactors, work, tag):
    port = free_port()
    cfg = {"global": {"reactors": reactors},
           "backstores": [{"name": "ram", "type": "ram", "size": SIZE}],
           "targets": [{"iqn": IQN, "tpgs": [{"tag": 1, "demo_mode": True,
                        "portals": [{"ip": "127.0.0.1", "port": port}],
                        "luns": [{"lun": 0, "backstore": "ram"}]}]}]}
    path = f"{work}/{tag}.json"
    with open(path, "w") as f:
        json.dump(cfg, f)
    p = subprocess.Popen([binary, "--config", path], stdout=subprocess.DEVNULL,
                         stderr=open(f"{work}/{tag}.log", "w"))
    wait_port(port, p, f"isertd ({tag})")
    return p, f"iscsi://127.0.0.1:{port}/{IQN}/0"


def iserbench(args, work, url, secs, seek="seekpct=100", rdpct=70, xfer="4k"):
    parm = "".join(f"sd=sd{i},lun={url},threads={args.threads}\n" for i in range(args.sessions))
    parm += (f"wd=wd1,sd=sd*,xfersize={xfer},rdpct={rdpct},{seek}\n"
             f"rd=rd1,wd=wd1,iorate=max,elapsed={secs},interval=1\n")
    return iserbench_parm(args.iserbench, work, parm, url)


def measure(args, work, proc, url):
    perf = subprocess.Popen(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_futex", "-p", str(proc.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    c0 = cpu_seconds(proc.pid)
    run = iserbench(args, work, url, args.secs)
    c1 = cpu_seconds(proc.pid)
    perf.send_signal(signal.SIGINT)
    futex = 0
    for line in perf.communicate(timeout=10)[1].splitlines():
        f = line.split(",")
        if len(f) > 2 and f[2].startswith("syscalls:sys_enter_futex") and f[0].isdigit():
            futex = int(f[0])
    m, ios = run_figures(run, c1 - c0, url)
    return {"iops": m["iops"], "cpu_us_per_io": m["cpu_us_per_io"], "futex_per_kio": futex * 1e3 / ios}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--isertd", default=os.path.join(SRC, "build/target/isertd"))
    ap.add_argument("--base", required=True, help="the isertd to compare with (a build before the change)")
    ap.add_argument("--iserbench", default=os.path.join(SRC, "build/tools/iserbench/iserbench"))
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--threads", type=int, default=4, help="outstanding I/Os per session")
    ap.add_argument("--reactors", type=int, default=2)
    ap.add_argument("--secs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("hotlu: run as root (perf counts isertd's futex calls)")
    for b in (args.isertd, args.base, args.iserbench):
        if not os.access(b, os.X_OK):
            sys.exit(f"hotlu: {b} missing: build first")
    builds = {"base": args.base, "new": args.isertd}
    res = {k: [] for k in builds}
    with tempfile.TemporaryDirectory(prefix="isert-hotlu-") as work:
        procs = {}
        try:
            for k, b in builds.items():
                procs[k] = start_isertd(b, args.reactors, work, k)
                # Write the LU once, so reads hit memory that exists.
                iserbench(args, work, procs[k][1], 600, seek="seekpct=eof", rdpct=0, xfer="1m")
            log(f"hotlu: {args.sessions} sessions x {args.threads} I/Os, {args.reactors} reactors, "
                f"4k random 70% reads, {args.secs} s runs, {args.rounds} rounds")
            for r in range(args.rounds):
                order = list(builds) if r % 2 == 0 else list(reversed(builds))
                for k in order:
                    m = measure(args, work, procs[k][0], procs[k][1])
                    res[k].append(m)
                    log(f"  round {r + 1} {k:4}: {m['iops']:9.0f} IOPS, {m['cpu_us_per_io']:6.2f} us CPU/IO, "
                        f"{m['futex_per_kio']:7.2f} futex calls per 1000 I/Os")
        finally:
            for p, _ in procs.values():
                p.send_signal(signal.SIGTERM)
                p.wait(10)
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in res.items()}
    log("medians:")
    for k in builds:
        log(f"  {k:4}: {med[k]['iops']:9.0f} IOPS, {med[k]['cpu_us_per_io']:6.2f} us CPU/IO, "
            f"{med[k]['futex_per_kio']:7.2f} futex/1000 I/Os")
    ratio = lambda m: med["new"][m] / med["base"][m] if med["base"][m] else float("nan")
    log(f"new/base: IOPS {ratio('iops'):.2f}x, CPU/IO {ratio('cpu_us_per_io'):.2f}x, "
        f"futex/IO {ratio('futex_per_kio'):.2f}x")


if __name__ == "__main__":
    main()
