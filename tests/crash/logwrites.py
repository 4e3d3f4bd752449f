#!/usr/bin/env python3
"""Read and replay a dm-log-writes log (the kernel's
Documentation/admin-guide/device-mapper/log-writes.rst; written from that
document and the on-disk layout, not from xfstests' replay-log).

The log holds, in order, what the device below dm-log-writes made durable:
an ordinary write is logged only at the next flush that followed its
completion, a FUA write as it completes, a mark when it is asked for.  So
the entries up to any index are one state the device could hold after a
power loss at that moment, and replaying them rebuilds it.

Layout: block 0 is the super block (magic, version, entry count, block
size); entries follow from block 1, each a block holding its header
(sector, nr_sectors, flags, data_len; sector and nr_sectors in blocks of
the super's size) and, for a mark, its text; a write's data follows in
nr_sectors blocks; a discard has none.

usage: logwrites.py LOG list
       logwrites.py LOG replay DEST [--from I] --to J    (entries I..J-1, I defaults to 0)
"""
import ctypes
import os
import struct
import sys

MAGIC = 0x6a736677736872
FLUSH, FUA, DISCARD, MARK, METADATA = 1, 2, 4, 8, 16
SUPER = struct.Struct('<QQQI')
ENTRY = struct.Struct('<QQQQ')


class LogError(Exception):
    pass


class Entry:
    __slots__ = ('index', 'sector', 'nr', 'flags', 'mark', 'data_at')

    def __init__(self, index, sector, nr, flags, mark, data_at):
        self.index, self.sector, self.nr, self.flags, self.mark, self.data_at = \
            index, sector, nr, flags, mark, data_at

    def kind(self):
        return ('mark' if self.flags & MARK else 'discard' if self.flags & DISCARD
                else 'flush' if self.flags & FLUSH and not self.nr else 'write')

    def __str__(self):
        f = ''.join(c for b, c in ((FLUSH, 'F'), (FUA, 'U'), (DISCARD, 'D'), (METADATA, 'M'))
                    if self.flags & b) or '-'
        return f'{self.index} {self.kind()} {f} {self.sector} {self.nr}' + (f' {self.mark}' if self.mark else '')


def read_log(path):
    """(block size, [Entry]) of the log on PATH; a log that is not one, or ends early, is an error
    that says where."""
    with open(path, 'rb') as f:
        head = f.read(SUPER.size)
        if len(head) < SUPER.size:
            raise LogError(f'{path}: shorter than a super block')
        magic, version, count, bsize = SUPER.unpack(head)
        if magic != MAGIC:
            raise LogError(f'{path}: no dm-log-writes super block (magic {magic:#x})')
        if version != 1 or bsize < 512 or bsize & (bsize - 1) or bsize > 65536:
            raise LogError(f'{path}: unsupported log (version {version}, block size {bsize})')
        size = f.seek(0, os.SEEK_END)
        entries, pos = [], bsize
        for i in range(count):
            if pos + bsize > size:
                raise LogError(f'{path}: entry {i} of {count} lies past the end ({pos} > {size})')
            f.seek(pos)
            blk = f.read(bsize)
            sector, nr, flags, dlen = ENTRY.unpack_from(blk)
            mark = None
            if flags & MARK:
                if dlen > bsize - ENTRY.size:
                    raise LogError(f'{path}: entry {i}: mark of {dlen} bytes in a {bsize}-byte block')
                mark = blk[ENTRY.size:ENTRY.size + dlen].decode(errors='replace')
                nr = 0
            pos += bsize
            entries.append(Entry(i, sector, nr, flags, mark, pos))
            if not flags & (DISCARD | MARK):
                pos += nr * bsize
            if pos > size:
                raise LogError(f'{path}: entry {i}: data past the end of the log')
        return bsize, entries


_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def punch(fd, offset, length):
    """Zero a range of DEST: a discard replays as zeroes (what the NVMe namespace with DLFEAT and a
    file's hole both read).  A hole where DEST can have one, written zeroes where it cannot."""
    if _libc.fallocate(fd, FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE, offset, length) == 0:
        return
    zero = bytes(1 << 20)
    while length:
        n = min(length, len(zero))
        os.pwrite(fd, zero[:n], offset)
        offset, length = offset + n, length - n


def replay(logpath, bsize, entries, dest_fd, first, last):
    """Apply entries[first:last] (writes and discards) to DEST_FD, in log order."""
    with open(logpath, 'rb') as log:
        for e in entries[first:last]:
            if e.flags & MARK or not e.nr:
                continue
            if e.flags & DISCARD:
                punch(dest_fd, e.sector * bsize, e.nr * bsize)
                continue
            log.seek(e.data_at)
            left, off = e.nr * bsize, e.sector * bsize
            while left:
                chunk = log.read(min(left, 4 << 20))
                if not chunk:
                    raise LogError(f'{logpath}: entry {e.index}: data cut short')
                os.pwrite(dest_fd, chunk, off)
                off, left = off + len(chunk), left - len(chunk)


def main(argv):
    if len(argv) < 3 or argv[2] not in ('list', 'replay'):
        sys.exit(__doc__.split('usage:')[1].strip().join(['usage: ', '']))
    try:
        bsize, entries = read_log(argv[1])
        if argv[2] == 'list':
            print(f'# block size {bsize}, {len(entries)} entries')
            for e in entries:
                print(e)
            return
        if len(argv) < 4 or '--to' not in argv:
            sys.exit('logwrites.py: replay needs DEST and --to J')
        last = int(argv[argv.index('--to') + 1])
        first = int(argv[argv.index('--from') + 1]) if '--from' in argv else 0
        if not 0 <= first <= last <= len(entries):
            sys.exit(f'logwrites.py: --from {first} --to {last}: the log has {len(entries)} entries')
        fd = os.open(argv[3], os.O_WRONLY)
        try:
            replay(argv[1], bsize, entries, fd, first, last)
            os.fsync(fd)
        finally:
            os.close(fd)
    except LogError as e:
        sys.exit(f'logwrites.py: {e}')


if __name__ == '__main__':
    main(sys.argv)
