#!/usr/bin/env python3
"""EXTENDED COPY (LID1) and RECEIVE COPY RESULTS over TCP (docs/scsi.md).

An initiator whose ACL maps a RAM LU, a file LU (io_uring), a RAM LU
write-protected and a LU of 4096-byte blocks copies within one LUN and
across LUNs (several chunks, two segments); the data is read back and
compared byte for byte.  Then every refusal: a write-protected destination,
an LU of another target (not reachable), another block size, LBAs past
the end, unknown descriptor types, too many descriptors, a truncated list,
a reservation held by another initiator.  RECEIVE COPY RESULTS reports the
limits and the held status.  Last, copies that an ABORT TASK or a dropped
connection cut short: the target answers and keeps serving, and exits
cleanly (an ASan build reports a buffer or a callback left behind).

usage: test_xcopy.py ISERTD [PORT]"""
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
from scsi_util import CHECK, CONFLICT, GOOD, expect, naa_of, read_big, rw16, sense_of, write_big  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3520
T1, T2 = 'iqn.2026-11.org.isert:xcopy', 'iqn.2026-11.org.isert:xcopy-other'
INI, INI2 = 'iqn.2026-11.org.isert:xc-a', 'iqn.2026-11.org.isert:xc-b'
NBLK = 32768  # 16 MiB of 512-byte blocks


