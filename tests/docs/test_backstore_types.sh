#!/bin/bash
# Backstore kinds describe themselves (BACKSTORE_KINDS in
# target/backstore/backstore.h, each kind's ops in its own file): no C file
# names a backstore type to switch on it, target/backstore/ included; it asks
# the type's kind (backstore_kind, backstore_kind_has) or the store's ops.
# The types are read from the list, so a new kind is checked too.  Fails
# listing each use.
set -u
src=${1:?usage: test_backstore_types.sh SOURCE-ROOT}
cd "$src" || exit 2
list=target/backstore/backstore.h
types=$(sed -n 's/^[[:space:]]*X(\([A-Z0-9_]*\),.*/\1/p' "$list" | paste -sd'|')
[ -n "$types" ] || { echo "FAIL no kinds read from $list's BACKSTORE_KINDS"; exit 1; }
uses=$(git ls-files -- target common initiator tools 2>/dev/null | grep -E '\.[ch]$' |
	grep -vx "$list" |
	xargs grep -nE "\bBACKSTORE_($types)\b" 2>/dev/null)
if [ -n "$uses" ]; then
	echo "FAIL backstore types named outside BACKSTORE_KINDS (ask backstore_kind() or the store's ops instead):"
	echo "$uses"
	exit 1
fi
n=$(git ls-files -- target common initiator tools | grep -cE '\.[ch]$')
[ "$n" -gt 100 ] || { echo "FAIL only $n C files found under $src: wrong source root?"; exit 1; }
echo "ok no backstore type ($types) named outside BACKSTORE_KINDS ($n C files)"
