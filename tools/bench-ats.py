#!/usr/bin/env python3
"""COMPARE AND WRITE heartbeats under another initiator's ORWRITE load.

VMware's ATS heartbeat is a one-block COMPARE AND WRITE each host sends to
its own block every few seconds; a host whose heartbeat is late long enough
is taken for dead.  Here one initiator keeps LOADERS sessions each doing
16 MiB ORWRITEs (read-modify-write, serialized with COMPARE AND WRITE on the
same blocks) on one LU, while another initiator sends a heartbeat CAW to a
block the ORWRITEs never touch every INTERVAL, and the heartbeat latency is
measured: idle first, then under the load.  isertd (and, with --base, a
second isertd build: before/after) and tgtd serve the same kind of LU, a
256 MiB file in /dev/shm, in turns; the summary prints each and the ratio.

usage: sudo tools/bench-ats.py [--secs 10] [--loaders 2] [--isertd PATH] [--base PATH] [--no-tgtd]

tgtd 1.0.85 (Debian 12) answers COMPARE AND WRITE with INVALID COMMAND
OPERATION CODE, so against it the script says so and compares nothing; the
before/after comparison is --base.  On a 2-core machine keep --loaders at 2:
each loader is a process of its own, and past the cores the heartbeat waits
for a CPU, not for the target.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import multiprocessing as mp
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'integration'))
import iscsi_client as ic  # noqa: E402

IQN = 'iqn.2026-11.org.isert:ats'
SIZE = 256 << 20
BS = 512
HB_LBA = 8                       # the heartbeat block
OR_BLOCKS = (16 << 20) // BS     # one ORWRITE: 16 MiB
OR_BASE = (64 << 20) // BS       # ORWRITEs go from 64 MiB on


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, name):
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f'bench-ats: {name} exited at start (status {proc.returncode})')
        try:
            socket.create_connection(('127.0.0.1', port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f'bench-ats: {name} does not listen on {port}')


def start_isertd(binary, work, name):
    port = free_port()
    img = os.path.join('/dev/shm', f'bench-ats-{os.getpid()}-{name}.img')
    with open(img, 'wb') as f:
        f.truncate(SIZE)
    cfg = {'backstores': [{'name': 'f', 'type': 'file', 'path': img, 'write_cache': True}],
           'targets': [{'iqn': IQN, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                              'portals': [{'ip': '127.0.0.1', 'port': port}],
                                              'luns': [{'lun': 0, 'backstore': 'f'}]}]}]}
    path = os.path.join(work, name + '.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    p = subprocess.Popen([binary, '-c', path, '--admin-socket', 'none', '--state-dir', 'none', '-r', '2'],
                         stdout=open(os.path.join(work, name + '.log'), 'w'), stderr=subprocess.STDOUT)
    wait_port(port, p, name)
    return p, port, IQN, 0, img


def start_tgtd(work):
    port, ctl = free_port(), 20 + os.getpid() % 1000
    img = os.path.join('/dev/shm', f'bench-ats-{os.getpid()}-tgtd.img')
    with open(img, 'wb') as f:
        f.truncate(SIZE)
    p = subprocess.Popen(['tgtd', '-f', '-C', str(ctl), '--iscsi', f'portal=127.0.0.1:{port}'],
                         stdout=open(os.path.join(work, 'tgtd.log'), 'w'), stderr=subprocess.STDOUT)
    wait_port(port, p, 'tgtd')
    t = ['tgtadm', '-C', str(ctl), '--lld', 'iscsi']
    for a in (['--op', 'new', '--mode', 'target', '--tid', '1', '-T', IQN + '-tgtd'],
              ['--op', 'new', '--mode', 'logicalunit', '--tid', '1', '--lun', '1', '-b', img],
              ['--op', 'bind', '--mode', 'target', '--tid', '1', '-I', 'ALL']):
        subprocess.run(t + a, check=True)
    p.ctl = ctl
    return p, port, IQN + '-tgtd', 1, img


def session(port, iqn, ini, lun):
    c = ic.Conn(port, timeout=120)
    st = c.login(ini, iqn)
    if st:
        sys.exit(f'bench-ats: login of {ini} refused ({st:#x})')
    c.lun = lun
    for _ in range(4):  # the power-on unit attention
        if c.command(bytes(6), 0, lun=c.lun)[0] == 0:
            break
    return c


def caw(c, lba, old, new):
    cdb = bytes([0x89, 0]) + struct.pack('>Q', lba) + bytes([0, 0, 0, 1, 0, 0])
    t0 = time.monotonic()
    st, _, c.sense = c.command(cdb, 2 * BS, write_data=old + new, lun=c.lun)
    return st, time.monotonic() - t0


def orwrite(c, lba, data):
    """ORWRITE (16) with Data-Out PDUs as large as the target takes (the test client sends 8 KiB ones)."""
    seg = int(c.params.get('MaxRecvDataSegmentLength', 8192))
    cdb = bytes([0x8B, 0]) + struct.pack('>Q', lba) + struct.pack('>I', OR_BLOCKS) + bytes(2)
    itt = c.next_itt()
    c.send(c.scsi_bhs(cdb, len(data), write=True, lun=c.lun, itt=itt))
    while True:
        op, bhs, payload = c.recv()
        if op == ic.OP_R2T:
            ttt, off, length = struct.unpack('>I', bhs[20:24])[0], *struct.unpack('>II', bhs[40:48])
            for sn, o in enumerate(range(off, off + length, seg)):
                n = min(seg, off + length - o)
                dbhs = bytes([ic.OP_DATA_OUT, 0x80 if o + n >= off + length else 0, 0, 0, 0]) + n.to_bytes(3, 'big')
                dbhs += struct.pack('>Q', c.lun << 48) + struct.pack('>IIIIIII', itt, ttt, 0, c.statsn + 1, 0, sn, o)
                c.send(dbhs + bytes(4), data[o:o + n])
        elif op == ic.OP_SCSI_RSP:
            return bhs[3]


class Heartbeat:
    """One block, compared and written every interval; latencies in seconds."""

    def __init__(self, port, iqn, lun):
        self.c = session(port, iqn, 'iqn.2026-11.org.test:esx-b', lun)
        self.cur = bytes(BS)
        st, _ = caw(self.c, HB_LBA, self.cur, self.cur)
        if st:  # the block is not zero (a run before): take what is there
            rd = bytes([0x28, 0]) + struct.pack('>I', HB_LBA) + bytes([0, 0, 1, 0])
            self.cur = self.c.command(rd, BS, read=True, lun=lun)[1]

    def run(self, secs, interval):
        lat, failed, end = [], 0, time.monotonic() + secs
        n = 0
        while time.monotonic() < end:
            n += 1
            new = struct.pack('>Q', n).ljust(BS, b'\0')
            st, dt = caw(self.c, HB_LBA, self.cur, new)
            if st == 0:
                self.cur = new
                lat.append(dt)
            else:
                failed += 1
                if failed == 1:
                    print(f'  heartbeat COMPARE AND WRITE failed: status {st:#x}, sense {self.c.sense.hex()}')
            time.sleep(max(0.0, interval - dt))
        return lat, failed


def loader(port, iqn, lun, i, stop, done, errors):
    """A process of its own: the heartbeat's timing is not the loaders' interpreter's."""
    c = session(port, iqn, 'iqn.2026-11.org.test:esx-a', lun)
    data = bytes([1 << (i % 8)]) * (OR_BLOCKS * BS)
    lba = OR_BASE + (i % 8) * OR_BLOCKS
    while not stop.is_set():
        if orwrite(c, lba, data) != 0:
            with errors.get_lock():
                errors.value += 1
        with done.get_lock():
            done.value += 1
    c.close()


