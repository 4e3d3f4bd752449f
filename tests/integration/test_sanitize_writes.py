#!/usr/bin/env python3
"""SANITIZE against the writes already running on a LU (docs/admin.md, "Sanitizing a LU").

A SANITIZE that ends GOOD must leave nothing of what any write carried, even
writes that were running when it came: it starts only once every command
writing the LU has ended, and a copy whose destination is being sanitized
stops at its next chunk.  For each destination kind (RAM, file, and block
over a loop device), a second initiator sends SANITIZE OVERWRITE (IMMED=1)
while the first has, in flight on that LU (sent, then a NOP-Out answered,
so the target has begun it before the SANITIZE comes):

- an EXTENDED COPY of 256 MiB (four passes over 64 MiB) from a RAM LU full
  of 0xAB, addressed to that source LU;
- a WRITE USING TOKEN of the same, with a token of the source;
- a WRITE USING TOKEN with the block device zero ROD token;
- 6 WRITEs of 8 MiB of 0xAB to the LU's first blocks, their data all sent
  unsolicited (InitialR2T=No), so they reach the store as the SANITIZE
  comes: the first chunks it overwrites are theirs.

Once the SANITIZE has ended (REQUEST SENSE no longer in progress, and not in
failure mode), every block of the destination holds the pattern.  A copy
stopped by the SANITIZE ends with the sense SBC-4 and SPC-4 give it: a WRITE
USING TOKEN (addressed to the LU being sanitized) NOT READY, SANITIZE IN
PROGRESS; an EXTENDED COPY addressed to the source COPY ABORTED, COPY TARGET
DEVICE NOT REACHABLE.  A copy from a LU being sanitized stops too: its
bytes must not reach another LU.

usage: test_sanitize_writes.py ISERTD [PORT]"""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
from admin_rpc import start_isertd, stop_isertd  # noqa: E402
from checks import check, finish, workdir  # noqa: E402
from scsi_util import GOOD, expect, naa_of, read_big, sense_of, write_big  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3650
T = 'iqn.2026-11.org.isert:sanitize-writes'
INI_A, INI_B = 'iqn.2026-11.org.isert:sw-a', 'iqn.2026-11.org.isert:sw-b'
SIZE = 64 << 20
NBLK = SIZE // 512
SEG_BLOCKS = 32768          # 16 MiB, the most one segment carries
PATTERN = b'SANI'
NOT_READY, IN_PROGRESS, NOT_REACHABLE = 0x2, 0x041b, 0x0d02
SA_PT, SA_WUT, SA_RRTI = 0x10, 0x11, 0x07
ZERO_TOKEN_TYPE = 0xffff0001
WRITES, WRITE_BYTES = 6, 8 << 20   # within the session's 64 MiB of buffers, all data unsolicited
SRC, KINDS = 0, ['ram', 'file', 'block']   # LUN 0 the source; LUN 1 + i the destination of kind i


def config(work, loopdev):
    stores = [{'name': 'src', 'type': 'ram', 'size': '64M'},
              {'name': 'ram', 'type': 'ram', 'size': '64M'},
              {'name': 'file', 'type': 'file', 'path': os.path.join(work, 'f.img'), 'size': '64M'},
              {'name': 'block', 'type': 'block', 'path': loopdev}]
    luns = [{'lun': i, 'backstore': s['name']} for i, s in enumerate(stores)]
    maps = [{'mapped_lun': i, 'tpg_lun': i} for i in range(len(stores))]
    return {'backstores': stores,
            'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'portals': [{'ip': '127.0.0.1', 'port': PORT}], 'luns': luns,
                                             'params': {'FirstBurstLength': WRITE_BYTES, 'MaxBurstLength': WRITE_BYTES},
                                             'acls': [{'initiator': INI_A, 'mapped_luns': maps},
                                                      {'initiator': INI_B, 'mapped_luns': maps}]}]}]}


def login(ini):
    c = ic.Conn(PORT, timeout=60)
    # Large Data-In PDUs: reading every LU back whole is most of this test's time.
    assert c.login(ini, T, op_keys={'InitialR2T': 'No', 'FirstBurstLength': str(WRITE_BYTES),
                                    'MaxBurstLength': str(WRITE_BYTES), 'MaxRecvDataSegmentLength': '262144'}) == 0
    c.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for lun in range(1 + len(KINDS)):   # the power-on unit attentions
        for _ in range(3):
            c.command(b'\0' * 6, lun=lun)
    return c


