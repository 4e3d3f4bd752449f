#!/usr/bin/env python3
"""Two isertd gateways over one RBD image as one SCSI target
(docs/cluster.md), against a real throw-away Ceph cluster (run it under
tests/ceph/cluster.sh run, which exports CEPH_CONF), one initiator through
each gateway, both gateways active:

- registrations made through either gateway are seen through both (READ
  KEYS, READ FULL STATUS with each registration's relative target port),
  with one generation; a reservation taken through A makes B's non-holder
  writes RESERVATION CONFLICT; PREEMPT AND ABORT from B takes it over and
  A's initiator hears REGISTRATIONS PREEMPTED; RESERVATIONS RELEASED reaches
  the registrant on the other gateway; REGISTER AND MOVE to the other
  gateway's port; SPC-2 RESERVE through A conflicts on B, a lost nexus
  releases it everywhere, and a logout before its Logout Response; a
  LOGICAL UNIT RESET through A is met through B on the next command; an
  `rbd resize` is CAPACITY DATA HAS CHANGED through both gateways; each
  of the six reservation types taken through A is obeyed through B by a
  registered and an unregistered nexus; PREEMPT across; the state outlives
  both gateways (APTPL is implicit: REPORT CAPABILITIES says PTPL_C);
- concurrent RESERVEs through both gateways, ROUNDS rounds: exactly one
  wins each round and both gateways then report that one holder;
- the ALUA states the same through both gateways: SET TARGET PORT GROUPS
  through one is reported by the other, whose initiator hears ASYMMETRIC
  ACCESS STATE CHANGED and whose port then refuses writes; a third gateway
  configured with a relative port another live one serves does not start,
  nor one serving the image under another target name;
- a gateway stopped (SIGSTOP) while the other preempts and aborts its
  initiator's reservation is fenced within the notify timeout: the
  PREEMPT AND ABORT completes, the stopped gateway is
  on the OSDs' blocklist, after SIGCONT its writes no longer land, and its
  ALUA group is unavailable while the other's stays active/optimized;
- a damaged ALUA state object: a gateway that starts on it says so and
  serves.

usage: test_cluster.py ISERTD ISERCTL [PORT] [ROUNDS]"""
import json
import os
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
from admin_rpc import stop_isertd  # noqa: E402
from checks import check  # noqa: E402
from pr_client import (CLR, CONFLICT, EA, EA_AR, EA_RO, GOOD, PRE, PRE_ABORT, REG, REG_IGN, REL, RES, WE,  # noqa
                       WE_AR, WE_RO, caps,
                       full_status, prout, read_keys, read_reservation, register_and_move, release6, reserve6,
                       rw)

ISERTD, ISERCTL = sys.argv[1], sys.argv[2]
PORT = int(sys.argv[3]) if len(sys.argv) > 3 else 3550
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 100
CONF = os.environ['CEPH_CONF']
T = 'iqn.2026-11.org.isert:cluster'
INI_1, INI_2 = 'iqn.2026-11.org.isert:node-1', 'iqn.2026-11.org.isert:node-2'
ISID = {INI_1: bytes.fromhex('400001370011'), INI_2: bytes.fromhex('400001370022')}
KEY_1, KEY_2 = 0x1111, 0x2222
UNIT_ATTENTION = 6


def rbd(*args):
    return subprocess.run(['rbd', '--conf', CONF] + list(args), capture_output=True, timeout=120)


