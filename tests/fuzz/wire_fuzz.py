#!/usr/bin/env python3
"""Wire fuzzer for a running isertd: mutated Login PDUs, and mutated full
feature phase PDUs after a valid login, on loopback only.  It starts nothing:
give it the port of a target you started (see README.md).  Every --check
inputs, and at the end, a fresh session must log in and answer a NOP-Out;
if not, the inputs sent since the last good check are written to --crash-dir
and the exit status is 1.

usage: wire_fuzz.py --port PORT [--target IQN] [--initiator IQN]
                    [--iterations N] [--seconds S] [--seed N] [--check N] [--crash-dir DIR]"""
import argparse
import ipaddress
import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'integration'))
import iscsi_client as ic  # noqa: E402

INTERESTING32 = [0, 1, 0x7f, 0x80, 0xff, 0x100, 511, 512, 8191, 8192, 8193, 65535, 65536, 262144,
                 0xffffff, 0x1000000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff]
LOGIN_KEYS = ['InitiatorName', 'TargetName', 'SessionType', 'AuthMethod', 'HeaderDigest', 'DataDigest',
              'MaxRecvDataSegmentLength', 'MaxBurstLength', 'FirstBurstLength', 'ImmediateData',
              'InitialR2T', 'MaxConnections', 'ErrorRecoveryLevel', 'RDMAExtensions', 'CHAP_A', 'CHAP_N',
              'CHAP_R', 'CHAP_I', 'CHAP_C', 'SendTargets', 'X-com.example', 'TaskReporting', 'IFMarkInt',
              'DefaultTime2Wait', 'MaxOutstandingR2T', 'iSERHelloRequired', 'TargetRecvDataSegmentLength']
VALUES = ['', 'None', 'CRC32C', 'CRC32C,None', 'Yes', 'No', 'Normal', 'Discovery', 'CHAP', 'CHAP,None',
          '0', '1', '512', '8192', '16777215', '16777216', '4294967296', '0x', '0x' + 'f' * 600,
          '0b' + 'A' * 1000, 'Reject', 'Irrelevant', 'NotUnderstood', 'All', '5,6,7,8', 'x' * 300,
          'iqn.2026-11.org.isert:default', '\xff\xfe']


