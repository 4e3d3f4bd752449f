#!/usr/bin/env python3
"""logwrites.py against logs laid out as dm-log-writes writes them (built here
from the layout in log-writes.rst), and against broken ones: the replay at
each index gives the state the log describes, and a log that is not one, or
ends early, is refused with a message naming the entry.  The real logs are
read in the guest (tests/vm/t-crash.sh)."""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, '..', 'integration'))
import logwrites as lw  # noqa: E402
import checks  # noqa: E402
from checks import check  # noqa: E402

BS = 4096


def build(entries, count=None, magic=lw.MAGIC, bsize=BS):
    """A log image: ENTRIES are (sector, nr, flags, payload) with payload the data (writes) or the text (marks)."""
    out = bytearray(bsize)
    struct.pack_into('<QQQI', out, 0, magic, 1, len(entries) if count is None else count, bsize)
    for sector, nr, flags, payload in entries:
        blk = bytearray(bsize)
        dlen = len(payload) if flags & lw.MARK else 0
        struct.pack_into('<QQQQ', blk, 0, sector, nr, flags, dlen)
        if flags & lw.MARK:
            blk[32:32 + dlen] = payload
        out += blk
        if not flags & (lw.MARK | lw.DISCARD):
            out += payload
    return bytes(out)


def write(path, data):
    with open(path, 'wb') as f:
        f.write(data)


def state(log, upto, size=8 * BS):
    bsize, entries = lw.read_log(log)
    with tempfile.NamedTemporaryFile() as dev:
        dev.truncate(size)
        fd = os.open(dev.name, os.O_RDWR)
        try:
            lw.replay(log, bsize, entries, fd, 0, upto)
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)


def main():
    work = checks.workdir('logwrites-')
    log = os.path.join(work, 'log')
    a, b, c = (bytes([x]) * BS for x in (0xAA, 0xBB, 0xCC))
    write(log, build([(0, 1, 0, a), (1, 2, lw.FLUSH, b + b), (0, 1, lw.MARK, b'one'),
                      (1, 1, lw.DISCARD, b''), (2, 1, lw.FUA, c), (0, 0, lw.FLUSH, b''), (0, 1, lw.MARK, b'two')]))
    bsize, entries = lw.read_log(log)
    check('the super block: block size and entry count', bsize == BS and len(entries) == 7)
    check('kinds as logged: write, write with flush, mark, discard, FUA write, empty flush, mark',
          [e.kind() for e in entries] == ['write', 'write', 'mark', 'discard', 'write', 'flush', 'mark'],
          str([e.kind() for e in entries]))
    check('marks carry their text', [e.mark for e in entries if e.mark] == ['one', 'two'])
    check('after entry 0 only block 0 is written', state(log, 1)[:3 * BS] == a + bytes(2 * BS))
    check('at mark "one": blocks 1-2 hold the flushed write', state(log, 3)[:3 * BS] == a + b + b)
    check('a discard replays as zeroes', state(log, 4)[:3 * BS] == a + bytes(BS) + b)
    check('the FUA write lands after the discard', state(log, 7)[:3 * BS] == a + bytes(BS) + c)
    out = subprocess.run([sys.executable, os.path.join(HERE, 'logwrites.py'), log, 'list'],
                         capture_output=True, text=True).stdout
    check('list: one line per entry with flags and the mark', '2 mark - 0 0 one' in out and '4 write U 2 1' in out, out)

    def refused(desc, data, words):
        write(log, data)
        p = subprocess.run([sys.executable, os.path.join(HERE, 'logwrites.py'), log, 'list'],
                           capture_output=True, text=True)
        check(desc, p.returncode != 0 and all(w in p.stderr for w in words) and 'Traceback' not in p.stderr,
              p.stderr.strip())

    refused('not a log: refused, naming the magic', bytes(BS), ['no dm-log-writes super block'])
    refused('shorter than a super block', b'x', ['shorter than a super block'])
    refused('an odd block size', build([], bsize=BS)[:8] + struct.pack('<QQI', 1, 0, 1000) + bytes(BS),
            ['block size 1000'])
    refused('more entries counted than present: the entry named',
            build([(0, 1, 0, a)], count=3), ['entry 1 of 3'])
    refused('a write whose data is cut short', build([(0, 2, 0, a + a)])[:3 * BS], ['entry 0', 'past the end'])
    bad_mark = bytearray(build([(0, 1, lw.MARK, b'x')]))
    struct.pack_into('<Q', bad_mark, BS + 24, BS)
    refused('a mark longer than its block', bytes(bad_mark), ['entry 0', 'mark of 4096 bytes'])
    write(log, build([(0, 1, 0, a)]))
    p = subprocess.run([sys.executable, os.path.join(HERE, 'logwrites.py'), log, 'replay', '/dev/null', '--to', '5'],
                       capture_output=True, text=True)
    check('replay past the last entry: refused, saying how many there are', p.returncode != 0 and
          'the log has 1 entries' in p.stderr, p.stderr.strip())
    checks.finish()


if __name__ == '__main__':
    main()
