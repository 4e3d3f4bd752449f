#!/usr/bin/env python3
"""SANITIZE (SBC-4) over TCP against isertd (docs/admin.md, "Sanitizing a LU").

A 512 MiB RAM LU is overwritten 31 times (INVERT, a 5-byte pattern) with
IMMED=1: REQUEST SENSE reports NOT READY, SANITIZE IN PROGRESS with a
progress indication that grows; READ, WRITE and TEST UNIT READY are refused
with that sense while INQUIRY answers; a LOGICAL UNIT RESET, then the
logout of the session that started it, do not stop it.  Afterwards every
block holds the pattern, restarted at each block.  A SANITIZE with IMMED=0
is aborted (ABORT TASK): the abort is answered, the operation goes on to
its end.  Then failure, for real: isertd runs with RLIMIT_FSIZE below the
size of a file LU, so an OVERWRITE of it fails half way (EFBIG): the LU is
in sanitize failure mode (MEDIUM ERROR, SANITIZE COMMAND FAILED on media
access and in REQUEST SENSE); EXIT FAILURE MODE is refused after an AUSE=0
failure, and so is a SANITIZE asking for AUSE=1; a BLOCK ERASE (holes
punched) ends it and the blocks read back as zeroes; after an AUSE=1
failure EXIT FAILURE MODE ends it.  isertd killed with SIGKILL while the
LU is in failure mode comes back with the LU still needing a sanitize (the
marker in its state folder).  Also: REPORT SUPPORTED OPERATION CODES lists
the service actions each LU can do, VPD B1 reports WABEREQ, a read-only
mapping gets DATA PROTECT, malformed parameter lists get the field pointer.

usage: test_sanitize.py ISERTD [PORT]"""
import json
import os
import resource
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
from admin_rpc import start_isertd  # noqa: E402
from checks import check, finish, workdir  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3600
T = 'iqn.2026-11.org.isert:sanitize'
INI = 'iqn.2026-11.org.isert:san-a'
BIG = 512 << 20          # the RAM LU overwritten 31 times: some seconds of work
FILE_SIZE = 16 << 20     # the file LU ...
FSIZE_LIMIT = 8 << 20    # ... of which isertd may write only this much (RLIMIT_FSIZE)
PATTERN = b'abcde'       # 5 bytes: each 512-byte block starts it anew

GOOD, CHECK = 0x00, 0x02
NOT_READY, MEDIUM, ILLEGAL, UA, PROTECT = 0x2, 0x3, 0x5, 0x6, 0x7
IN_PROGRESS, FAILED = 0x041b, 0x3103


def config(work):
    maps = [{'mapped_lun': 0, 'tpg_lun': 0}, {'mapped_lun': 1, 'tpg_lun': 1}, {'mapped_lun': 2, 'tpg_lun': 2},
            {'mapped_lun': 3, 'tpg_lun': 2, 'write_protect': True}]
    return {
        'backstores': [
            {'name': 'big', 'type': 'ram', 'size': '512M'},
            {'name': 'f', 'type': 'file', 'path': os.path.join(work, 'f.img'), 'size': '16M', 'thin': True},
            {'name': 'small', 'type': 'ram', 'size': '8M', 'thin': True},
        ],
        'targets': [{'iqn': T, 'tpgs': [{'tag': 1, 'portals': [{'ip': '127.0.0.1', 'port': PORT}],
                                         'luns': [{'lun': i, 'backstore': b} for i, b in enumerate(['big', 'f', 'small'])],
                                         'acls': [{'initiator': INI, 'mapped_luns': maps}]}]}],
    }


def sense_of(sense):
    """(key, asc<<8|ascq, sense-key specific 3 bytes or None) of fixed-format sense."""
    if len(sense) < 14:
        return None, None, None
    sks = sense[15:18] if len(sense) >= 18 and sense[15] & 0x80 else None
    return sense[2] & 0xf, sense[12] << 8 | sense[13], sks


