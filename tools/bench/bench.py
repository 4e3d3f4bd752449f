#!/usr/bin/env python3
"""One bench command: isertd next to its peers, side by side in one run.

Sections (docs/bench.md says what each measures and why):
  tcp    on this host, iSCSI over loopback TCP: isertd and tgtd serving the
         same kind of LUN (RAM: tgtd's rdwr on tmpfs; file: a file on disk
         for both), driven by iserbench with the same workloads, plus raw
         TCP streams of 128 KiB and 1 MiB writes (iperf3) as ceilings.
  guest  in the QEMU test guest over iSER (rxe, siw) with the kernel
         initiator and fio: isertd (block and nvme backstores, RAM) next to
         LIO (iblock on the same NVMe namespace, rd_mcp) and tgtd --iser;
         tools/bench/guest.sh runs there.

Every round is printed as it ends; the summary gives medians over rounds,
the ratios isertd/peer and the issue's goals (met or missed).  Results go to
OUT/results.json and OUT/report.html.  Nothing here asserts a timing: a
missed goal is reported, the exit status only says whether the runs ran.
"""
import argparse
import fnmatch
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
IQN = "iqn.2026-11.org.isert:bench"
TGT_IQN = "iqn.2026-11.org.isert:tgtbench"

# name: (xfersize, read %, seek %, outstanding I/Os)
WORKLOADS = {
    "4k-randread-qd1": ("4k", 100, 100, 1),
    "4k-randread-qd32": ("4k", 100, 100, 32),
    "4k-randwrite-qd1": ("4k", 0, 100, 1),
    "4k-randwrite-qd32": ("4k", 0, 100, 32),
    "128k-seqread-qd8": ("128k", 100, 0, 8),
    "128k-seqread-qd32": ("128k", 100, 0, 32),
    "1m-seqread-qd8": ("1m", 100, 0, 8),
    "1m-seqwrite-qd8": ("1m", 0, 0, 8),
}
# --cost: one traced run of each (tools/bench/syscalls.py).
COST_TCP = ["4k-randread-qd1", "4k-randwrite-qd1", "4k-randread-qd32", "128k-seqread-qd8"]
COST_SMOKE = ["4k-randread-qd1"]
QUICK_TCP = ["4k-randread-qd1", "4k-randread-qd32", "128k-seqread-qd8", "128k-seqread-qd32"]
SMOKE_TCP = ["4k-randread-qd32", "128k-seqread-qd32"]
METRICS = ("iops", "mib_s", "lat_us", "cpu_us_per_io")


def log(msg):
    print(msg, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User + system CPU seconds of process PID, all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_port(port, proc, what, secs=20):
    end = time.time() + secs
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited at start (status {proc.returncode})")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {secs} s")


def iserbench_parm(iserbench, work, parm, url):
    """Run iserbench on the parameter file text PARM (in folder WORK): its first run's results."""
    with open(f"{work}/b.parm", "w") as f:
        f.write(parm)
    out = f"{work}/ib"
    r = subprocess.run([iserbench, "-f", f"{work}/b.parm", "-o", out],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"iserbench against {url} failed: {r.stderr.strip()[-300:]}")
    with open(f"{out}/results.json") as f:
        return json.load(f)["runs"][0]


def run_figures(run, cpu_secs, what):
    """One iserbench run's figures and its I/O count (results.json "runs" entry); cpu_secs: the target's CPU time over it."""
    # The first interval holds the ramp-up: left out when there are more.
    iv = run["intervals"][1:] if len(run["intervals"]) > 1 else run["intervals"]
    secs = sum(i["seconds"] for i in iv)
    ios = sum(i["reads"] + i["writes"] for i in iv)
    nbytes = sum(i["read_bytes"] + i["write_bytes"] for i in iv)
    lat = sum(i["resp_ms"] * (i["reads"] + i["writes"]) for i in iv) / max(ios, 1) * 1000
    all_ios = run["reads_done"] + run["writes_done"]
    if run["validation_errors"] or any(i["errors"] for i in run["intervals"]) or not ios:
        raise RuntimeError(f"{what}: I/O errors or no I/O")
    return {"iops": ios / secs, "mib_s": nbytes / secs / 1048576, "lat_us": lat,
            "cpu_us_per_io": cpu_secs * 1e6 / max(all_ios, 1)}, all_ios


