"""SCSI helpers the copy tests share (test_xcopy.py, test_odx.py, test_sanitize_writes.py): sense decoding, an
LU's NAA designator, 16-byte READ and WRITE, transfers of a few MiB, and a check of a command's status and sense."""
import struct

from checks import check

GOOD, CHECK, CONFLICT = 0x00, 0x02, 0x18


def sense_of(sense):
    """(key, asc<<8|ascq, field pointer or None, command-specific info) of fixed or descriptor sense."""
    if len(sense) < 8:
        return None, None, None, None
    if sense[0] & 0x7f in (0x72, 0x73):
        return sense[1] & 0xf, sense[2] << 8 | sense[3], None, None
    sks = struct.unpack('>H', sense[16:18])[0] if len(sense) >= 18 and sense[15] & 0x80 else None
    return sense[2] & 0xf, sense[12] << 8 | sense[13], sks, struct.unpack('>I', sense[8:12])[0]


def naa_of(c, lun):
    st, d, _ = c.command(bytes([0x12, 1, 0x83, 1, 0, 0]), 256, read=True, lun=lun)
    assert st == GOOD, st
    off = 4
    while off + 4 <= len(d):
        if d[off + 1] & 0x3f == 0x03 and d[off + 3] == 16:
            return d[off + 4:off + 20]
        off += 4 + d[off + 3]
    raise AssertionError('no NAA designator on LUN %d' % lun)


def rw16(c, write, lun, lba, nblocks, data=None, bs=512):
    cdb = bytes([0x8a if write else 0x88, 0]) + struct.pack('>QI', lba, nblocks) + b'\0\0'
    if write:
        return c.command(cdb, nblocks * bs, write_data=data, lun=lun)
    return c.command(cdb, nblocks * bs, read=True, lun=lun)


def write_big(c, lun, lba, data):
    for off in range(0, len(data), 1 << 20):
        part = data[off:off + (1 << 20)]
        st, _, _ = rw16(c, True, lun, lba + off // 512, len(part) // 512, part)
        assert st == GOOD, st


def read_big(c, lun, lba, nbytes):
    out = b''
    for off in range(0, nbytes, 1 << 20):
        n = min(1 << 20, nbytes - off)
        st, d, _ = rw16(c, False, lun, lba + off // 512, n // 512)
        assert st == GOOD, st
        out += d
    return out


def expect(name, res, status, key=None, asc=None, field=None):
    st, _, sense = res
    k, a, f, _ = sense_of(sense)
    ok = st == status and (key is None or k == key) and (asc is None or a == asc) and (field is None or f == field)
    check(name, ok, 'status %#x sense %s/%s field %s' % (st, k, hex(a) if a is not None else None, f))
