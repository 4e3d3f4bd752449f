#!/bin/bash
# The man pages (docs/man/*.scd) against the programs: every option a
# program's --help lists is in its page, and every option its page documents
# (the OPTIONS section) is in --help.  With scdoc installed, each page must
# also render.
#   test_manpages.sh MANDIR PROGRAM PAGE [PROGRAM PAGE ...]
set -u
mandir=$1
shift
ok=0 bad=0
pass() { ok=$((ok + 1)); }
fail() { echo "FAIL: $*"; bad=$((bad + 1)); }

# Options in a text: -x or --long-name after a blank, comma, bracket, bar or
# asterisk (scdoc bold).
options() { grep -oE '(^|[][ ,|*])--?[A-Za-z][A-Za-z0-9-]*' | sed -E 's/^[][ ,|*]//' | sort -u; }
# Whether option $1 appears in file $2 as a whole word (-c is not in --config).
mentions() { grep -qE -- "(^|[^A-Za-z0-9-])$1([^A-Za-z0-9-]|\$)" "$2"; }

while [ $# -ge 2 ]; do
	prog=$1 page=$mandir/$2
	name=$(basename "$prog")
	shift 2
	if [ ! -f "$page" ]; then
		fail "$page: missing"
		continue
	fi
	help=$("$prog" --help 2>&1)
	rc=$?
	if [ $rc -ne 0 ] || [ -z "$help" ]; then
		fail "$name --help exited $rc"
		continue
	fi
	# The OPTIONS section: from '# OPTIONS' to the next heading; its '*-...'
	# lines are the options it documents.
	sf=$(mktemp)
	sed -n '/^# OPTIONS/,/^# /p' "$page" | grep -E '^\*-' >"$sf"
	n=0
	for o in $(options <<<"$help"); do
		n=$((n + 1))
		if mentions "$o" "$sf"; then pass; else fail "$name: $o is in --help but not in the OPTIONS of $(basename "$page")"; fi
	done
	[ $n -gt 0 ] || fail "$name --help lists no option"
	documented=$(options <"$sf")
	rm -f "$sf"
	[ -n "$documented" ] || fail "$(basename "$page"): no option in its OPTIONS section"
	hf=$(mktemp)
	printf '%s\n' "$help" >"$hf"
	for o in $documented; do
		if mentions "$o" "$hf"; then
			pass
		elif [ "$o" = -h ] || [ "$o" = --help ]; then
			# Not every usage text lists itself: running it is the check.
			out=$("$prog" "$o" 2>&1) && [ -n "$out" ] && pass || fail "$name $o fails or prints nothing"
		else
			fail "$(basename "$page") documents $o, which $name --help does not list"
		fi
	done
	rm -f "$hf"
	if command -v scdoc >/dev/null; then
		if scdoc <"$page" >/dev/null; then pass; else fail "$(basename "$page"): scdoc cannot render it"; fi
	fi
	echo "$name: $(basename "$page") checked"
done
# Pages without a program (file formats) must render too.
if command -v scdoc >/dev/null; then
	for page in "$mandir"/*.5.scd; do
		[ -e "$page" ] || continue
		if scdoc <"$page" >/dev/null; then pass; else fail "$(basename "$page"): scdoc cannot render it"; fi
	done
fi
echo "$ok passed, $bad failed"
[ $bad -eq 0 ]
