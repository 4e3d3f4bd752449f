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
put('config', 'nvme.json', b'{"backstores":[{"name":"n","type":"nvme","path":"/dev/ng0n1","thin":true,'
    b'"block_size":4096,"size":"1G"}],"targets":[]}')
put('config', 'bad-syntax.json', b'{"backstores":[{"name":"r",}]')
put('config', 'global.json', b'{"global":{"reactors":2,"poll_mode":"event","admin_socket":"/run/isertd.sock"},'
    b'"discovery":{"auth_required":false},"backstores":[],"targets":[]}')
put('config', 'redirect.json', b'{"backstores":[],"targets":[{"iqn":"iqn.2024-01.test:t","tpgs":['
    b'{"tag":1,"portals":[{"ip":"127.0.0.1"},{"ip":"::1","port":3261}],"redirect":"[fd00::2]:3260",'
    b'"redirect_type":"permanent"},{"tag":2,"portals":[{"ip":"10.0.0.1"},{"ip":"10.0.0.2"}],'
    b'"redirect_balance":["10.0.0.1","10.0.0.2:3260"]}]}]}')
put('config', 'isns.json', b'{"backstores":[],"targets":[],"global":{"isns":{"server":"[fd00::5]:3205",'
    b'"entity":"storage1","esi_interval":60,"esi_port":3206,"registration_period":900,"discovery_domain":"dd1"}}}')

# -- prstate: APTPL state files (docs/reservations.md) ----------------------
def prstate_doc(regs, res, version=1, aptpl='true'):
    r = ','.join('{"key":"%s","initiator":"%s","target_port":"iqn.2024-01.test:t,t,0x0001",'
                 '"relative_port":1,"all_target_ports":%s}' % (k, i, a) for k, i, a in regs)
    return ('{"format":"isert-pr","version":%d,"serial":"s1","naa":"6a000004bb4a9ec2f3a2f2d1e66d0b3c",'
            '"backstore":"r0","generation":7,"aptpl":%s,"registrations":[%s],"reservation":%s}'
            % (version, aptpl, r, res)).encode()


TWO = [('0x1', 'iqn.2024-01.test:a,i,0x400001370000', 'false'),
       ('0xffffffffffffffff', 'iqn.2024-01.test:b', 'true')]
put('prstate', 'two-we-ro.json', prstate_doc(TWO, '{"type":5,"holder":0}'))
put('prstate', 'all-registrants.json', prstate_doc(TWO, '{"type":8}'))
put('prstate', 'none.json', prstate_doc([], 'null'))
put('prstate', 'bad-holder.json', prstate_doc(TWO, '{"type":1,"holder":2}'))
put('prstate', 'bad-version.json', prstate_doc(TWO, 'null', version=2))
put('prstate', 'duplicate.json', prstate_doc([TWO[0], TWO[0]], 'null'))
put('prstate', 'truncated.json', prstate_doc(TWO, '{"type":5,"holder":0}')[:90])

# -- scsi: [setup 12][commands...] (layout at the top of fuzz_scsi.c) ------
LU_THIN, LU_4K, LU_RO_BACKSTORE, LU_WCE, LU_SERIAL_FROM_NAME = 1, 2, 4, 8, 16


def scsi_setup(lu=LU_THIN | LU_WCE, nexuses=2, ro=(), same_initiator=False, tlen=0, ilen=0, slen=16,
               vlen=0, nluns=4, seed=0, blocks=56, tpgt=1):
    nf = (nexuses - 1) | sum(4 << i for i in ro) | (0x40 if same_initiator else 0)
    return bytes([lu, nf, tlen, ilen, slen, vlen]) + struct.pack('<H', nluns) + \
        bytes([seed, blocks - 8]) + struct.pack('<H', tpgt)


def cdb(*b, n=16):
    return bytes(b).ljust(n, b'\0')


def be(v, n):
    return v.to_bytes(n, 'big')


def cmd(c, edtl=0, nx=0, rd=False, wr=False, dout=b'', cdb_len=16, no_lu=False, defer=False, views=False):
    """One command; EDTL class 6 carries the exact EDTL.  views: from a transport that sends from any memory."""
    who = nx | (4 if no_lu else 0) | (8 if defer else 0) | (0x20 if views else 0)
    f = (1 if rd else 0) | (2 if wr else 0) | (6 << 2) | ({16: 0, 6: 1, 10: 2, 12: 3}[cdb_len] << 5)
    return bytes([who, f]) + struct.pack('<I', edtl) + c.ljust(16, b'\0') + struct.pack('<H', len(dout)) + dout


def event(which, nx=0):
    """0 LU reset, 1 warm reset, 2 cold reset, 3 nexus loss, 4 clear task set, 5 capacity changed."""
    return bytes([0x10 | nx, 0, which])


def rd(c, edtl, nx=0, **kw):
    return cmd(c, edtl, nx, rd=True, **kw)


def wr(c, data, nx=0, **kw):
    return cmd(c, len(data), nx, wr=True, dout=data, **kw)


def scsi(name, setup, *cmds):
    put('scsi', 'seed-' + name, setup + b''.join(cmds))


def prout_list(rk=0, sark=0, flags=0, tids=b''):
    p = struct.pack('>QQ', rk, sark) + b'\0' * 4 + bytes([flags]) + b'\0' * 3
    return p + (struct.pack('>I', len(tids)) + tids if flags & 0x08 else b'')


def tid(name, isid=None):
    s = (name + (',i,0x' + isid if isid else '')).encode() + b'\0'
    s += b'\0' * (-len(s) % 4)
    s = s.ljust(20, b'\0')
    return bytes([0x45 if isid else 0x05, 0]) + struct.pack('>H', len(s)) + s


