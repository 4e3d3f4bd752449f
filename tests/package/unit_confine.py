#!/usr/bin/env python3
"""Run a command confined as isertd.service confines isertd, without systemd.

usage: unit_confine.py UNIT [--root DIR] [--show] -- CMD ARGS...

Of the unit's [Service] settings it applies the two that decide what isertd
may ask of the kernel, as systemd 252 applies them:

- CapabilityBoundingSet=: every other capability is dropped from the
  bounding set and the inheritable set, so that after the exec even root has
  only these (what systemd does for a root service);
- SystemCallFilter= (with SystemCallErrorNumber= and
  SystemCallArchitectures=native): the same allow-list, its groups expanded
  by `systemd-analyze syscall-filter`, the calls systemd always allows added,
  loaded as a seccomp filter; a call outside it fails with the error number
  (or kills, without one), a call of another ABI fails.

NoNewPrivileges is set (the unit has it; seccomp needs it). The other
sandboxing (mount namespace, RestrictAddressFamilies=, MemoryDenyWriteExecute=,
...) is not applied: these tests do not check it. --root DIR: chroot there
first (with the capabilities still held, as systemd's RootDirectory= would).
--show prints what is applied on stderr. Exits 2 on a unit it cannot apply.
"""
import ctypes
import errno
import os
import re
import struct
import subprocess
import sys

SYSTEMD_ALWAYS = {'execve', 'exit', 'exit_group', 'getrlimit', 'rt_sigreturn', 'sigreturn'}


def fail(msg):
    print(f'unit_confine: {msg}', file=sys.stderr)
    sys.exit(2)


def service_settings(path):
    """[Service] assignments in order, as (key, value); continuation lines joined."""
    out, section, pending = [], None, ''
    for raw in open(path, encoding='utf-8'):
        line = pending + raw.rstrip('\n')
        if line.endswith('\\'):
            pending = line[:-1] + ' '
            continue
        pending = ''
        s = line.strip()
        if not s or s[0] in '#;':
            continue
        if s.startswith('['):
            section = s
            continue
        if section == '[Service]' and '=' in s:
            k, v = s.split('=', 1)
            out.append((k.strip(), v.strip()))
    return out


def syscall_groups():
    text = subprocess.run(['systemd-analyze', 'syscall-filter', '--no-pager'], check=True,
                          capture_output=True, text=True).stdout
    groups, cur = {}, None
    for line in text.splitlines():
        if line.startswith('@'):
            cur = groups.setdefault(line.strip(), [])
        elif cur is not None and line.startswith('    ') and not line.strip().startswith('#'):
            cur.append(line.strip())
        elif not line.strip():
            cur = None
    return groups


