"""PERSISTENT RESERVE IN/OUT, RESERVE and RELEASE from an iscsi_client.Conn,
and their answers parsed (SPC-4 6.15, 6.16): shared by the reservation tests
(test_aptpl.py, tests/ceph/test_cluster.py)."""
import struct

GOOD, CHECK, CONFLICT = 0x00, 0x02, 0x18
# Service actions of PERSISTENT RESERVE OUT, and reservation types.
REG, RES, REL, CLR, PRE, PRE_ABORT, REG_IGN, REG_MOVE = 0, 1, 2, 3, 4, 5, 6, 7
WE, EA, WE_RO, EA_RO, WE_AR, EA_AR = 1, 3, 5, 6, 7, 8


def prout(c, sa, rtype=0, rk=0, sark=0, aptpl=False, param=None):
    """PERSISTENT RESERVE OUT with the basic parameter list (or param): (status, sense)."""
    if param is None:
        param = struct.pack('>QQ', rk, sark) + b'\0' * 4 + bytes([1 if aptpl else 0, 0, 0, 0])
    cdb = bytes([0x5f, sa, rtype, 0, 0]) + struct.pack('>I', len(param)) + b'\0'
    st, _, sense = c.command(cdb, edtl=len(param), write_data=param)
    return st, sense


def transport_id(initiator_port):
    """The iSCSI TransportID of initiator_port ("name,i,0xISID"): format 01b, name and ISID (SPC-4 7.6.4.6)."""
    name = initiator_port.encode() + b'\0'
    name += b'\0' * (-len(name) % 4)
    return bytes([0x40 | 0x05, 0]) + struct.pack('>H', len(name)) + name


def register_and_move(c, rk, sark, rtpi, initiator_port, unreg=False):
    """REGISTER AND MOVE to the I_T nexus of initiator_port ("name,i,0xISID") at relative port rtpi."""
    tid = transport_id(initiator_port)
    param = struct.pack('>QQ', rk, sark) + bytes([0, 0x02 if unreg else 0]) + struct.pack('>HI', rtpi, len(tid)) + tid
    return prout(c, REG_MOVE, WE, param=param)


def register_spec_i_pt(c, sark, initiator_ports):
    """REGISTER with SPEC_I_PT: the issuer and every initiator port named, each with key sark: (status, sense)."""
    tids = b''.join(transport_id(p) for p in initiator_ports)
    param = struct.pack('>QQ', 0, sark) + b'\0' * 4 + bytes([0x08, 0, 0, 0]) + struct.pack('>I', len(tids)) + tids
    return prout(c, REG, param=param)


def prin(c, sa, alloc=8192):
    cdb = bytes([0x5e, sa, 0, 0, 0, 0, 0]) + struct.pack('>H', alloc) + b'\0'
    st, data, _ = c.command(cdb, edtl=alloc, read=True)
    assert st == GOOD, st
    return data


def read_keys(c):
    """(generation, [keys]) in the target's order."""
    d = prin(c, 0)
    gen, n = struct.unpack('>II', d[:8])
    return gen, [struct.unpack('>Q', d[8 + i:16 + i])[0] for i in range(0, n, 8)]


def read_reservation(c):
    """(key, type), or None."""
    d = prin(c, 1)
    if struct.unpack('>I', d[4:8])[0] == 0:
        return None
    return struct.unpack('>Q', d[8:16])[0], d[21] & 0x0f


def caps(c):
    """(PTPL_C, PTPL_A) of REPORT CAPABILITIES."""
    d = prin(c, 2)
    return bool(d[2] & 1), bool(d[3] & 1)


def full_status(c):
    """[(key, holder, type, relative port, TransportID name)] in the target's order."""
    d = prin(c, 3)
    out, off = [], 8
    while off < 8 + struct.unpack('>I', d[4:8])[0]:
        key = struct.unpack('>Q', d[off:off + 8])[0]
        dl = struct.unpack('>I', d[off + 20:off + 24])[0]
        tid = d[off + 24:off + 24 + dl]
        out.append((key, bool(d[off + 12] & 1), d[off + 13], struct.unpack('>H', d[off + 18:off + 20])[0],
                    tid[4:].split(b'\0')[0].decode()))
        off += 24 + dl
    return out


def rw(c, write, lun=0):
    """A one-block WRITE(10) or READ(10) at LBA 1: its status."""
    if write:
        cdb = bytes([0x2a, 0, 0, 0, 0, 1, 0, 0, 1, 0])
        return c.command(cdb, edtl=512, write_data=b'w' * 512, lun=lun)[0]
    return c.command(bytes([0x28, 0, 0, 0, 0, 1, 0, 0, 1, 0]), edtl=512, read=True, lun=lun)[0]


def reserve6(c):
    return c.command(bytes([0x16, 0, 0, 0, 0, 0]))[0]


def release6(c):
    return c.command(bytes([0x17, 0, 0, 0, 0, 0]))[0]
