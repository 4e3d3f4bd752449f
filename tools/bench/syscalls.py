"""System calls per I/O by kind: the cost account of bench.py --cost.

perf trace (on this host) or strace -f -y (in the test guest, see below)
follows every thread of a running target while one workload runs;
each system call is put in a kind by its name and by the file it works on
(perf names a descriptor: socket, eventfd, eventpoll, io_uring, uverbs), so
a read() of a socket and a read() of an eventfd count apart.  Divided by the
workload's I/O count, that says what one I/O costs in kernel crossings,
whoever the target is (isertd, tgtd).  Under either tracer the target runs
slower; the counts per I/O, not the rates, are the measurement.  The guest
uses strace: perf trace switches the syscall tracepoints on, and the text
patching that does panicked the TCG guest twice in a row (the "Oops: int3"
of tests/vm/known-panics.txt); ptrace patches nothing.
"""
import collections
import os
import re
import signal
import subprocess
import time

# Kinds by the file a call works on (perf trace's "fd: N<what>"), then by name.
FD_KINDS = (("socket:", "socket"), ("anon_inode:[eventfd]", "eventfd"), ("anon_inode:[eventpoll]", "epoll"),
            ("anon_inode:[io_uring]", "io_uring_enter"), ("/dev/infiniband/", "uverbs"),
            ("anon_inode:[infinibandevent]", "cq_event"),
            ("anon_inode:[signalfd]", "signalfd"), ("anon_inode:[timerfd]", "timerfd"))
NAME_KINDS = {"epoll_wait": "epoll", "epoll_pwait": "epoll", "epoll_pwait2": "epoll", "epoll_ctl": "epoll",
              "io_uring_enter": "io_uring_enter", "futex": "futex", "sched_yield": "sched_yield"}
# "... ): name(arg: N<file>, ..." or "... ): name(...": the call and its first descriptor.
CALL = re.compile(r"\):\s+(?:\S+/\d+\s+)?(\w+)\((?:\w+: -?\d+<([^>]*)>)?")
# strace -f -y: "[PID ]name(N<file>, ..."; "<... name resumed>" ends a call counted at its start.
STRACE_CALL = re.compile(r"^(?:\d+\s+)?(\w+)\((?:-?\d+<([^>]*)>)?")
# uverbs is the kind a real NIC would not pay: on rxe (and for posts on siw)
# every post and completion-queue re-arm is a system call on the device
# file; on a hardware RNIC it is a doorbell store in user space.  cq_event
# (reading the completion channel after a wake-up) is paid on hardware too.


def kind(name, fd):
    for prefix, k in FD_KINDS:
        if fd and fd.startswith(prefix):
            return k
    return NAME_KINDS.get(name, "other")


def parse(lines, tracer="perf"):
    """(calls by kind, calls by kind/name) of perf trace's (or strace's) output lines; kind LOST counts
    perf's lines saying it dropped events."""
    kinds, names = collections.Counter(), collections.Counter()
    for line in lines:
        if tracer == "perf" and "LOST" in line:
            kinds["LOST"] += 1      # perf's own line: events dropped (reported, not a call)
            continue
        if "[continued]" in line or "resumed>" in line:
            continue        # the end of a call already counted at its start
        m = CALL.search(line) if tracer == "perf" else STRACE_CALL.match(line)
        if not m:
            continue
        k = kind(m.group(1), m.group(2))
        kinds[k] += 1
        names[f"{k}/{m.group(1)}"] += 1
    return kinds, names


def entry(prov, target, workload, ios, kinds, names, complaints):
    """One "cost" record of results.json (host and guest alike): the calls per I/O by kind and by kind/call."""
    per = lambda c: {k: v / max(ios, 1) for k, v in sorted(c.items())}
    return {"section": "cost", "prov": prov, "target": target, "workload": workload, "ios": ios,
            "per_io": per(kinds), "per_io_by_call": per(names), "total": sum(kinds.values()) / max(ios, 1),
            "complaints": complaints}


def traced(pid, work, fn, tag):
    """Run fn() (returns the workload's I/O count) with perf trace on every
    thread of pid; returns (ios, calls by kind, calls by kind/name, perf's
    complaints)."""
    out = os.path.join(work, f"trace-{tag}.txt")
    err = open(os.path.join(work, f"trace-{tag}.err"), "w+")
    p = subprocess.Popen(["perf", "trace", "--no-inherit", "-p", str(pid), "-o", out],
                         stdout=subprocess.DEVNULL, stderr=err)
    time.sleep(1.0)      # perf attaches to every thread before the workload starts
    try:
        ios = fn()
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    err.seek(0)
    complaints = [x.strip() for x in err if "LOST" in x or "rror" in x]
    with open(out, errors="replace") as f:
        kinds, names = parse(f)
    if kinds.pop("LOST", 0):
        complaints.append("perf trace lost events: the counts are low")
    os.unlink(out)
    return ios, kinds, names, complaints


def available():
    """None when perf trace can follow a process here, else why not."""
    try:
        r = subprocess.run(["perf", "trace", "--", "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"perf trace cannot run: {e} (apt-get install linux-perf)"
    if r.returncode:
        return f"perf trace cannot run: {r.stderr.strip()[-200:]}"
    return None
