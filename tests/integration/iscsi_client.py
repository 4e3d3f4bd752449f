"""A deliberately small iSCSI initiator for tests: it speaks the wire format
directly so tests can send exactly the (possibly malformed) PDUs they want."""
import hashlib
import os
import socket
import struct

OP_NOP_OUT, OP_SCSI_CMD, OP_TMF, OP_LOGIN, OP_TEXT, OP_DATA_OUT, OP_LOGOUT = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06
OP_NOP_IN, OP_SCSI_RSP, OP_TMF_RSP, OP_LOGIN_RSP, OP_TEXT_RSP, OP_DATA_IN, OP_LOGOUT_RSP = \
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26
OP_R2T, OP_REJECT = 0x31, 0x3F
HASHES = {5: hashlib.md5, 6: hashlib.sha1, 7: hashlib.sha256, 8: hashlib.sha3_256}


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    """CRC32C as iSCSI carries it (little-endian bytes on the wire)."""
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return struct.pack('<I', c ^ 0xFFFFFFFF)


def pad4(b):
    return b + b'\0' * (-len(b) % 4)


def kv(d):
    """Text keys; a bytes value goes as it is, and a str from bytes.decode('utf-8', 'surrogateescape') too
    (hostile names: any byte but NUL)."""
    return b''.join(f'{k}='.encode() + (v if isinstance(v, bytes) else f'{v}'.encode('utf-8', 'surrogateescape'))
                    + b'\0' for k, v in d.items())


def parse_kv(data):
    out = {}
    for item in data.split(b'\0'):
        if b'=' in item:
            k, v = item.split(b'=', 1)
            out[k.decode()] = v.decode()
    return out