def sanitize(c, sa, lun=0, immed=False, ause=False, data=b'', plen=None, byte1=0, cdb_extra=None):
    cdb = bytearray([0x48, (0x80 if immed else 0) | (0x20 if ause else 0) | sa | byte1, 0, 0, 0, 0, 0, 0, 0, 0])
    cdb[7:9] = struct.pack('>H', len(data) if plen is None else plen)
    for i, v in (cdb_extra or {}).items():
        cdb[i] = v
    return c.command(bytes(cdb), len(data), write_data=data or None, lun=lun)


def overwrite_list(count, pattern, invert=False, test=0):
    return bytes([(0x80 if invert else 0) | test << 5 | count, 0]) + struct.pack('>H', len(pattern)) + pattern


def request_sense(c, lun):
    """REQUEST SENSE, past any unit attention: (key, asc, progress or None)."""
    for _ in range(10):
        st, d, _ = c.command(bytes([0x03, 0, 0, 0, 252, 0]), 252, read=True, lun=lun)
        assert st == GOOD, st
        key, asc, sks = sense_of(d)
        if key != UA:
            return key, asc, struct.unpack('>H', sks[1:3])[0] if sks else None
    raise AssertionError('unit attentions without end')


def cmd_past_ua(c, cdb, edtl=0, read=False, data=None, lun=0):
    for _ in range(10):
        res = c.command(cdb, edtl, read=read, write_data=data, lun=lun)
        if res[0] != CHECK or sense_of(res[2])[0] != UA:
            return res
    return res


def read16(c, lun, lba, n):
    return cmd_past_ua(c, bytes([0x88, 0]) + struct.pack('>QI', lba, n) + b'\0\0', n * 512, read=True, lun=lun)


def expect(name, res, status, key=None, asc=None, field=None):
    st, _, sense = res
    k, a, sks = sense_of(sense)
    f = struct.unpack('>H', sks[1:3])[0] if sks else None
    ok = st == status and (key is None or k == key) and (asc is None or a == asc) and (field is None or f == field)
    check(name, ok, 'status %#x sense %s/%s field %s' % (st, k, hex(a) if a is not None else None, f))


def wait_done(c, lun, limit=120):
    """REQUEST SENSE until the operation ended: its (key, asc) then."""
    end = time.time() + limit
    while time.time() < end:
        key, asc, _ = request_sense(c, lun)
        if (key, asc) != (NOT_READY, IN_PROGRESS):
            return key, asc
        time.sleep(0.05)
    return NOT_READY, IN_PROGRESS


def login(port=PORT):
    c = ic.Conn(port, timeout=60)
    assert c.login(INI, T) == 0
    return c


def start(cfgfile, work, log):
    def limits():
        # Writes past FSIZE_LIMIT fail with EFBIG (SIGXFSZ ignored, as the shell's ulimit -f would not).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))
    # The host's default admin socket: this test runs alone.
    return start_isertd(ISERTD, work, cfgfile, '-r', '2', admin=None, log=log, ready=PORT, seconds=10,
                        preexec_fn=limits)[0]


def rsoc_sas(c, lun):
    """The SANITIZE service actions REPORT SUPPORTED OPERATION CODES lists."""
    st, d, _ = cmd_past_ua(c, bytes([0xa3, 0x0c, 0, 0, 0, 0]) + struct.pack('>I', 65536) + b'\0\0', 65536,
                           read=True, lun=lun)
    assert st == GOOD, st
    sas, off = [], 4
    while off + 8 <= len(d):
        if d[off] == 0x48:
            sas.append(struct.unpack('>H', d[off + 2:off + 4])[0])
        off += 8
    return sorted(sas)


