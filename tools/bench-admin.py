#!/usr/bin/env python3
"""How the admin socket scales with the size of the configuration: the time
to add one LUN (backstore.create + lun.add) when the target has 0 LUNs and
when it has N-1, and `iserctl ls` and `save` with N LUNs.

usage: tools/bench-admin.py [BUILD_DIR] [N]   (default build, 4096)"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

BUILD = sys.argv[1] if len(sys.argv) > 1 else 'build'
N = int(sys.argv[2]) if len(sys.argv) > 2 else 4096
IQN = 'iqn.2026-11.org.isert:scale'


def call(sock, method, params=None):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': method, 'params': params or {}}).encode())
    out = b''
    while not out.endswith(b'\n'):
        b = s.recv(1 << 20)
        if not b:
            break
        out += b
    s.close()
    r = json.loads(out)
    if 'error' in r:
        raise RuntimeError(f'{method}: {r["error"]["message"]}')
    return r['result']


def add_lun(sock, i):
    t0 = time.perf_counter()
    call(sock, 'backstore.create', {'name': f'r{i}', 'type': 'ram', 'size': '1M'})
    call(sock, 'lun.add', {'target': IQN, 'tag': 1, 'backstore': f'r{i}', 'lun': i})
    return time.perf_counter() - t0


def doc(n):
    return {'backstores': [{'name': f'r{i}', 'type': 'ram', 'size': '1M'} for i in range(n)],
            'targets': [{'iqn': IQN, 'tpgs': [{'tag': 1, 'enable': True, 'demo_mode': True,
                                                'portals': [{'ip': '127.0.0.1', 'port': 3499}],
                                                'luns': [{'lun': i, 'backstore': f'r{i}'} for i in range(n)]}]}]}


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    work = tempfile.mkdtemp(prefix='isert-bench-admin-')
    sock = os.path.join(work, 's.sock')
    cfg = os.path.join(work, 'isertd.json')
    with open(cfg, 'w') as f:
        json.dump(doc(0), f)
    d = subprocess.Popen([os.path.join(BUILD, 'target/isertd'), '-c', cfg, '-a', sock, '-r', '2'],
                         stderr=open(os.path.join(work, 'isertd.log'), 'w'))
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        # The first LUNs, one by one (the first few are the "1st LUN" figure).
        first = [add_lun(sock, i) for i in range(5)]
        print(f'LUN 1-5 (backstore.create + lun.add): median {median(first) * 1000:.1f} ms')
        # Up to N-5 in one apply, then the last five one by one.
        t0 = time.perf_counter()
        call(sock, 'apply', {'config': doc(N - 5)})
        print(f'apply of a document with {N - 5} LUNs (from 5): {time.perf_counter() - t0:.2f} s')
        last = [add_lun(sock, i) for i in range(N - 5, N)]
        print(f'LUN {N - 4}-{N} (backstore.create + lun.add): median {median(last) * 1000:.1f} ms')
        iserctl = os.path.join(BUILD, 'tools/iserctl/iserctl')
        t0 = time.perf_counter()
        out = subprocess.run([iserctl, '-s', sock, 'ls'], capture_output=True, text=True, check=True).stdout
        t_ls = time.perf_counter() - t0
        t0 = time.perf_counter()
        subprocess.run([iserctl, '-s', sock, 'save'], capture_output=True, check=True)
        t_save = time.perf_counter() - t0
        print(f'iserctl ls with {N} LUNs: {t_ls * 1000:.0f} ms ({len(out.splitlines())} lines); '
              f'iserctl save: {t_save * 1000:.0f} ms ({os.path.getsize(cfg) // 1024} KiB)')
        print(f'ratio, LUN {N} / LUN 1: {median(last) / median(first):.1f}x')
    finally:
        d.terminate()
        d.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    main()