def config(work):
    maps = [{'mapped_lun': 0, 'tpg_lun': 0}, {'mapped_lun': 1, 'tpg_lun': 1},
            {'mapped_lun': 2, 'tpg_lun': 2, 'write_protect': True}, {'mapped_lun': 3, 'tpg_lun': 3}]
    return {
        'backstores': [
            {'name': 'r0', 'type': 'ram', 'size': '16M'},
            {'name': 'f1', 'type': 'file', 'path': os.path.join(work, 'f1.img'), 'size': '16M'},
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


def tgt(naa, block):
    return bytes([0xe4, 0, 0, 0, 0x01, 0x03, 0, 16]) + naa + b'\0' * 4 + bytes([0]) + block.to_bytes(3, 'big')


def seg(src, dst, n, slba, dlba, typ=0x02):
    return bytes([typ, 0]) + struct.pack('>HHHHHQQ', 0x18, src, dst, 0, n, slba, dlba)


def plist(tgts, segs, list_id=0, usage=3):
    t, s = b''.join(tgts), b''.join(segs)
    return bytes([list_id, usage << 3]) + struct.pack('>HIII', len(t), 0, len(s), 0) + t + s


def xcopy(c, data, lun=0, plen=None):
    cdb = bytes([0x83, 0]) + b'\0' * 8 + struct.pack('>I', len(data) if plen is None else plen) + b'\0\0'
    return c.command(cdb, len(data), write_data=data or None, lun=lun)


def main():
    work = workdir('isert-xcopy-')
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(work), f)
    proc, _ = start_isertd(ISERTD, work, cfgfile, '-r', '2', admin='none', ready=PORT)
    try:
        c = ic.Conn(PORT, timeout=30)
        check('login', c.login(INI, T1) == 0)
        for lun in range(4):  # power-on unit attentions
            for _ in range(3):
                c.command(b'\0' * 6, lun=lun)
        naa = [naa_of(c, lun) for lun in range(4)]
        o = ic.Conn(PORT)
        o.login(INI, T2)
        for _ in range(3):
            o.command(b'\0' * 6)
        naa_other = naa_of(o, 0)
        o.close()

        # -- copies ---------------------------------------------------------
        src = os.urandom(8 << 20)
        write_big(c, 0, 0, src)
        res = xcopy(c, plist([tgt(naa[0], 512)], [seg(0, 0, 2048, 0, 20000)]))
        check('copy within LUN 0 (1 MiB): GOOD', res[0] == GOOD, res)
        check('copy within LUN 0: the data arrived, byte for byte', read_big(c, 0, 20000, 1 << 20) == src[:1 << 20])
        res = xcopy(c, plist([tgt(naa[0], 512), tgt(naa[1], 512)],
                             [seg(0, 1, 8192, 0, 100), seg(0, 1, 8192, 8192, 100 + 8192)]))
        check('copy LUN 0 (RAM) to LUN 1 (file), two segments of 4 MiB: GOOD', res[0] == GOOD, res)
        check('LUN 0 -> LUN 1: the data arrived, byte for byte', read_big(c, 1, 100, 8 << 20) == src)
        res = xcopy(c, plist([tgt(naa[1], 512), tgt(naa[0], 512)], [seg(0, 1, 4096, 100, 26000)]), lun=3)
        check('copy LUN 1 -> LUN 0 with LUN 3 as the copy manager: GOOD', res[0] == GOOD, res)
        check('LUN 1 -> LUN 0: the data arrived', read_big(c, 0, 26000, 2 << 20) == src[:2 << 20])
        res = xcopy(c, plist([tgt(naa[2], 512), tgt(naa[0], 512)], [seg(0, 1, 16, 0, 31000)]))
        check('a write-protected LUN may be the source', res[0] == GOOD, res)
        # overlapping, destination above the source: memmove semantics
        res = xcopy(c, plist([tgt(naa[1], 512)], [seg(0, 0, 6000, 100, 1100)]))
        check('overlapping copy within LUN 1: GOOD', res[0] == GOOD, res)
        check('overlapping copy: the destination holds the old source', read_big(c, 1, 1100, 6000 * 512) ==
              src[:6000 * 512])
        expect('parameter list length 0: GOOD, nothing done', xcopy(c, b''), GOOD)

        # -- refusals ---------------------------------------------------------
        before = read_big(c, 2, 0, 1 << 20)
        expect('destination mapped write-protected: DATA PROTECT',
               xcopy(c, plist([tgt(naa[0], 512), tgt(naa[2], 512)], [seg(0, 1, 64, 0, 0)])), CHECK, 0x7, 0x2700)
        check('nothing reached the write-protected LUN', read_big(c, 2, 0, 1 << 20) == before)
        expect('an LU of another target: COPY ABORTED, copy target device not reachable',
               xcopy(c, plist([tgt(naa[0], 512), tgt(naa_other, 512)], [seg(0, 1, 8, 0, 0)])), CHECK, 0xa, 0x0d02, 6)
        expect('a descriptor index past the list: COPY ABORTED, not reachable',
               xcopy(c, plist([tgt(naa[0], 512)], [seg(0, 1, 8, 0, 0)])), CHECK, 0xa, 0x0d02, 6)
        expect('512-byte blocks to 4096-byte blocks: INVALID FIELD IN PARAMETER LIST',
               xcopy(c, plist([tgt(naa[0], 512), tgt(naa[3], 4096)], [seg(0, 1, 8, 0, 0)])), CHECK, 0x5, 0x2600)
        expect('DISK BLOCK LENGTH not the LU\'s: INVALID FIELD IN PARAMETER LIST (pointer to it)',
               xcopy(c, plist([tgt(naa[0], 4096)], [seg(0, 0, 8, 0, 64)])), CHECK, 0x5, 0x2600, 16 + 29)
        res = xcopy(c, plist([tgt(naa[0], 512), tgt(naa[1], 512)],
                             [seg(0, 1, 8, 0, 0), seg(0, 1, 16, NBLK - 8, 0)]))
        expect('source LBAs past the end: COPY ABORTED, pointer to the LBA', res, CHECK, 0xa, None, 12)
        check('... and the segment number is segment 1', sense_of(res[2])[3] == 1, sense_of(res[2]))
        expect('destination LBAs past the end: COPY ABORTED',
               xcopy(c, plist([tgt(naa[0], 512), tgt(naa[1], 512)], [seg(0, 1, 16, 0, NBLK - 1)])),
               CHECK, 0xa, None, 20)
        expect('a segment past MAXIMUM SEGMENT LENGTH: INVALID FIELD IN PARAMETER LIST',
               xcopy(c, plist([tgt(naa[0], 512), tgt(naa[1], 512)], [seg(0, 1, 40000, 0, 0)])), CHECK, 0x5, 0x2600)
        fc = bytearray(tgt(naa[0], 512))
        fc[0] = 0xe0
        expect('Fibre Channel CSCD descriptor: UNSUPPORTED TARGET DESCRIPTOR TYPE CODE',
               xcopy(c, plist([bytes(fc)], [seg(0, 0, 8, 0, 64)])), CHECK, 0x5, 0x2607, 16)
        expect('stream-to-stream segment: UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE',
               xcopy(c, plist([tgt(naa[0], 512)], [seg(0, 0, 8, 0, 64, typ=0x03)])), CHECK, 0x5, 0x2609, 48)
        expect('9 CSCD descriptors: TOO MANY TARGET DESCRIPTORS',
               xcopy(c, plist([tgt(naa[0], 512)] * 9, [seg(0, 0, 8, 0, 64)])), CHECK, 0x5, 0x2606)
        expect('17 segment descriptors: TOO MANY SEGMENT DESCRIPTORS',
               xcopy(c, plist([tgt(naa[0], 512)], [seg(0, 0, 8, 0, 64)] * 17)), CHECK, 0x5, 0x2608)
        good = plist([tgt(naa[0], 512)], [seg(0, 0, 8, 0, 64)])
        expect('a list shorter than its header says: PARAMETER LIST LENGTH ERROR',
               xcopy(c, good[:-1]), CHECK, 0x5, 0x1a00)
        expect('a parameter list length past the maximum: PARAMETER LIST LENGTH ERROR',
               xcopy(c, good, plen=100000), CHECK, 0x5, 0x1a00)
        expect('EXTENDED COPY (LID4): INVALID FIELD IN CDB',
               c.command(bytes([0x83, 0x01]) + b'\0' * 14, lun=0), CHECK, 0x5, 0x2400)

        # another initiator reserves LUN 1 (WRITE EXCLUSIVE): no copy into it, copies out of it go on
        c2 = ic.Conn(PORT)
        check('second initiator logs in', c2.login(INI2, T1) == 0)
        for _ in range(3):
            c2.command(b'\0' * 6, lun=1)
        reg = b'\0' * 8 + struct.pack('>Q', 0x77) + b'\0' * 8
        pr = bytes([0x5f, 0x00, 0, 0, 0, 0, 0, 0, 24, 0])
        check('PR REGISTER', c2.command(pr, 24, write_data=reg, lun=1)[0] == GOOD)
        res = struct.pack('>Q', 0x77) + b'\0' * 16
        check('PR RESERVE (write exclusive)',
              c2.command(bytes([0x5f, 0x01, 0x01, 0, 0, 0, 0, 0, 24, 0]), 24, write_data=res, lun=1)[0] == GOOD)
        expect('a copy into the reserved LUN: RESERVATION CONFLICT',
               xcopy(c, plist([tgt(naa[0], 512), tgt(naa[1], 512)], [seg(0, 1, 8, 0, 0)])), CONFLICT)
        expect('a copy out of it: GOOD',
               xcopy(c, plist([tgt(naa[1], 512), tgt(naa[0], 512)], [seg(0, 1, 8, 0, 31500)])), GOOD)
        check('PR CLEAR', c2.command(bytes([0x5f, 0x03, 0, 0, 0, 0, 0, 0, 24, 0]), 24, write_data=res,
                                     lun=1)[0] == GOOD)
        c2.close()

        # -- RECEIVE COPY RESULTS ---------------------------------------------
        st, d, _ = c.command(bytes([0x84, 0x03]) + b'\0' * 8 + struct.pack('>I', 256) + b'\0\0', 256, read=True)
        check('OPERATING PARAMETERS: the limits enforced above', st == GOOD and len(d) == 46 and
              struct.unpack('>HHII', d[8:20]) == (8, 16, 8 * 32 + 16 * 28, 16 << 20) and d[44:46] == b'\x02\xe4',
              d.hex())
        rcs = bytes([0x84, 0x00, 42]) + b'\0' * 7 + struct.pack('>I', 64) + b'\0\0'
        expect('COPY STATUS of a list never sent: INVALID FIELD IN CDB', c.command(rcs, 64, read=True), CHECK, 0x5,
               0x2400)
        res = xcopy(c, plist([tgt(naa[0], 512)], [seg(0, 0, 100, 0, 25000)], list_id=42, usage=0))
        check('a copy with list identifier 42, held', res[0] == GOOD, res)
        st, d, _ = c.command(rcs, 64, read=True)
        check('COPY STATUS: completed, 1 segment, 51200 bytes', st == GOOD and d[4] == 0x01 and
              struct.unpack('>H', d[5:7])[0] == 1 and struct.unpack('>I', d[8:12])[0] == 51200, d.hex())

        # -- copies cut short ---------------------------------------------------
        # LUN 1 is a file (its writes come back through io_uring); LUN 0 onto
        # itself is RAM to RAM (completes inline and must yield to the reactor)
        for tds, what in (([naa[0], naa[1]], 'RAM to file'), ([naa[0]], 'RAM to RAM')):
            big = plist([tgt(n, 512) for n in tds], [seg(0, len(tds) - 1, 32000, 0, 0)] * 4)
            itt = c.next_itt()
            cdb = bytes([0x83, 0]) + b'\0' * 8 + struct.pack('>I', len(big)) + b'\0\0'
            # No Nagle: the TMF goes out at once, not after the target's delayed ACK
            # (40 ms, longer than the copy on a fast host).  Corked, the command and
            # its abort leave in one segment: the abort is there while the copy runs
            # however late this process is scheduled (a test beside it, the sanitizers).
            c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            c.send(c.scsi_bhs(cdb, len(big), write=True, data_len=len(big), itt=itt), big)
            tmf = bytes([ic.OP_TMF | 0x40, 0x80 | 1, 0, 0, 0, 0, 0, 0]) + b'\0' * 8
            tmf += struct.pack('>IIIII', c.next_itt(), itt, c.cmdsn, c.statsn + 1, c.cmdsn - 1) + b'\0' * 12
            c.send(tmf)
            c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)
            got_tmf = got_rsp = False
            for _ in range(4):
                op, bhs, _ = c.recv()
                got_rsp |= op == ic.OP_SCSI_RSP
                if op == ic.OP_TMF_RSP:
                    got_tmf = True
                    # 64 MB take longer than a round trip: the copy is stopped, not finished
                    check(f'ABORT TASK during a 64 MB copy {what}: function complete, the copy answered nothing',
                          bhs[2] == 0 and not got_rsp, (bhs[2], got_rsp))
                    break
            check(f'the TMF response came ({what})', got_tmf)
        check('the session goes on after the abort', c.command(b'\0' * 6)[0] == GOOD)
        # a connection dropped in the middle of a copy
        d = ic.Conn(PORT)
        d.login(INI2, T1)
        for _ in range(3):
            d.command(b'\0' * 6, lun=0)
        cdb = bytes([0x83, 0]) + b'\0' * 8 + struct.pack('>I', len(big)) + b'\0\0'
        d.send(d.scsi_bhs(cdb, len(big), write=True, data_len=len(big)), big)
        time.sleep(0.01)
        d.close()
        time.sleep(0.5)
        e = ic.Conn(PORT)
        check('after a connection dropped mid-copy, a new login works', e.login(INI2, T1) == 0)
        e.close()
        st, d1, _ = rw16(c, False, 0, 0, 8)
        check('and the first session still reads', st == GOOD and d1 == src[:4096])
        c.close()
        check('isertd still runs', proc.poll() is None)
    finally:
        rc = stop_isertd(proc, 20)
        check('isertd exits cleanly (no leak, no callback left)', rc == 0, 'exit %s' % rc)
        if rc != 0:
            print(open(os.path.join(work, 'isertd.log')).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    finish()


main()
