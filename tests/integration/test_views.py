#!/usr/bin/env python3
"""Large READs of a RAM LU over TCP go out from the store itself (no copy
into a pool buffer: backstore_read_view), and a WRITE ATOMIC still reaches
them all or nothing (docs/architecture.md, "Data path over TCP").

LUN 0: connection A sends 24 READs of 1 MiB at once and reads none of the
answers, so the target's socket fills and most of those reads are still
being sent from the store.  Connection B then writes the first 256 KiB with
WRITE ATOMIC (16): it must wait until A has taken every answer (B's status
does not come while A is stuck), every one of A's reads must hold the old
bytes whole, and B's write must be there after.  Reads after it and small
reads (below the view size) return the right bytes too.

A reader that stops for good (tcp_keepalive 0: nothing else ends its
connection) holds up only the atomic writes of its own blocks, and those
for RAM_VIEW_WAIT_MAX_MS (target/backstore/ram.c) at most.  LUN 1: a
reader stalls on the first MiB; a second initiator's WRITE ATOMIC of other
blocks is answered before that bound, one of the same blocks within the
bound and some slack, and the stalled reader's connection is the one that
pays: it is closed, and what it had been sent is whole (each block old or
new, never a mix).  LUNs 2 and 3: an ABORT TASK, an LU RESET of a WRITE
ATOMIC waiting for a stalled reader is answered before the bound (the
reader keeps its connection), and the write is not done.
Each part has an LU of its own, which no WRITE ATOMIC has met before.
LUN 4: with DataDigest=CRC32C, READs of 1 MiB whose answers wait to be
sent while another initiator rewrites their blocks: every digest is right (each
Data-In's digest covers the bytes sent: such READs are copied, not sent
from the store, whose bytes a WRITE may change after the digest is made).
isertd exits 0.

usage: test_views.py ISERTD [PORT]"""
import fcntl
import json
import os
import socket
import struct
import sys
import termios
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
INI2 = 'iqn.2026-11.org.isert:views-writer'
MIB, NREADS = 1 << 20, 24
OLD = bytes(range(256)) * (MIB // 256)    # the first MiB before the atomic write
BOUND = 5.0    # RAM_VIEW_WAIT_MAX_MS: how long a WRITE ATOMIC waits for a view of its blocks
SLACK = 10.0   # for a loaded machine and the sanitizer build


def login(ini=INI, luns=(0,)):
    for _ in range(100):
        try:
            # A small receive buffer: the 24 MiB A leaves unread stay in the target, whatever the host's tcp_rmem.
            c = ic.Conn(PORT, timeout=20, rcvbuf=256 << 10)
            break
        except OSError:
            time.sleep(0.05)
    check(f'{ini} logs in', c.login(ini, T) == 0)
    for lun in luns:
        c.command(bytes(6), lun=lun)   # TEST UNIT READY takes the power-on unit attention
    return c


def watomic_cdb(lba, data):
    return bytes([0x9c, 0]) + struct.pack('>Q', lba) + b'\0\0' + struct.pack('>H', len(data) // 512) + b'\0\0'


def filled(c, seconds=10):
    """Once the target has filled c's socket and holds the rest: what c has received and not read (SIOCINQ)
    stands still for 0.25 s.  A fixed sleep would bet on how soon the target gets to the READs (a test
    beside this one, the sanitizers)."""
    def queued():
        return struct.unpack('i', fcntl.ioctl(c.s.fileno(), termios.FIONREAD, b'\0' * 4))[0]
    end, last, since = time.monotonic() + seconds, -1, time.monotonic()
    while time.monotonic() < end:
        n = queued()
        if n != last:
            last, since = n, time.monotonic()
        elif n and time.monotonic() - since >= 0.25:
            return
        time.sleep(0.05)


def stall(c, lun):
    """NREADS READs of the LU's first MiB from c, none of their answers read: c's views of it stay out."""
    itts = []
    for _ in range(NREADS):
        itt = c.next_itt()
        cdb = bytes([0x88, 0]) + struct.pack('>QI', 0, MIB // 512) + b'\0\0'
        c.send(c.scsi_bhs(cdb, MIB, read=True, lun=lun, itt=itt))
        itts.append(itt)
    filled(c)
    return itts


def timed_atomic(c, lun, lba, data, limit):
    """WRITE ATOMIC (16) from c in a thread, waited for at most limit s: ({'r': (status, ...), 's': seconds},
    the thread)."""
    res, t0 = {}, time.monotonic()

    def run():
        try:
            res['r'] = c.command(watomic_cdb(lba, data), len(data), write_data=data, lun=lun)
        except (OSError, ConnectionError) as e:
            res['r'] = (repr(e),)
        res['s'] = time.monotonic() - t0
    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(limit)
    return res, th


def drain(c, itts, old, new):
    """Read c's answers until they are all in or the target closed c: (answers complete, blocks seen, torn
    blocks, closed).  A block is whole when it holds the old or the new bytes of its place."""
    got, complete, closed = {i: b'' for i in itts}, 0, False
    try:
        while complete < len(itts):
            op, bhs, data = c.recv()
            itt = struct.unpack('>I', bhs[16:20])[0]
            if op == ic.OP_DATA_IN:
                got[itt] += data
                complete += bhs[1] & 1
    except (OSError, ConnectionError):
        closed = True
    blocks = torn = 0
    for d in got.values():
        for off in range(0, len(d) - len(d) % 512, 512):
            blocks += 1
            torn += d[off:off + 512] not in (old[off:off + 512], new[off:off + 512])
    return complete, blocks, torn, closed


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


def stalled_reader(proc, work):
    """LUN 1: a reader that never reads again holds up no one for longer than the bound."""
    a = login(INI, luns=(1,))
    write_big(a, 1, 0, OLD)
    itts = stall(a, 1)
    b1, b2 = login(INI2, luns=(1,)), login(INI2, luns=(1,))
    for c in (b1, b2):
        c.s.settimeout(BOUND + SLACK)
    other = b'\xc3' * (256 << 10)
    res, th1 = timed_atomic(b1, 1, 8192, other, BOUND)
    check(f'a stalled reader holds views of LUN 1: a WRITE ATOMIC of other blocks from {INI2} is answered '
          f'before the bound ({BOUND:g} s)', res.get('r', (None,))[0] == GOOD, res)
    print(f'     (in {res.get("s", -1):.2f} s)')
    new = b'\x5a' * (256 << 10)
    res, th2 = timed_atomic(b2, 1, 0, new, BOUND + SLACK)
    check(f'a WRITE ATOMIC of the stalled reader\'s blocks is answered GOOD within the bound and {SLACK:g} s',
          res.get('r', (None,))[0] == GOOD, res)
    print(f'     (in {res.get("s", -1):.2f} s)')
    complete, blocks, torn, closed = drain(a, itts, OLD, new + OLD[len(new):])
    check('the stalled reader pays: its connection is closed', closed, f'{complete} answers complete')
    check('what it was sent is whole: every block the old or the new bytes', blocks and not torn,
          f'{torn} torn of {blocks} blocks, {complete} answers complete')
    print(f'     ({blocks} blocks, {complete} of {NREADS} answers complete)')
    th1.join(SLACK)   # (had they not been answered, the reader's draining lets them end)
    th2.join(SLACK)
    st, d, _ = rw16(b2, False, 1, 0, MIB // 512)
    check('after it, LUN 1 holds the atomic write and the old rest', st == GOOD and d == new + OLD[len(new):],
          f'status {st}, {len(d)} bytes')
    st, d, _ = rw16(b2, False, 1, 8192, len(other) // 512)
    check('... and the write of the other blocks', st == GOOD and d == other, f'status {st}, {len(d)} bytes')
    log = open(os.path.join(work, 'isertd.log')).read()
    check('isertd says why it closed the reader\'s connection', 'holds up a WRITE ATOMIC' in log, log[-500:])
    for c in (a, b1, b2):
        c.close()
    check('isertd still runs', proc.poll() is None)


def aborted_writer(lun, fn, what):
    """An ABORT TASK (fn 1) or LU RESET (fn 5) of a WRITE ATOMIC waiting for a stalled reader is answered
    before the bound, and the write not done."""
    a = login(INI, luns=(lun,))
    write_big(a, lun, 0, OLD)
    itts = stall(a, lun)
    b = login(INI2, luns=(lun,))
    b.s.settimeout(BOUND + SLACK)
    b.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)   # the TMF goes out at once
    new = b'\x5a' * 8192
    itt = b.next_itt()
    b.send(b.scsi_bhs(watomic_cdb(0, new), len(new), write=True, data_len=len(new), lun=lun, itt=itt), new)
    time.sleep(0.5)   # it waits for the reader's views of its blocks
    tmf_itt = b.next_itt()
    tmf = bytes([ic.OP_TMF | 0x40, 0x80 | fn, 0, 0, 0, 0, 0, 0]) + struct.pack('>Q', lun << 48)
    tmf += struct.pack('>IIII', tmf_itt, itt if fn == 1 else 0xffffffff, b.cmdsn, b.statsn + 1) + b'\0' * 16
    t0 = time.monotonic()
    b.send(tmf)
    answer, status = None, None
    try:
        while answer is None:
            op, bhs, _ = b.recv()
            if op == ic.OP_SCSI_RSP and struct.unpack('>I', bhs[16:20])[0] == itt:
                status = bhs[3]
            elif op == ic.OP_TMF_RSP and struct.unpack('>I', bhs[16:20])[0] == tmf_itt:
                answer = bhs[2]
    except (OSError, ConnectionError) as e:
        answer = repr(e)
    took = time.monotonic() - t0
    check(f'LUN {lun}: {what} of a WRITE ATOMIC waiting for a stalled reader: function complete, no status for '
          'the write', answer == 0 and status is None, f'answer {answer}, status {status}, after {took:.1f} s')
    print(f'     (in {took:.2f} s)')
    complete, blocks, torn, closed = drain(a, itts, OLD, OLD)
    check(f'the {what} ended the wait, not the bound: the reader keeps its connection and gets every READ whole',
          complete == NREADS and not torn and not closed,
          f'{complete} answers complete, {torn} torn blocks, closed {closed}')
    b.command(bytes(6), lun=lun)   # a reset's unit attention
    st, d, _ = rw16(b, False, lun, 0, len(new) // 512)
    check('the aborted WRITE ATOMIC wrote nothing', st == GOOD and d == OLD[:len(new)],
          f'status {st}, first byte {d[:1].hex()}')
    a.close()
    b.close()


def digest_reads():
    """READs with DataDigest on, their blocks rewritten while their answers wait to be sent: no digest error."""
    r = ic.Conn(PORT, timeout=20, rcvbuf=256 << 10)
    check('a DataDigest=CRC32C session logs in', r.login(INI, T, op_keys={'DataDigest': 'CRC32C'}) == 0 and r.dd)
    w = login(INI2, luns=(4,))
    for _ in range(3):
        r.command(b'\0' * 6, lun=4)
    itts = []
    for _ in range(8):
        itt = r.next_itt()
        r.send(r.scsi_bhs(bytes([0x88, 0]) + struct.pack('>QI', 0, MIB // 512) + b'\0\0', MIB, read=True,
                          itt=itt, lun=4))
        itts.append(itt)
    filled(r)
    for k in range(1, 4):
        rw16(w, True, 4, 0, MIB // 512, bytes([k]) * MIB)
    errors, done = [], 0
    try:
        while done < len(itts):
            op, bhs, _ = r.recv()
            done += op == ic.OP_SCSI_RSP or (op == ic.OP_DATA_IN and bhs[1] & 1)
    except ValueError as e:
        errors.append(str(e))
    check(f'DataDigest on, blocks rewritten while {len(itts)} READs of 1 MiB wait to be sent: no digest error',
          not errors and done == len(itts), (done, errors))
    r.close()
    w.logout()


def main():
    work = workdir('isert-views-')
    # tcp_keepalive 0 (allowed): a peer that stops reading keeps its connection, and its views, for ever.
    cfg = {'global': {'tcp_keepalive': 0},
           'backstores': [{'name': 'r', 'type': 'ram', 'size': '64M'},
                          {'name': 'r1', 'type': 'ram', 'size': '8M'},
                          {'name': 'r2', 'type': 'ram', 'size': '8M'},
                          {'name': 'r3', 'type': 'ram', 'size': '8M'},
                          {'name': 'r4', 'type': 'ram', 'size': '8M'}],
           'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'demo_mode': True,
                                            'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                            'luns': [{'lun': 0, 'backstore': 'r'}, {'lun': 1, 'backstore': 'r1'},
                                                     {'lun': 2, 'backstore': 'r2'}, {'lun': 3, 'backstore': 'r3'},
                                                     {'lun': 4, 'backstore': 'r4'}]}]}]}
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
        filled(a)

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
        check('after it, a 1 MiB READ holds the atomic write and the old rest',
              st == GOOD and d == new + OLD[len(new):])
        st, d, _ = rw16(b, False, 0, 1024, 16)
        check('a small READ after it too', st == GOOD and d == OLD[512 << 10:(512 << 10) + 8192])
        a.logout()
        b.logout()

        stalled_reader(proc, work)
        aborted_writer(2, 1, 'ABORT TASK')
        aborted_writer(3, 5, 'LU RESET')
        digest_reads()
    finally:
        end_isertd(proc, work)
    finish()


main()