class Fuzzer:
    def __init__(self, args):
        self.a = args
        self.r = random.Random(args.seed)  # fixes every choice and byte sent
        self.sent = []  # (label, bytes) since the last good health check

    # -- mutation ---------------------------------------------------------
    def mutate(self, b, rounds=None):
        b = bytearray(b)
        for _ in range(rounds or self.r.randint(1, 6)):
            k = self.r.randrange(9)
            if k == 0 and b:
                i = self.r.randrange(len(b))
                b[i] ^= 1 << self.r.randrange(8)
            elif k == 1 and b:
                b[self.r.randrange(len(b))] = self.r.randrange(256)
            elif k == 2 and len(b) >= 4:
                i = self.r.randrange(len(b) - 3)
                b[i:i + 4] = struct.pack('>I', self.r.choice(INTERESTING32))
            elif k == 3:
                i = self.r.randrange(len(b) + 1)
                b[i:i] = self.r.randbytes(self.r.randint(1, 16)) if self.r.random() < 0.5 else b'\0' * self.r.randint(1, 8)
            elif k == 4 and len(b) > 1:
                i = self.r.randrange(len(b))
                del b[i:i + self.r.randint(1, 16)]
            elif k == 5 and len(b) >= 48:
                # the BHS fields that size everything: AHS length and data length
                if self.r.random() < 0.5:
                    b[4] = self.r.choice([0, 1, 2, 5, 64, 255])
                else:
                    b[5:8] = self.r.choice([0, 1, 3, 48, 8192, 8193, 65536, 0xffffff]).to_bytes(3, 'big')
            elif k == 6 and len(b) >= 2:
                b[0] = (b[0] & 0x40) | self.r.choice([0, 1, 2, 3, 4, 5, 6, 0x10, 0x1c, 0x20, 0x3f, self.r.randrange(64)])
            elif k == 7 and len(b) >= 2:
                b[1] = self.r.randrange(256)
            elif k == 8:
                b = b[:self.r.randrange(len(b) + 1)]
        return bytes(b)

    def keys(self, base):
        """A key=value segment: the valid keys, with some replaced, added or broken."""
        pairs = list(base.items())
        for _ in range(self.r.randint(0, 4)):
            op = self.r.randrange(5)
            if op == 0:
                pairs.append((self.r.choice(LOGIN_KEYS), self.r.choice(VALUES)))
            elif op == 1 and pairs:
                i = self.r.randrange(len(pairs))
                pairs[i] = (pairs[i][0], self.r.choice(VALUES))
            elif op == 2 and pairs:
                del pairs[self.r.randrange(len(pairs))]
            elif op == 3 and pairs:
                pairs.append(self.r.choice(pairs))  # duplicate
            else:
                pairs.append(('K' * self.r.choice([1, 63, 64, 200]), 'v'))
        data = b''.join(f'{k}={v}'.encode('utf-8', 'surrogateescape') + b'\0' for k, v in pairs)
        if self.r.random() < 0.2:
            data = self.mutate(data, 2)
        return data

    # -- PDUs -------------------------------------------------------------
    def login_bhs(self, c, csg, nsg, transit, data, tsih=0):
        flags = (0x80 if transit else 0) | (csg << 2) | nsg
        bhs = bytes([0x43, flags, 0, 0, 0]) + len(data).to_bytes(3, 'big') + c.isid + struct.pack('>H', tsih)
        bhs += struct.pack('>IHHII', c.itt, 0, 0, c.cmdsn, c.statsn + 1) + b'\0' * 16
        return bhs + ic.pad4(data)

    def ffp_pdu(self, c):
        """A valid-looking full feature phase PDU to start mutating from."""
        kind = self.r.randrange(8)
        itt = c.next_itt()
        exp = c.statsn + 1
        if kind == 0:
            data = self.r.randbytes(self.r.choice([0, 4, 100]))
            bhs = bytes([0x40, 0x80, 0, 0, 0]) + len(data).to_bytes(3, 'big') + b'\0' * 8
            return bhs + struct.pack('>IIII', itt, 0xffffffff, c.cmdsn, exp) + b'\0' * 16 + ic.pad4(data)
        if kind == 1:  # READ(10) / READ(16) / INQUIRY
            cdb = self.r.choice([bytes([0x28, 0, 0, 0, 0, 0, 0, 0, 8, 0]), bytes([0x12, 0, 0, 0, 96, 0]),
                                 bytes([0x88] + [0] * 9 + [0, 0, 0, 8, 0, 0]), bytes([0xa0] + [0] * 11)])
            return c.scsi_bhs(cdb, 4096, read=True, itt=itt)
        if kind == 2:  # WRITE(10) with immediate data, maybe with an extended-CDB AHS
            data = self.r.randbytes(512)
            bhs = bytearray(c.scsi_bhs(bytes([0x2a, 0, 0, 0, 0, 9, 0, 0, 2, 0]), 1024, write=True,
                                       data_len=len(data), itt=itt))
            ahs = b''
            if self.r.random() < 0.5:
                ext = self.r.randbytes(self.r.choice([1, 4, 16, 244]))
                ahs = struct.pack('>HB', len(ext) + 1, 1) + b'\0' + ext
                ahs = ic.pad4(ahs)
                bhs[4] = len(ahs) // 4
            return bytes(bhs) + ahs + data
        if kind == 3:  # Data-Out for a task that may not exist
            data = self.r.randbytes(512)
            bhs = bytes([0x05, 0x80, 0, 0, 0]) + len(data).to_bytes(3, 'big') + b'\0' * 8
            return bhs + struct.pack('>IIIIIII', itt - 1, self.r.choice([0, 1, 0xffffffff]), 0, exp, 0, 0,
                                     self.r.choice([0, 512, 0xfffffe00])) + b'\0' * 4 + data
        if kind == 4:  # TMF
            fn = self.r.choice([1, 2, 3, 4, 5, 6, 7, 8, 0x7f])
            bhs = bytes([0x42, 0x80 | fn, 0, 0, 0, 0, 0, 0]) + b'\0' * 8
            return bhs + struct.pack('>IIIIII', itt, itt - 1, c.cmdsn, exp, c.cmdsn, 0) + b'\0' * 8
        if kind == 5:  # Text
            data = self.keys({'SendTargets': 'All'} if self.r.random() < 0.5 else {'MaxBurstLength': '4096'})
            bhs = bytes([0x44, 0x80, 0, 0, 0]) + len(data).to_bytes(3, 'big') + b'\0' * 8
            return bhs + struct.pack('>IIII', itt, 0xffffffff, c.cmdsn, exp) + b'\0' * 16 + ic.pad4(data)
        if kind == 6:  # SNACK
            bhs = bytes([0x10, 0x80 | self.r.randrange(4), 0, 0, 0, 0, 0, 0]) + b'\0' * 8
            return bhs + struct.pack('>IIII', itt, 0, 0, exp) + b'\0' * 8 + struct.pack('>II', 0, 0)
        bhs = bytes([0x46, 0x80 | self.r.randrange(3), 0, 0, 0, 0, 0, 0]) + b'\0' * 8  # Logout
        return bhs + struct.pack('>IHHII', itt, 0, 0, c.cmdsn, exp) + b'\0' * 16

    # -- I/O --------------------------------------------------------------
    def send(self, c, label, data):
        self.sent.append((label, data))
        try:
            c.send_raw(data)
        except OSError:
            return False
        return True

    def drain(self, c, seconds):
        """Read whatever the target answers, briefly; it may also close."""
        c.s.settimeout(seconds)
        try:
            while c.s.recv(65536):
                pass
        except (socket.timeout, OSError):
            pass

    def one_login(self):
        c = ic.Conn(self.a.port, timeout=2)
        try:
            if self.r.random() < 0.4:
                # a valid first step, then a mutated operational stage
                st, _, rk = c.login_pdu(0, 1, True, ic.kv({
                    'InitiatorName': self.a.initiator, 'TargetName': self.a.target,
                    'SessionType': 'Normal', 'AuthMethod': 'None'}))
                self.sent.append(('login step 1', b''))
                if st:
                    return
                data = self.keys({'HeaderDigest': 'None', 'DataDigest': 'None',
                                  'MaxRecvDataSegmentLength': '8192', 'ImmediateData': 'Yes'})
                pdu = self.login_bhs(c, 1, 3, True, data)
            else:
                base = {'InitiatorName': self.a.initiator, 'SessionType': 'Normal', 'AuthMethod': 'None'}
                if self.r.random() < 0.8:
                    base['TargetName'] = self.a.target
                data = self.keys(base)
                pdu = self.login_bhs(c, 0, self.r.choice([1, 3]), self.r.random() < 0.9, data)
            if self.r.random() < 0.7:
                pdu = self.mutate(pdu)
            if self.send(c, 'login', pdu):
                self.drain(c, 0.05)
        except (OSError, AssertionError, ConnectionError):
            pass
        finally:
            c.close()

    def one_ffp(self):
        c = ic.Conn(self.a.port, timeout=2)
        try:
            if c.login(self.a.initiator, self.a.target) != 0:
                raise RuntimeError('valid login refused')
            self.sent.append(('valid login', b''))
            for _ in range(self.r.randint(1, 4)):
                pdu = self.ffp_pdu(c)
                if self.r.random() < 0.8:
                    pdu = self.mutate(pdu)
                if not self.send(c, 'ffp', pdu):
                    break
            self.drain(c, 0.05)
        except (OSError, AssertionError, ConnectionError):
            pass
        finally:
            c.close()

    def healthy(self):
        try:
            c = ic.Conn(self.a.port, timeout=5)
            try:
                st = c.login(self.a.initiator, self.a.target)
                if st != 0:
                    return f'login status {st:#x}'
                payload = os.urandom(64)
                if c.nop(payload) != payload:
                    return 'NOP-In did not echo the ping data'
                return None
            finally:
                c.close()
        except Exception as e:  # noqa: BLE001 - any failure here is the finding
            return repr(e)

    def report(self, why, it):
        os.makedirs(self.a.crash_dir, exist_ok=True)
        print(f'FAIL after input {it}: target unhealthy: {why}')
        print(f'{len(self.sent)} inputs since the last good check (seed {self.a.seed}):')
        for n, (label, data) in enumerate(self.sent):
            path = os.path.join(self.a.crash_dir, f'wire-{self.a.seed}-{it}-{n:03d}-{label.replace(" ", "-")}.bin')
            with open(path, 'wb') as f:
                f.write(data)
            print(f'  {label}: {data[:96].hex()}{"..." if len(data) > 96 else ""} -> {path}')

    def run(self):
        start = time.time()
        it = 0
        while it < self.a.iterations and time.time() - start < self.a.seconds:
            if self.r.random() < 0.5:
                self.one_login()
            else:
                self.one_ffp()
            it += 1
            if it % self.a.check == 0:
                why = self.healthy()
                if why:
                    self.report(why, it)
                    return 1
                self.sent.clear()
        why = self.healthy()
        if why:
            self.report(why, it)
            return 1
        print(f'wire_fuzz: {it} inputs in {time.time() - start:.1f} s (seed {self.a.seed}): target healthy')
        return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--target', default='iqn.2026-11.org.isert:default')
    p.add_argument('--initiator', default='iqn.2026-11.org.test:wirefuzz')
    p.add_argument('--iterations', type=int, default=500)
    p.add_argument('--seconds', type=float, default=60)
    p.add_argument('--seed', type=int, default=1)
    p.add_argument('--check', type=int, default=25, help='health check every N inputs')
    p.add_argument('--crash-dir', default='wire-crashes')
    a = p.parse_args()
    if not ipaddress.ip_address(a.host).is_loopback:
        p.error('loopback addresses only')
    return Fuzzer(a).run()


if __name__ == '__main__':
    sys.exit(main())
