#!/usr/bin/env python3
"""One shared LU flooded with PERSISTENT RESERVE OUT while a gateway of
another LU dies (docs/cluster.md, "Under a flood"), against a real
throw-away Ceph cluster (run it under tests/ceph/cluster.sh run, which
exports CEPH_CONF):

- gateway A serves LU A (image fa) and LU B (image fb) as target T,
  gateway B serves LU B alone as T: the ALUA states of T are shared by
  both, LU A's reservations by A alone, LU B's by both;
- LU A is filled to the registration cap (1024) through A with SPEC_I_PT
  registrations whose names JSON escapes (every change then rewrites a
  state of 1.28 MB): one more is INSUFFICIENT REGISTRATION RESOURCES on
  the shared path too;
- one initiator keeps DEPTH PERSISTENT RESERVE OUTs (REGISTER AND IGNORE
  EXISTING KEY, each a change) in flight on LU A through A, more than an
  object's queue takes: those past the cap are TASK SET FULL, the others
  GOOD, and another nexus's meanwhile BUSY;
- meanwhile gateway B is killed with -9: A fences it for LU B and for the
  ALUA states (its group unavailable) within the heartbeat's bound, and
  an `iserctl alua set` on A completes within the bound of a change (it
  waits for LU A's one change in progress, not for its queue), the flood
  still going on.

Before the commit that added this test it failed: one commit thread took
every change in order and asked the other gateways only when no change
waited, so under the flood B was never fenced, the alua set waited for all
of LU A's queue, and no PERSISTENT RESERVE OUT was refused.

usage: test_flood.py ISERTD ISERCTL [PORT]"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from checks import check  # noqa: E402
from pr_client import CHECK, GOOD, REG, REG_IGN, prin, prout, register_spec_i_pt  # noqa: E402

ISERTD, ISERCTL = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 3553
CONF = os.environ['CEPH_CONF']
T = 'iqn.2026-11.org.isert:flood'
INI = 'iqn.2026-11.org.isert:flooder'
BUSY, TASK_SET_FULL = 0x08, 0x28
REGS_MAX = 1024          # PR_STATE_MAX_REGS
QUEUE_MAX = 32           # SHARED_QUEUE_MAX: commands queued or running per shared object
DEPTH = 96               # the flood's commands in flight, well past QUEUE_MAX (QueueDepth is 128)
HEARTBEAT, NOTIFY = 5.0, 5.0  # SHARED_HEARTBEAT_MS, SHARED_NOTIFY_MS
# docs/cluster.md: a dead gateway is fenced within SHARED_HEARTBEAT_MS + 2 x SHARED_NOTIFY_MS.
FENCE_BOUND = HEARTBEAT + 2 * NOTIFY
# Names JSON escapes (\u0001: 6 bytes a byte): 17 such TransportIDs fill one 4096-byte list (SCSI_PR_OUT_MAX).
FILL = '\x01' * 180


def rbd(*args):
    return subprocess.run(['rbd', '--conf', CONF] + list(args), capture_output=True, timeout=120)


def gateway(work, name, port, tag, luns):
    """A gateway of T: portal group tag, luns [(lun, image)], both ALUA groups active/optimized."""
    other = 3 - tag
    groups = sorted([{'id': tag, 'state': 'active_optimized', 'tpgs': [tag]},
                     {'id': other, 'state': 'active_optimized', 'remote_ports': [other]}], key=lambda g: g['id'])
    cfg = {'backstores': [{'name': 'disk-' + img[1], 'type': 'rbd', 'pool': 'rbd', 'image': img, 'conf': CONF}
                          for _, img in luns],
           'targets': [{'iqn': T, 'tpgs': [{'tag': tag, 'demo_mode': True,
                                            'portals': [{'ip': '127.0.0.1', 'port': port}],
                                            'luns': [{'lun': n, 'backstore': 'disk-' + img[1]} for n, img in luns]}],
                        'alua': {'mode': 'both', 'groups': groups}}]}
    path = os.path.join(work, name + '.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    log = open(os.path.join(work, name + '.log'), 'a')
    p = subprocess.Popen([ISERTD, '-c', path, '--admin-socket', os.path.join(work, name + '.sock'),
                          '--state-dir', 'none', '-r', '2'], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        try:
            ic.Conn(port, timeout=1).close()
            break
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.05)
    return p


def clear_uas(c):
    """TEST UNIT READYs until one passes: the unit attentions waiting are heard."""
    for _ in range(10):
        if c.command(b'\0' * 6)[0] == GOOD:
            break


def session(port, ini, isid):
    c = ic.Conn(port, timeout=60)
    c.isid = isid
    assert c.login(ini, T) == 0
    clear_uas(c)
    return c


def fill(port):
    """LU A to REGS_MAX registrations, through issuers of their own, each naming what fits in one list."""
    n, i, seconds = 0, 0, []
    while n < REGS_MAX:
        i += 1
        c = session(port, 'iqn.2026-11.org.isert:filler-%d' % i, bytes.fromhex('4000000a%04x' % i))
        names = []
        while n + 1 + len(names) < REGS_MAX and len(names) < 17:
            names.append('iqn.2026-11.org.isert:%s-%04d,i,0x4000000b%04x' % (FILL, n + len(names), n + len(names)))
        t0 = time.time()
        st, sense = register_spec_i_pt(c, 0x100 + i, names)
        seconds.append(time.time() - t0)
        c.close()
        if st != GOOD:
            return n, sense, seconds
        n += 1 + len(names)
    return n, b'', seconds


class Flood(threading.Thread):
    """DEPTH REGISTER AND IGNORE EXISTING KEY in flight on LUN 0, each with a new key, until stopped."""

    def __init__(self, c):
        super().__init__(daemon=True)
        self.c, self.stop, self.seen = c, threading.Event(), {}
        self.error = None
        self.checks = set()  # (key, asc, ascq) of its CHECK CONDITIONs

    def send(self, key):
        param = struct.pack('>QQ', 0, key) + b'\0' * 8
        cdb = bytes([0x5f, REG_IGN, 0, 0, 0]) + struct.pack('>I', len(param)) + b'\0'
        self.c.send(self.c.scsi_bhs(cdb, len(param), write=True, data_len=len(param)), param)

    def run(self):
        key = 0x7000
        self.began = time.time()
        try:
            for _ in range(DEPTH):
                key += 1
                self.send(key)
            while not self.stop.is_set():  # what is still in flight is left to the target
                op, bhs, data = self.c.recv()
                if op != ic.OP_SCSI_RSP:
                    continue
                st = bhs[3]
                if st == CHECK and len(data) >= 16:
                    self.checks.add((data[4] & 0x0F, data[14], data[15]))
                self.seen[st] = self.seen.get(st, 0) + 1
                if st in (BUSY, TASK_SET_FULL):
                    time.sleep(0.005)  # an initiator backs off a little; this one hardly
                key += 1
                self.send(key)
        except Exception as e:  # noqa: BLE001 - reported by the checks
            self.error = repr(e)
        self.took = time.time() - self.began


def rtpg_group2(c):
    """The state of ALUA group 2 through c (REPORT TARGET PORT GROUPS), or None."""
    st, d, _ = c.command(bytes([0xA3, 0x0A, 0, 0, 0, 0]) + struct.pack('>I', 1024) + b'\0\0', 1024, read=True)
    off = 4
    while st == GOOD and off + 8 <= 4 + struct.unpack('>I', d[:4])[0]:
        gid, n = struct.unpack('>H', d[off + 2:off + 4])[0], d[off + 7]
        if gid == 2:
            return d[off] & 0x0F
        off += 8 + 4 * n
    return None


def main():
    work = tempfile.mkdtemp(prefix='isert-flood-')
    procs = []
    try:
        check('rbd create fa and fb', all(rbd('create', '--size', '16M', 'rbd/' + i).returncode == 0
                                          for i in ('fa', 'fb')))
        ga = gateway(work, 'a', PORT, 1, [(0, 'fa'), (1, 'fb')])
        procs.append(ga)
        gb = gateway(work, 'b', PORT + 1, 2, [(1, 'fb')])
        procs.append(gb)
        check('gateway A (LU A and LU B) and gateway B (LU B) start', ga.poll() is None and gb.poll() is None)

        n, sense, took = fill(PORT)
        size = subprocess.run(['rados', '--conf', CONF, '-p', 'rbd', 'stat',
                               'isert_state.' + json.loads(rbd('info', '--format', 'json', 'rbd/fa').stdout)['id']],
                              capture_output=True, text=True, timeout=60).stdout.strip()
        change = sorted(took[-5:])[2]  # one change near the cap, nothing else waiting (the median of the last 5)
        print('     LU A filled: %d registrations in %d commands; one change at the cap took %.0f ms; its state: %s' %
              (n, len(took), 1000 * change, size))
        check('LU A holds %d registrations, made through A with SPEC_I_PT' % REGS_MAX, n == REGS_MAX, (n, sense.hex()))
        c = session(PORT, 'iqn.2026-11.org.isert:one-more', bytes.fromhex('4000000cffff'))
        st, sense = prout(c, REG, sark=0x9999)
        check('one more registration on the shared LU: INSUFFICIENT REGISTRATION RESOURCES (55h/04h)',
              st == CHECK and sense[12:14] == b'\x55\x04', (st, sense.hex()))
        c.close()

        # A registrant floods (a new one would pass the cap): each of its new keys is a change.
        f = session(PORT, 'iqn.2026-11.org.isert:filler-1', bytes.fromhex('4000000a0001'))
        view = session(PORT, INI, bytes.fromhex('400000010002'))
        check('REPORT TARGET PORT GROUPS through A: group 2 (gateway B) active/optimized',
              rtpg_group2(view) == 0, rtpg_group2(view))
        flood = Flood(f)
        flood.start()
        time.sleep(3)
        before = dict(flood.seen)
        check('the flood goes on: PERSISTENT RESERVE OUTs answered GOOD', before.get(GOOD, 0) > 0, before)
        # REGISTER with key 0 from a nexus not registered changes nothing, once it is let in.  The queue is full
        # but for the few ms between a change's end and the flooder's next command.  Sent back to back, this
        # nexus's commands would each take the place its previous one just freed, before the flooder's next
        # (a faster machine made all ten GOOD so): a pause longer than the flooder's between two tries lets
        # the flooder refill it, so each try finds the queue as the flood keeps it.
        got = []
        for _ in range(10):
            time.sleep(0.05)
            got.append(prout(view, REG)[0])
        print('     another nexus\'s ten: %s' % ' '.join('GOOD' if st == GOOD else 'BUSY' if st == BUSY else hex(st)
                                                    for st in got))
        check('PERSISTENT RESERVE OUTs of another nexus meanwhile: some BUSY (it has none of its own waiting), '
              'the others GOOD', BUSY in got and set(got) <= {BUSY, GOOD}, got)

        gb.send_signal(signal.SIGKILL)
        gb.wait()
        t0 = time.time()
        fenced_b = fenced_alua = None
        log = ''
        while time.time() - t0 < FENCE_BOUND + 10 and (fenced_b is None or fenced_alua is None):
            log = open(os.path.join(work, 'a.log'), errors='replace').read()
            if fenced_b is None and re.search(r'reservations of disk-b: gateway .*fenced', log):
                fenced_b = time.time() - t0
            if fenced_alua is None and rtpg_group2(view) == 3:
                fenced_alua = time.time() - t0
            time.sleep(0.2)
        print('     gateway B killed: fenced for LU B after %s s, its ALUA group unavailable through A after %s s' %
              ('%.1f' % fenced_b if fenced_b is not None else 'never', '%.1f' % fenced_alua
               if fenced_alua is not None else 'never'))
        check('A fences B for LU B within %.0f s while LU A is flooded' % FENCE_BOUND,
              fenced_b is not None and fenced_b <= FENCE_BOUND, (fenced_b, log[-1500:]))
        check('A fences B for the ALUA states and makes its group 2 unavailable within %.0f s' % FENCE_BOUND,
              fenced_alua is not None and fenced_alua <= FENCE_BOUND, fenced_alua)

        t1 = time.time()
        r = subprocess.run([ISERCTL, '-s', os.path.join(work, 'a.sock'), 'alua', 'set', T, '1',
                            'active_nonoptimized'], capture_output=True, text=True, timeout=120)
        took_alua = time.time() - t1
        # It waits for LU A's change in progress, then makes its own (counted as one more); 1 s for iserctl and
        # the configuration.  Waiting for LU A's whole queue instead would be DEPTH changes.
        bound = 1 + 2 * change
        print('     iserctl alua set during the flood: %.2f s' % took_alua)
        check('iserctl alua set on A during the flood completes within 1 s and two changes (%.1f s)' % bound,
              r.returncode == 0 and took_alua <= bound, (r.returncode, took_alua, r.stderr))

        mid = dict(flood.seen)
        time.sleep(1)
        flood.stop.set()
        flood.join(60)
        seen = flood.seen
        print('     the flood: %s in %.1f s, %.0f ms a change' %
              ({('GOOD' if k == GOOD else 'TASK SET FULL' if k == TASK_SET_FULL else 'BUSY' if k == BUSY else
                 hex(k)): v for k, v in seen.items()}, flood.took, 1000 * flood.took / max(seen.get(GOOD, 0), 1)))
        check('the flood stopped when told', not flood.is_alive() and flood.error is None, flood.error)
        check('still GOOD answers after the fencing', seen.get(GOOD, 0) > mid.get(GOOD, 0), (mid, seen))
        check('past %d queued changes of LU A: TASK SET FULL (the flooder has changes queued); nothing else but '
              'the unit attention of the alua set (2Ah/06h)' % QUEUE_MAX,
              seen.get(TASK_SET_FULL, 0) > 0 and set(seen) <= {GOOD, TASK_SET_FULL, CHECK} and
              flood.checks <= {(6, 0x2A, 0x06)}, (seen, flood.checks))
        clear_uas(view)  # ASYMMETRIC ACCESS STATE CHANGED
        keys = struct.unpack('>I', prin(view, 0, alloc=16384)[4:8])[0] // 8
        check('LU A still holds %d registrations' % REGS_MAX, keys == REGS_MAX, keys)
        f.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if checks.failed:
            for name in ('a', 'b'):
                path = os.path.join(work, name + '.log')
                if os.path.exists(path):
                    print('---- %s.log' % name)
                    print(open(path, errors='replace').read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