TUR = cdb(0x00)
inq = lambda evpd, page, alloc: cdb(0x12, evpd, page, *be(alloc, 2))
prout = lambda sa, scope_type, plen: cdb(0x5f, sa, scope_type, 0, 0, *be(plen, 4))
prin = lambda sa, alloc: cdb(0x5e, sa, 0, 0, 0, 0, 0, *be(alloc, 2))
rw10 = lambda op, lba, n, flags=0: cdb(op, flags, *be(lba, 4), 0, *be(n, 2))
rw16 = lambda op, lba, n, flags=0: cdb(op, flags, *be(lba, 8), *be(n, 4))

scsi('identity-at-maxima', scsi_setup(tlen=223, ilen=223, slen=64, vlen=0xff, nluns=16384, seed=7),
     *[rd(inq(1, p, 0xffff), 0xffff) for p in (0x00, 0x80, 0x83, 0x86, 0xb0, 0xb1, 0xb2)],
     rd(inq(1, 0x83, 300), 0xffff), rd(inq(1, 0x83, 0xffff), 3), rd(inq(0, 0, 0xffff), 96),
     rd(cdb(0xa0, 0, 0, 0, 0, 0, *be(0xffffffff, 4)), 140000), rd(cdb(0xa0, 0, 0, 0, 0, 0, *be(16, 4)), 16),
     rd(cdb(0xa0, 0, 0, 0, 0, 0, *be(4096, 4)), 4096, nx=1))
scsi('unmapped-lun', scsi_setup(nluns=300),
     rd(inq(0, 0, 96), 96, no_lu=True), rd(inq(1, 0x83, 255), 255, no_lu=True),
     rd(cdb(0x03, 0, 0, 0, 18), 18, no_lu=True), cmd(TUR, no_lu=True),
     rd(cdb(0xa0, 0, 0, 0, 0, 0, *be(4096, 4)), 4096, no_lu=True))
control = lambda d_sense, swp: bytes([0, 0, 0, 0, 0x0a, 0x0a, 4 if d_sense else 0, 0x10,
                                      8 if swp else 0, 0x40, 0, 0, 0xff, 0xff, 0, 0])
caching = lambda wce: bytes([0, 0, 0, 0, 0x08, 0x12, 4 if wce else 0]).ljust(24, b'\0')
scsi('mode-pages', scsi_setup(),
     rd(cdb(0x1a, 0, 0x3f, 0, 0xff), 0xff), rd(cdb(0x1a, 0x08, 0x7f, 0, 0xff), 0xff),
     rd(cdb(0x5a, 0x10, 0xbf, 0, 0, 0, 0, *be(0xffff, 2)), 0xffff), rd(cdb(0x1a, 0, 0xca, 0, 0xff), 0xff),
     wr(cdb(0x15, 0x10, 0, 0, 16), control(True, True)), wr(rw10(0x2a, 0, 1), b'w' * 512),
     rd(cdb(0x03, 1, 0, 0, 0xff), 0xff, nx=1), wr(cdb(0x15, 0x10, 0, 0, 16), control(False, False)),
     wr(cdb(0x55, 0x10, 0, 0, 0, 0, 0, 0, 28), bytes(8) + caching(False)[4:]),
     wr(cdb(0x0a, 0, 0, 3, 1), b'6' * 512), wr(rw10(0x2a, 4, 1), b'x' * 512),
     wr(cdb(0x42, 0, 0, 0, 0, 0, 0, 0, 24), struct.pack('>HH4xQI4x', 22, 16, 4, 2)))
scsi('rw-4k-thick', scsi_setup(lu=LU_4K | LU_WCE, blocks=32),
     wr(rw10(0x2a, 1, 2), bytes(range(256)) * 32), rd(rw10(0x28, 1, 2), 8192), rd(rw10(0x28, 1, 2), 5000),
     wr(cdb(0x0a, 0, 0, 5, 1), b'\x66' * 4096), rd(cdb(0x08, 0, 0, 5, 1), 4096),
     wr(rw16(0x8a, 30, 1, 0x08), b'f' * 4096), rd(rw16(0x88, 31, 1), 4096), rd(rw16(0x88, 32, 1), 4096),
     wr(rw10(0x2f, 1, 2, 0x02), bytes(range(256)) * 32), wr(rw10(0x2e, 9, 1), b'v' * 4096),
     wr(rw16(0x89, 9, 0) [:13] + b'\x01\0\0', b'v' * 4096 + b'c' * 4096),
     wr(rw16(0x93, 10, 4), b'p' * 4096), cmd(rw16(0x91, 0, 0)), cmd(rw10(0x34, 0, 4)),
     rd(cdb(0x25), 8), rd(cdb(0x9e, 0x10, *bytes(8), *be(32, 4)), 32),
     rd(cdb(0x9e, 0x12, *bytes(8), *be(0xffff, 4)), 0xffff))
scsi('thin-unmap', scsi_setup(lu=LU_THIN, blocks=128),
     wr(rw10(0x2a, 0, 16), b'\xff' * 8192),
     wr(cdb(0x42, 0, 0, 0, 0, 0, 0, 0, 40), struct.pack('>HH4xQI4xQI4x', 38, 32, 0, 8, 64, 8)),
     rd(cdb(0x9e, 0x12, *bytes(8), *be(0x400, 4)), 0x400), wr(rw16(0x93, 16, 8, 0x08), bytes(512)),
     cmd(rw16(0x93, 24, 8, 0x09)), rd(cdb(0x9e, 0x12, *be(24, 8), *be(24, 4)), 24),
     wr(cdb(0x42, 0, 0, 0, 0, 0, 0, 0, 24), struct.pack('>HH4xQI4x', 22, 16, 127, 2)))
