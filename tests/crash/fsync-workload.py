#!/usr/bin/env python3
"""A bounded, seeded, metadata-heavy file system workload with fsyncs, for the
crash-consistency replay (tests/crash/README.md).

It creates, writes, overwrites, appends to, truncates, renames and removes
files in a few directories; after each group of operations it fsyncs every
file and directory the group touched, then asks for a mark in the
dm-log-writes log (MARK_CMD NAME) and writes the state every fsynced name must
have from then on to MANIFEST, one JSON line per mark:
{"mark": NAME, "files": {path: sha256 or null (must not exist)}}.
Names are never reused, so a name's expected state is the same at every mark
until an operation touches it again.

usage: fsync-workload.py DIR MANIFEST --seed S --groups N --mark-cmd CMD
"""
import hashlib
import json
import os
import random
import shlex
import subprocess
import sys


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Workload:
    def __init__(self, root, seed):
        self.root, self.rng = root, random.Random(seed)
        self.content = {}        # live file -> bytes
        self.gone = set()        # names removed or renamed away
        self.dirs = ['']
        self.serial = 0
        self.touched_files, self.touched_dirs = set(), set()

    def new_name(self, kind='f'):
        self.serial += 1
        return os.path.join(self.rng.choice(self.dirs), f'{kind}{self.serial}')

    def data(self):
        n = self.rng.choice([1, 100, 4096, 5000, 65536, 200000])
        return self.rng.randbytes(self.rng.randint(1, n))

    def touch(self, name):
        self.touched_files.add(name)
        self.touched_dirs.add(os.path.dirname(name))

    def op(self):
        live = sorted(self.content)
        kind = self.rng.choice(['create'] * 3 + ['mkdir'] + (['write', 'append', 'truncate', 'rename', 'unlink']
                                                            if live else []))
        if kind == 'mkdir' and len(self.dirs) < 6:
            d = self.new_name('d')
            os.mkdir(os.path.join(self.root, d))
            self.dirs.append(d)
            self.touched_dirs.update([d, os.path.dirname(d)])
            return
        if kind in ('create', 'mkdir'):
            name = self.new_name()
            body = self.data()
            with open(os.path.join(self.root, name), 'wb') as f:
                f.write(body)
            self.content[name] = body
            self.touch(name)
            return
        name = self.rng.choice(live)
        path = os.path.join(self.root, name)
        body = self.content[name]
        if kind == 'write':
            new = self.data()
            at = self.rng.randint(0, len(body))
            with open(path, 'r+b') as f:
                f.seek(at)
                f.write(new)
            self.content[name] = body[:at] + new + body[at + len(new):]
        elif kind == 'append':
            new = self.data()
            with open(path, 'ab') as f:
                f.write(new)
            self.content[name] = body + new
        elif kind == 'truncate':
            n = self.rng.randint(0, len(body))
            os.truncate(path, n)
            self.content[name] = body[:n]
        elif kind == 'rename':
            to = self.new_name()
            os.rename(path, os.path.join(self.root, to))
            self.content[to] = self.content.pop(name)
            self.gone.add(name)
            self.touch(to)
        else:
            os.unlink(path)
            del self.content[name]
            self.gone.add(name)
            self.touched_dirs.add(os.path.dirname(name))
            return
        self.touch(name)

    def sync(self):
        for name in sorted(self.touched_files):
            if name in self.content:
                fsync_path(os.path.join(self.root, name))
        for d in sorted(self.touched_dirs, key=len, reverse=True):
            fsync_path(os.path.join(self.root, d) if d else self.root, directory=True)
        self.touched_files.clear()
        self.touched_dirs.clear()

    def expected(self):
        files = {n: hashlib.sha256(b).hexdigest() for n, b in self.content.items()}
        files.update({n: None for n in self.gone})
        return files


def main():
    if len(sys.argv) < 3 or '--mark-cmd' not in sys.argv:
        sys.exit(__doc__.split('usage:')[1].strip().join(['usage: ', '']))
    root, manifest = sys.argv[1], sys.argv[2]
    seed, groups = int(arg('--seed', '1')), int(arg('--groups', '20'))
    mark = shlex.split(arg('--mark-cmd'))
    w = Workload(root, seed)
    with open(manifest, 'a') as out:
        for g in range(groups):
            for _ in range(w.rng.randint(1, 4)):
                w.op()
            w.sync()
            name = f'fsync-{g}'
            subprocess.run(mark + [name], check=True)
            out.write(json.dumps({'mark': name, 'files': w.expected()}) + '\n')
            out.flush()
    print(f'fsync-workload: seed {seed}, {groups} groups, {w.serial} names, {len(w.content)} files live')


if __name__ == '__main__':
    main()
