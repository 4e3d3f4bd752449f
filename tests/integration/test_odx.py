#!/usr/bin/env python3
"""Token-based copy (ODX) over TCP: POPULATE TOKEN, RECEIVE ROD TOKEN
INFORMATION, WRITE USING TOKEN (docs/admin.md, docs/security.md).

An initiator whose ACL maps a RAM LU, a file LU (io_uring), a RAM LU
write-protected and a LU of 4096-byte blocks makes a token of two ranges of
LUN 0, reads it back by list identifier (once), and writes from it into the
file LUN (other LU) and into LUN 0 itself from an offset into the ROD; the
data is read back and compared byte for byte.  Then what refuses a token:
a write over its ranges from another initiator (TOKEN CANCELLED), its
inactivity timeout (TOKEN EXPIRED), a forged one (TOKEN UNKNOWN), one byte
altered (TOKEN CORRUPT), the same token through another target (REMOTE
TOKEN USAGE NOT SUPPORTED), a reset (TOKEN REVOKED), DEL_TKN (TOKEN
DELETED); the bounds: 65 range descriptors (TOO MANY SEGMENT DESCRIPTORS), a
list past the longest, 129 tokens on one LU (the least recently used is
revoked); reservations; VPD 8Fh.  Last, copies that an ABORT TASK, an LU
RESET or a dropped connection cut short: the target answers, keeps serving
and exits cleanly (an ASan build reports a buffer or a callback left
behind).

usage: test_odx.py ISERTD [PORT]"""
import json
import os
import shutil
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
from admin_rpc import start_isertd, stop_isertd  # noqa: E402
from checks import check, finish, workdir  # noqa: E402
from scsi_util import CHECK, CONFLICT, GOOD, expect, read_big, rw16, sense_of, write_big  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3610
T1, T2 = 'iqn.2026-11.org.isert:odx', 'iqn.2026-11.org.isert:odx-other'
INI, INI2 = 'iqn.2026-11.org.isert:odx-a', 'iqn.2026-11.org.isert:odx-b'
NBLK = 131072  # 64 MiB of 512-byte blocks
SA_PT, SA_WUT, SA_RRTI = 0x10, 0x11, 0x07
ZERO_TYPE = 0xffff0001