tids = tid('iqn.2026-11.org.fuzz:i' + 'x' * 20, '00000023d001') + tid('iqn.2026-11.org.fuzz:other')
moved = tid('iqn.x:moved', '000000000001')
scsi('pr-three-nexuses', scsi_setup(nexuses=3, same_initiator=True, ilen=40),
     wr(prout(0, 0, 24), prout_list(0, 0xa)), wr(prout(0, 0, 28 + len(tids)), prout_list(0, 0xb, 0x08, tids), nx=2),
     wr(prout(6, 0, 24), prout_list(0, 0xc, 0x04), nx=1), wr(prout(1, 0x06, 24), prout_list(0xa)),
     rd(prin(0, 0xffff), 0xffff), rd(prin(1, 0xffff), 0xffff), rd(prin(2, 0xffff), 0xffff),
     rd(prin(3, 0xffff), 0xffff), rd(prin(3, 10), 10, nx=2), wr(rw10(0x2a, 7, 1), b'z' * 512, nx=2),
     wr(rw10(0x2a, 7, 1), b'd' * 512, nx=1, defer=True),
     wr(prout(5, 0x06, 24), prout_list(0xb, 0xc), nx=2), cmd(TUR, nx=1), cmd(TUR),
     wr(prout(7, 0, 24 + len(moved)), struct.pack('>QQ', 0xa, 0xd) + bytes([0, 0]) +
        struct.pack('>HI', 1, len(moved)) + moved),
     rd(prin(3, 0x2000), 0x2000), wr(prout(3, 0, 24), prout_list(0xb), nx=2), rd(prin(0, 0x2000), 0x2000))
scsi('spc2-reserve', scsi_setup(nexuses=2),
     cmd(cdb(0x16), cdb_len=6), cmd(TUR, nx=1), rd(rw10(0x28, 0, 1), 512, nx=1), cmd(cdb(0x17), nx=1),
     rd(prin(0, 64), 64), cmd(cdb(0x57), cdb_len=10), cmd(cdb(0x56, 0x02)), event(0, nx=1),
     rd(cdb(0x03, 0, 0, 0, 18), 18))
scsi('read-only-mapping', scsi_setup(nexuses=2, ro=(1,)),
     wr(cdb(0x15, 0x10, 0, 0, 16), control(False, True), nx=1), cmd(cdb(0x1b, 0, 0, 0, 0), nx=1),
     cmd(cdb(0x1e, 0, 0, 0, 1), nx=1), cmd(cdb(0x1e), nx=1), wr(prout(0, 0, 24), prout_list(0, 1), nx=1),
     cmd(cdb(0x16), nx=1), wr(rw10(0x2a, 0, 1), b'r' * 512, nx=1), rd(rw10(0x28, 0, 1), 512, nx=1),
     rd(cdb(0x1a, 0, 0x3f, 0, 0xff), 0xff, nx=1), wr(rw10(0x2a, 0, 1), b'w' * 512),
     wr(cdb(0x15, 0x10, 0, 0, 16), control(False, True)), cmd(TUR, nx=1),
     wr(cdb(0x15, 0x10, 0, 0, 16), control(False, False)))
scsi('read-only-backstore', scsi_setup(lu=LU_RO_BACKSTORE | LU_SERIAL_FROM_NAME, nexuses=1),
     wr(rw10(0x2a, 0, 1), b'r' * 512), cmd(cdb(0x1b, 0, 0, 0, 0)), rd(rw10(0x28, 0, 1), 512),
     wr(cdb(0x15, 0x10, 0, 0, 16), control(False, False)), rd(inq(1, 0x80, 64), 64))
scsi('start-stop-events', scsi_setup(nexuses=2),
     cmd(cdb(0x1b, 0, 0, 0, 0)), cmd(TUR, nx=1), cmd(cdb(0x1b, 0, 0, 0, 1)), cmd(cdb(0x1e, 0, 0, 0, 1), nx=1),
     cmd(cdb(0x1b, 0, 0, 0, 2)), cmd(cdb(0x1e), nx=1), cmd(cdb(0x1b, 0, 0, 0, 2)), cmd(TUR),
     cmd(cdb(0x1b, 0, 0, 0, 3)), event(5), event(1, nx=1), event(2), event(4, nx=1), event(3, nx=1),
     rd(cdb(0x03, 0, 0, 0, 0xff), 0xff), rd(cdb(0x03, 1, 0, 0, 0xff), 0xff, nx=1), cmd(TUR))
atomic16 = lambda lba, n, flags=0, boundary=0: cdb(0x9c, flags, *be(lba, 8), *be(boundary, 2), *be(n, 2))
scsi('orwrite-atomic-defect', scsi_setup(nexuses=2, ro=(1,), blocks=64),
     wr(rw10(0x2a, 3, 2), b'\x0f' * 1024), wr(rw16(0x8b, 3, 2), b'\xf0' * 1024), rd(rw10(0x28, 3, 2), 1024),
     wr(rw16(0x8b, 3, 2), b'\x01' * 512), wr(rw16(0x8b, 63, 2), b'o' * 1024), wr(rw16(0x8b, 5, 1, 0x20), b'p' * 512),
     wr(rw16(0x89, 3, 0)[:13] + b'\x01\0\0', b'\xff' * 512 + b'c' * 512, defer=True),
     wr(rw16(0x8b, 3, 1), b'\x02' * 512), wr(atomic16(8, 4), b'a' * 2048), rd(rw10(0x28, 8, 4), 2048),
     wr(atomic16(8, 4, 0, 1), b'b' * 2048), wr(atomic16(8, 4), b'b' * 1024), wr(atomic16(62, 4), b'e' * 2048),
     wr(atomic16(8, 1), b'r' * 512, nx=1), wr(rw16(0x8b, 8, 1), b'r' * 512, nx=1),
     rd(cdb(0x37, 0, 0x1d, 0, 0, 0, 0, *be(32, 2)), 32), rd(cdb(0x37, 0, 0x11, 0, 0, 0, 0, *be(2, 2)), 2),
     rd(cdb(0xb7, 0x0b, 0, 0, 0, 0, *be(64, 4)), 64), rd(cdb(0xb7, 0x07, 0, 0, 0, 0, *be(64, 4)), 64),
     rd(cdb(0x9e, 0x10, *bytes(8), *be(32, 4)), 32), rd(inq(1, 0xb0, 64), 64))
