#!/bin/bash
# Backstores describe themselves (target/backstore/kinds.c): nothing outside
# target/backstore/ names a backstore type to switch on it; it asks the
# type's kind (backstore_kind, backstore_kind_has).  Fails listing each use.
set -u
src=${1:?usage: test_backstore_types.sh SOURCE-ROOT}
cd "$src" || exit 2
uses=$(git ls-files -- target common initiator tools 2>/dev/null | grep -E '\.[ch]$' |
	grep -v '^target/backstore/' |
	xargs grep -nE '\bBACKSTORE_(RAM|FILE|BLOCK|RBD|NVME)\b' 2>/dev/null)
if [ -n "$uses" ]; then
	echo "FAIL backstore types named outside target/backstore/ (ask backstore_kind() instead):"
	echo "$uses"
	exit 1
fi
n=$(git ls-files -- target common initiator tools | grep -cE '\.[ch]$')
[ "$n" -gt 100 ] || { echo "FAIL only $n C files found under $src: wrong source root?"; exit 1; }
echo "ok no backstore type named outside target/backstore/ ($n C files)"
