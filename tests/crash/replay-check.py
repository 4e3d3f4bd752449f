#!/usr/bin/env python3
"""Replay a dm-log-writes log to every point a power loss could leave the
device at, and check the file system there (tests/crash/README.md).

The points: every flush, every FUA write and every mark after the mark
START (the file system made).  At each, the log's entries up to it are
replayed onto a copy of the device (logwrites.py), the copy is attached to a
loop device, mounted (so the journal is replayed), each file the workload's
MANIFEST expects there is compared, it is unmounted, and fsck -n must find
nothing.  At a workload mark the expectation is that mark's manifest line; at
a point between two marks, the names whose expectation is the same at both
(a name touched in between may be in either state).

usage: replay-check.py LOG MANIFEST --fs ext4|xfs --size BYTES --work DIR
       [--start MARK] [--inner PATH --inner-fs ext4|xfs]
--inner: the device holds a file system (--fs) whose file PATH is the disk the
workload ran on (a file backstore): that file is checked the same way, inside.
Prints one line per failed point (the first 20) and a summary; exit 3 if any
failed, 1 if the check could not run.
"""
import hashlib
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import logwrites  # noqa: E402


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def run(*cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, (p.stdout + p.stderr).strip()


FSCK = {'ext4': ['e2fsck', '-f', '-n'], 'xfs': ['xfs_repair', '-n']}


class Mounted:
    """DEVICE (a file: attached to a loop device) mounted at MNT, detached on exit."""

    def __init__(self, image, mnt, fs):
        self.image, self.mnt, self.fs, self.loop, self.mounted = image, mnt, fs, None, False

    def __enter__(self):
        rc, out = run('losetup', '-f', '--show', self.image)
        if rc:
            raise RuntimeError(f'losetup: {out}')
        self.loop = out
        os.makedirs(self.mnt, exist_ok=True)
        rc, out = run('mount', '-t', self.fs, self.loop, self.mnt)
        if rc:
            run('losetup', '-d', self.loop)
            raise RuntimeError(f'mount -t {self.fs} failed: {out.splitlines()[0][-200:] if out else rc}')
        self.mounted = True
        return self

    def unmount_and_fsck(self):
        rc, out = run('umount', self.mnt)
        self.mounted = rc != 0
        if rc:
            return f'umount: {out}'
        rc, out = run(*FSCK[self.fs], self.loop)
        return None if rc == 0 else f'{" ".join(FSCK[self.fs])}: exit {rc}: {out[-600:]}'

    def __exit__(self, *exc):
        if self.mounted:
            run('umount', self.mnt)
        if self.loop:
            run('losetup', '-d', self.loop)


def compare(root, expect):
    """The names whose content differs from EXPECT (sha256, or None: must not exist)."""
    bad = []
    for name, want in sorted(expect.items()):
        path = os.path.join(root, name)
        try:
            with open(path, 'rb') as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except FileNotFoundError:
            got = None
        except OSError as e:
            got = f'unreadable ({e.strerror})'
        if got != want:
            bad.append(f'{name}: {"missing" if got is None else "present" if want is None else "wrong content"}')
    return bad


def check_point(image, work, fs, expect, inner, inner_fs):
    """None if the state at this point is sound, else why not."""
    with Mounted(image, os.path.join(work, 'mnt'), fs) as m:
        if inner:
            with Mounted(os.path.join(m.mnt, inner), os.path.join(work, 'inner'), inner_fs) as i:
                bad = compare(i.mnt, expect)
                why = i.unmount_and_fsck()
        else:
            bad, why = compare(m.mnt, expect), None
        outer = m.unmount_and_fsck()
    problems = bad[:5] + ([f'... {len(bad) - 5} more'] if len(bad) > 5 else [])
    if why:
        problems.append('inner ' + why)
    if outer:
        problems.append(outer)
    return '; '.join(problems) or None


def main():
    if len(sys.argv) < 3 or '--fs' not in sys.argv or '--work' not in sys.argv or '--size' not in sys.argv:
        sys.exit(__doc__.split('usage:')[1].split('--inner:')[0].strip().join(['usage: ', '']))
    logpath, manifest = sys.argv[1], sys.argv[2]
    fs, work, size = arg('--fs'), arg('--work'), int(arg('--size'))
    start, inner, inner_fs = arg('--start', 'mkfs'), arg('--inner'), arg('--inner-fs', 'ext4')
    bsize, entries = logwrites.read_log(logpath)
    with open(manifest) as f:
        marks = [json.loads(line) for line in f if line.strip()]
    if not marks:
        sys.exit(f'replay-check: {manifest}: no mark: the workload did not run')
    expect_at = {m['mark']: m['files'] for m in marks}
    at = {e.mark: e.index for e in entries if e.mark is not None}
    missing = [m for m in [start] + list(expect_at) if m not in at]
    if missing:
        sys.exit(f'replay-check: marks not in the log: {", ".join(missing[:5])} (is it the right log?)')
    # The expectation in force at each entry: a mark's own, else what the marks on both sides agree on.
    order = sorted((at[m], m) for m in expect_at)
    points = [e for e in entries if e.index > at[start] and (e.flags & (logwrites.FLUSH | logwrites.FUA) or
                                                              e.mark in expect_at)]

    def expectation(i):
        before = [m for idx, m in order if idx <= i]
        after = [m for idx, m in order if idx > i]
        if before and at[before[-1]] == i or not after:
            return expect_at[before[-1]] if before else {}
        if not before:
            return {}
        a, b = expect_at[before[-1]], expect_at[after[0]]
        return {n: h for n, h in a.items() if b.get(n, 'absent') == h}

    os.makedirs(work, exist_ok=True)
    base, scratch = os.path.join(work, 'base.img'), os.path.join(work, 'point.img')
    with open(base, 'wb') as f:
        f.truncate(size)
    fd = os.open(base, os.O_WRONLY)
    done, failed, compared, t0 = 0, 0, 0, time.time()
    kinds = {'flush': 0, 'fua': 0, 'mark': 0}
    for p in points:
        logwrites.replay(logpath, bsize, entries, fd, done, p.index + 1)
        done = p.index + 1
        rc, out = run('cp', '--sparse=always', base, scratch)
        if rc:
            sys.exit(f'replay-check: cp: {out}')
        kind = 'mark' if p.mark else 'flush' if p.flags & logwrites.FLUSH else 'fua'
        kinds[kind] += 1
        expect = expectation(p.index)
        compared += len(expect)
        try:
            why = check_point(scratch, work, fs, expect, inner, inner_fs)
        except RuntimeError as e:
            why = str(e)
        if why:
            failed += 1
            if failed <= 20:
                print(f'  not ok: entry {p.index} ({kind}{" " + p.mark if p.mark else ""}): {why}')
    os.close(fd)
    for f in (scratch, base):
        if os.path.exists(f):
            os.unlink(f)
    print(f'replay-check: {len(points)} points ({kinds["flush"]} flush, {kinds["fua"]} FUA, {kinds["mark"]} marks) '
          f'of {len(entries)} log entries, {compared} file expectations, {failed} failed, {time.time() - t0:.0f} s')
    sys.exit(3 if failed else 0 if points else 1)


if __name__ == '__main__':
    main()