def gateway(work, name, port, tag, target=T):
    """A gateway of target T on image 'shared': its portal group is tag, both ALUA groups active/optimized."""
    other = 3 - tag
    groups = sorted([{'id': tag, 'state': 'active_optimized', 'tpgs': [tag]},
                     {'id': other, 'state': 'active_optimized', 'remote_ports': [other]}], key=lambda g: g['id'])
    cfg = {'backstores': [{'name': 'disk', 'type': 'rbd', 'pool': 'rbd', 'image': 'shared', 'conf': CONF}],
           'targets': [{'iqn': target, 'tpgs': [{'tag': tag, 'demo_mode': True,
                                            'portals': [{'ip': '127.0.0.1', 'port': port}],
                                            'luns': [{'lun': 0, 'backstore': 'disk'}]}],
                        'alua': {'mode': 'both', 'groups': groups}}]}
    path = os.path.join(work, name + '.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    log = open(os.path.join(work, name + '.log'), 'a')
    sock = os.path.join(work, name + '.sock')
    p = subprocess.Popen([ISERTD, '-c', path, '--admin-socket', sock, '--state-dir', 'none', '-r', '2'],
                         stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        try:
            ic.Conn(port, timeout=1).close()
            break
        except OSError:
            if p.poll() is not None:
                break
            time.sleep(0.05)
    return p


def iserctl(work, name, *args):
    r = subprocess.run([ISERCTL, '-s', os.path.join(work, name + '.sock')] + list(args), capture_output=True,
                       text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


def session(port, ini, isid=None):
    c = ic.Conn(port, timeout=30)
    c.isid = isid or ISID[ini]
    assert c.login(ini, T) == 0
    uas(c)
    return c


def uas(c):
    """TEST UNIT READYs until one passes: the (ASC, ASCQ) of the unit attentions met."""
    seen = []
    for _ in range(10):
        st, _, sense = c.command(b'\0' * 6)
        if st == 2 and len(sense) > 13 and sense[2] & 0x0F == UNIT_ATTENTION:
            seen.append((sense[12], sense[13]))
            continue
        break
    return seen


def iport(ini):
    return '%s,i,0x%s' % (ini, ISID[ini].hex())


AO, STANDBY, UNAVAILABLE = 0, 2, 3


def rtpg(c):
    """REPORT TARGET PORT GROUPS: {group id: (state, [relative ports])}."""
    st, d, _ = c.command(bytes([0xA3, 0x0A, 0, 0, 0, 0]) + struct.pack('>I', 1024) + b'\0\0', 1024, read=True)
    out, off = {}, 4
    while st == GOOD and off + 8 <= 4 + struct.unpack('>I', d[:4])[0]:
        gid, n = struct.unpack('>H', d[off + 2:off + 4])[0], d[off + 7]
        out[gid] = (d[off] & 0x0F, [struct.unpack('>H', d[off + 8 + 4 * i + 2:off + 8 + 4 * i + 4])[0]
                                    for i in range(n)])
        off += 8 + 4 * n
    return out


def stpg(c, states):
    """SET TARGET PORT GROUPS: [(group id, state)]; its status."""
    param = b'\0' * 4 + b''.join(bytes([st, 0]) + struct.pack('>H', gid) for gid, st in states)
    cdb = bytes([0xA4, 0x0A, 0, 0, 0, 0]) + struct.pack('>I', len(param)) + b'\0\0'
    return c.command(cdb, len(param), write_data=param)[0]


def alua(a, b, work):
    """The target's ALUA states are the same through both gateways, whichever one changes them."""
    ra, rb = rtpg(a), rtpg(b)
    check('REPORT TARGET PORT GROUPS: the same through both gateways, both groups active/optimized',
          ra == rb and ra.get(1, (None,))[0] == AO and ra.get(2, (None,))[0] == AO, (ra, rb))
    check('SET TARGET PORT GROUPS through B: group 1 (gateway A) standby', stpg(b, [(1, STANDBY)]) == GOOD)
    seen = uas(a)
    check('node 1 hears ASYMMETRIC ACCESS STATE CHANGED (2Ah/06h) through A', (0x2A, 0x06) in seen, seen)
    check('and A reports group 1 standby, as B does', rtpg(a).get(1, (None,))[0] == STANDBY == rtpg(b)[1][0],
          (rtpg(a), rtpg(b)))
    st, _, sense = a.command(bytes([0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0]), 512, write_data=b'x' * 512)
    check('a write through A (standby now) is refused: NOT READY 04h/0Bh', st == 2 and sense[12:14] == b'\x04\x0b',
          (st, sense[:14].hex()))
    check('SET TARGET PORT GROUPS through A: group 1 active/optimized again', stpg(a, [(1, AO)]) == GOOD)
    uas(a)
    uas(b)
    check('both report both groups active/optimized again', rtpg(a) == rtpg(b) and rtpg(b)[1][0] == AO,
          (rtpg(a), rtpg(b)))
    rc, out, err = iserctl(work, 'a', 'alua', 'set', T, '2', 'standby')
    uas(a)
    uas(b)
    check('iserctl alua set on gateway A: group 2 (gateway B) standby, as B reports it',
          rc == 0 and rtpg(b).get(2, (None,))[0] == STANDBY, (rc, out, err, rtpg(b)))
    rc, out, err = iserctl(work, 'b', 'alua')
    check('and iserctl alua on gateway B says so', rc == 0 and 'standby' in out, out + err)
    iserctl(work, 'b', 'alua', 'set', T, '2', 'active_optimized')
    uas(a)
    uas(b)


def cluster_view(work):
    """iserctl cluster on each gateway: both gateways, the registrations, the ALUA states."""
    time.sleep(6)  # a heartbeat: every gateway asked once
    rc, out, err = iserctl(work, 'a', 'cluster')
    print('\n'.join('     ' + line for line in out.splitlines()))
    check('iserctl cluster on A: the image\'s state object and both gateways, each answered',
          rc == 0 and 'isert_state.' in out and 'isert_alua.' in out and out.count(' yes ') >= 4, out + err)
    rc, out, err = iserctl(work, 'b', '--json', 'cluster')
    try:
        v = json.loads(out)
        regs = v['reservations'][0]['state']['registrations']
        gws = v['alua'][0]['gateways']
    except (ValueError, KeyError, IndexError, TypeError):
        regs, gws = None, None
    check('iserctl --json cluster on B: the registrations of both nodes, and both gateways with their ports',
          regs is not None and {r['relative_port'] for r in regs} == {1, 2} and
          sorted(p for g in gws for p in g['desc']['ports']) == [1, 2], out[-1500:] + err)


def semantics(a, b, work):
    """a: INI_1 through gateway A (port tag 1), b: INI_2 through gateway B (tag 2)."""
    check('REPORT CAPABILITIES: PTPL_C on both (the shared state persists)', caps(a)[0] and caps(b)[0])
    g0, keys = read_keys(a)
    check('no registration yet, seen the same through both', keys == [] and read_keys(b) == (g0, []),
          (read_keys(a), read_keys(b)))
    check('node 1 registers through A', prout(a, REG, sark=KEY_1)[0] == GOOD)
    check('node 2 registers through B', prout(b, REG, sark=KEY_2)[0] == GOOD)
    check('READ KEYS through A and through B: both keys, one generation',
          read_keys(a) == read_keys(b) == (g0 + 2, [KEY_1, KEY_2]), (read_keys(a), read_keys(b)))
    check('node 1 reserves WRITE EXCLUSIVE through A', prout(a, RES, WE, rk=KEY_1)[0] == GOOD)
    check('READ RESERVATION through B: node 1\'s key, type 1', read_reservation(b) == (KEY_1, WE),
          read_reservation(b))
    check('node 2 (registered, not the holder) writes through B: RESERVATION CONFLICT', rw(b, True) == CONFLICT)
    check('node 2 reads through B (WRITE EXCLUSIVE lets it)', rw(b, False) == GOOD)
    check('node 1 writes through A', rw(a, True) == GOOD)
    fs = full_status(b)
    check('READ FULL STATUS through B: node 1 through port 1, the holder; node 2 through port 2',
          sorted((k, h, rp, n) for k, h, _, rp, n in fs) == [(KEY_1, True, 1, iport(INI_1)),
                                                              (KEY_2, False, 2, iport(INI_2))], fs)

    check('node 2 preempts and aborts node 1 through B', prout(b, PRE_ABORT, WE, rk=KEY_2, sark=KEY_1)[0] == GOOD)
    seen = uas(a)
    check('node 1 hears REGISTRATIONS PREEMPTED (2Ah/05h) through A', (0x2A, 0x05) in seen, seen)
    check('node 1 writes through A: RESERVATION CONFLICT (no longer registered)', rw(a, True) == CONFLICT)
    check('node 2 holds it now, through both', read_reservation(a) == read_reservation(b) == (KEY_2, WE))
    check('node 2 writes through B', rw(b, True) == GOOD)

    # RESERVATIONS RELEASED to a registrant on the other gateway.
    check('node 1 registers again through A', prout(a, REG, sark=KEY_1)[0] == GOOD)
    check('node 2 releases, and reserves WRITE EXCLUSIVE - REGISTRANTS ONLY',
          prout(b, REL, WE, rk=KEY_2)[0] == GOOD and prout(b, RES, WE_RO, rk=KEY_2)[0] == GOOD)
    uas(a)
    check('node 2 releases it through B', prout(b, REL, WE_RO, rk=KEY_2)[0] == GOOD)
    seen = uas(a)
    check('node 1 hears RESERVATIONS RELEASED (2Ah/04h) through A', (0x2A, 0x04) in seen, seen)

    # REGISTER AND MOVE to the other gateway's port.
    check('node 2 reserves WRITE EXCLUSIVE', prout(b, RES, WE, rk=KEY_2)[0] == GOOD)
    st, sense = register_and_move(b, KEY_2, 0x3333, 1, iport(INI_1))
    check('REGISTER AND MOVE through B to node 1 at relative port 1 (gateway A)', st == GOOD, (st, sense.hex()))
    check('node 1 holds it through A, with the new key', read_reservation(a) == (0x3333, WE), read_reservation(a))
    check('node 1 writes through A, node 2 conflicts through B', rw(a, True) == GOOD and rw(b, True) == CONFLICT)
    check('CLEAR through A', prout(a, CLR, rk=0x3333)[0] == GOOD)
    uas(b)
    check('after CLEAR no key and no reservation, through both',
          read_keys(a)[1] == read_keys(b)[1] == [] and read_reservation(b) is None)

    # SPC-2 RESERVE/RELEASE across the gateways; a logout releases it everywhere.
    check('node 1 RESERVE(6) through A', reserve6(a) == GOOD)
    check('node 2 reads through B: RESERVATION CONFLICT (SPC-2)', rw(b, False) == CONFLICT)
    check('node 1 RELEASE(6) through A', release6(a) == GOOD)
    check('node 2 reads through B again', rw(b, False) == GOOD)
    a2 = session(PORT, INI_1, isid=bytes.fromhex('400001370013'))  # another port of node 1: a nexus of its own
    check('node 1 RESERVE(6) again through A (another port of it), then its session ends', reserve6(a2) == GOOD and
          rw(b, False) == CONFLICT)
    a2.close()
    ok = False
    for _ in range(100):
        if rw(b, False) == GOOD:
            ok = True
            break
        time.sleep(0.1)
    check('the lost nexus released it: node 2 reads through B', ok)
    # A logout answers once every gateway has the release: no waiting after it.
    a3 = session(PORT, INI_1, isid=bytes.fromhex('400001370014'))
    check('node 1 RESERVE(6) through A (a third port of it)', reserve6(a3) == GOOD and rw(b, False) == CONFLICT)
    check('it logs out', a3.logout() == 0)
    a3.close()
    check('at once after the Logout Response, node 2 reads through B', rw(b, False) == GOOD)
    # A reset is one for the whole target: its unit attention is on every gateway's nexuses when it is answered.
    uas(a)
    uas(b)
    check('LOGICAL UNIT RESET through A: function complete', a.tmf(5) == 0)
    st, _, sense = b.command(b'\0' * 6)
    check('at once after it, node 2\'s next command through B meets BUS DEVICE RESET FUNCTION OCCURRED (29h/03h)',
          st == 2 and sense[12:14] == b'\x29\x03', (st, sense.hex()))
    check('and node 1 through A', (0x29, 0x03) in uas(a))
    r = rbd('resize', '--size', '24M', 'rbd/shared')
    check('rbd resize of the image to 24 MiB', r.returncode == 0, r.stderr)
    seen_a, seen_b = [], []
    for _ in range(100):  # each gateway's librbd hears of it by its own watch on the image
        seen_a += uas(a)
        seen_b += uas(b)
        if (0x2A, 0x09) in seen_a and (0x2A, 0x09) in seen_b:
            break
        time.sleep(0.1)
    check('CAPACITY DATA HAS CHANGED (2Ah/09h) through both gateways', (0x2A, 0x09) in seen_a and
          (0x2A, 0x09) in seen_b, (seen_a, seen_b))


# Each reservation type: what a registered non-holder and an unregistered nexus may do (SPC-4 table 85).
TYPES = [  # (type, name, registered read, registered write, unregistered read, unregistered write)
    (WE, 'WRITE EXCLUSIVE', GOOD, CONFLICT, GOOD, CONFLICT),
    (EA, 'EXCLUSIVE ACCESS', CONFLICT, CONFLICT, CONFLICT, CONFLICT),
    (WE_RO, 'WRITE EXCLUSIVE - REGISTRANTS ONLY', GOOD, GOOD, GOOD, CONFLICT),
    (EA_RO, 'EXCLUSIVE ACCESS - REGISTRANTS ONLY', GOOD, GOOD, CONFLICT, CONFLICT),
    (WE_AR, 'WRITE EXCLUSIVE - ALL REGISTRANTS', GOOD, GOOD, GOOD, CONFLICT),
    (EA_AR, 'EXCLUSIVE ACCESS - ALL REGISTRANTS', GOOD, GOOD, CONFLICT, CONFLICT),
]


def types(a, b):
    """Every reservation type taken through A, obeyed through B; PREEMPT across; both nodes registered."""
    b2 = session(PORT + 1, INI_2, isid=bytes.fromhex('400001370023'))  # another port of node 2, not registered
    check('node 1 and node 2 register through A and B',
          prout(a, REG_IGN, sark=KEY_1)[0] == GOOD and prout(b, REG_IGN, sark=KEY_2)[0] == GOOD)
    for rtype, name, rr, rw_, ur, uw in TYPES:
        check('node 1 reserves %s through A' % name, prout(a, RES, rtype, rk=KEY_1)[0] == GOOD)
        holder = 0 if rtype in (WE_AR, EA_AR) else KEY_1  # an all-registrants reservation has key 0
        got = (read_reservation(b), rw(b, False), rw(b, True), rw(b2, False), rw(b2, True))
        check('%s through B: READ RESERVATION, then registered node 2 reads/writes, unregistered port reads/writes'
              % name, got == ((holder, rtype), rr, rw_, ur, uw), got)
        check('node 1 writes through A', rw(a, True) == GOOD)
        check('node 1 releases it through A', prout(a, REL, rtype, rk=KEY_1)[0] == GOOD)
        seen = uas(b)
        released = (0x2A, 0x04) in seen
        check('B reports no reservation%s' % (', and node 2 heard RESERVATIONS RELEASED (2Ah/04h)' if rtype in
                                                (WE_RO, EA_RO, WE_AR, EA_AR) else ''),
              read_reservation(b) is None and released == (rtype in (WE_RO, EA_RO, WE_AR, EA_AR)), seen)
        uas(a)
        uas(b2)
    check('node 1 reserves WRITE EXCLUSIVE through A again', prout(a, RES, WE, rk=KEY_1)[0] == GOOD)
    check('node 2 PREEMPTs node 1 through B', prout(b, PRE, WE, rk=KEY_2, sark=KEY_1)[0] == GOOD)
    seen = uas(a)
    check('node 1 hears REGISTRATIONS PREEMPTED (2Ah/05h) through A', (0x2A, 0x05) in seen, seen)
    check('node 2 holds it, node 1 is no longer registered, seen through A',
          read_reservation(a) == (KEY_2, WE) and read_keys(a)[1] == [KEY_2], (read_reservation(a), read_keys(a)))
    check('CLEAR through B', prout(b, CLR, rk=KEY_2)[0] == GOOD)
    uas(a)
    uas(b)
    uas(b2)
    b2.close()


def race(a, b):
    """Both nodes RESERVE at once, ROUNDS times: one winner each round, seen alike through both."""
    check('both register with REGISTER AND IGNORE EXISTING KEY',
          prout(a, REG_IGN, sark=KEY_1)[0] == GOOD and prout(b, REG_IGN, sark=KEY_2)[0] == GOOD)
    bad = []
    for i in range(ROUNDS):
        res = {}
        start = threading.Barrier(2)

        def go(c, key, who):
            start.wait()
            res[who] = prout(c, RES, EA, rk=key)[0]
        ts = [threading.Thread(target=go, args=(a, KEY_1, 1)), threading.Thread(target=go, args=(b, KEY_2, 2))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        winners = [w for w, st in res.items() if st == GOOD]
        holder = read_reservation(a)
        if (len(winners) != 1 or sorted(res.values()) != [GOOD, CONFLICT] or holder != read_reservation(b) or
                holder != ({1: KEY_1, 2: KEY_2}[winners[0]], EA)):
            bad.append((i, res, holder, read_reservation(b)))
        w = winners[0] if winners else 1
        prout(a if w == 1 else b, REL, EA, rk=KEY_1 if w == 1 else KEY_2)
    check('%d rounds of RESERVE through both gateways at once: one winner each, both report it' % ROUNDS,
          not bad, bad[:5])
    prout(a, CLR, rk=KEY_1)
    uas(a)
    uas(b)


def blocklisted(work):
    """The client addresses on the OSDs' blocklist ("ADDR UNTIL" lines)."""
    r = subprocess.run(['ceph', '--conf', CONF, 'osd', 'blocklist', 'ls'], capture_output=True, text=True, timeout=60)
    return [line.split()[0] for line in r.stdout.splitlines() if '/' in line.split(' ')[0]]


def fencing(work, ga, a, b):
    """Gateway A stopped while node 2 preempts and aborts node 1 (the holder, through A): A is fenced, the
    PREEMPT AND ABORT completes, and what A still does is refused by the cluster."""
    check('node 1 reserves WRITE EXCLUSIVE through A', prout(a, RES, WE, rk=0x1112)[0] == GOOD)
    before = len(blocklisted(work))
    ga.send_signal(signal.SIGSTOP)
    t0 = time.time()
    st = prout(b, PRE_ABORT, WE, rk=KEY_2, sark=0x1112)[0]
    took = time.time() - t0
    print('     the PREEMPT AND ABORT through B completed %.1f s after A stopped' % took)
    check('node 2 preempts and aborts node 1 through B while gateway A is stopped: GOOD, within the notify '
          'timeout and a bit', st == GOOD and took < 15, (st, took))
    check('node 2 holds the reservation', read_reservation(b) == (KEY_2, WE), read_reservation(b))
    log = open(os.path.join(work, 'b.log')).read()
    check('gateway B says it fenced A', 'fenced (blocklisted)' in log, log[-1500:])
    check('A\'s client is on the OSDs\' blocklist', len(blocklisted(work)) > before, blocklisted(work))
    ga.send_signal(signal.SIGCONT)
    try:
        st = rw(a, True)
    except (OSError, RuntimeError, ConnectionError):
        st = None
    check('after SIGCONT, node 1\'s write through fenced gateway A does not succeed', st != GOOD, st)
    # The ALUA state has its own list of gateways: A leaves it at that object's next question (heartbeat
    # and notify timeout, about 10 s), and B's failover follows.
    for _ in range(200):
        uas(b)  # ASYMMETRIC ACCESS STATE CHANGED first
        groups = rtpg(b)
        if groups.get(1, (None,))[0] == UNAVAILABLE:
            break
        time.sleep(0.1)
    check('B made the fenced gateway\'s group 1 unavailable and keeps group 2 active/optimized',
          groups.get(1, (None,))[0] == UNAVAILABLE and groups.get(2, (None,))[0] == AO, groups)


def refused_at_start(work):
    """A third gateway that disagrees with A and B: refused at start, naming the gateway in the way."""
    gc = gateway(work, 'c', PORT + 2, 2)
    rc = gc.wait(60) if gc.poll() is None else gc.returncode
    log = open(os.path.join(work, 'c.log')).read()
    check('a gateway configured with B\'s portal group tag (relative port 2) does not start, saying why',
          rc != 0 and 'relative port 2' in log and 'served by gateway' in log, (rc, log[-600:]))
    gd = gateway(work, 'd', PORT + 2, 1, target=T + '-other')
    rc = gd.wait(60) if gd.poll() is None else gd.returncode
    log = open(os.path.join(work, 'd.log')).read()
    check('a gateway serving the same image as another target does not start, naming the target it is served as',
          rc != 0 and 'same target name' in log and T in log, (rc, log[-600:]))


def damaged_alua(work, gb):
    """A damaged ALUA state object (format not a string): a gateway that starts says it is not usable and serves."""
    check('gateway B stops cleanly', stop_isertd(gb) == 0)
    r = subprocess.run(['rados', '--conf', CONF, '-p', 'rbd', 'put', 'isert_alua.' + T, '-'],
                       input=b'{"format": null, "groups": 7}', capture_output=True, timeout=60)
    check('rados put of a damaged isert_alua object', r.returncode == 0, r.stderr)
    gb = gateway(work, 'b', PORT + 1, 2)
    try:
        c = session(PORT + 1, INI_2)
        ok = rw(c, False) == GOOD
        c.close()
    except (OSError, AssertionError, RuntimeError):
        ok = False
    log = open(os.path.join(work, 'b.log')).read()
    check('gateway B starts on it, says the ALUA state is not usable, and serves', gb.poll() is None and ok and
          'is not usable' in log, log[-800:])
    return gb


def main():
    work = tempfile.mkdtemp(prefix='isert-cluster-')
    procs = []
    try:
        r = rbd('create', '--size', '16M', 'rbd/shared')
        check('rbd create shared', r.returncode == 0, r.stderr)
        ga = gateway(work, 'a', PORT, 1)
        gb = gateway(work, 'b', PORT + 1, 2)
        procs += [ga, gb]
        check('two gateways start on one image', ga.poll() is None and gb.poll() is None)
        a, b = session(PORT, INI_1), session(PORT + 1, INI_2)
        semantics(a, b, work)
        types(a, b)
        alua(a, b, work)
        race(a, b)
        check('both register with REGISTER AND IGNORE EXISTING KEY',
              prout(a, REG_IGN, sark=KEY_1)[0] == GOOD and prout(b, REG_IGN, sark=KEY_2)[0] == GOOD)
        cluster_view(work)
        check('gateway B stops cleanly', stop_isertd(gb) == 0)
        gb = gateway(work, 'b', PORT + 1, 2)
        procs.append(gb)
        b = session(PORT + 1, INI_2)
        check('node 1 registers a new key through A', prout(a, REG_IGN, sark=0x1112)[0] == GOOD)
        check('restarted gateway B reads the shared state: node 1\'s key', 0x1112 in read_keys(b)[1], read_keys(b))
        refused_at_start(work)
        fencing(work, ga, a, b)
        procs.append(damaged_alua(work, gb))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        for name in ('a', 'b'):
            path = os.path.join(work, name + '.log')
            if checks.failed and os.path.exists(path):
                print('---- %s.log' % name)
                print(open(path).read()[-4000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


if __name__ == '__main__':
    main()