def config(work):
    maps = [{'mapped_lun': 0, 'tpg_lun': 0}, {'mapped_lun': 1, 'tpg_lun': 1},
            {'mapped_lun': 2, 'tpg_lun': 2, 'write_protect': True}, {'mapped_lun': 3, 'tpg_lun': 3}]
    return {
        'backstores': [
            {'name': 'r0', 'type': 'ram', 'size': '64M'},
            {'name': 'f1', 'type': 'file', 'path': os.path.join(work, 'f1.img'), 'size': '64M'},
            {'name': 'r2', 'type': 'ram', 'size': '16M'},
            {'name': 'r3', 'type': 'ram', 'size': '16M', 'block_size': 4096},
            {'name': 'other', 'type': 'ram', 'size': '16M'},
        ],
        'targets': [
            {'iqn': T1, 'tpgs': [{'tag': 1, 'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                  'luns': [{'lun': i, 'backstore': b} for i, b in enumerate(['r0', 'f1', 'r2', 'r3'])],
                                  'acls': [{'initiator': INI, 'mapped_luns': maps},
                                           {'initiator': INI2, 'mapped_luns': maps}]}]},
            {'iqn': T2, 'tpgs': [{'tag': 1, 'demo_mode': True, 'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                  'luns': [{'lun': 0, 'backstore': 'other'}]}]},
        ],
    }


def ranges(rs):
    return b''.join(struct.pack('>QII', lba, n, 0) for lba, n in rs)


def pt_list(rs, timeout=0, rod_type=None, count=None):
    r = ranges(rs)
    hdr = struct.pack('>HBBIIHH', 14 + len(r), 0x02 if rod_type is not None else 0, 0, timeout,
                      rod_type or 0, 0, len(r) if count is None else count * 16)
    return hdr + r


def wut_list(token, rs, offset=0, flags=0):
    r = ranges(rs)
    return struct.pack('>HBB4xQ', 534 + len(r), flags, 0, offset) + token + b'\0' * 6 + struct.pack('>H', len(r)) + r


def out_cdb(sa, lid, plen):
    return bytes([0x83, sa, 0, 0, 0, 0]) + struct.pack('>II', lid, plen) + b'\0\0'


def pt(c, lun, lid, rs, **kw):
    data = pt_list(rs, **kw)
    return c.command(out_cdb(SA_PT, lid, len(data)), len(data), write_data=data, lun=lun)


def wut(c, lun, lid, token, rs, **kw):
    data = wut_list(token, rs, **kw)
    return c.command(out_cdb(SA_WUT, lid, len(data)), len(data), write_data=data, lun=lun)


def rrti(c, lun, lid):
    """(status, copy operation status, transfer count, the token or None, sense)."""
    st, d, sense = c.command(bytes([0x84, SA_RRTI]) + struct.pack('>I', lid) + b'\0' * 4 +
                             struct.pack('>I', 1024) + b'\0\0', 1024, read=True, lun=lun)
    if st != GOOD:
        return st, None, None, None, sense
    off = 32 + d[13]
    tok = d[off + 6:off + 6 + 512] if struct.unpack('>I', d[off:off + 4])[0] == 514 else None
    return st, d[5], struct.unpack('>Q', d[16:24])[0], tok, d[32:32 + d[13]]


def token(c, lun, rs, lid=257, **kw):
    st, _, sense = pt(c, lun, lid, rs, **kw)
    assert st == GOOD, (st, sense_of(sense))
    st, cos, count, tok, _ = rrti(c, lun, lid)
    assert st == GOOD and cos == 1 and tok, (st, cos)
    return tok


def login(ini, target, luns):
    c = ic.Conn(PORT, timeout=30)
    assert c.login(ini, target) == 0
    for lun in luns:  # power-on unit attentions
        for _ in range(3):
            c.command(b'\0' * 6, lun=lun)
    return c


def cut_short(c, lun, data, tmf_fn, what):
    """Send a WRITE USING TOKEN and, at once, a task management function: it answers before the copy does."""
    itt = c.next_itt()
    c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # Corked, the command and the TMF leave in one segment: the TMF is there while the copy runs however
    # late this process is scheduled (a test beside it, the sanitizers).
    c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    c.send(c.scsi_bhs(out_cdb(SA_WUT, 500, len(data)), len(data), write=True, data_len=len(data), itt=itt,
                      lun=lun), data)
    ref = itt if tmf_fn == 1 else 0xffffffff
    tmf = bytes([ic.OP_TMF | 0x40, 0x80 | tmf_fn, 0, 0, 0, 0, 0, 0]) + struct.pack('>Q', lun << 48)
    tmf += struct.pack('>IIIII', c.next_itt(), ref, c.cmdsn, c.statsn + 1, c.cmdsn - 1) + b'\0' * 12
    c.send(tmf)
    c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
    got_rsp = None
    for _ in range(4):
        op, bhs, _ = c.recv()
        if op == ic.OP_SCSI_RSP:
            got_rsp = bhs[3]
        if op == ic.OP_TMF_RSP:
            check(f'{what} during a 64 MiB WRITE USING TOKEN: function complete, the copy answered nothing '
                  'before it', bhs[2] == 0 and got_rsp is None, (bhs[2], got_rsp))
            return
    check(f'{what}: the TMF response came', False)


def main():
    work = workdir('isert-odx-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(work), f)
    t0 = time.monotonic()
    proc, _ = start_isertd(ISERTD, work, cfgfile, '-r', '2', admin='none', ready=PORT)
    try:
        c = login(INI, T1, range(4))

        # -- VPD 8Fh: what Windows and ddpt look for ----------------------------
        st, d, _ = c.command(bytes([0x12, 1, 0x8f, 4, 0, 0]), 1024, read=True)
        descs, off = {}, 4
        while off + 4 <= len(d):
            t, n = struct.unpack('>HH', d[off:off + 4])
            descs[t] = d[off:off + 4 + n]
            off += 4 + n
        lim = descs.get(0x0000, b'')
        check('VPD 8Fh: Block Device ROD Token Limits (64 ranges, 600 s most, 60 s default, 256 MiB a token)',
              len(lim) == 36 and struct.unpack('>HIIQ', lim[10:28]) == (64, 600, 60, (256 << 20) // 512), lim.hex())
        check('VPD 8Fh: POPULATE TOKEN, WRITE USING TOKEN, RECEIVE ROD TOKEN INFORMATION among its commands',
              descs.get(1, b'')[4:15] == bytes([10, 0x83, 3, 0, 0x10, 0x11, 0x84, 3, 0, 3, 7]))
        check('VPD 8Fh: ROD Token Features and Supported ROD Types', 0x0106 in descs and 0x0108 in descs)

        # -- tokens and copies ------------------------------------------------------
        src = os.urandom(4 << 20)
        write_big(c, 0, 0, src)
        st, _, sense = pt(c, 0, 257, [(0, 2048), (4096, 4096)])
        check('POPULATE TOKEN of two ranges of LUN 0 (3 MiB): GOOD', st == GOOD, sense_of(sense))
        st, cos, count, tok, _ = rrti(c, 0, 257)
        check('RECEIVE ROD TOKEN INFORMATION: completed, 6144 blocks, a 512-byte token',
              st == GOOD and cos == 1 and count == 6144 and tok and len(tok) == 512, (st, cos, count))
        check('the token names LUN 0 and its 3 MiB', tok[16] == 0xe4 and struct.unpack('>Q', tok[56:64])[0] == 3 << 20)
        st, _, _, _, sense = rrti(c, 0, 257)
        expect('the result is held once: asked again, INVALID FIELD IN CDB at the list identifier',
               (st, b'', sense), CHECK, 0x5, 0x2400, 2)
        st, _, sense = wut(c, 1, 258, tok, [(1000, 6144)])
        check('WRITE USING TOKEN into LUN 1 (file, another LU): GOOD', st == GOOD, sense_of(sense))
        st, cos, count, _, _ = rrti(c, 1, 258)
        check('... RECEIVE ROD TOKEN INFORMATION: completed, 6144 blocks', st == GOOD and cos == 1 and count == 6144,
              (st, cos, count))
        got = read_big(c, 1, 1000, 3 << 20)
        check('LUN 0 -> LUN 1: the data arrived, byte for byte', got == src[:1 << 20] + src[2 << 20:4 << 20])
        st, _, sense = wut(c, 0, 259, tok, [(20000, 1000), (30000, 1048)], offset=4096)
        check('WRITE USING TOKEN into LUN 0 itself, 4096 blocks into the ROD: GOOD', st == GOOD, sense_of(sense))
        # the ROD is blocks 0-2047 then 4096-8191: 4096 into it is block 6144
        check('... the data arrived', read_big(c, 0, 20000, 1000 * 512) == src[6144 * 512:7144 * 512])
        check('... and the second range', read_big(c, 0, 30000, 1048 * 512) == src[7144 * 512:8192 * 512])
        st, _, _ = wut(c, 1, 260, tok, [(40000, 4096)], offset=4096)
        st, cos, count, _, _ = rrti(c, 1, 260)
        check('a ROD shorter than the destination: GOOD, residual data, TRANSFER COUNT 2048',
              st == GOOD and cos == 4 and count == 2048, (st, cos, count))
        expect('an offset past the ROD: INVALID FIELD IN PARAMETER LIST at OFFSET INTO ROD',
               wut(c, 1, 261, tok, [(0, 8)], offset=6145), CHECK, 0x5, 0x2600, 8)
        expect('onto its own ranges: INVALID FIELD IN PARAMETER LIST at the range',
               wut(c, 0, 261, tok, [(100, 8)]), CHECK, 0x5, 0x2600, 536)
        expect('into the 4096-byte LU: INVALID FIELD IN PARAMETER LIST',
               wut(c, 3, 261, tok, [(0, 8)]), CHECK, 0x5, 0x2600)
        expect('into the write-protected LUN: DATA PROTECT', wut(c, 2, 261, tok, [(0, 8)]), CHECK, 0x7, 0x2700)
        zero = struct.pack('>I2xH', ZERO_TYPE, 0x1f8) + b'\0' * 504
        st, _, _ = wut(c, 1, 262, zero, [(1000, 64)])
        check('the block device zero ROD token zeroes LUN 1 blocks 1000-1063', st == GOOD and
              read_big(c, 1, 1000, 64 * 512) == b'\0' * 64 * 512)

        # -- what refuses a token -------------------------------------------------------
        c2 = login(INI2, T1, range(4))
        tok = token(c, 0, [(0, 2048)])
        check('a write beside the token\'s ranges leaves it', rw16(c2, True, 0, 2048, 1, b'x' * 512)[0] == GOOD and
              wut(c, 1, 300, tok, [(0, 8)])[0] == GOOD)
        check('another initiator writes into its ranges', rw16(c2, True, 0, 2047, 1, b'y' * 512)[0] == GOOD)
        expect('... then the token is refused: INVALID TOKEN OPERATION, TOKEN CANCELLED',
               wut(c, 1, 300, tok, [(0, 8)]), CHECK, 0x5, 0x2308, 16)
        tok = token(c, 0, [(0, 2048)], timeout=1)
        time.sleep(1.3)
        expect('1 s of inactivity later: TOKEN EXPIRED', wut(c, 1, 300, tok, [(0, 8)]), CHECK, 0x5, 0x2307)
        tok = token(c, 0, [(0, 2048)])
        forged = tok[:8] + os.urandom(504)
        expect('a forged token: TOKEN UNKNOWN', wut(c, 1, 300, forged, [(0, 8)]), CHECK, 0x5, 0x2304)
        for at, what in ((30, 'the LU'), (60, 'the size'), (140, 'the target'), (460, 'the ranges\' digest'),
                         (500, 'the secret')):
            bad = bytearray(tok)
            bad[at] ^= 1
            expect(f'a token with one bit of {what} altered: TOKEN CORRUPT', wut(c, 1, 300, bytes(bad), [(0, 8)]),
                   CHECK, 0x5, 0x2305)
        o = login(INI, T2, [0])
        expect('the token through another target: REMOTE TOKEN USAGE NOT SUPPORTED',
               wut(o, 0, 300, tok, [(0, 8)]), CHECK, 0x5, 0x2302)
        o.close()
        check('the token still works where it was made', wut(c, 1, 300, tok, [(0, 8)], flags=0x02)[0] == GOOD)
        expect('after a WRITE USING TOKEN with DEL_TKN: TOKEN DELETED', wut(c, 1, 300, tok, [(0, 8)]),
               CHECK, 0x5, 0x2309)
        tok = token(c, 0, [(0, 2048)])
        check('LU RESET from the other initiator', c2.tmf(5, lun=0) == 0)
        for _ in range(3):
            c.command(b'\0' * 6, lun=0)
        expect('... revokes the LU\'s tokens: TOKEN REVOKED', wut(c, 1, 300, tok, [(0, 8)]), CHECK, 0x5, 0x2306)

        # -- bounds -------------------------------------------------------------------------
        data = pt_list([(i * 10, 2) for i in range(64)], count=65)
        expect('65 range descriptors: TOO MANY SEGMENT DESCRIPTORS',
               c.command(out_cdb(SA_PT, 301, len(data)), len(data), write_data=data), CHECK, 0x5, 0x2608, 14)
        data = pt_list([(i * 10, 2) for i in range(65)])
        expect('a list past the longest (65 ranges): PARAMETER LIST LENGTH ERROR',
               c.command(out_cdb(SA_PT, 301, len(data)), len(data), write_data=data), CHECK, 0x5, 0x1a00)
        expect('an inactivity timeout past 600 s: INVALID FIELD IN PARAMETER LIST at it',
               pt(c, 0, 301, [(0, 1)], timeout=601), CHECK, 0x5, 0x2600, 4)
        expect('an LBA past the end: LOGICAL BLOCK ADDRESS OUT OF RANGE', pt(c, 0, 301, [(NBLK - 4, 8)]),
               CHECK, 0x5, 0x2100)
        first = token(c, 0, [(0, 8)])
        for i in range(128):
            assert pt(c, 0, 302, [(8, 8)])[0] == GOOD
        expect('129 tokens on one LU: the least recently used is revoked', wut(c, 1, 300, first, [(0, 8)]),
               CHECK, 0x5, 0x2306)

        # -- reservations ------------------------------------------------------------------
        reg = b'\0' * 8 + struct.pack('>Q', 0x77) + b'\0' * 8
        check('PR REGISTER (other initiator, LUN 1)',
              c2.command(bytes([0x5f, 0, 0, 0, 0, 0, 0, 0, 24, 0]), 24, write_data=reg, lun=1)[0] == GOOD)
        res = struct.pack('>Q', 0x77) + b'\0' * 16
        check('PR RESERVE WRITE EXCLUSIVE', c2.command(bytes([0x5f, 1, 1, 0, 0, 0, 0, 0, 24, 0]), 24,
                                                       write_data=res, lun=1)[0] == GOOD)
        check('POPULATE TOKEN reads: allowed on the reserved LUN', pt(c, 1, 303, [(0, 8)])[0] == GOOD)
        check('RECEIVE ROD TOKEN INFORMATION: allowed', rrti(c, 1, 303)[0] == GOOD)
        tok = token(c, 0, [(0, 8)])
        expect('WRITE USING TOKEN into it: RESERVATION CONFLICT', wut(c, 1, 304, tok, [(0, 8)]), CONFLICT)
        check('PR CLEAR', c2.command(bytes([0x5f, 3, 0, 0, 0, 0, 0, 0, 24, 0]), 24, write_data=res, lun=1)[0] == GOOD)
        for _ in range(3):
            c.command(b'\0' * 6, lun=1)

        # -- copies cut short ---------------------------------------------------------------
        big = token(c, 0, [(0, NBLK)])
        cut_short(c, 1, wut_list(big, [(0, NBLK)]), 1, 'ABORT TASK')
        st, cos, count, _, _ = rrti(c, 1, 500)
        check('... RECEIVE ROD TOKEN INFORMATION: terminated (60h), part of it written',
              st == GOOD and cos == 0x60 and count < NBLK, (st, cos, count))
        check('the session goes on after the abort', c.command(b'\0' * 6)[0] == GOOD)
        cut_short(c, 1, wut_list(big, [(0, NBLK)]), 5, 'LU RESET')
        for _ in range(3):
            c.command(b'\0' * 6, lun=1)
        check('the token survives a reset of another LU', wut(c, 1, 501, big, [(0, 8)])[0] == GOOD)
        d = login(INI2, T1, [1])
        d.send(d.scsi_bhs(out_cdb(SA_WUT, 502, len(wut_list(big, [(0, NBLK)]))), 536 + 16, write=True,
                          data_len=536 + 16, lun=1), wut_list(big, [(0, NBLK)]))
        time.sleep(0.01)
        d.close()
        c2.close()
        time.sleep(0.5)
        e = ic.Conn(PORT)
        check('after a connection dropped mid-copy, a new login works', e.login(INI2, T1) == 0)
        e.close()
        check('and the first session still reads', rw16(c, False, 0, 0, 8)[1] == src[:4096])
        c.close()
        check('isertd still runs', proc.poll() is None)
        check('the test took under 20 s', time.monotonic() - t0 < 20, '%.1f s' % (time.monotonic() - t0))
    finally:
        rc = stop_isertd(proc, 20)
        check('isertd exits cleanly (no leak, no callback left)', rc == 0, 'exit %s' % rc)
        if rc != 0:
            print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    finish()


main()