# READs of 16 KiB and more as views of the store (TCP), one held while a WRITE ATOMIC runs whole, then views
# ended by it: the read copies.
scsi('read-views', scsi_setup(lu=LU_WCE, nexuses=1, blocks=128),
     cmd(TUR), wr(rw10(0x2a, 0, 64), bytes(range(256)) * 128), rd(rw10(0x28, 0, 64), 32768, views=True),
     rd(rw10(0x28, 0, 8), 4096, views=True), rd(rw10(0x28, 0, 64), 32768, views=True, defer=True),
     wr(atomic16(0, 1), b'\x77' * 512, views=True), rd(rw10(0x28, 0, 64), 32768, views=True))


def fuzz_naa(slen=16, seed=0):
    """The NAA designator (VPD 83h) of the harness's LU: make_name() serial, then lu.c's FNV-1a."""
    abc = b'abcdefghijklmnopqrstuvwxyz0123456789.-:'
    serial = bytes(abc[(seed + i * 7) % len(abc)] for i in range(max(slen, 1)))

    def fnv(h):
        for ch in serial:
            h = ((h ^ ch) * 0x100000001b3) & (1 << 64) - 1
        return h
    hi, lo = fnv(0xcbf29ce484222325), fnv(0x84222325cbf29ce4)
    return bytes([0x6a, 0, 0, (hi >> 32) & 0x0f]) + be(hi & 0xffffffff, 4) + be(lo, 8)


def xc_tgt(naa, block=512):
    return bytes([0xe4, 0, 0, 0, 0x01, 0x03, 0, 16]) + naa + bytes(5) + be(block, 3)


def xc_seg(src, dst, n, slba, dlba, typ=0x02):
    return bytes([typ, 0]) + struct.pack('>HHHHHQQ', 0x18, src, dst, 0, n, slba, dlba)


def xc_list(tgts, segs, list_id=0, usage=3):
    t, s = b''.join(tgts), b''.join(segs)
    return bytes([list_id, usage << 3]) + struct.pack('>HIII', len(t), 0, len(s), 0) + t + s


xcopy = lambda plen: cdb(0x83, 0, *bytes(8), *be(plen, 4))
rcr = lambda sa, list_id, alloc: cdb(0x84, sa, list_id, *bytes(7), *be(alloc, 4))
NAA0 = fuzz_naa()
xc_within = xc_list([xc_tgt(NAA0)], [xc_seg(0, 0, 8, 0, 20), xc_seg(0, 0, 30, 0, 10)], list_id=3, usage=0)
xc_refused = [xc_list([xc_tgt(NAA0)], [xc_seg(0, 0, 8, 50, 0)]),          # past the end
              xc_list([xc_tgt(NAA0)], [xc_seg(0, 1, 8, 0, 0)]),           # no such descriptor
              xc_list([xc_tgt(NAA0, 4096)], [xc_seg(0, 0, 8, 0, 16)]),    # another block length
              xc_list([xc_tgt(NAA0)], [xc_seg(0, 0, 8, 0, 16, typ=0x0a)]),
              xc_list([xc_tgt(bytes(16))], [xc_seg(0, 0, 8, 0, 16)]),
              xc_list([xc_tgt(NAA0)] * 9, [xc_seg(0, 0, 8, 0, 16)])]
scsi('xcopy', scsi_setup(nexuses=2, ro=(1,)),
     wr(rw10(0x2a, 0, 40), bytes(range(256)) * 80), rd(inq(1, 0x8f, 0xffff), 0xffff), rd(rcr(3, 0, 256), 256),
     wr(xcopy(len(xc_within)), xc_within), rd(rcr(0, 3, 64), 64), rd(rw10(0x28, 10, 30), 30 * 512),
     wr(xcopy(len(xc_within)), xc_within, nx=1), *[wr(xcopy(len(x)), x) for x in xc_refused],
     wr(xcopy(len(xc_within)), xc_within[:-1]), cmd(xcopy(0)), event(3))
scsi('xcopy-wce-off', scsi_setup(lu=LU_THIN, nexuses=1),
     wr(xcopy(len(xc_within)), xc_within), wr(xcopy(len(xc_within)), xc_within, defer=True), cmd(TUR),
     rd(rcr(0, 3, 64), 64), event(0), wr(xcopy(len(xc_within)), xc_within))
# Token-based copy (rod.c): tokens made, read back, used (the harness puts the last token read into a
# WRITE USING TOKEN whose token field starts FF 'R' 'P' 'L'), altered, cancelled by a write, refused.
pt_cdb = lambda lid, plen: cdb(0x83, 0x10, 0, 0, 0, 0, *be(lid, 4), *be(plen, 4))
wut_cdb = lambda lid, plen: cdb(0x83, 0x11, 0, 0, 0, 0, *be(lid, 4), *be(plen, 4))
rrti = lambda lid, alloc: cdb(0x84, 0x07, *be(lid, 4), 0, 0, 0, 0, *be(alloc, 4))


def rod_ranges(rs):
    return b''.join(struct.pack('>QII', lba, n, 0) for lba, n in rs)


def pt_list(rs, timeout=0, rod_type=None):
    r = rod_ranges(rs)
    return struct.pack('>HBBIIHH', 14 + len(r), 2 if rod_type is not None else 0, 0, timeout, rod_type or 0, 0,
                       len(r)) + r


def wut_list(tok, rs, offset=0, flags=0):
    r = rod_ranges(rs)
    return struct.pack('>HBB4xQ', 534 + len(r), flags, 0, offset) + tok + bytes(6) + struct.pack('>H', len(r)) + r


REPLAY = b'\xffRPL'.ljust(512, b'\0')
ALTERED = (b'\xffRPL' + bytes([250])).ljust(512, b'\0')   # token byte 500 (the secret) flipped
ZERO_TOKEN = struct.pack('>I2xH', 0xffff0001, 0x1f8).ljust(512, b'\0')
# A token as this target makes them (type, length, the LU's NAA, its size) with an id and secret it never made.
LOOKALIKE = (struct.pack('>I2xHQ', 0x10000, 0x1f8, 7) + bytes([0xe4, 0, 0, 0, 1, 3, 0, 16]) + NAA0 +
             bytes(5) + be(512, 3) + bytes(8) + be(8 * 512, 8)).ljust(512, b'\x5a')
