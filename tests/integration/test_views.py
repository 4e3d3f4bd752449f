#!/usr/bin/env python3
"""Large READs of a RAM LU over TCP go out from the store itself (no copy
into a pool buffer: backstore_read_view), and a WRITE ATOMIC still reaches
them all or nothing (docs/architecture.md, "Data path over TCP").

Connection A sends 24 READs of 1 MiB at once and reads none of the answers,
so the target's socket fills and most of those reads are still being sent
from the store.  Connection B then writes the first 256 KiB with WRITE
ATOMIC (16): it must wait until A has taken every answer (B's status does
not come while A is stuck), every one of A's reads must hold the old bytes
whole, and B's write must be there after.  Reads after it (the store then
copies under the atomic write's sequence lock) and small reads (below the
view size) return the right bytes too, and isertd exits 0.

usage: test_views.py ISERTD [PORT]"""
import json
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
from admin_rpc import end_isertd, start_isertd  # noqa: E402
from checks import check, finish, workdir  # noqa: E402
from scsi_util import GOOD, rw16, write_big  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3640
T, INI = 'iqn.2026-11.org.isert:views', 'iqn.2026-11.org.isert:views-ini'
MIB, NREADS = 1 << 20, 24
OLD = bytes(range(256)) * (MIB // 256)    # the first MiB before the atomic write


def login():
    for _ in range(100):
        try:
            # A small receive buffer: the 24 MiB A leaves unread stay in the target, whatever the host's tcp_rmem.
            c = ic.Conn(PORT, timeout=20, rcvbuf=256 << 10)
            break
        except OSError:
            time.sleep(0.05)
    check(f'{INI} logs in', c.login(INI, T) == 0)
    c.command(bytes(6))   # TEST UNIT READY takes the power-on unit attention
    return c


def read_answers(c, itts):
    """Every Data-In of the pipelined READs, by ITT: {itt: (status, data)}."""
    got, done = {i: b'' for i in itts}, {}
    while len(done) < len(itts):
        op, bhs, data = c.recv()
        itt = struct.unpack('>I', bhs[16:20])[0]
        if op == ic.OP_DATA_IN:
            got[itt] += data
            if bhs[1] & 1:
                done[itt] = (bhs[3], got[itt])
        elif op == ic.OP_SCSI_RSP:
            done[itt] = (bhs[3], got[itt])
    return done


def main():
    work = workdir('isert-views-')
    cfg = {'backstores': [{'name': 'r', 'type': 'ram', 'size': '64M'}],
           'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                            'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                            'luns': [{'lun': 0, 'backstore': 'r'}]}]}]}
    with open(os.path.join(work, 'isertd.json'), 'w') as f:
        json.dump(cfg, f)
    proc, _ = start_isertd(ISERTD, work, os.path.join(work, 'isertd.json'))
    try:
        a, b = login(), login()
        write_big(a, 0, 0, OLD)
        st, d, _ = rw16(a, False, 0, 0, MIB // 512)
        check('a 1 MiB READ (a view) returns what was written', st == GOOD and d == OLD)
        st, d, _ = rw16(a, False, 0, 8, 8)
        check('a 4 KiB READ (copied: below the view size) returns what was written',
              st == GOOD and d == OLD[4096:8192])

        # A: 24 READs of the first MiB in flight, none of their answers read yet.
        itts = []
        for _ in range(NREADS):
            itt = a.next_itt()
            cdb = bytes([0x88, 0]) + struct.pack('>QI', 0, MIB // 512) + b'\0\0'
            a.send(a.scsi_bhs(cdb, MIB, read=True, itt=itt))
            itts.append(itt)
        time.sleep(0.5)   # the target fills A's socket and holds the rest

        # B: WRITE ATOMIC (16) of the first 256 KiB, in a thread: its status must wait for A.
        new = b'\x5a' * (256 << 10)
        res = {}

        def atomic():
            cdb = bytes([0x9c, 0]) + struct.pack('>Q', 0) + b'\0\0' + struct.pack('>H', len(new) // 512) + b'\0\0'
            res['b'] = b.command(cdb, len(new), write_data=new)
            res['t'] = time.monotonic()
        t = threading.Thread(target=atomic)
        t.start()
        time.sleep(1.0)
        check('WRITE ATOMIC waits while READs of its blocks are still being sent from the store',
              'b' not in res, res.get('b', ('',))[0])
        t_drain = time.monotonic()
        done = read_answers(a, itts)
        t.join(20)
        check('WRITE ATOMIC completes GOOD once they are sent', res.get('b', (None,))[0] == GOOD, res.get('b'))
        check('... and not before', res.get('t', 0) >= t_drain)
        whole = [st == GOOD and d == OLD for st, d in done.values()]
        check(f'all {NREADS} READs GOOD, each with the old bytes whole', len(done) == NREADS and all(whole),
              f'{sum(whole)} of {len(done)}')

        st, d, _ = rw16(a, False, 0, 0, MIB // 512)
        check('after it, a 1 MiB READ (copied now) holds the atomic write and the old rest',
              st == GOOD and d == new + OLD[len(new):])
        st, d, _ = rw16(b, False, 0, 1024, 16)
        check('a small READ after it too', st == GOOD and d == OLD[512 << 10:(512 << 10) + 8192])
        a.logout()
        b.logout()
    finally:
        end_isertd(proc, work)
    finish()


main()
