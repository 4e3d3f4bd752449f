#!/usr/bin/env python3
"""Write the seed corpus of every harness into corpus/<harness>/.
Re-run after changing an input layout: python3 tests/fuzz/gen_corpus.py"""
import base64
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def put(harness, name, data):
    d = os.path.join(HERE, 'corpus', harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), 'wb') as f:
        f.write(data)


def kv(pairs):
    return b''.join(f'{k}={v}'.encode() + b'\0' for k, v in pairs)


def bhs(op, flags, dlen=0, ahs_words=0, lun=0, itt=1, f20=0, f24=1, f28=1, f32=0, rest=b''):
    b = bytes([op, flags, 0, 0, ahs_words]) + dlen.to_bytes(3, 'big') + struct.pack('>Q', lun)
    b += struct.pack('>IIIII', itt, f20, f24, f28, f32)
    return b + rest.ljust(12, b'\0')


def login_bhs(flags, dlen, isid=b'\x80\x12\x34\x56\x78\x9a', tsih=0, cid=0, cmdsn=1, expstatsn=0):
    b = bytes([0x43, flags, 0, 0, 0]) + dlen.to_bytes(3, 'big') + isid + struct.pack('>H', tsih)
    b += struct.pack('>IHHII', 1, cid, 0, cmdsn, expstatsn)
    return b + b'\0' * 16


# -- pdu: [flags][max_dlen LE32][BHS][AHS] --------------------------------
def pdu(name, flags, max_dlen, b, ahs=b''):
    assert len(b) == 48
    put('pdu', name, bytes([flags]) + struct.pack('<I', max_dlen) + b + ahs)


login_keys = kv([('InitiatorName', 'iqn.2026-11.org.test:init'), ('SessionType', 'Normal'),
                 ('TargetName', 'iqn.2026-11.org.isert:default'), ('AuthMethod', 'None')])