pt1 = pt_list([(0, 8), (16, 8)])
scsi('odx', scsi_setup(nexuses=2, ro=(1,), blocks=64),
     wr(rw10(0x2a, 0, 40), bytes(range(256)) * 80), rd(inq(1, 0x8f, 0xffff), 0xffff),
     wr(pt_cdb(257, len(pt1)), pt1), rd(rrti(257, 1024), 1024),
     wr(wut_cdb(258, 536 + 16), wut_list(REPLAY, [(32, 16)])), rd(rrti(258, 1024), 1024), rd(rw10(0x28, 32, 16), 8192),
     wr(wut_cdb(259, 536 + 16), wut_list(REPLAY, [(40, 8)], offset=4)), rd(rrti(259, 64), 64),
     wr(wut_cdb(260, 536 + 16), wut_list(ALTERED, [(40, 8)])),
     wr(wut_cdb(260, 536 + 16), wut_list(LOOKALIKE, [(40, 8)])),
     wr(wut_cdb(261, 536 + 16), wut_list(ZERO_TOKEN, [(48, 8)])), rd(rw10(0x28, 48, 8), 4096),
     wr(wut_cdb(262, 536 + 16), wut_list(REPLAY, [(40, 8)]), nx=1),
     wr(rw10(0x2a, 4, 1), b'w' * 512, nx=0), wr(wut_cdb(263, 536 + 16), wut_list(REPLAY, [(40, 8)])),
     wr(pt_cdb(264, len(pt1)), pt1, nx=1), rd(rrti(264, 1024), 1024, nx=1),
     wr(wut_cdb(265, 536 + 16), wut_list(REPLAY, [(40, 8)], flags=2)),
     wr(wut_cdb(265, 536 + 16), wut_list(REPLAY, [(40, 8)])), event(0), wr(wut_cdb(265, 536 + 16),
                                                                          wut_list(REPLAY, [(40, 8)])))
scsi('odx-refused', scsi_setup(lu=LU_THIN, nexuses=1, blocks=32),
     wr(pt_cdb(1, 32), pt_list([(20, 8)], timeout=601)), wr(pt_cdb(1, 32), pt_list([(30, 8)])),
     wr(pt_cdb(1, 48), pt_list([(0, 8), (4, 8)])), wr(pt_cdb(1, 32), pt_list([(0, 8)], rod_type=0x800002)),
     wr(pt_cdb(1, 32), pt_list([(0, 8)], rod_type=0x800000)), rd(rrti(1, 1024), 1024),
     wr(pt_cdb(2, 32), pt_list([(0, 8)])[:31]), cmd(pt_cdb(2, 8)), wr(pt_cdb(3, 32), pt_list([(0, 8)]), defer=True),
     wr(wut_cdb(3, 536 + 16), wut_list(REPLAY, [(8, 8)])), rd(rrti(3, 1024), 1024),
     wr(wut_cdb(4, 536 + 16), wut_list(REPLAY, [(8, 8)], offset=9)),
     wr(wut_cdb(4, 536 + 16), wut_list(REPLAY, [(4, 8)])), rd(rrti(77, 64), 64), event(3))
scsi('rsoc', scsi_setup(lu=LU_WCE),
     rd(cdb(0xa3, 0x0c, 0x80, 0, 0, 0, *be(0xffff, 4)), 0xffff), rd(cdb(0xa3, 0x0c, 0, 0, 0, 0, *be(64, 4)), 64),
     rd(cdb(0xa3, 0x0c, 0x81, 0x12, 0, 0, *be(512, 4)), 512), rd(cdb(0xa3, 0x0c, 0x02, 0x9e, 0, 0x10, *be(512, 4)), 512),
     rd(cdb(0xa3, 0x0c, 0x03, 0x42, 0, 0, *be(512, 4)), 512), rd(cdb(0xa3, 0x0c, 0x01, 0x5f, 0, 0, *be(512, 4)), 512))

# SANITIZE: every service action, IMMED and AUSE, the OVERWRITE list's fields, reserved CDB bytes, ZNR,
# a WRITE deferred across one, failure-mode exits, RSOC and VPD B1.
san = lambda byte1, plen=0: cdb(0x48, byte1, 0, 0, 0, 0, 0, *be(plen, 2), n=10)
ow_list = lambda byte0, pat: bytes([byte0, 0]) + be(len(pat), 2) + pat
scsi('sanitize', scsi_setup(lu=LU_THIN, nexuses=2, ro=(1,)),
     rd(cdb(0xa3, 0x0c, 0x02, 0x48, 0, 0x02, *be(64, 4)), 64), rd(cdb(0xa3, 0x0c, 0x02, 0x48, 0, 0x03, *be(64, 4)), 64),
     rd(inq(1, 0xb1, 64), 64),
     wr(san(0x01, 9), ow_list(0x01, b'abcde')), rd(rw10(0x28, 0, 2), 1024),
     wr(san(0x81 | 0x20, 516), ow_list(0x80 | 3, bytes(range(256)) * 2)), cmd(cdb(0x03, 0, 0, 0, 252), 252, rd=True),
     wr(san(0x01, 8), ow_list(0x00, b'abcd')), wr(san(0x01, 8), ow_list(0x21, b'abcd')),
     wr(san(0x01, 8), bytes([1, 0, 0, 5]) + b'abcd'), wr(san(0x01, 4), b'\x01\0\0\0'),
     wr(san(0x01, 517), ow_list(1, bytes(513))), wr(san(0x01, 9), ow_list(1, b'abcde'), nx=1),
     cmd(san(0x02)), cmd(san(0x42)), cmd(san(0x03)), cmd(san(0x1f)), cmd(san(0x3f)), cmd(san(0x04)),
     cmd(cdb(0x48, 0x02, 0, 0, 7, 0, 0, 0, 0, n=10)), wr(san(0x02, 8), bytes(8)),
     wr(rw10(0x2a, 4, 1), bytes(512), defer=True), cmd(san(0x82)), cmd(TUR), event(0), cmd(san(0x1f)))


