#!/usr/bin/env python3
"""Integration tests of isertd over loopback TCP: ACLs, CHAP (one-way,
mutual, every CHAP_A), discovery filtering, malformed PDUs, and that the
target keeps serving other sessions after each bad one.

usage: test_target.py ISERTD [PORT]"""
import os
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import iscsi_client as ic  # noqa: E402
import checks  # noqa: E402
from admin_rpc import start_isertd  # noqa: E402
from checks import check  # noqa: E402

ISERTD = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 3271
TARGET = 'iqn.2026-11.org.isert:acl'
NOCHAP, CHAP, MUTUAL = 'iqn.2026-11.org.test:nochap', 'iqn.2026-11.org.test:chap', 'iqn.2026-11.org.test:mutual'
STRANGER = 'iqn.2026-11.org.test:stranger'


def session(initiator=NOCHAP, **kw):
    c = ic.Conn(PORT)
    st = c.login(initiator, TARGET, **kw)
    return c, st


def target_still_serves(label):
    """A fresh, well-behaved session works: log in, write, read back."""
    try:
        c, st = session()
        if st:
            check(f'{label}: other sessions still served', False, f'login status {st:#x}')
            return
        block = os.urandom(512)
        c.command(bytes([0x2A, 0, 0, 0, 0, 7, 0, 0, 1, 0]), 512, write_data=block)
        status, data, _ = c.command(bytes([0x28, 0, 0, 0, 0, 7, 0, 0, 1, 0]), 512, read=True)
        check(f'{label}: other sessions still served', status == 0 and data == block)
        c.close()
    except Exception as e:  # noqa: BLE001 - any failure here is the finding
        check(f'{label}: other sessions still served', False, repr(e))


def expect_reject_or_close(c, label):
    try:
        op, bhs, _ = c.recv()
        while op == ic.OP_NOP_IN:
            op, bhs, _ = c.recv()
        check(label, op == ic.OP_REJECT, f'got opcode {op:#x}')
    except (ConnectionError, OSError):
        check(label + ' (connection closed)', True)


