#!/usr/bin/env python3
"""A document's `sh` blocks as one bash script, in order: what the doc test
of a guide (docs/deploy-iser.md) runs.  The script stops at the first
command that fails and names the block's line in the document.  Blocks
fenced with another language (`text`, ...) are not taken.

usage: doc_script.py DOC > SCRIPT"""
import os
import re
import sys


def blocks(path):
    """[(line, text)] of the ```sh blocks."""
    out, cur, start = [], None, 0
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if cur is None:
                m = re.match(r'^```(\w*)\s*$', line)
                if m:
                    cur, start = ([] if m.group(1) == 'sh' else False), n
            elif line.startswith('```'):
                if cur is not False:
                    out.append((start, ''.join(cur)))
                cur = None
            elif cur is not False:
                cur.append(line)
    if cur is not None:
        sys.exit(f'{path}:{start}: block not closed')
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    doc = sys.argv[1]
    name = os.path.relpath(doc, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    print('set -eE -o pipefail')
    print(f'trap \'echo "FAIL: {name}:$DOC_LINE: exit $?"\' ERR')
    for line, text in blocks(doc):
        print(f'DOC_LINE={line}; echo "== {name}:{line}"')
        print(text, end='' if text.endswith('\n') else '\n')


if __name__ == '__main__':
    main()