def measure(name, target, args):
    proc, port, iqn, lun, img = target
    hb = Heartbeat(port, iqn, lun)
    idle, _ = hb.run(min(3, args.secs), args.interval)
    stop, done, errors = mp.Event(), mp.Value('q', 0), mp.Value('q', 0)
    procs = [mp.Process(target=loader, args=(port, iqn, lun, i, stop, done, errors), daemon=True)
             for i in range(args.loaders)]
    for p in procs:
        p.start()
    time.sleep(1)  # the ORWRITEs queue up
    d0, t0 = done.value, time.monotonic()
    busy, failed = hb.run(args.secs, args.interval)
    mbs = (done.value - d0) * 16 / (time.monotonic() - t0)
    stop.set()
    for p in procs:
        p.join(120)
    hb.c.close()
    q = lambda v, p: sorted(v)[min(len(v) - 1, int(p * len(v)))] * 1000 if v else float('nan')  # noqa: E731
    r = {'name': name, 'idle_ms': statistics.median(idle) * 1000 if idle else float('nan'),
         'median_ms': q(busy, 0.5), 'p99_ms': q(busy, 0.99), 'max_ms': max(busy) * 1000 if busy else float('nan'),
         'beats': len(busy), 'failed': failed, 'orwrite_mbs': mbs, 'orwrite_errors': errors.value}
    print(f"{name:>12}: heartbeat idle {r['idle_ms']:.2f} ms; under {args.loaders} x 16 MiB ORWRITE "
          f"({mbs:.0f} MiB/s): median {r['median_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max {r['max_ms']:.1f} ms "
          f"({len(busy)} beats, {failed} failed, {errors.value} ORWRITE errors)", flush=True)
    return r


def stop_target(target):
    proc = target[0]
    if hasattr(proc, 'ctl'):
        subprocess.run(['tgtadm', '-C', str(proc.ctl), '--op', 'delete', '--mode', 'system', '--force'],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
    os.unlink(target[4])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    ap.add_argument('--secs', type=float, default=10, help='heartbeat seconds under load (default 10)')
    ap.add_argument('--interval', type=float, default=0.05, help='seconds between heartbeats (default 0.05)')
    ap.add_argument('--loaders', type=int, default=2, help='ORWRITE sessions of the other initiator (default 2)')
    ap.add_argument('--isertd', default=os.path.join(here, 'build', 'target', 'isertd'))
    ap.add_argument('--base', help='another isertd build to measure beside it (before/after)')
    ap.add_argument('--no-tgtd', action='store_true', help='leave tgtd out')
    args = ap.parse_args()
    if not args.no_tgtd and (os.geteuid() or not shutil.which('tgtd')):
        sys.exit('bench-ats: tgtd needs root and the tgt package (or --no-tgtd)')
    work = tempfile.mkdtemp(prefix='bench-ats-')
    results = []
    try:
        runs = [('isertd', lambda: start_isertd(args.isertd, work, 'isertd'))]
        if args.base:
            runs.append(('isertd-base', lambda: start_isertd(args.base, work, 'base')))
        if not args.no_tgtd:
            runs.append(('tgtd', lambda: start_tgtd(work)))
        for name, start in runs:
            t = start()
            try:
                results.append(measure(name, t, args))
            finally:
                stop_target(t)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ours = results[0]
    for r in results[1:]:
        if not r['beats']:
            print(f"{r['name']}: no heartbeat went through (above: why), nothing to compare")
            continue
        print(f"max heartbeat delay under load: isertd / {r['name']} = {ours['max_ms'] / r['max_ms']:.2f}x "
              f"(p99 {ours['p99_ms'] / r['p99_ms']:.2f}x, median {ours['median_ms'] / r['median_ms']:.2f}x)")


if __name__ == '__main__':
    main()