def send_cmd(c, cdb, lun, data=b''):
    """Send a command whose data all goes as immediate data (<= 8 KiB): its ITT, the response not awaited."""
    itt = c.next_itt()
    c.send(c.scsi_bhs(cdb, len(data), write=bool(data), data_len=len(data), lun=lun, itt=itt), data)
    return itt


def send_write(c, lun, lba, nbytes):
    """A WRITE(16) of nbytes of 0xAB, every byte sent at once: immediate data, then unsolicited Data-Out."""
    itt = c.next_itt()
    lun_field = struct.pack('>Q', lun << 48)
    c.send(c.scsi_bhs(bytes([0x8a, 0]) + struct.pack('>QI', lba, nbytes // 512) + b'\0\0', nbytes, write=True,
                      data_len=8192, lun=lun, itt=itt, final=False), b"\xab" * 8192)
    chunk = b'\xab' * 65536
    for sn, o in enumerate(range(8192, nbytes, len(chunk))):
        part = chunk[:min(len(chunk), nbytes - o)]
        d = bytes([ic.OP_DATA_OUT, 0x80 if o + len(part) >= nbytes else 0, 0, 0, 0]) + len(part).to_bytes(3, 'big')
        c.send(d + lun_field + struct.pack('>IIIIIII', itt, 0xffffffff, 0, c.statsn + 1, 0, sn, o) + b'\0' * 4, part)
    return itt


def responses(c, want, got=None):
    """Read until every ITT in want has its SCSI Response, and, with a ping ITT in want, its NOP-In:
    ITT -> (status, sense); got: those read before."""
    got = dict(got or {})
    while not want <= got.keys():
        op, bhs, payload = c.recv()
        itt = struct.unpack('>I', bhs[16:20])[0]
        if op == ic.OP_SCSI_RSP or op == ic.OP_NOP_IN:
            got[itt] = (bhs[3], payload[2:] if len(payload) > 2 else b'')
    return got


def started(c):
    """A NOP-Out answered: the target has read all c sent before it, so those commands have begun (a
    command whose data is all there starts as it comes).  The SCSI Responses met on the way."""
    itt = c.next_itt()
    c.send(bytes([ic.OP_NOP_OUT | 0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b'\0' * 8 +
           struct.pack('>IIII', itt, 0xffffffff, c.cmdsn, c.statsn + 1) + b'\0' * 16)
    got = responses(c, {itt})
    del got[itt]
    return got


def sanitize_cdb(plen):
    return bytes([0x48, 0x80 | 0x01, 0, 0, 0, 0, 0]) + struct.pack('>H', plen) + b'\0'


def sanitize(c, lun):
    """SANITIZE OVERWRITE, IMMED=1, one pass of PATTERN: (status, sense)."""
    data = bytes([1, 0]) + struct.pack('>H', len(PATTERN)) + PATTERN
    st, _, sense = c.command(sanitize_cdb(len(data)), len(data), write_data=data, lun=lun)
    return st, sense


def wait_sanitized(c, lun, limit=120):
    """REQUEST SENSE until the operation ended: its (key, asc) then."""
    end = time.time() + limit
    while time.time() < end:
        st, d, _ = c.command(bytes([0x03, 0, 0, 0, 252, 0]), 252, read=True, lun=lun)
        key, asc, _, _ = sense_of(d)
        if st == GOOD and (key, asc) != (NOT_READY, IN_PROGRESS):
            return key or 0, asc or 0
        time.sleep(0.05)
    return NOT_READY, IN_PROGRESS


def survivors(c, lun):
    """Blocks of lun that do not hold the pattern, and how many of those hold 0xAB or zeroes."""
    block = PATTERN * (512 // len(PATTERN))
    data = read_big(c, lun, 0, SIZE)
    bad = [data[i:i + 512] for i in range(0, SIZE, 512) if data[i:i + 512] != block]
    return len(bad), sum(b == b'\xab' * 512 for b in bad), sum(b == bytes(512) for b in bad)


def xcopy_list(naa_src, naa_dst, passes):
    tgt = b''.join(bytes([0xe4, 0, 0, 0, 0x01, 0x03, 0, 16]) + naa + b'\0' * 4 + bytes([0]) + (512).to_bytes(3, 'big')
                   for naa in (naa_src, naa_dst))
    segs = b''.join(bytes([0x02, 0]) + struct.pack('>HHHHHQQ', 0x18, 0, 1, 0, SEG_BLOCKS, lba, lba)
                    for _ in range(passes) for lba in range(0, NBLK, SEG_BLOCKS))
    return bytes([0, 3 << 3]) + struct.pack('>HIII', len(tgt), 0, len(segs), 0) + tgt + segs


def wut_list(token, passes):
    rs = b''.join(struct.pack('>QII', lba, SEG_BLOCKS, 0) for _ in range(passes) for lba in range(0, NBLK, SEG_BLOCKS))
    return struct.pack('>HBB4xQ', 534 + len(rs), 0, 0, 0) + token + b'\0' * 6 + struct.pack('>H', len(rs)) + rs


def rod_cdb(sa, lid, plen):
    return bytes([0x83, sa, 0, 0, 0, 0]) + struct.pack('>II', lid, plen) + b'\0\0'


def source_token(c):
    """A ROD token of the whole source LU (POPULATE TOKEN, then RECEIVE ROD TOKEN INFORMATION)."""
    rs = b''.join(struct.pack('>QII', lba, SEG_BLOCKS, 0) for lba in range(0, NBLK, SEG_BLOCKS))
    data = struct.pack('>HBBIIHH', 14 + len(rs), 0, 0, 0, 0, 0, len(rs)) + rs
    st, _, sense = c.command(rod_cdb(SA_PT, 7, len(data)), len(data), write_data=data, lun=SRC)
    assert st == GOOD, (st, sense_of(sense))
    st, d, _ = c.command(bytes([0x84, SA_RRTI]) + struct.pack('>I', 7) + b'\0' * 4 + struct.pack('>I', 1024) +
                         b'\0\0', 1024, read=True, lun=SRC)
    off = 32 + d[13]
    assert st == GOOD and struct.unpack('>I', d[off:off + 4])[0] == 514, st
    return d[off + 6:off + 6 + 512]


def zero_token():
    # The block device zero ROD token (SBC-4 5.27.4): its type, the rest reserved.
    return struct.pack('>IHH', ZERO_TOKEN_TYPE, 0, 0x1f8) + bytes(504)


def race(a, b, lun, what, start, expected):
    """start() sends the work on a (returns its ITTs); once the target has begun it, SANITIZE from b.  The work
    ends GOOD or with expected (key, asc); the SANITIZE ends GOOD; no block holds anything but the pattern."""
    itts = start()
    early = started(a)
    st, sense = sanitize(b, lun)
    check(f'{what}: SANITIZE OVERWRITE (IMMED=1) accepted', st == GOOD, (st, sense_of(sense)))
    ends = responses(a, set(itts), early)
    endings = sorted({(s, sense_of(sn)[:2]) for s, sn in ends.values()})
    cut = [e for e in endings if e[0] != GOOD]
    check(f'{what}: ended GOOD or {expected}', all(e[1] == expected for e in cut), endings)
    done = wait_sanitized(b, lun)
    check(f'{what}: the SANITIZE ended GOOD', done == (0, 0), done)
    n, ab, zero = survivors(b, lun)
    check(f'{what}: every block holds the pattern', n == 0,
          f'{n} blocks do not ({ab} hold the source\'s 0xAB, {zero} zeroes); the work ended {endings}')
    return bool(cut)


def main():
    work = workdir('isert-sanitize-writes-')
    with open(os.path.join(work, 'b.img'), 'wb') as f:
        f.truncate(SIZE)
    loop = subprocess.run(['losetup', '-f', '--show', os.path.join(work, 'b.img')], capture_output=True, text=True)
    if loop.returncode:
        check('losetup: a loop device for the block LU', False, loop.stderr.strip())
        finish()
    loopdev = loop.stdout.strip()
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(work, loopdev), f)
    proc, _ = start_isertd(ISERTD, work, cfgfile, '-r', '2', admin='none', ready=PORT, seconds=10)
    try:
        a, b = login(INI_A), login(INI_B)
        write_big(a, SRC, 0, b'\xab' * SIZE)
        naa_src = naa_of(a, SRC)
        tok = source_token(a)
        cut = {}
        for i, kind in enumerate(KINDS):
            lun = 1 + i
            naa = naa_of(a, lun)
            plist = xcopy_list(naa_src, naa, 4)
            cut['xcopy'] = race(a, b, lun, f'{kind}: EXTENDED COPY into it',
                                lambda: [send_cmd(a, bytes([0x83, 0]) + b'\0' * 8 + struct.pack('>I', len(plist)) +
                                                  b'\0\0', SRC, plist)],
                                (0xa, NOT_REACHABLE)) or cut.get('xcopy')
            wl = wut_list(tok, 1)   # the token holds 64 MiB
            cut['wut'] = race(a, b, lun, f'{kind}: WRITE USING TOKEN into it',
                              lambda: [send_cmd(a, rod_cdb(SA_WUT, 8, len(wl)), lun, wl)],
                              (NOT_READY, IN_PROGRESS)) or cut.get('wut')
            zl = wut_list(zero_token(), 1)   # no two ranges may overlap
            cut['zero'] = race(a, b, lun, f'{kind}: WRITE USING TOKEN of the zero token into it',
                               lambda: [send_cmd(a, rod_cdb(SA_WUT, 9, len(zl)), lun, zl)],
                               (NOT_READY, IN_PROGRESS)) or cut.get('zero')

            race(a, b, lun, f'{kind}: {WRITES} queued WRITEs of 8 MiB',
                 lambda: [send_write(a, lun, 0, WRITE_BYTES) for _ in range(WRITES)], (NOT_READY, IN_PROGRESS))
        # What the copies met is timing; that the SANITIZE overtook each kind of copy at least once is not.
        for k in ('xcopy', 'wut', 'zero'):
            check(f'the SANITIZE stopped a running {k} copy at least once', cut.get(k), cut)

        # A copy from a LU being sanitized: none of its bytes reach the destination.
        write_big(a, 1, 0, b'\xab' * SIZE)   # the RAM LU is the source now, the file LU the destination
        write_big(a, 2, 0, b'\0' * SIZE)
        plist = xcopy_list(naa_of(a, 1), naa_of(a, 2), 4)
        itt = send_cmd(a, bytes([0x83, 0]) + b'\0' * 8 + struct.pack('>I', len(plist)) + b'\0\0', 2, plist)
        early = started(a)
        st, sense = sanitize(b, 1)
        check('source sanitized mid-copy: SANITIZE accepted', st == GOOD, (st, sense_of(sense)))
        st, sense = responses(a, {itt}, early)[itt]
        ok = st == GOOD or sense_of(sense)[:2] == (0xa, NOT_REACHABLE)
        check('source sanitized mid-copy: the copy ended GOOD or COPY ABORTED, COPY TARGET DEVICE NOT REACHABLE',
              ok, (st, sense_of(sense)))
        wait_sanitized(b, 1)
        dst = read_big(b, 2, 0, SIZE)
        copied = sum(dst[i:i + 512] == b'\xab' * 512 for i in range(0, SIZE, 512))
        # Blocks read before the SANITIZE came may be there (a READ then was the initiator's right); the
        # copy stopped at its next chunk: at most the chunks it had in flight (4 x 1 MiB) past what it had.
        check('source sanitized mid-copy: the copy stopped (not all 64 MiB copied)', st == GOOD or copied < NBLK,
              f'{copied} blocks copied')
        expect('TEST UNIT READY after everything', a.command(b'\0' * 6, lun=2), GOOD)
        a.logout()
        b.logout()
    finally:
        stop_isertd(proc, 30)
        subprocess.run(['losetup', '-d', loopdev])
        # Its two 64 MiB images are in tmpfs, memory until removed (KEEP=1 keeps them to look at).
        if not os.environ.get('KEEP'):
            shutil.rmtree(work, ignore_errors=True)
    finish()


if __name__ == '__main__':
    main()