class Tcp:
    """The loopback section: targets on this host, iserbench as initiator."""

    def __init__(self, args, work):
        self.args, self.work, self.procs = args, work, []
        self.iserbench = os.path.join(args.build, "tools/iserbench/iserbench")
        self.isertd = os.path.join(args.build, "target/isertd")
        for b in (self.iserbench, self.isertd):
            if not os.access(b, os.X_OK):
                sys.exit(f"bench: {b} missing: build first (meson setup {args.build} && ninja -C {args.build})")
        for tool, pkg in (("tgtd", "tgt"), ("tgtadm", "tgt"), ("fio", "fio")):
            if not any(os.access(os.path.join(d, tool), os.X_OK) for d in os.environ["PATH"].split(":")):
                sys.exit(f"bench: {tool} not found: apt-get install {pkg}")
        if os.geteuid() != 0:
            sys.exit("bench: the tcp section starts tgtd, which needs root")
        self.size = args.size_mib << 20
        self.kinds = ["ram"] if args.smoke else ["ram", "file"]
        self.ctl = 20 + os.getpid() % 1000     # tgtd's control port: not another tgtd's

    def start(self):
        w = self.work
        # The file kind lives on disk (the page cache serves it to both).
        self.disk = tempfile.mkdtemp(prefix="isert-bench-", dir="/var/tmp")
        files = {"ram": None, "file": os.path.join(self.disk, "lun.img")}
        if "file" in self.kinds:
            with open(files["file"], "wb") as f:
                f.truncate(self.size)
        bs = [{"name": "ram", "type": "ram", "size": self.size}]
        if "file" in self.kinds:
            # A volatile write cache, as tgtd reports by default (its rdwr backstore syncs only on
            # FUA or with WCE off): without it every isertd write would be RWF_DSYNC.
            bs.append({"name": "file", "type": "file", "path": files["file"], "write_cache": True})
        self.iport = free_port()
        cfg = {"backstores": bs, "targets": [{"iqn": IQN, "tpgs": [{"tag": 1, "demo_mode": True,
               "portals": [{"ip": "127.0.0.1", "port": self.iport}],
               "luns": [{"lun": i, "backstore": b["name"]} for i, b in enumerate(bs)]}]}]}
        with open(f"{w}/isertd.json", "w") as f:
            json.dump(cfg, f)
        p = subprocess.Popen([self.isertd, "--config", f"{w}/isertd.json"],
                             stdout=subprocess.DEVNULL, stderr=open(f"{w}/isertd.log", "w"))
        self.procs.append(p)
        wait_port(self.iport, p, "isertd")
        self.isertd_pid = p.pid
        # tgtd: its RAM-like setup is the rdwr backstore on a tmpfs file.
        self.shm = f"/dev/shm/isert-bench-{os.getpid()}.img"
        with open(self.shm, "wb") as f:
            f.truncate(self.size)
        self.tport = free_port()
        p = subprocess.Popen(["tgtd", "-f", "-C", str(self.ctl), "--iscsi", f"portal=127.0.0.1:{self.tport}"],
                             stdout=open(f"{w}/tgtd.log", "w"), stderr=subprocess.STDOUT)
        self.procs.append(p)
        wait_port(self.tport, p, "tgtd")
        self.tgtd_pid = p.pid
        t = ["tgtadm", "-C", str(self.ctl), "--lld", "iscsi"]
        run = lambda *a: subprocess.run(t + list(a), check=True)
        run("--op", "new", "--mode", "target", "--tid", "1", "-T", TGT_IQN)
        for i, k in enumerate(self.kinds):
            run("--op", "new", "--mode", "logicalunit", "--tid", "1", "--lun", str(i + 1),
                "-b", self.shm if k == "ram" else files[k])
        run("--op", "bind", "--mode", "target", "--tid", "1", "-I", "ALL")
        self.targets = {}
        for i, k in enumerate(self.kinds):
            self.targets[f"isertd-{k}"] = (f"iscsi://127.0.0.1:{self.iport}/{IQN}/{i}", self.isertd_pid)
            self.targets[f"tgtd-{k}"] = (f"iscsi://127.0.0.1:{self.tport}/{TGT_IQN}/{i + 1}", self.tgtd_pid)
        # Write every LUN once, so reads hit memory that exists.
        for name, (url, _) in self.targets.items():
            self.iserbench_run(url, "1m", 0, 0, 8, 600, "seekpct=eof")

    def stop(self):
        subprocess.run(["tgtadm", "-C", str(self.ctl), "--op", "delete", "--mode", "system", "--force"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (getattr(self, "shm", None),):
            if f and os.path.exists(f):
                os.unlink(f)
        if getattr(self, "disk", None):
            subprocess.run(["rm", "-rf", self.disk])

    def iserbench_run(self, url, xfer, rdpct, seekpct, threads, secs, seek=None):
        parm = (f"sd=sd1,lun={url},threads={threads}\n"
                f"wd=wd1,sd=sd1,xfersize={xfer},rdpct={rdpct},{seek or f'seekpct={seekpct}'}\n"
                f"rd=rd1,wd=wd1,iorate=max,elapsed={secs},interval=1\n")
        return iserbench_parm(self.iserbench, self.work, parm, url)

    def measure(self, target, wl):
        url, pid = self.targets[target]
        xfer, rdpct, seekpct, qd = WORKLOADS[wl]
        c0 = cpu_seconds(pid)
        run = self.iserbench_run(url, xfer, rdpct, seekpct, qd, self.args.secs)
        c1 = cpu_seconds(pid)
        return run_figures(run, c1 - c0, f"{target} {wl}")[0]

    def cost(self, out):
        """System calls per I/O by kind of every target, one traced run per workload (--cost)."""
        import syscalls
        why = syscalls.available()
        if why:
            raise RuntimeError(f"--cost: {why}")
        log("== tcp cost account: system calls per I/O (perf trace on the target)")
        for wl in COST_SMOKE if self.args.smoke else COST_TCP:
            xfer, rdpct, seekpct, qd = WORKLOADS[wl]
            for t, (url, pid) in self.targets.items():
                def one():
                    run = self.iserbench_run(url, xfer, rdpct, seekpct, qd, self.args.secs)
                    return run_figures(run, 0, f"{t} {wl} (traced)")[1]
                ios, kinds, names, complaints = syscalls.traced(pid, self.work, one, f"{t}-{wl}")
                if not kinds.get("socket"):
                    raise RuntimeError(f"--cost: perf trace saw no socket call of {t} over {ios} I/Os")
                x = syscalls.entry("loopback", t, wl, ios, kinds, names, complaints)
                out.append(x)
                log(cost_row(x))

    def raw_stream(self, length):
        """A raw loopback TCP stream of LENGTH-byte writes (iperf3, one stream): MiB/s received."""
        port = free_port()
        srv = subprocess.Popen(["iperf3", "-s", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.time() + 10
            # Until the server listens (ss, not a probe connection: iperf3
            # counts a connection that sends nothing as a test).
            while not subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True,
                                     text=True).stdout.strip():
                if time.time() > deadline or srv.poll() is not None:
                    raise RuntimeError("iperf3 -s did not start listening")
                time.sleep(0.05)
            tx = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-l", str(length),
                                 "-t", str(self.args.secs), "-J"], capture_output=True, text=True)
            j = json.loads(tx.stdout or "{}")
            if tx.returncode or "error" in j or "sum_received" not in j.get("end", {}):
                raise RuntimeError(f"iperf3 -c failed: {j.get('error') or tx.stderr.strip()}")
            bw = j["end"]["sum_received"]["bits_per_second"] / 8
        finally:
            srv.kill()
            srv.wait()
        return {"iops": bw / length, "mib_s": bw / 1048576, "lat_us": 0, "cpu_us_per_io": 0}

    def rounds(self, results):
        wls = SMOKE_TCP if self.args.smoke else QUICK_TCP if self.args.quick else list(WORKLOADS)
        names = list(self.targets)
        for r in range(1, self.args.rounds + 1):
            log(f"== tcp round {r}/{self.args.rounds}")
            for wl in wls:
                # A different first target each round spreads drift over all.
                order = names[(r - 1) % len(names):] + names[:(r - 1) % len(names)]
                for t in order:
                    m = self.measure(t, wl)
                    results.append(dict(section="tcp", prov="loopback", target=t, workload=wl, round=r, **m))
                    log(row(results[-1]))
            for kib in (128, 1024):
                m = self.raw_stream(kib * 1024)
                results.append(dict(section="tcp", prov="loopback", target="raw-tcp-stream",
                                    workload=f"{kib // 1024}m-stream" if kib >= 1024 else f"{kib}k-stream",
                                    round=r, **m))
                log(row(results[-1]))


def cost_row(x):
    kinds = ", ".join(f"{k} {v:.2f}" for k, v in sorted(x["per_io"].items(), key=lambda kv: -kv[1]) if v >= 0.005)
    lost = f"  (tracer: {'; '.join(x['complaints'])[:120]})" if x["complaints"] else ""
    return f"  cost  {x['prov']:8} {x['target']:19} {x['workload']:18} {x['total']:6.2f} calls/IO over {x['ios']} I/Os: {kinds}{lost}"


def row(x):
    cpu = f"{x['cpu_us_per_io']:9.2f}" if x.get("cpu_us_per_io") else f"{'-':>9}"
    gcpu = f"{x['guest_cpu_us_per_io']:9.1f}" if x.get("guest_cpu_us_per_io") else ""
    return (f"  {x['section']:5} {x['prov']:8} {x['target']:15} {x['workload']:18} r{x['round']} "
            f"{x['iops']:10.0f} IOPS {x['mib_s']:9.1f} MiB/s {x['lat_us']:8.1f} us {cpu} us/IO {gcpu}")


def guest(args, work, results, cost):
    """Run tools/bench/guest.sh in the test guest; collect its JSON lines (cost lines apart)."""
    gwork = os.path.join(work, "guest")
    os.makedirs(gwork, exist_ok=True)
    env = dict(os.environ, BENCH_SECS=str(args.guest_secs), BENCH_ROUNDS=str(args.rounds),
               BENCH_QUICK="1" if args.quick else "0", BENCH_COST="1" if args.cost else "0")
    cmd = [os.path.join(SRC, "tests/vm/run.sh"), "--build", args.build, "--work", gwork,
           "--timeout", str(args.guest_timeout), os.path.join(HERE, "guest.sh")]
    log(f"== guest: {' '.join(cmd)}")
    rc = subprocess.run(cmd, env=env).returncode
    out = os.path.join(gwork, "bench.jsonl")
    n = 0
    if os.path.exists(out):
        for line in open(out):
            if line.strip():
                x = json.loads(line)
                (cost if x["section"] == "cost" else results).append(x)
                n += 1
    if rc == 77:
        log("guest: skipped (run.sh exit 77: see its message above)")
        return True
    if rc != 0 or not n:
        log(f"guest: run.sh exited with status {rc}, {n} results; logs in {gwork}")
        return False
    return True


def medians(results):
    groups = {}
    for x in results:
        groups.setdefault((x["section"], x["prov"], x["target"], x["workload"]), []).append(x)
    med = {}
    for k, xs in groups.items():
        med[k] = {m: statistics.median(x[m] for x in xs) for m in METRICS + ("guest_cpu_us_per_io",)
                  if all(x.get(m) is not None for x in xs)}
        med[k]["rounds"] = len(xs)
    return med


# Comparisons: (section, provider or None for all, ours, peer); and per workload.
PAIRS = [("tcp", "isertd-ram", "tgtd-ram"), ("tcp", "isertd-file", "tgtd-file"),
         ("guest", "isertd-block", "lio-iblock"), ("guest", "isertd-block", "tgtd-block"),
         ("guest", "isertd-nvme", "lio-iblock"), ("guest", "isertd-nvme", "isertd-block"),
         ("guest", "isertd-ram", "lio-ram"), ("guest", "isertd-ram", "tgtd-ram"),
         ("guest", "isertd-ram", "isertd-lazyram"),
         # isertd-KIND-MODE: KIND in a poll mode (guest.sh), against LIO on the same storage
         ("guest", "isertd-ram-*", "lio-ram"), ("guest", "isertd-block-*", "lio-iblock")]


def ratios(med):
    out = []
    for (sec, prov, t, wl), a in sorted(med.items()):
        for s, ours, peer in PAIRS:
            if s != sec or not fnmatch.fnmatchcase(t, ours) or (sec, prov, peer, wl) not in med:
                continue
            b = med[(sec, prov, peer, wl)]
            r = {"section": sec, "prov": prov, "workload": wl, "ours": t, "peer": peer,
                 "iops": a["iops"] / b["iops"] if b["iops"] else None}
            if a.get("cpu_us_per_io") and b.get("cpu_us_per_io"):
                r["iops_per_target_cpu"] = b["cpu_us_per_io"] / a["cpu_us_per_io"]
            if a.get("guest_cpu_us_per_io") and b.get("guest_cpu_us_per_io"):
                r["guest_cpu_per_io"] = a["guest_cpu_us_per_io"] / b["guest_cpu_us_per_io"]
            if wl.endswith("qd1") and a["lat_us"] and b["lat_us"]:
                r["latency"] = a["lat_us"] / b["lat_us"]
            out.append(r)
    return out


def goals(results, med):
    """The issue's goals, each met, missed or not measured in this run."""
    g = []

    def add(name, value, ok, detail):
        g.append({"goal": name, "value": value, "met": ok, "detail": detail})

    # Over TCP, 4 KiB random read QD32: IOPS per target CPU-second >= 8x tgtd in every round.
    per_round = []
    for x in results:
        if x["section"] == "tcp" and x["target"] == "isertd-ram" and x["workload"] == "4k-randread-qd32":
            y = [z for z in results if z["section"] == "tcp" and z["target"] == "tgtd-ram"
                 and z["workload"] == x["workload"] and z["round"] == x["round"]]
            if y and x["cpu_us_per_io"]:
                per_round.append(y[0]["cpu_us_per_io"] / x["cpu_us_per_io"])
    if per_round:
        add("tcp 4k-randread-qd32: IOPS per target CPU-second >= 8x tgtd in every round",
            min(per_round), min(per_round) >= 8, "per round: " + ", ".join(f"{v:.2f}x" for v in per_round))
    s = med.get(("tcp", "loopback", "raw-tcp-stream", "128k-stream"))
    s1m = med.get(("tcp", "loopback", "raw-tcp-stream", "1m-stream"))
    for wl in ("128k-seqread-qd8", "128k-seqread-qd32"):
        a = med.get(("tcp", "loopback", "isertd-ram", wl))
        if a and s:
            v = a["mib_s"] / s["mib_s"]
            # isertd may beat it: it writes several Data-In PDUs with one
            # writev; the stream of 1 MiB writes shows that headroom.
            big = f"; a stream of 1 MiB writes: {s1m['mib_s']:.0f} MiB/s" if s1m else ""
            add(f"tcp {wl} >= 85% of a raw TCP stream of 128 KiB writes", v, v >= 0.85,
                f"{a['mib_s']:.0f} of {s['mib_s']:.0f} MiB/s (medians){big}")
    for ours in ("isertd-block", "isertd-nvme"):
        k = ("guest", "rxe", ours, "4k-randread-qd32")
        lio = med.get(("guest", "rxe", "lio-iblock", "4k-randread-qd32"))
        tgt = med.get(("guest", "rxe", "tgtd-block", "4k-randread-qd32"))
        if k in med and lio:
            v = med[k]["iops"] / lio["iops"]
            add(f"guest rxe 4k-randread-qd32 NVMe: {ours} IOPS >= LIO iblock", v, v >= 1, f"{v:.2f}x")
            if med[k].get("guest_cpu_us_per_io") and lio.get("guest_cpu_us_per_io"):
                v = med[k]["guest_cpu_us_per_io"] / lio["guest_cpu_us_per_io"]
                add(f"guest rxe 4k-randread-qd32 NVMe: {ours} guest CPU per I/O <= LIO iblock's", v, v <= 1,
                    f"{v:.2f}x of LIO's")
        if k in med and tgt:
            v = med[k]["iops"] / tgt["iops"]
            add(f"guest rxe 4k-randread-qd32 NVMe: {ours} IOPS >= 1.5x tgtd", v, v >= 1.5, f"{v:.2f}x")
    # QD1 latency: isertd in its best poll mode against LIO on the same storage, over TCP and iSER on rxe.
    for prov in ("tcp", "rxe"):
        for kind, lio in (("ram", "lio-ram"), ("block", "lio-iblock")):
            peer = med.get(("guest", prov, lio, "4k-randread-qd1"))
            ours = [(m["lat_us"], t, m) for (sec, p, t, wl), m in med.items()
                    if sec == "guest" and p == prov and wl == "4k-randread-qd1"
                    and (t == f"isertd-{kind}" or t.startswith(f"isertd-{kind}-"))]
            if not peer or not ours:
                continue
            lat, t, m = min(ours, key=lambda o: o[0])
            cpu = f", its target CPU {m['cpu_us_per_io']:.0f} us per I/O" if m.get("cpu_us_per_io") else ""
            add(f"guest {prov} 4k-randread-qd1 {kind}: isertd's best poll mode latency <= {lio}'s", lat / peer["lat_us"],
                lat <= peer["lat_us"], f"{t} {lat:.0f} us against {peer['lat_us']:.0f} us{cpu}")
    # Large reads of a RAM LU go out from its pages (TCP: views; iSER: its registration), no slower than NVMe's.
    for prov in ("tcp", "rxe", "siw"):
        ram = med.get(("guest", prov, "isertd-ram", "128k-seqread-qd8"))
        blk = med.get(("guest", prov, "isertd-block", "128k-seqread-qd8"))
        if ram and blk:
            v = ram["iops"] / blk["iops"]
            add(f"guest {prov} 128k-seqread-qd8: isertd-ram IOPS >= isertd-block's", v, v >= 1,
                f"{ram['iops']:.0f} against {blk['iops']:.0f} IOPS")
    return g


def summary(med, rat, gl):
    lines = ["", "== medians"]
    for (sec, prov, t, wl), m in sorted(med.items()):
        cpu = f"{m['cpu_us_per_io']:8.2f}" if m.get("cpu_us_per_io") else f"{'-':>8}"
        g = f" guest {m['guest_cpu_us_per_io']:7.1f} us/IO" if m.get("guest_cpu_us_per_io") else ""
        lines.append(f"  {sec:5} {prov:8} {wl:18} {t:15} {m['iops']:10.0f} IOPS {m['mib_s']:9.1f} MiB/s "
                     f"{m['lat_us']:8.1f} us  target {cpu} us/IO{g}  ({m['rounds']} rounds)")
    lines.append("== ratios (ours / peer, medians)")
    for r in rat:
        parts = [f"IOPS {r['iops']:.2f}x"]
        if "iops_per_target_cpu" in r:
            parts.append(f"IOPS per target CPU-second {r['iops_per_target_cpu']:.2f}x")
        if "guest_cpu_per_io" in r:
            parts.append(f"guest CPU per I/O {r['guest_cpu_per_io']:.2f}x")
        if "latency" in r:
            parts.append(f"latency {r['latency']:.2f}x")
        lines.append(f"  {r['section']:5} {r['prov']:8} {r['workload']:18} {r['ours']}/{r['peer']}: " + ", ".join(parts))
    lines.append("== goals")
    for x in gl:
        lines.append(f"  {'met   ' if x['met'] else 'MISSED'} {x['goal']}: {x['detail']}")
    if not gl:
        lines.append("  (none measured in this run)")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description="isertd side by side with tgtd and LIO (docs/bench.md)")
    ap.add_argument("--build", default=os.path.join(SRC, "build"), help="build tree (default: build)")
    ap.add_argument("--sections", default="tcp,guest", help="tcp, guest or both (default)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=5, help="seconds per tcp run (default 5)")
    ap.add_argument("--guest-secs", type=int, default=5, help="seconds per guest run (default 5)")
    ap.add_argument("--guest-timeout", type=int, default=3600)
    ap.add_argument("--size-mib", type=int, default=1024, help="tcp LUN size (default 1024)")
    ap.add_argument("--out", help="results folder (default bench-results/DATE-TIME)")
    ap.add_argument("--quick", action="store_true", help="a 2-minute subset: 1 round, fewer workloads")
    ap.add_argument("--cost", action="store_true",
                    help="also count each target's system calls per I/O by kind (perf trace on this host, "
                         "strace in the guest), one traced run per workload")
    ap.add_argument("--smoke", action="store_true", help="seconds: checks that the bench runs (meson test bench-smoke)")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.quick or args.smoke:
        args.rounds = 1
        args.secs = args.guest_secs = 3
    if args.smoke:
        args.secs, args.size_mib, args.sections = 2, 64, "tcp"
    sections = args.sections.split(",")
    if any(s not in ("tcp", "guest") for s in sections):
        sys.exit(f"bench: --sections {args.sections}: tcp, guest or tcp,guest")
    out = args.out or os.path.join(SRC, "bench-results", time.strftime("%Y%m%d-%H%M%S"))
    os.makedirs(out, exist_ok=True)
    # The commit measured is the build tree's source, which may be another checkout.
    try:
        with open(os.path.join(args.build, "meson-info/meson-info.json")) as f:
            built_from = json.load(f)["directories"]["source"]
    except (OSError, ValueError, KeyError):
        built_from = SRC
    commit = subprocess.run(["git", "-C", built_from, "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    log(f"bench: commit {commit}, build {args.build}, {args.rounds} round(s), sections {args.sections}; results in {out}")
    results, cost, ok = [], [], True
    with tempfile.TemporaryDirectory(prefix="isert-bench-") as work:
        if "tcp" in sections:
            tcp = Tcp(args, work)
            try:
                tcp.start()
                tcp.rounds(results)
                if args.cost:
                    tcp.cost(cost)
            except (RuntimeError, subprocess.CalledProcessError) as e:
                log(f"bench: tcp: {e}")
                ok = False
            finally:
                tcp.stop()
        if "guest" in sections:
            ok = guest(args, out, results, cost) and ok
    med = medians(results)
    rat = ratios(med)
    gl = goals(results, med)
    text = summary(med, rat, gl)
    if cost:
        text += "\n== system calls per I/O by kind (the target traced: perf trace on this host, strace in the guest; " \
            "one run each)\n" + \
            "\n".join(cost_row(x) for x in cost)
    log(text)
    doc = {"commit": commit, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": os.uname().nodename,
           "args": vars(args), "workloads": {k: dict(zip(("xfersize", "rdpct", "seekpct", "qd"), v))
                                            for k, v in WORKLOADS.items()},
           "rounds": results, "medians": [dict(zip(("section", "prov", "target", "workload"), k), **v)
                                          for k, v in sorted(med.items())],
           "ratios": rat, "goals": gl, "cost": cost}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    sys.path.insert(0, HERE)
    import report
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write(report.html(doc, text))
    log(f"bench: {out}/results.json, {out}/report.html")
    return 0 if ok and results else 1


if __name__ == "__main__":
    sys.exit(main())
