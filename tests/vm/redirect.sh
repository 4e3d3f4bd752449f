# Login redirection with the Linux kernel initiator (open-iscsi, iscsi_tcp):
# a gateway drained live.  Sourced by t-isertd-tcp.sh once isertd and iscsid
# run.  A target made with iserctl, one TPG with two portals; a session
# logged in at the first, data written; `redirect` set to the second and the
# session closed by the admin: open-iscsi reconnects to its record's portal,
# is redirected, and the same session (its disk, its data) goes on at the
# second.  A new login at the first lands at the second; with the redirect
# taken away (redirect=null) a login stays at the first.  Behind CHAP, a
# wrong secret is refused at the first portal and the right one redirected
# once CHAP passed, open-iscsi logging in afresh there.  redirect_iser
# (t-isertd-iser.sh, rxe) does the same over iSER: ib_iser follows the
# redirection from one iSER portal to another.
redirect_setup() {   # redirect_setup IQN PORTAL_A PORTAL_B ISER: a RAM LUN behind both portals
	{ iserctl create /backstores/redir-${1##*:} type=ram size=16M &&
		iserctl create /iscsi/$1 &&
		iserctl create /iscsi/$1/tpg1/portals/$2 iser=$4 &&
		iserctl create /iscsi/$1/tpg1/portals/$3 iser=$4 &&
		iserctl create /iscsi/$1/tpg1/luns backstore=redir-${1##*:} &&
		iserctl create /iscsi/$1/tpg1/acls/$ISCSI_INITIATOR; } >/dev/null
}
# session_portal IQN: the portal (without its tag) the session's connection is at now.
session_portal() {
	iscsiadm -m session -P 1 2>/dev/null |
		awk -v t="$1" '$1 == "Target:" { on = ($2 == t) } on && /Current Portal:/ { sub(/,.*/, "", $3); print $3; exit }'
}
session_at() { [ "$(session_portal "$1")" = "$2" ]; }   # session_at IQN PORTAL
say_portal() { echo "    current portal: $(session_portal "$1")"; session_at "$@"; }
redirect_tsih() {   # redirect_tsih IQN: the TSIH of its one session in isertd
	iserctl call sessions target="$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["sessions"][0]["tsih"])'
}
redirected_at() {   # redirected_at PORTAL: logins the portal redirected (iserctl stats --json)
	iserctl stats --json | python3 -c 'import json,sys
print(sum(p["logins"]["redirected"] for p in json.load(sys.stdin)["portals"] if p["portal"] == sys.argv[1]))' "$1"
}
same_session() {   # same_session IQN SID DEV: one session of IQN, still SID, DEV reads back the pattern
	iscsiadm -m session | sed 's/^/    /'
	[ "$(iscsiadm -m session | grep -c " $1 ")" = 1 ] && [ "$(iscsi_sid $1)" = "$2" ] &&
		dd if=/dev/$3 bs=1M count=1 iflag=direct status=none | cmp - /tmp/redirect.pat
}
redirect_section() {
	local t=$VM_PREFIX:redirect a=127.0.0.1:3270 b=127.0.0.1:3271 dev sid n0
	ok "redirect: a target with portals $a and $b (iserctl create)" redirect_setup $t $a $b false || return 1
	ok "redirect: discovery at $a lists $t" has_line $t <<< "$(iscsi_discover $a)"
	ok "redirect: login at $a, 1 LUN" login_wait $t $a 1 || return 1
	ok "redirect: the session is at $a" say_portal $t $a
	read -r _ dev <<< "$(iscsi_disks $t)"
	sid=$(iscsi_sid $t)
	head -c 1M /dev/urandom > /tmp/redirect.pat
	ok "redirect: 1 MiB written to /dev/$dev" dd if=/tmp/redirect.pat of=/dev/$dev bs=1M oflag=direct status=none
	n0=$(redirected_at $a)
	ok "redirect: iserctl set redirect=$b" iserctl set /iscsi/$t/tpg1 redirect=$b
	ok "redirect: the admin closes the session (the drain)" iserctl sessions close "$(redirect_tsih $t)"
	ok "redirect: open-iscsi reconnects and is redirected: the session is at $b" wait_for 40 session_at $t $b
	say_portal $t $b >/dev/null || say_portal $t $b
	ok "redirect: the same session (sid $sid) and disk; the data reads back" same_session $t $sid $dev
	ok "redirect: iserctl stats: $a counted the redirected login" test "$(redirected_at $a)" -gt "$n0"
	ok "redirect: logout" logout_gone $t $a
	ok "redirect: a new login at $a, 1 LUN" login_wait $t $a 1
	ok "redirect: it lands at $b" say_portal $t $b
	ok "redirect: logout" logout_gone $t $a
	# Behind CHAP the redirection comes only once CHAP passed (docs/config.md): a wrong
	# secret is refused at the first portal, the right one is sent on and open-iscsi
	# logs in afresh there, CHAP again.
	ok "redirect: CHAP on the ACL" iserctl set /iscsi/$t/tpg1/acls/$ISCSI_INITIATOR \
		chap.userid=$CHAP_USER chap.password=$CHAP_PASS
	n0=$(redirected_at $a)
	iscsi_chap $t $a $CHAP_USER wrong-secret-123
	ok "redirect: CHAP with a wrong secret at $a: refused, not redirected" \
		eval "! iscsi_login $t $a >/dev/null 2>&1 && [ \"\$(redirected_at $a)\" = $n0 ]"
	iscsi_chap $t $a $CHAP_USER $CHAP_PASS
	ok "redirect: CHAP with the secret at $a, 1 LUN" login_wait $t $a 1
	ok "redirect: it lands at $b, redirected once CHAP passed" \
		eval "say_portal $t $b && [ \"\$(redirected_at $a)\" -gt $n0 ]"
	ok "redirect: logout" logout_gone $t $a
	iscsiadm -m node -T $t -p $a -o update -n node.session.auth.authmethod -v None >/dev/null
	iserctl set /iscsi/$t/tpg1/acls/$ISCSI_INITIATOR chap=null >/dev/null
	ok "redirect: iserctl set redirect=null" iserctl set /iscsi/$t/tpg1 redirect=null
	ok "redirect: a login at $a, 1 LUN" login_wait $t $a 1
	ok "redirect: it stays at $a" say_portal $t $a
	ok "redirect: logout" logout_gone $t $a
}
redirect_iser() {   # redirect_iser PROVIDER IP
	local p=$1 t=$VM_PREFIX:redirect-iser a=$2:3270 b=$2:3271
	ok "$p: redirect: a target with iSER portals $a and $b, redirect=$b" \
		eval "redirect_setup $t $a $b true && iserctl set /iscsi/$t/tpg1 redirect=$b >/dev/null" || return 1
	iscsi_node $t $a iser
	ok "$p: redirect: login over iSER at $a, 1 LUN" \
		eval "iscsi_login $t $a iser >/dev/null && iscsi_wait_disks $t 1" || return 1
	ok "$p: redirect: the iSER session is at $b" say_portal $t $b
	ok "$p: redirect: logout" eval "iscsi_logout $t $a iser >/dev/null && iscsi_no_session $t"
	iserctl delete /iscsi/$t >/dev/null
}