pdu('login-security', 1, 8192, login_bhs(0x81, len(login_keys)))
pdu('login-operational', 1, 8192, login_bhs(0x87, 120))
pdu('login-too-long', 1, 8192, login_bhs(0x81, 9000))
read10 = bytes([0x28, 0, 0, 0, 0, 7, 0, 0, 1, 0]).ljust(16, b'\0')
pdu('scsi-read', 1, 262144, bhs(0x01, 0xC1, 0, 0, 0, 2, 512, 1, 1, 0, b'') [:32] + read10)
ext_cdb = bytes(range(0x10, 0x10 + 16))  # 16 more CDB bytes
ahs_ext = struct.pack('>HB', 1 + len(ext_cdb), 1) + b'\0' + ext_cdb
ahs_ext += b'\0' * (-len(ahs_ext) % 4)
ahs_bidi = struct.pack('>HBB', 5, 2, 0) + struct.pack('>I', 4096)
both = ahs_ext + ahs_bidi
cmd = bhs(0x01, 0xE1, 0, len(both) // 4, 0, 3, 512, 2, 1)[:32] + bytes([0x7f] + [0] * 15)
pdu('scsi-ahs-ext-bidi', 1, 262144, cmd, both)
cmd = bhs(0x01, 0xA1, 512, len(ahs_ext) // 4, 0, 4, 512, 3, 1)[:32] + bytes([0x7f] + [0] * 15)
pdu('scsi-ahs-ext-write', 1, 8192, cmd, ahs_ext)
pdu('scsi-ahs-lie', 0x81, 8192, cmd, ahs_ext)
pdu('nop-out', 1, 8192, bhs(0x40, 0x80, 0, 0, 0, 5, 0xffffffff, 4, 1))
pdu('data-out', 1, 8192, bhs(0x05, 0x80, 4096, 0, 0, 6, 0x10, 0, 1, 0, struct.pack('>III', 0, 0, 0)))
pdu('tmf-lu-reset', 1, 8192, bhs(0x42, 0x85, 0, 0, 0, 7, 0xffffffff, 5, 1))
pdu('logout', 1, 8192, bhs(0x46, 0x80, 0, 0, 0, 8, 0, 6, 1))
pdu('text-sendtargets', 1, 8192, bhs(0x44, 0x80, 16, 0, 0, 9, 0xffffffff, 7, 1))
pdu('snack', 1, 8192, bhs(0x10, 0x80, 0, 0, 0, 10, 0, 0, 1))
pdu('vendor-1c', 1, 8192, bhs(0x1c, 0x80))
pdu('login-rsp', 1, 8192, bytes([0x23, 0x87, 0, 0, 0, 0, 0, 64]) + b'\0' * 40)
pdu('data-in-status', 1, 8192, bhs(0x25, 0x81, 512, 0, 0, 2, 0xffffffff, 3, 2))
pdu('r2t', 1, 8192, bhs(0x31, 0x80, 0, 0, 0, 4, 0x10, 3, 2, 33, struct.pack('>III', 0, 0, 65536)))
pdu('reject', 1, 8192, bhs(0x3f, 0x80, 48, 0, 0, 0xffffffff, 0, 3, 2, 33, struct.pack('>B', 0)))
pdu('lun-flat', 1, 8192, bhs(0x01, 0x81, 0, 0, 0x4123 << 48, 2, 0))
pdu('lun-extended', 1, 8192, bhs(0x01, 0x81, 0, 0, 0xd2001234 << 32, 2, 0))


# -- text: [mode][target params 45][initiator params 45][segment] --------
def params(bits, mrdsl, burst, first, r2t=1, trdsl=8192, irdsl=8192, t2w=2, t2r=20, moup=0):
    vals = [mrdsl - 512, burst - 512, first - 512, r2t - 1, trdsl - 512, irdsl - 512, t2w, t2r, max(moup - 2, 0)]
    return bytes([bits]) + b''.join(struct.pack('<I', v) for v in vals) + b'\0' * (44 - 4 * len(vals))


def text(name, mode, tp, ip, seg):
    assert len(tp) == 45 and len(ip) == 45
    put('text', name, bytes([mode]) + tp + ip + seg)


T = params(0x4f, 262144, 1048576, 65536)
I = params(0x4f, 8192, 262144, 65536)
ops = kv([('HeaderDigest', 'CRC32C,None'), ('DataDigest', 'None'), ('MaxRecvDataSegmentLength', '8192'),
          ('ImmediateData', 'Yes'), ('InitialR2T', 'Yes'), ('MaxBurstLength', '262144'),
          ('FirstBurstLength', '65536'), ('MaxConnections', '1'), ('DefaultTime2Wait', '2'),
          ('DefaultTime2Retain', '0'), ('MaxOutstandingR2T', '1'), ('DataPDUInOrder', 'Yes'),
          ('DataSequenceInOrder', 'Yes'), ('ErrorRecoveryLevel', '0')])
text('linux-operational', 0, T, I, ops)
text('linux-operational-early-decl', 4, T, I, ops)
text('initiator-accepts', 8, T, I, kv([('HeaderDigest', 'None'), ('DataDigest', 'None'),
                                      ('MaxRecvDataSegmentLength', '262144'), ('MaxBurstLength', '65536'),
                                      ('FirstBurstLength', '4096'), ('ImmediateData', 'No'),
                                      ('InitialR2T', 'Yes'), ('ErrorRecoveryLevel', '0')]))
text('security', 0, T, I, login_keys + kv([('CHAP_A', '7,5'), ('X-com.example.key', 'v'),
                                           ('X#vendor', '1')]))
text('discovery', 1, T, I, kv([('InitiatorName', 'iqn.2026-11.org.test:init'), ('SessionType', 'Discovery'),
                               ('SendTargets', 'All'), ('MaxRecvDataSegmentLength', '32768'),
                               ('MaxBurstLength', '65536')]))
text('iser', 0, params(0x5f, 262144, 1048576, 65536, moup=64), params(0x7f, 8192, 262144, 65536, moup=32),
     kv([('RDMAExtensions', 'Yes'), ('TargetRecvDataSegmentLength', '8192'),
         ('InitiatorRecvDataSegmentLength', '262144'), ('MaxOutstandingUnexpectedPDUs', '0'),
         ('iSERHelloRequired', 'Yes'), ('HeaderDigest', 'CRC32C'), ('MaxRecvDataSegmentLength', '8192')]))
text('non-leading', 2, T, I, kv([('MaxRecvDataSegmentLength', '8192'), ('MaxBurstLength', '512')]))
text('markers-taskrep', 0, T, I, kv([('IFMarker', 'Yes'), ('OFMarkInt', '1~65535'),
                                     ('TaskReporting', 'RFC3720,ResponseFence'), ('ErrorRecoveryLevel', '2')]))
text('bad-values', 0, T, I, kv([('MaxBurstLength', '0x1000000'), ('FirstBurstLength', '999999999999'),
                                ('MaxRecvDataSegmentLength', 'Reject'), ('DataDigest', 'Irrelevant')]))
text('first-over-max', 0, params(0x0f, 8192, 4096, 16384), I,
     kv([('FirstBurstLength', '65536'), ('MaxBurstLength', '4096')]))
text('binary-values', 0, T, I, kv([('CHAP_C', '0x' + 'ab' * 64), ('CHAP_R', '0b' + 'QUJD' * 10)]))
text('duplicate', 0, T, I, kv([('MaxBurstLength', '8192'), ('MaxBurstLength', '4096')]))
text('no-trailing-nul', 0, T, I, b'HeaderDigest=None\0DataDigest=None')

# -- chap: [outlen LE16][4 algorithm bytes][string] ---------------------
def chap(name, outlen, algs, s):
    put('chap', name, struct.pack('<H', outlen) + bytes(algs) + s.encode())


chap('hex-16', 1024, [7, 5, 0, 0], '0x' + '0123456789abcdef' * 2)
chap('hex-odd', 1024, [5, 0, 0, 0], '0xABC')
chap('hex-short-out', 4, [6, 0, 0, 0], '0x' + 'ff' * 8)
chap('b64', 1024, [8, 7, 6, 5], '0b' + base64.b64encode(bytes(range(40))).decode())
chap('b64-nopad', 1024, [8, 0, 0, 0], '0b' + base64.b64encode(b'abcd').decode().rstrip('='))
chap('alg-list', 64, [7, 5, 6, 8], '5,6,7,8')
chap('alg-list-hex', 64, [7, 5, 0, 0], '0x7,99,abc,5')
chap('alg-unsupported', 64, [1, 2, 9, 0xff], '1,2,9')

# -- config: whole documents ----------------------------------------------
for f in sorted(os.listdir(os.path.join(ROOT, 'configs'))):
    if f.endswith('.json'):
        shutil.copy(os.path.join(ROOT, 'configs', f), os.path.join(HERE, 'corpus', 'config', f))
put('config', 'minimal.json', b'{"backstores":[{"name":"r","type":"ram","size":4096}],"targets":[]}')
put('config', 'bad-syntax.json', b'{"backstores":[{"name":"r",}]')
put('config', 'global.json', b'{"global":{"reactors":2,"poll_mode":"event","admin_socket":"/run/isertd.sock"},'
    b'"discovery":{"auth_required":false},"backstores":[],"targets":[]}')