class Conn:
    def __init__(self, port, host='127.0.0.1', timeout=5, src=None, rcvbuf=None):
        """rcvbuf: SO_RCVBUF set before connecting (the window the target may fill while this side does not read)."""
        if rcvbuf:
            self.s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.s.settimeout(timeout)
            if src:
                self.s.bind((src, 0))
            self.s.connect((host, port))
        else:
            self.s = socket.create_connection((host, port), timeout=timeout,
                                              source_address=(src, 0) if src else None)
        self.itt = 1
        self.cmdsn = 1
        self.statsn = 0
        self.isid = b'\x80' + os.urandom(5)
        self.hd = self.dd = False  # digests in force (after login)

    def close(self):
        self.s.close()

    def send_raw(self, b):
        self.s.sendall(b)

    def send(self, bhs, data=b'', corrupt_hd=False, corrupt_dd=False):
        assert len(bhs) == 48
        out = bhs
        if self.hd:
            d = crc32c(bhs)
            out += bytes([d[0] ^ 0xFF]) + d[1:] if corrupt_hd else d
        out += pad4(data)
        if self.dd and data:
            d = crc32c(pad4(data))
            out += bytes([d[0] ^ 0xFF]) + d[1:] if corrupt_dd else d
        self.s.sendall(out)

    def recv_exact(self, n):
        buf = b''
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError('connection closed by target')
            buf += chunk
        return buf

    def recv(self):
        bhs = self.recv_exact(48)
        ahs = bhs[4] * 4
        dlen = int.from_bytes(bhs[5:8], 'big')
        ahs_bytes = self.recv_exact(ahs)
        if self.hd and self.recv_exact(4) != crc32c(bhs + ahs_bytes):
            raise ValueError('bad header digest from target')
        padded = self.recv_exact(dlen + (-dlen % 4))
        if self.dd and dlen and self.recv_exact(4) != crc32c(padded):
            raise ValueError('bad data digest from target')
        data = padded[:dlen]
        op = bhs[0] & 0x3F
        if op in (OP_SCSI_RSP, OP_NOP_IN, OP_TMF_RSP, OP_LOGIN_RSP, OP_TEXT_RSP, OP_LOGOUT_RSP, OP_REJECT) or \
                (op == OP_DATA_IN and bhs[1] & 1):
            self.statsn = struct.unpack('>I', bhs[24:28])[0]
        return op, bhs, data

    def closed(self):
        """True if the target closed the connection (within the timeout)."""
        try:
            while True:
                if not self.s.recv(4096):
                    return True
        except (ConnectionError, OSError):
            return True

    # -- login ---------------------------------------------------------
    def login_pdu(self, csg, nsg, transit, keys):
        flags = (0x80 if transit else 0) | (csg << 2) | nsg
        bhs = struct.pack('>BBBB', 0x43, flags, 0, 0) + b'\0' + len(keys).to_bytes(3, 'big')
        bhs += self.isid + b'\0\0' + struct.pack('>IHHII', self.itt, 0, 0, self.cmdsn, self.statsn + 1) + b'\0' * 16
        self.send(bhs, keys)
        op, rbhs, data = self.recv()
        assert op == OP_LOGIN_RSP, f'expected Login Response, got opcode {op:#x}'
        status = rbhs[36] << 8 | rbhs[37]
        return status, rbhs[1], parse_kv(data)

    def login(self, initiator, target=None, chap=None, mutual=None, alg=5, discovery=False, op_keys=None,
              mutual_chal=None):
        """Returns the login status (class << 8 | detail); 0 is success.  mutual_chal: our
        challenge for mutual CHAP (default 16 random bytes; 'reflect': the target's own)."""
        keys = {'InitiatorName': initiator, 'SessionType': 'Discovery' if discovery else 'Normal',
                'AuthMethod': 'CHAP,None' if chap else 'None'}
        if target:
            keys['TargetName'] = target
        status, flags, rk = self.login_pdu(0, 1, True, kv(keys))
        if status:
            return status
        if rk.get('AuthMethod') == 'CHAP':
            if not chap:
                return -1
            status, flags, rk = self.login_pdu(0, 1, False, kv({'CHAP_A': str(alg)}))
            if status:
                return status
            a = int(rk['CHAP_A'])
            cid = int(rk['CHAP_I'])
            chal = bytes.fromhex(rk['CHAP_C'][2:])
            user, secret = chap
            resp = HASHES[a](bytes([cid]) + secret.encode() + chal).hexdigest()
            keys = {'CHAP_N': user, 'CHAP_R': '0x' + resp}
            if mutual:
                my_id = 77
                my_chal = chal if mutual_chal == 'reflect' else mutual_chal or os.urandom(16)
                keys.update({'CHAP_I': str(my_id), 'CHAP_C': '0x' + my_chal.hex()})
            status, flags, rk = self.login_pdu(0, 1, True, kv(keys))
            if status:
                return status
            if mutual:
                want = HASHES[a](bytes([my_id]) + mutual[1].encode() + my_chal).hexdigest()
                if rk.get('CHAP_N') != mutual[0] or rk.get('CHAP_R', '').lower() != '0x' + want:
                    return -2  # the target failed to prove itself
        ops = {'HeaderDigest': 'None', 'DataDigest': 'None', 'MaxRecvDataSegmentLength': '8192'}
        if not discovery:
            ops.update({'ImmediateData': 'Yes', 'InitialR2T': 'Yes', 'MaxBurstLength': '262144',
                        'FirstBurstLength': '65536'})
        ops.update(op_keys or {})
        status, flags, rk = self.login_pdu(1, 3, True, kv(ops))
        self.params = rk
        self.hd = rk.get('HeaderDigest') == 'CRC32C'
        self.dd = rk.get('DataDigest') == 'CRC32C'
        self.cmdsn += 0 if status else 0
        return status

    # -- full feature phase --------------------------------------------
    def next_itt(self):
        self.itt += 1
        return self.itt

    def scsi_bhs(self, cdb, edtl, read=False, write=False, data_len=0, lun=0, itt=None, immediate=False, final=True):
        itt = self.next_itt() if itt is None else itt
        flags = (0x80 if final else 0) | (0x40 if read else 0) | (0x20 if write else 0) | 1
        bhs = bytes([OP_SCSI_CMD | (0x40 if immediate else 0), flags, 0, 0, 0]) + data_len.to_bytes(3, 'big')
        bhs += struct.pack('>Q', lun << 48) + struct.pack('>IIII', itt, edtl, self.cmdsn, self.statsn + 1)
        bhs += cdb.ljust(16, b'\0')
        if not immediate:
            self.cmdsn += 1
        return bhs

    def command(self, cdb, edtl=0, read=False, write_data=None, lun=0):
        """Run a SCSI command; returns (status, data_in, sense)."""
        data = write_data or b''
        imm = data[:min(len(data), 8192)]
        itt = self.next_itt()
        self.send(self.scsi_bhs(cdb, edtl, read=read, write=bool(write_data), data_len=len(imm), lun=lun,
                                itt=itt), imm)
        got = b''
        while True:
            op, bhs, payload = self.recv()
            if op == OP_DATA_IN:
                got += payload
                if bhs[1] & 1:
                    return bhs[3], got, b''
            elif op == OP_R2T:
                ttt, off, length = struct.unpack('>I', bhs[20:24])[0], *struct.unpack('>II', bhs[40:48])
                for sn, o in enumerate(range(off, off + length, 8192)):
                    chunk = data[o:min(o + 8192, off + length)]
                    last = o + 8192 >= off + length
                    dbhs = bytes([OP_DATA_OUT, 0x80 if last else 0, 0, 0, 0]) + len(chunk).to_bytes(3, 'big')
                    dbhs += struct.pack('>Q', lun << 48) + struct.pack('>IIIIIII', itt, ttt, 0, self.statsn + 1,
                                                                     0, sn, o) + b'\0' * 4
                    self.send(dbhs, chunk)
            elif op == OP_SCSI_RSP:
                sense = payload[2:] if len(payload) > 2 else b''
                return bhs[3], got, sense
            elif op == OP_REJECT:
                raise RuntimeError('command rejected, reason %#x' % bhs[2])
            elif op == OP_NOP_IN:
                continue

    def nop(self, data=b''):
        itt = self.next_itt()
        bhs = bytes([OP_NOP_OUT | 0x40, 0x80, 0, 0, 0]) + len(data).to_bytes(3, 'big') + b'\0' * 8
        bhs += struct.pack('>IIII', itt, 0xFFFFFFFF, self.cmdsn, self.statsn + 1) + b'\0' * 16
        self.send(bhs, data)
        while True:
            op, rbhs, payload = self.recv()
            if op == OP_NOP_IN and struct.unpack('>I', rbhs[16:20])[0] == itt:
                return payload

    def tmf(self, function, lun=0, ref_itt=0xFFFFFFFF):
        """A task management request (immediate): its response code, once it came."""
        itt = self.next_itt()
        bhs = bytes([OP_TMF | 0x40, 0x80 | function, 0, 0, 0, 0, 0, 0]) + struct.pack('>Q', lun << 48)
        bhs += struct.pack('>IIII', itt, ref_itt, self.cmdsn, self.statsn + 1) + b'\0' * 16
        self.send(bhs)
        while True:
            op, rbhs, _ = self.recv()
            if op == OP_TMF_RSP and struct.unpack('>I', rbhs[16:20])[0] == itt:
                return rbhs[2]

    def logout(self):
        """Logout, closing the session (immediate): the response code, once it came."""
        bhs = bytes([OP_LOGOUT | 0x40, 0x80, 0, 0, 0, 0, 0, 0]) + b'\0' * 8
        bhs += struct.pack('>IHHII', self.next_itt(), 0, 0, self.cmdsn, self.statsn + 1) + b'\0' * 16
        self.send(bhs)
        while True:
            op, rbhs, _ = self.recv()
            if op == OP_LOGOUT_RSP:
                return rbhs[2]

    def send_targets(self):
        itt = self.next_itt()
        body = kv({'SendTargets': 'All'})
        bhs = bytes([OP_TEXT | 0x40, 0x80, 0, 0, 0]) + len(body).to_bytes(3, 'big') + b'\0' * 8
        bhs += struct.pack('>IIII', itt, 0xFFFFFFFF, self.cmdsn, self.statsn + 1) + b'\0' * 16
        self.send(bhs, body)
        op, rbhs, payload = self.recv()
        assert op == OP_TEXT_RSP
        return [i.decode() for i in payload.split(b'\0') if i]