# -- initiator: [header 8][events...] (tests/fuzz/fuzz_initiator.c) --------
# Header: flags (1 immediate data, 2 InitialR2T, 4 discovery, 8 reconnect,
# 0x10 CHAP, 0x20 mutual, 0x40 digests, 0x80 connect refused), lengths
# (MaxRecvDataSegmentLength 512/8192/64K/256K, MaxBurstLength 512/64K/1M/8M,
# FirstBurstLength), CHAP_A choice, 5 reserved.
(E_LOGIN, E_SCSI_RSP, E_DATA_IN, E_R2T, E_NOP_IN, E_REJECT, E_ASYNC, E_TEXT_RSP, E_TMF_RSP, E_LOGOUT_RSP,
 E_RAW, E_CLOSE, E_STALL, E_SERVICE, E_SUBMIT, E_ABORT, E_LU_RESET, E_NOP, E_LOGOUT, E_SYNC,
 E_RECONNECT) = range(21)
u16 = lambda v: struct.pack('<H', v)
u32 = lambda v: struct.pack('<I', v)


def ini_header(flags=0x01, dsl=1, burst=2, first=1, alg=2):
    return bytes([flags, dsl | burst << 2 | first << 4, alg]) + bytes(5)


def ev_login(text, f=0x01, tsih=1, status=None):
    """f: 1 transit, 2-4 NSG (0: full feature, 2: operational, 4: security), 8 continue."""
    b = bytes([E_LOGIN, f | (0x10 if status else 0)]) + u16(tsih)
    if status:
        b += bytes(status)
    return b + u16(len(text)) + text


def ev_scsi_rsp(status=0, sense=b'', resid=0, flags=0, pick=0):
    f = (1 if status else 0) | (0x40 if sense else 0) | flags
    b = bytes([E_SCSI_RSP, pick, f]) + (bytes([status]) if status else b'') + u32(resid) + bytes([0])
    return b + (u16(len(sense)) + sense if sense else u16(0))


def ev_data_in(data, status=True, pick=0, blocks=None):
    """Data-In from the command's next offset, n bytes as 512-byte units (f & 2 clear)."""
    f = 0x04 | (0x08 if status else 0)
    units = (len(data) + 511) // 512
    return bytes([E_DATA_IN, pick, f, units - 1]) + u32(0) + data.ljust(units * 512, b'\0')[:units * 512] + b'\0'


def ev_data_in_exact(data, status=True, pick=0, underflow=False):
    f = 0x02 | 0x04 | (0x08 if status else 0) | (0x10 if underflow else 0)
    return bytes([E_DATA_IN, pick, f]) + u16(len(data)) + u32(0) + data + b'\0'


def ev_r2t(off, length, flags=0, pick=0, ttt=0x10, sn=None):
    f = flags | (0x08 if sn is not None else 0)
    b = bytes([E_R2T, pick, f]) + u32(off) + u32(length) + u32(ttt)
    return b + (u32(sn) if sn is not None else b'')