def lu_reset_with_data_owed():
    """
    LU RESET while a WRITE waits for the data its R2T asked for.  An initiator
    following RFC 7143 sec. 11.6.2 goes on answering the R2T; one with Linux's
    default FastAbort sends nothing more and may reuse the ITT at once.  The
    target answers the TMF either way, takes late data quietly (it used to
    Reject each such Data-Out, reason 0x09, which an initiator sees as an
    error) and gives the aborted WRITE no response.
    """
    for fast_abort in (False, True):
        label = 'FastAbort initiator' if fast_abort else 'initiator answering the R2T'
        c, st = session()
        if st:
            check(f'LU RESET, {label}: login', False, f'status {st:#x}')
            continue
        got = []
        try:
            witt = c.next_itt()
            c.send(c.scsi_bhs(bytes([0x2A, 0, 0, 0, 0x20, 0, 0, 0, 64, 0]), 32768, write=True, itt=witt))
            op, bhs, _ = c.recv()
            r2t = op == ic.OP_R2T
            ttt, off, length = struct.unpack('>I', bhs[20:24])[0], *struct.unpack('>II', bhs[40:48])
            tmf_itt = c.next_itt()
            tmf = bytes([ic.OP_TMF | 0x40, 0x80 | 5, 0, 0, 0, 0, 0, 0]) + struct.pack('>Q', 0)
            tmf += struct.pack('>IIIIII', tmf_itt, 0xFFFFFFFF, c.cmdsn, c.statsn + 1, 0, 0) + b'\0' * 8
            c.send(tmf)
            for sn, o in enumerate(range(off, off + length, 8192) if not fast_abort else ()):
                last = o + 8192 >= off + length
                dbhs = bytes([ic.OP_DATA_OUT, 0x80 if last else 0, 0, 0, 0]) + (8192).to_bytes(3, 'big')
                dbhs += struct.pack('>Q', 0) + struct.pack('>IIIIIII', witt, ttt, 0, c.statsn + 1, 0, sn, o)
                c.send(dbhs + b'\0' * 4, os.urandom(8192))
            # Then a ping: everything the target sends before its answer is the finding.
            nop_itt = c.next_itt()
            ping = bytes([ic.OP_NOP_OUT | 0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b'\0' * 8
            c.send(ping + struct.pack('>IIII', nop_itt, 0xFFFFFFFF, c.cmdsn, c.statsn + 1) + b'\0' * 16)
            while True:
                op, bhs, _ = c.recv()
                if op == ic.OP_NOP_IN and struct.unpack('>I', bhs[16:20])[0] == nop_itt:
                    break
                got.append((op, struct.unpack('>I', bhs[16:20])[0], bhs[2]))
            check(f'LU RESET with a WRITE waiting for R2T data, {label}: "function complete", no Reject, '
                  'no response for the aborted WRITE', r2t and got == [(ic.OP_TMF_RSP, tmf_itt, 0)],
                  f'R2T first: {r2t}; then (opcode, ITT, byte 2): {got}')
            # The ITT is free again: a new WRITE with it runs (its status is the reset's unit attention).
            c.itt = witt - 1
            status, _, sense = c.command(bytes([0x2A, 0, 0, 0, 0x20, 0, 0, 0, 64, 0]), 32768,
                                         write_data=os.urandom(32768))
            check(f'LU RESET, {label}: the aborted WRITE\'s ITT is taken by a new command',
                  c.itt == witt and status in (0, 2), f'status {status}')
        except Exception as e:  # noqa: BLE001 - a timeout or a Reject here is the finding
            check(f'LU RESET with a WRITE waiting for R2T data, {label}', False, f'{e!r}, PDUs {got}')
        c.close()
    target_still_serves('after a LU RESET with data outstanding')


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    work = checks.workdir('isert-target-')
    # No admin socket, a state folder of its own: not the host's defaults, which other isertds share.
    proc, _ = start_isertd(ISERTD, work, os.path.join(here, 'integration.json'), '--portal', f'127.0.0.1:{PORT}',
                           admin='none', ready=PORT, seconds=10)
    try:
        run()
        check('isertd still running at the end', proc.poll() is None)
    finally:
        proc.terminate()
        try:
            rc = proc.wait(10)
            check('isertd stops cleanly on SIGTERM', rc == 0, f'exit status {rc}')
        except subprocess.TimeoutExpired:
            proc.kill()
            check('isertd stops cleanly on SIGTERM', False, 'did not exit within 10 s')
        if checks.failed:
            print('--- isertd log ---')
            print(open(os.path.join(work, 'isertd.log')).read()[-4000:])
        shutil.rmtree(work, ignore_errors=True)
    checks.finish()


def run():
    # Access control and authentication.
    c, st = session(NOCHAP)
    check('ACL initiator without CHAP logs in', st == 0, f'status {st:#x}')
    c.close()
    c, st = session(STRANGER)
    check('initiator without ACL refused: authorization failure 0x0202', st == 0x0202, f'status {st:#x}')
    c.close()
    c = ic.Conn(PORT)
    st = c.login(NOCHAP, 'iqn.2026-11.org.isert:nosuch')
    check('unknown target: not found 0x0203', st == 0x0203, f'status {st:#x}')
    c.close()
    for alg in (5, 6, 7, 8):
        c, st = session(CHAP, chap=('alice', 'alice-secret-1'), alg=alg)
        check(f'one-way CHAP with CHAP_A={alg}', st == 0, f'status {st:#x}')
        c.close()
    c, st = session(CHAP, chap=('alice', 'wrong-secret-1'))
    check('wrong CHAP secret: authentication failure 0x0201', st == 0x0201, f'status {st:#x}')
    c.close()
    c, st = session(CHAP, chap=('mallory', 'alice-secret-1'))
    check('wrong CHAP user: authentication failure 0x0201', st == 0x0201, f'status {st:#x}')
    c.close()
    c, st = session(CHAP)
    check('CHAP required but initiator offers only None: 0x0201', st == 0x0201, f'status {st:#x}')
    c.close()
    c, st = session(MUTUAL, chap=('bob', 'bob-secret-123'), mutual=('target', 'target-secret-1'), alg=7)
    check('mutual CHAP: target proves itself', st == 0, f'status {st:#x}')
    if st == 0:
        status, _, sense = c.command(bytes([0x2A, 0, 0, 0, 0, 0, 0, 0, 1, 0]), 512, write_data=b'x' * 512)
        check('write-protected mapped LUN refuses WRITE with DATA PROTECT',
              status == 2 and len(sense) > 13 and (sense[2] & 0xF) == 7, f'status {status} sense {sense[:14].hex()}')
    c.close()

    # Discovery shows only what the initiator may log in to.
    c = ic.Conn(PORT)
    st = c.login(NOCHAP, discovery=True)
    targets = c.send_targets() if st == 0 else []
    check('discovery lists the target to an ACL initiator', f'TargetName={TARGET}' in targets, str(targets))
    check('discovery reports the portal', f'TargetAddress=127.0.0.1:{PORT},1' in targets, str(targets))
    c.close()
    c = ic.Conn(PORT)
    st = c.login(STRANGER, discovery=True)
    targets = c.send_targets() if st == 0 else None
    check('discovery hides ACL-protected targets from an initiator without ACL',
          targets is not None and f'TargetName={TARGET}' not in targets, str(targets))
    check('discovery shows demo-mode targets to any initiator',
          targets is not None and 'TargetName=iqn.2026-11.org.isert:nop' in targets, str(targets))
    c.close()

    # Malformed PDUs during login.
    c = ic.Conn(PORT)
    c.send_raw(os.urandom(48))
    check('random bytes instead of a login: connection closed', c.closed())
    target_still_serves('after random bytes')
    c = ic.Conn(PORT)
    bhs = bytearray(48)
    bhs[0], bhs[1] = 0x43, 0x87
    bhs[5:8] = (0xFFFFFF).to_bytes(3, 'big')
    c.send_raw(bytes(bhs))
    check('login with a 16 MiB data segment: connection closed', c.closed())
    target_still_serves('after oversized login')

    # Malformed PDUs in full feature phase: answered with Reject, connection usable.
    c, st = session()
    check('session for malformed-PDU tests', st == 0)
    bad = bytearray(48)
    bad[0], bad[1] = 0x1F, 0x80
    bad[16:20] = struct.pack('>I', 0x1234)
    c.send(bytes(bad))
    expect_reject_or_close(c, 'reserved opcode 0x1f gets a Reject')
    try:
        check('connection still usable after the Reject', c.nop(b'ping') == b'ping')
    except (ConnectionError, OSError) as e:
        check('connection still usable after the Reject', False, repr(e))
    # Immediate data longer than the expected transfer length.
    cdb = bytes([0x2A, 0, 0, 0, 0, 0, 0, 0, 1, 0])
    c.send(c.scsi_bhs(cdb, 512, write=True, data_len=1024), b'y' * 1024)
    expect_reject_or_close(c, 'immediate data beyond EDTL gets a Reject')
    # Data-Out for a task that does not exist.
    dout = bytes([ic.OP_DATA_OUT, 0x80, 0, 0, 0, 0, 2, 0]) + b'\0' * 8 + struct.pack('>IIIIIII', 0x7777, 0xFFFFFFFF,
                                                                                   0, c.statsn + 1, 0, 0, 0) + b'\0' * 4
    c.send(dout, b'z' * 512)
    expect_reject_or_close(c, 'Data-Out for an unknown task gets a Reject')
    c.close()

    # Data-Out beyond the expected transfer length (solicited).
    c, st = session()
    itt = c.next_itt()
    c.send(c.scsi_bhs(cdb, 512, write=True, itt=itt))
    op, r2t, _ = c.recv()
    check('WRITE without immediate data gets an R2T', op == ic.OP_R2T, f'opcode {op:#x}')
    if op == ic.OP_R2T:
        ttt = struct.unpack('>I', r2t[20:24])[0]
        dout = bytes([ic.OP_DATA_OUT, 0x80, 0, 0, 0]) + (4096).to_bytes(3, 'big') + b'\0' * 8
        dout += struct.pack('>IIIIIII', itt, ttt, 0, c.statsn + 1, 0, 0, 0) + b'\0' * 4
        c.send(dout, b'w' * 4096)
        expect_reject_or_close(c, 'Data-Out beyond the R2T and EDTL gets a Reject')
    c.close()
    target_still_serves('after bad Data-Out')

    # A data segment larger than the target's MaxRecvDataSegmentLength.
    c, st = session()
    big = b'n' * (1024 * 1024)
    nop = bytes([ic.OP_NOP_OUT | 0x40, 0x80, 0, 0, 0]) + len(big).to_bytes(3, 'big') + b'\0' * 8
    nop += struct.pack('>IIII', c.next_itt(), 0xFFFFFFFF, c.cmdsn, c.statsn + 1) + b'\0' * 16
    try:
        c.send(nop, big)
        expect_reject_or_close(c, 'NOP-Out with 1 MiB of data (over MaxRecvDataSegmentLength) refused')
    except (ConnectionError, OSError):
        check('NOP-Out with 1 MiB of data (over MaxRecvDataSegmentLength) refused (closed)', True)
    c.close()
    # A bad TotalAHSLength on a SCSI command.
    c, st = session()
    bhs = bytearray(c.scsi_bhs(bytes([0x00] * 6), 0))
    bhs[4] = 2
    c.send_raw(bytes(bhs) + b'\xff' * 8)
    expect_reject_or_close(c, 'SCSI command with a malformed AHS refused')
    c.close()
    # Logout in the middle of nothing, then the connection ends.
    c, st = session()
    lo = bytes([ic.OP_LOGOUT | 0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b'\0' * 8
    lo += struct.pack('>IHHII', c.next_itt(), 0, 0, c.cmdsn, c.statsn + 1) + b'\0' * 16
    c.send(lo)
    op, rbhs, _ = c.recv()
    check('Logout answered with a Logout Response', op == ic.OP_LOGOUT_RSP and rbhs[2] == 0, f'opcode {op:#x}')
    check('connection closed after Logout', c.closed())
    target_still_serves('at the end')
    # InitialR2T=No: a WRITE whose command has the F bit set sends no unsolicited
    # Data-Out, so the target must ask (R2T) for everything past the immediate data.
    c, st = session(op_keys={'InitialR2T': 'No', 'FirstBurstLength': '65536'})
    check('InitialR2T=No negotiated', st == 0 and c.params.get('InitialR2T') == 'No', str(getattr(c, 'params', {})))
    if st == 0:
        try:
            block = os.urandom(32768)
            status, _, _ = c.command(bytes([0x2A, 0, 0, 0, 0x10, 0, 0, 0, 64, 0]), 32768, write_data=block)
            status2, data, _ = c.command(bytes([0x28, 0, 0, 0, 0x10, 0, 0, 0, 64, 0]), 32768, read=True)
            check('InitialR2T=No, F bit on the command: the rest comes by R2T, data reads back',
                  status == 0 and status2 == 0 and data == block)
        except Exception as e:  # noqa: BLE001 - a timeout here is the finding
            check('InitialR2T=No, F bit on the command: the rest comes by R2T, data reads back', False, repr(e))
        c.close()
    lu_reset_with_data_owed()
    # Header and data digests (CRC32C) on the wire.
    c, st = session(op_keys={'HeaderDigest': 'CRC32C,None', 'DataDigest': 'CRC32C,None'})
    check('CRC32C header and data digests negotiated', st == 0 and c.hd and c.dd, str(getattr(c, 'params', {})))
    if st == 0 and c.hd:
        block = os.urandom(4096)
        c.command(bytes([0x2A, 0, 0, 0, 0, 9, 0, 0, 8, 0]), 4096, write_data=block)
        status, data, _ = c.command(bytes([0x28, 0, 0, 0, 0, 9, 0, 0, 8, 0]), 4096, read=True)
        check('write and read back with digests on', status == 0 and data == block)
        ping = bytes([ic.OP_NOP_OUT | 0x40, 0x80, 0, 0, 0, 0, 0, 4]) + b'\0' * 8
        ping += struct.pack('>IIII', c.next_itt(), 0xFFFFFFFF, c.cmdsn, c.statsn + 1) + b'\0' * 16
        c.send(ping, b'abcd', corrupt_dd=True)
        op, rbhs, _ = c.recv()
        check('bad data digest gets a Reject (reason 0x02)', op == ic.OP_REJECT and rbhs[2] == 0x02,
              f'opcode {op:#x}')
        check('connection still usable after a data digest error', c.nop(b'pong') == b'pong')
        c.send(ping, b'abcd', corrupt_hd=True)
        check('bad header digest closes the connection', c.closed())
    c.close()
    target_still_serves('after digest errors')

    # Target NOP-In pings: answered ones keep the connection, an unanswered one ends it.
    c = ic.Conn(PORT)
    st = c.login(NOCHAP, 'iqn.2026-11.org.isert:nop')
    pings = 0
    try:
        for _ in range(2):
            op, bhs, _ = c.recv()
            itt, ttt = struct.unpack('>II', bhs[16:24])
            if op == ic.OP_NOP_IN and itt == 0xFFFFFFFF and ttt != 0xFFFFFFFF:
                pings += 1
                ans = bytes([ic.OP_NOP_OUT | 0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b'\0' * 8
                ans += struct.pack('>IIII', 0xFFFFFFFF, ttt, c.cmdsn, c.statsn + 1) + b'\0' * 16
                c.send(ans)
    except (ConnectionError, OSError) as e:
        print('nop:', repr(e))
    check('target sends NOP-In pings (TTT set, ITT reserved) at NopInInterval', st == 0 and pings == 2)
    t0 = time.time()
    check('an unanswered NOP-In ends the connection', c.closed() and time.time() - t0 < 4)
    c.close()
    # Many sessions at once, each working.
    conns = [session()[0] for _ in range(20)]
    ok = all(c.nop(b'%d' % i) == b'%d' % i for i, c in enumerate(conns))
    check('20 concurrent sessions each answer NOP-Out', ok)
    for c in conns:
        c.close()


if __name__ == '__main__':
    main()