def expand(names, groups, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        n = n.split(':', 1)[0]   # "name:EPERM": the error number does not change membership
        if n.startswith('@'):
            if n not in groups:
                fail(f'unknown system call group {n}')
            if n not in seen:
                seen.add(n)
                out |= expand(groups[n], groups, seen)
        else:
            out.add(n)
    return out


def syscall_filter(settings, groups):
    """(allowed set, error number or None for kill); None when the unit has no filter."""
    allow, errno_ = None, None
    for k, v in settings:
        if k == 'SystemCallErrorNumber':
            errno_ = None if v in ('', 'kill') else int(v) if v.isdigit() else getattr(errno, v)
        if k != 'SystemCallFilter':
            continue
        if not v:
            allow = None
            continue
        deny = v.startswith('~')
        names = expand(v.lstrip('~').split(), groups)
        if allow is None:
            if deny:
                fail('a SystemCallFilter= that starts with a deny-list is not emulated')
            allow = set(names)
        elif deny:
            allow -= names
        else:
            allow |= names
    if allow is None:
        return None
    # The calls for querying time and sleeping are in @default: SYSTEMD_ALWAYS are the rest.
    return allow | SYSTEMD_ALWAYS, errno_


def syscall_numbers():
    nums = {}
    for line in open('/usr/include/x86_64-linux-gnu/asm/unistd_64.h', encoding='utf-8'):
        m = re.match(r'#define __NR_(\w+)\s+(\d+)', line)
        if m:
            nums[m.group(1)] = int(m.group(2))
    return nums


def cap_numbers():
    caps = {}
    for line in open('/usr/include/linux/capability.h', encoding='utf-8'):
        m = re.match(r'#define (CAP_\w+)\s+(\d+)\s*$', line)
        if m:
            caps[m.group(1)] = int(m.group(2))
    return caps


def bounding_set(settings, caps):
    keep = None
    for k, v in settings:
        if k != 'CapabilityBoundingSet':
            continue
        if not v:
            keep = None
            continue
        names = set(v.lstrip('~').split())
        unknown = names - set(caps)
        if unknown:
            fail(f'unknown capabilities {sorted(unknown)}')
        if v.startswith('~'):
            keep = (set(caps) if keep is None else keep) - names
        else:
            keep = (set() if keep is None else keep) | names
    return keep


def bpf(allowed_nrs, err):
    """x86-64 only, then the number against each allowed one; else the error (or kill)."""
    ld, jeq, ret = 0x20, 0x15, 0x06
    arch_x86_64 = 0xC000003E
    deny = 0x00050000 | (err & 0xffff) if err is not None else 0x80000000   # RET_ERRNO / RET_KILL_PROCESS
    allow = 0x7fff0000
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch_x86_64), (ret, 0, 0, deny), (ld, 0, 0, 0)]
    for nr in sorted(allowed_nrs):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, allow)]
    prog.append((ret, 0, 0, deny))
    return prog


def main():
    args = sys.argv[1:]
    if '--' not in args or not args:
        fail(__doc__.splitlines()[2])
    cmd = args[args.index('--') + 1:]
    opts = args[:args.index('--')]
    unit, root, show = opts[0], None, '--show' in opts
    if '--root' in opts:
        root = opts[opts.index('--root') + 1]
    settings = service_settings(unit)
    if not cmd:
        fail('no command')

    caps = cap_numbers()
    keep = bounding_set(settings, caps)
    filt = syscall_filter(settings, syscall_groups())
    nums = syscall_numbers()
    if show:
        print(f'unit_confine: capabilities {" ".join(sorted(keep)) if keep is not None else "(all)"}; '
              + (f'{len(set(filt[0]) & set(nums))} system calls allowed, the rest '
                 + (f'fail with {errno.errorcode.get(filt[1], filt[1])}' if filt[1] is not None else 'kill')
                 if filt else 'no system call filter'), file=sys.stderr)

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]

    def prctl(*a):
        a = list(a) + [0] * (5 - len(a))
        if libc.prctl(*a) != 0:
            fail(f'prctl{tuple(a)}: {os.strerror(ctypes.get_errno())}')

    if root:
        os.chroot(root)
        os.chdir('/')
    if keep is not None:
        last = int(open('/proc/sys/kernel/cap_last_cap').read())
        for c in range(last + 1):
            if c not in {caps[n] for n in keep}:
                prctl(24, c)   # PR_CAPBSET_DROP
        # The inheritable set too (capset v3), or root keeps what it holds there.
        hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)()
        if libc.capget(hdr, data) != 0:
            fail(f'capget: {os.strerror(ctypes.get_errno())}')
        data[2] = data[5] = 0
        if libc.capset(hdr, data) != 0:
            fail(f'capset: {os.strerror(ctypes.get_errno())}')
    prctl(38, 1)   # PR_SET_NO_NEW_PRIVS
    if filt:
        prog = bpf({nums[n] for n in filt[0] if n in nums}, filt[1])
        buf = ctypes.create_string_buffer(b''.join(struct.pack('HBBI', *i) for i in prog))
        fprog = struct.pack('HxxxxxxP', len(prog), ctypes.addressof(buf))
        fbuf = ctypes.create_string_buffer(fprog)
        prctl(22, 2, ctypes.addressof(fbuf))   # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        fail(f'{cmd[0]}: {e.strerror}')


if __name__ == '__main__':
    main()