def main():
    work = workdir('isert-sanitize-')
    with open(os.path.join(work, 'f.img'), 'wb') as f:
        f.truncate(FILE_SIZE)   # full size already: isertd need not extend it past its limit
    cfgfile = os.path.join(work, 'isertd.json')
    with open(cfgfile, 'w') as f:
        json.dump(config(work), f)
    log = open(os.path.join(work, 'isertd.log'), 'w')
    proc = start(cfgfile, work, log)
    try:
        c = login()
        for lun in range(4):
            cmd_past_ua(c, b'\0' * 6, lun=lun)

        # -- what each LU offers ------------------------------------------------
        check('RSOC: the thick RAM LU lists OVERWRITE and EXIT FAILURE MODE only', rsoc_sas(c, 0) == [1, 0x1f],
              rsoc_sas(c, 0))
        check('RSOC: the thin file LU lists OVERWRITE, BLOCK ERASE, EXIT FAILURE MODE', rsoc_sas(c, 1) == [1, 2, 0x1f],
              rsoc_sas(c, 1))
        st, d, _ = cmd_past_ua(c, bytes([0x12, 1, 0xb1, 0, 64, 0]), 64, read=True, lun=1)
        check('VPD B1 of the thin file LU: WABEREQ 01b, WACEREQ 00b', st == GOOD and d[7] & 0xf0 == 0x40, d[:8])
        st, d, _ = cmd_past_ua(c, bytes([0x12, 1, 0xb1, 0, 64, 0]), 64, read=True, lun=0)
        check('VPD B1 of the thick LU: WABEREQ 00b', st == GOOD and d[7] & 0xf0 == 0, d[:8])
        expect('BLOCK ERASE on the thick LU: INVALID FIELD IN CDB, pointer to the service action',
               sanitize(c, 2, lun=0), CHECK, ILLEGAL, 0x2400, 1)
        expect('CRYPTO ERASE where no backstore key exists: INVALID FIELD IN CDB',
               sanitize(c, 3, lun=1), CHECK, ILLEGAL, 0x2400, 1)
        expect('service action 04h: INVALID FIELD IN CDB', sanitize(c, 4, lun=2), CHECK, ILLEGAL, 0x2400, 1)
        expect('read-only mapping: DATA PROTECT, WRITE PROTECTED',
               sanitize(c, 1, lun=3, data=overwrite_list(1, b'\0' * 4)), CHECK, PROTECT, 0x2700)

        # -- malformed parameter lists ---------------------------------------------
        expect('OVERWRITE COUNT 0: INVALID FIELD IN PARAMETER LIST at byte 0',
               sanitize(c, 1, lun=2, data=overwrite_list(0, b'x')), CHECK, ILLEGAL, 0x2600, 0)
        expect('TEST 01b: INVALID FIELD IN PARAMETER LIST at byte 0',
               sanitize(c, 1, lun=2, data=overwrite_list(1, b'x', test=1)), CHECK, ILLEGAL, 0x2600, 0)
        expect('INITIALIZATION PATTERN LENGTH past the list: INVALID FIELD IN PARAMETER LIST at byte 2',
               sanitize(c, 1, lun=2, data=overwrite_list(1, b'xy')[:5] + b'\0' * 3), CHECK, ILLEGAL, 0x2600, 2)
        expect('PARAMETER LIST LENGTH 4 for OVERWRITE: INVALID FIELD IN CDB at byte 7',
               sanitize(c, 1, lun=2, data=b'\x01\0\0\0'), CHECK, ILLEGAL, 0x2400, 7)
        expect('a reserved CDB byte set: INVALID FIELD IN CDB at that byte',
               sanitize(c, 1, lun=2, data=overwrite_list(1, b'x'), cdb_extra={4: 1}), CHECK, ILLEGAL, 0x2400, 4)
        expect('IMMED=0 OVERWRITE of an 8 MiB LU: GOOD when done', sanitize(c, 1, lun=2, data=overwrite_list(1, b'Z')),
               GOOD)
        st, d, _ = read16(c, 2, 0, 16)
        check('... and it holds the pattern', st == GOOD and d == b'Z' * 8192)

        # -- a long OVERWRITE: progress, refusals, reset and logout ---------------------
        t0 = time.time()
        expect('OVERWRITE of 512 MiB, 31 passes, INVERT, IMMED=1: GOOD at once',
               sanitize(c, 1, lun=0, immed=True, data=overwrite_list(31, PATTERN, invert=True)), GOOD)
        seen = []
        for _ in range(4):
            key, asc, prog = request_sense(c, 0)
            if (key, asc) == (NOT_READY, IN_PROGRESS) and prog is not None:
                seen.append(prog)
            time.sleep(0.05)
        check('REQUEST SENSE: NOT READY, SANITIZE IN PROGRESS with a PROGRESS INDICATION that grows',
              len(seen) >= 2 and seen == sorted(seen) and seen[-1] > seen[0], seen)
        expect('READ(16) meanwhile: NOT READY, SANITIZE IN PROGRESS', read16(c, 0, 0, 1), CHECK, NOT_READY, IN_PROGRESS)
        expect('WRITE(16) meanwhile: NOT READY, SANITIZE IN PROGRESS',
               cmd_past_ua(c, bytes([0x8a, 0]) + struct.pack('>QI', 0, 1) + b'\0\0', 512, data=b'x' * 512),
               CHECK, NOT_READY, IN_PROGRESS)
        expect('TEST UNIT READY meanwhile: NOT READY, SANITIZE IN PROGRESS', cmd_past_ua(c, b'\0' * 6),
               CHECK, NOT_READY, IN_PROGRESS)
        expect('a second SANITIZE meanwhile: NOT READY, SANITIZE IN PROGRESS',
               sanitize(c, 1, lun=0, data=overwrite_list(1, b'x')), CHECK, NOT_READY, IN_PROGRESS)
        expect('INQUIRY meanwhile: GOOD', cmd_past_ua(c, bytes([0x12, 0, 0, 0, 36, 0]), 36, read=True), GOOD)
        expect('another LU meanwhile: GOOD', read16(c, 2, 0, 1), GOOD)
        check('LOGICAL UNIT RESET: function complete', c.tmf(5, lun=0) == 0)
        key, asc, p1 = request_sense(c, 0)
        check('after the LU reset the sanitize goes on', (key, asc) == (NOT_READY, IN_PROGRESS), (key, asc))
        check('logout of the session that started it', c.logout() == 0)
        c.close()
        c = login()
        key, asc, p2 = request_sense(c, 0)
        check('after its logout, in a new session, the sanitize goes on', (key, asc) == (NOT_READY, IN_PROGRESS)
              and p2 is not None and p1 is not None and p2 >= p1, (key, asc, p1, p2))
        key, asc = wait_done(c, 0)
        took = time.time() - t0
        check('the sanitize ends without error (%.1f s)' % took, (key, asc) == (0, 0), (key, asc))
        block = (PATTERN * 103)[:512]
        for lba in (0, 12345, BIG // 512 - 16):
            st, d, _ = read16(c, 0, lba, 16)
            check('LBA %d: every block holds the pattern from its first byte' % lba, st == GOOD and d == block * 16)

        # -- IMMED=0 aborted: the operation goes on ----------------------------------
        data = overwrite_list(31, b'\0\0\0\0')
        cdb = bytes([0x48, 0x01, 0, 0, 0, 0, 0]) + struct.pack('>H', len(data)) + b'\0'
        itt = c.next_itt()
        c.send(c.scsi_bhs(cdb, len(data), write=True, data_len=len(data), lun=0, itt=itt), data)
        time.sleep(0.1)
        t1 = time.time()
        check('ABORT TASK of the waiting SANITIZE (IMMED=0): function complete', c.tmf(1, lun=0, ref_itt=itt) == 0)
        check('... answered promptly (%.2f s)' % (time.time() - t1), time.time() - t1 < 2)
        o = login()
        key, asc, _ = request_sense(o, 0)
        check('the aborted SANITIZE\'s operation goes on', (key, asc) == (NOT_READY, IN_PROGRESS), (key, asc))
        check('the session that aborted it goes on', cmd_past_ua(c, bytes([0x12, 0, 0, 0, 36, 0]), 36,
                                                                 read=True)[0] == GOOD)
        check('... and its operation ends', wait_done(o, 0) == (0, 0))
        st, d, _ = read16(o, 0, 100, 8)
        check('... with zeroes written', st == GOOD and d == b'\0' * 4096)
        o.close()

        # -- failure mode, for real ---------------------------------------------------
        expect('OVERWRITE of the file LU beyond isertd\'s file size limit, AUSE=0: MEDIUM ERROR, SANITIZE COMMAND '
               'FAILED', sanitize(c, 1, lun=1, data=overwrite_list(1, b'F')), CHECK, MEDIUM, FAILED)
        key, asc, _ = request_sense(c, 1)
        check('REQUEST SENSE: MEDIUM ERROR, SANITIZE COMMAND FAILED', (key, asc) == (MEDIUM, FAILED), (key, asc))
        expect('READ in failure mode: MEDIUM ERROR, SANITIZE COMMAND FAILED', read16(c, 1, 0, 1), CHECK, MEDIUM, FAILED)
        expect('TEST UNIT READY in failure mode: MEDIUM ERROR', cmd_past_ua(c, b'\0' * 6, lun=1), CHECK, MEDIUM, FAILED)
        expect('INQUIRY in failure mode: GOOD', cmd_past_ua(c, bytes([0x12, 0, 0, 0, 36, 0]), 36, read=True, lun=1),
               GOOD)
        marker = [n for n in os.listdir(os.path.join(work, 'state')) if n.startswith('sanitize-')]
        check('the state folder holds the LU\'s "sanitize needed" marker', len(marker) == 1, marker)
        expect('EXIT FAILURE MODE after an AUSE=0 failure: INVALID FIELD IN CDB', sanitize(c, 0x1f, lun=1),
               CHECK, ILLEGAL, 0x2400, 1)
        expect('a SANITIZE with AUSE=1 after an AUSE=0 failure: INVALID FIELD IN CDB',
               sanitize(c, 2, lun=1, ause=True), CHECK, ILLEGAL, 0x2400, 1)

        # A restart after a crash: the LU still needs a sanitize.
        proc.kill()
        proc.wait()
        proc = start(cfgfile, work, log)
        c = login()
        key, asc, _ = request_sense(c, 1)
        check('isertd killed (SIGKILL) and started again: the LU is still in sanitize failure mode',
              (key, asc) == (MEDIUM, FAILED), (key, asc))
        expect('... READ refused', read16(c, 1, 0, 1), CHECK, MEDIUM, FAILED)
        expect('... EXIT FAILURE MODE still refused (AUSE=0 remembered)', sanitize(c, 0x1f, lun=1), CHECK, ILLEGAL,
               0x2400)
        expect('BLOCK ERASE (holes punched), AUSE=0: GOOD', sanitize(c, 2, lun=1), GOOD)
        st, d, _ = read16(c, 1, 0, 16)
        check('the failure mode is over: READ GOOD, zeroes', st == GOOD and d == b'\0' * 8192, st)
        check('the marker is gone', not [n for n in os.listdir(os.path.join(work, 'state')) if n.startswith('sanitize-')])
        st, d, _ = cmd_past_ua(c, bytes([0x9e, 0x12]) + struct.pack('>QI', 0, 32) + b'\0\0', 32, read=True, lun=1)
        check('GET LBA STATUS after BLOCK ERASE: the whole LU deallocated', st == GOOD and len(d) >= 24 and d[20] & 0xf == 1
              and struct.unpack('>I', d[16:20])[0] == FILE_SIZE // 512, d[:24])
        expect('OVERWRITE again, AUSE=1: fails the same way', sanitize(c, 1, lun=1, ause=True,
                                                                    data=overwrite_list(1, b'G')), CHECK, MEDIUM, FAILED)
        expect('EXIT FAILURE MODE after an AUSE=1 failure: GOOD', sanitize(c, 0x1f, lun=1), GOOD)
        expect('READ after EXIT FAILURE MODE: GOOD', read16(c, 1, 0, 1), GOOD)
        expect('EXIT FAILURE MODE when not in failure mode: GOOD, nothing changes', sanitize(c, 0x1f, lun=1), GOOD)
        c.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        log.close()
    check('isertd exits cleanly on SIGTERM (status %d)' % rc, rc == 0)
    with open(os.path.join(work, 'isertd.log')) as f:
        text = f.read()
    check('the log says the sanitize failed and why', 'SANITIZE failed: File too large' in text)
    if not os.environ.get('KEEP'):
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    finish()


if __name__ == '__main__':
    main()