def ev_nop_in(data=b'', ttt=0x99, answer=False, big=False):
    f = (0x01 if answer else 0) | (0x04 if ttt is None else 0) | (0x80 if big else 0)
    b = bytes([E_NOP_IN, f]) + (u32(ttt) if ttt is not None else b'')
    if big:
        return b + u16(len(data) // 8) + data
    return b + u16(len(data)) + data


def ev_text_rsp(text, final=True):
    return bytes([E_TEXT_RSP, 0x01 if final else 0x00]) + (u32(0x77) if not final else b'') + u16(len(text)) + text


def ev_submit(kind, arg=8, extra=None):
    """kind: 0 READ16, 1 WRITE16, 2 REPORT LUNS, 3 INQUIRY, 4 READ CAPACITY, 5 TUR, 6 SYNC CACHE."""
    b = bytes([E_SUBMIT, kind, arg])
    return b + (bytes([extra]) if extra is not None else b'')


OK_KEYS = kv([('HeaderDigest', 'None'), ('DataDigest', 'None'), ('MaxRecvDataSegmentLength', '8192'),
              ('MaxBurstLength', '262144'), ('FirstBurstLength', '65536'), ('InitialR2T', 'Yes'),
              ('ImmediateData', 'No'), ('MaxOutstandingR2T', '1'), ('ErrorRecoveryLevel', '0'),
              ('DefaultTime2Wait', '2'), ('DefaultTime2Retain', '0'), ('TargetAlias', 'fuzz')])
LOGIN = ev_login(OK_KEYS)
GO = bytes([E_SERVICE])


def ini(name, *parts, header=None):
    put('initiator', name, (header or ini_header()) + b''.join(parts))


def luns_answer(claimed, sent):
    return struct.pack('>II', 8 * claimed, 0) + b''.join(struct.pack('>Q', i << 48) for i in range(sent))


inquiry = bytes([0, 0, 5, 2, 31, 0, 0, 0]) + b'FAKE    HOSTILE         0001'
readcap = struct.pack('>QI', 2047, 512) + bytes(20)
sense = u16(18)[::-1] + bytes([0x70, 0, 6, 0, 0, 0, 0, 10, 0, 0, 0, 0, 0x29, 0, 0, 0, 0, 0])
ini('login-tur', GO, LOGIN, ev_submit(5, 0, 0), ev_scsi_rsp())
ini('login-refused', GO, ev_login(b'', status=(2, 1)))
ini('read-data-in', GO, LOGIN, ev_submit(0, 7), ev_data_in(bytes(range(256)) * 16))
ini('check-condition-sense', GO, LOGIN, ev_submit(5, 0, 0), ev_scsi_rsp(status=2, sense=sense))
ini('write-r2t', GO, LOGIN, ev_submit(1, 15), ev_r2t(0, 8192), GO, ev_scsi_rsp())
ini('write-r2t-beyond', GO, LOGIN, ev_submit(1, 15), bytes([E_STALL]), ev_r2t(0, 4096), ev_r2t(4096, 4096))
ini('write-r2t-out-of-range', GO, LOGIN, ev_submit(1, 0), ev_r2t(0, 1024, flags=0x02))
ini('write-r2t-bad-sn', GO, LOGIN, ev_submit(1, 3), ev_r2t(0, 2048, sn=5))
ini('write-unsolicited', GO, ev_login(kv([('InitialR2T', 'No'), ('ImmediateData', 'Yes'),
                                          ('MaxRecvDataSegmentLength', '512'), ('FirstBurstLength', '65536')])),
    ev_submit(1, 127), GO, ev_r2t(65536 - 512, 512), GO, ev_scsi_rsp(),
    header=ini_header(flags=0x01, burst=3, first=2))
ini('ping-echo', GO, LOGIN, ev_nop_in(bytes(range(200)) * 20), GO, bytes([E_NOP]), ev_nop_in(answer=True, ttt=None))
ini('ping-flood-stalled', GO, LOGIN, bytes([E_STALL]), *[ev_nop_in(bytes(8000), big=True) for _ in range(10)])
ini('ping-over-mrdsl', GO, LOGIN, ev_nop_in(bytes(8192 + 8), big=True))
# During a synchronous call the answers come one per loop turn: GO (no-op) gives the call a turn to go on.
ini('report-luns-cut', GO, LOGIN, bytes([E_SYNC, 80]), ev_data_in_exact(luns_answer(3000, 4), underflow=True),
    GO, GO, ev_data_in_exact(luns_answer(3000, 4), pick=0))
ini('report-luns-async', GO, LOGIN, ev_submit(2, 0, 31), ev_data_in_exact(luns_answer(2, 2)))
ini('inquiry-readcap-sync', GO, LOGIN, bytes([E_SYNC, 2]), ev_data_in_exact(inquiry), GO,
    bytes([E_SYNC, 3]), ev_data_in_exact(readcap, pick=0), GO)
ini('discovery', GO, ev_login(kv([('MaxRecvDataSegmentLength', '8192')])), bytes([E_SYNC, 4]),
    ev_text_rsp(kv([('TargetName', 'iqn.2026-11.org.isert:a'), ('TargetAddress', '127.0.0.1:3260,1'),
                    ('TargetAddress', '[::1]:3261,2'), ('TargetName', 'iqn.2026-11.org.isert:b')]), final=False),
    ev_text_rsp(b''), header=ini_header(flags=0x05))
ini('chap-mutual', GO, ev_login(kv([('AuthMethod', 'CHAP')]), f=0x00),
    ev_login(kv([('CHAP_A', '5'), ('CHAP_I', '7'), ('CHAP_C', '0x' + '0123456789abcdef' * 2)]), f=0x00),
    ev_login(kv([('CHAP_N', 'target'), ('CHAP_R', '0x' + '00' * 16)]), f=0x03),
    header=ini_header(flags=0x31, alg=0))
ini('reject-async-tmf', GO, LOGIN, ev_submit(0, 0), bytes([E_REJECT, 0, 4]), bytes([E_LU_RESET, 0]),
    bytes([E_TMF_RSP, 0]), bytes([E_ASYNC, 0, 1]) + u16(0), bytes([E_ASYNC, 0, 4]) + u16(0))
ini('abort-logout', GO, LOGIN, ev_submit(0, 0), bytes([E_ABORT, 1]), bytes([E_TMF_RSP, 0]), bytes([E_LOGOUT]),
    bytes([E_LOGOUT_RSP, 0]))
ini('reconnect', GO, LOGIN, ev_submit(1, 3), bytes([E_CLOSE]), GO, bytes([E_RECONNECT, 0]), GO, LOGIN,
    ev_r2t(0, 2048), GO, ev_scsi_rsp(), header=ini_header(flags=0x09))
ini('data-in-outside', GO, LOGIN, ev_submit(0, 0), bytes([E_DATA_IN, 0, 0x03]) + u32(400) + u16(127) + u32(0) +
    bytes(127) + b'\0')
# The harness is built with a 32 KiB send queue and 64 KiB of answers: 64 KiB of Data-Out waits for room.
ini('write-paced', GO, LOGIN, ev_submit(1, 127), ev_r2t(0, 65536), GO, GO, ev_scsi_rsp())
ini('write-paced-early-status', GO, LOGIN, bytes([E_STALL]), ev_submit(1, 127), ev_r2t(0, 65536),
    ev_scsi_rsp(status=2, sense=sense), bytes([E_STALL]), GO)


# -- isns: [mode][...] (tests/fuzz/fuzz_isns.c) ------------------------------
def isns_attr(tag, val):
    val += b'\0' * (-len(val) % 4)
    return struct.pack('>II', tag, len(val)) + val


def isns_pdu(func, xid, payload, flags=0x4000 | 0x0400 | 0x0800, seq=0, version=1):
    return struct.pack('>HHHHHH', version, func, len(payload), flags, xid, seq) + payload


def isns_str(s):
    return s.encode() + b'\0'


V4 = b'\0' * 10 + b'\xff\xff' + bytes([127, 0, 0, 1])
reg_rsp = isns_pdu(0x8001, 1, struct.pack('>I', 0) + isns_attr(1, isns_str('fuzz-entity')) + isns_attr(0, b'') +
                   isns_attr(1, isns_str('fuzz-entity')) + isns_attr(6, struct.pack('>I', 900)) +
                   isns_attr(32, isns_str('iqn.2026-11.org.isert:fuzz1')) + isns_attr(33, struct.pack('>I', 1)) +
                   isns_attr(16, V4) + isns_attr(17, struct.pack('>I', 3260)))
esi_req = isns_pdu(0x000d, 9, isns_attr(4, bytes(8)) + isns_attr(1, isns_str('fuzz-entity')) + isns_attr(16, V4) +
                   isns_attr(17, struct.pack('>I', 3260)), flags=0x8000 | 0x0400 | 0x0800)
put('isns', 'stream-reg-esi', bytes([1, 63]) + reg_rsp + esi_req)
put('isns', 'stream-bytewise', bytes([1, 0]) + reg_rsp)
half = len(reg_rsp) // 2 // 4 * 4
two = (isns_pdu(0x8001, 2, reg_rsp[12:12 + half], flags=0x4000 | 0x0400) +
       isns_pdu(0x8001, 2, reg_rsp[12 + half:], flags=0x4000 | 0x0800, seq=1))
put('isns', 'stream-two-pdus', bytes([1, 17]) + two)
put('isns', 'stream-bad-version', bytes([1, 5]) + isns_pdu(0x8001, 1, bytes(4), version=2))
put('isns', 'stream-auth-block', bytes([1, 5]) + isns_pdu(0x8001, 1, bytes(4), flags=0x6c00))
put('isns', 'stream-attr-too-long', bytes([1, 9]) + isns_pdu(0x8002, 1, bytes(4) + struct.pack('>II', 32, 65532)))
put('isns', 'stream-no-first', bytes([1, 9]) + isns_pdu(0x8001, 1, bytes(4), flags=0x4800, seq=3))

# Engine sessions: [0][variant] then events (op, operands); tags and values index fuzz_isns.c's tables.
T_DELIM, T_EID, T_PERIOD, T_NAME, T_PGNAME, T_PGIP, T_PGPORT, T_PGT, T_DDID, T_DDNAME = range(10)
V_EID, V_NAME0, V_NAME1, V_DD, V_NIL, V_IP1, V_IP2 = range(7)
V_3260, V_ONE = 7, 20  # 3260 + (v >> 6) with v % 12 == 7; v >> 4 == 1 with v % 12 == 8


def ev_answer(status=0, *attrs):
    return bytes([2, status, len(attrs)]) + b''.join(bytes([t, v]) for t, v in attrs)


TICK_NEXT = bytes([0, 255])
check_ok = ev_answer(0, (T_DELIM, 0), (T_EID, V_EID), (T_NAME, V_NAME0), (T_PGNAME, V_NAME0), (T_PGIP, V_IP1),
                     (T_PGPORT, V_3260), (T_PGT, V_ONE))
put('isns', 'engine-register-check', bytes([0, 0x00]) + ev_answer(0, (T_DELIM, 0), (T_PERIOD, V_ONE)) + TICK_NEXT +
    check_ok + TICK_NEXT + ev_answer(0, (T_DELIM, 0)) + TICK_NEXT + bytes([6]) + ev_answer(0))
put('isns', 'engine-lost-restart', bytes([0, 0x08]) + ev_answer(0) + bytes([3, 0, 30, 0, 30]) + ev_answer(0) +
    TICK_NEXT + check_ok + bytes([4, 0x00]) + ev_answer(0) + ev_answer(0))
put('isns', 'engine-dd', bytes([0, 0x0a]) + ev_answer(0) +
    ev_answer(0, (T_DELIM, 0), (T_DDID, V_ONE), (T_DDNAME, V_DD)) + ev_answer(0) + bytes([4, 0x02]) +
    ev_answer(0) + ev_answer(0) + bytes([4, 0x00]) + ev_answer(0))
put('isns', 'engine-dd-create', bytes([0, 0x02]) + ev_answer(0) + ev_answer(0) +
    ev_answer(0, (T_DELIM, 0), (T_DDID, V_ONE)) + TICK_NEXT + ev_answer(203))
put('isns', 'engine-esi-refused', bytes([0, 0x05]) + ev_answer(221) + ev_answer(0) + bytes([5, 1, 5, 0]) +
    TICK_NEXT + ev_answer(209))
put('isns', 'engine-slow-connect', bytes([0, 0x40]) + bytes([0, 60, 7, 1, 0, 20, 7, 0]) + ev_answer(0) +
    bytes([1, 16]) + bytes(16) + bytes([6]) + ev_answer(0))
put('isns', 'engine-server-moves', bytes([0, 0x18]) + ev_answer(0) + bytes([4, 0x98]) + ev_answer(0) +
    bytes([0, 10]) + ev_answer(0) + bytes([4, 0x20]) + ev_answer(0))

# ESI port peers: 8 P connect (P odd: from the server's address), 9 K N bytes, 10 K E an ESI (E odd: ours),
# 11 K B read B*16+1 bytes of the answer (255: close).
ESI_OTHER, ESI_SERVER = bytes([8, 0]), bytes([8, 1])
put('isns', 'esi-squatters', bytes([0, 0x01]) + ev_answer(0) + ESI_OTHER + bytes([8, 2, 8, 4]) + ESI_OTHER +
    bytes([0, 20]) + ESI_SERVER + bytes([10, 0, 1, 11, 0, 10]) + bytes([8, 2]) + ESI_SERVER * 3 + bytes([8, 4]) +
    ESI_SERVER + bytes([9, 2, 12]) + b'\x00\x07not iSNS!!' + bytes([0, 100, 8, 3, 10, 0, 0, 11, 0, 10]))
put('isns', 'esi-server-moves', bytes([0, 0x01]) + ev_answer(0) + ESI_SERVER * 4 + bytes([4, 0x81]) + ESI_OTHER +
    ESI_SERVER + bytes([10, 1, 1, 11, 1, 0, 11, 1, 10, 11, 1, 255]))
put('isns', 'esi-pieces', bytes([0, 0x01]) + ev_answer(0) + ESI_OTHER + bytes([9, 0, 20]) + esi_req[:20] +
    bytes([9, 0, len(esi_req) - 20]) + esi_req[20:] + bytes([10, 0, 1, 11, 0, 3, 11, 0, 10]))
