# open-iscsi discovers isertd's targets through iSNS (docs/admin.md "iSNS"):
# open-isns's isnsd in the guest (port 3620, no authentication, a default
# discovery domain), isertd registering with it (global.isns); then
# `iscsiadm -m discovery -t isns` lists each enabled target at its own
# portals only (a disabled portal group is not registered, a target is not
# offered at another target's portal), and a login through a record that
# discovery made works.  Sourced by t-guest.sh; stops what it started.
ISNS_PORT=3620
ISNS_T1=$VM_PREFIX:isns1 ISNS_T2=$VM_PREFIX:isns2 ISNS_T3=$VM_PREFIX:isns3
ISNS_PID=
isns_files() {
	cat > /tmp/isnsd.conf <<-EOF
		SourceName = iqn.2026-11.org.isert.vm:isnsd
		BindAddress = 127.0.0.1:$ISNS_PORT
		ControlSocket = /tmp/isnsctl
		PIDFile = /tmp/isnsd.pid
		Security = 0
		SLPRegister = 0
		DefaultDiscoveryDomain = 1
	EOF
	cat > /tmp/isertd-isns.json <<-EOF
		{ "backstores": [ { "name": "isns0", "type": "ram", "size": "16M" } ],
		  "targets": [
		    { "iqn": "$ISNS_T1", "alias": "isns one", "tpgs": [ { "tag": 1, "portals": [ { "ip": "127.0.0.1", "port": 3621 } ],
		      "luns": [ { "lun": 0, "backstore": "isns0" } ],
		      "acls": [ { "initiator": "$ISCSI_INITIATOR", "mapped_luns": [ { "mapped_lun": 0, "tpg_lun": 0 } ] } ] } ] },
		    { "iqn": "$ISNS_T2", "tpgs": [ { "tag": 1, "enable": false, "portals": [ { "ip": "127.0.0.1", "port": 3622 } ] } ] },
		    { "iqn": "$ISNS_T3", "tpgs": [ { "tag": 5, "portals": [ { "ip": "0.0.0.0", "port": 3623 } ] } ] } ],
		  "global": { "isns": { "server": "127.0.0.1:$ISNS_PORT", "entity": "isert-vm" } } }
	EOF
}
isnsd_up() { isns_files && { isnsd -f -c /tmp/isnsd.conf > "$VM_WORK/isnsd.log" 2>&1 & ISNS_PID=$!; } &&
	wait_for 10 port_listening $ISNS_PORT; }
isns_registered() { grep -q "entity isert-vm registered: 2 targets" "$VM_WORK/isertd.log"; }
isns_discovered() { iscsiadm -m discovery -t isns -p 127.0.0.1:$ISNS_PORT > /tmp/isns-disc.txt 2>&1; local rc=$?
	sed 's/^/    /' /tmp/isns-disc.txt; return $rc; }
isns_lists() { grep -qx -- "$1 $2" /tmp/isns-disc.txt; }      # isns_lists PORTAL,TAG IQN
isns_not() { ! grep -q -- "$1" /tmp/isns-disc.txt; }
isns_section() {
	must "iSNS: isnsd listens on $ISNS_PORT" isnsd_up
	ok "iSNS: isertd starts with global.isns" isertd_start /tmp/isertd-isns.json 3621 || return 1
	ok "iSNS: isertd registered its entity" wait_for 10 isns_registered
	must "iSNS: iscsid" iscsi_start
	ok "iSNS: iscsiadm -m discovery -t isns -p 127.0.0.1:$ISNS_PORT" isns_discovered
	ok "iSNS: $ISNS_T1 at 127.0.0.1:3621, tag 1" isns_lists 127.0.0.1:3621,1 $ISNS_T1
	ok "iSNS: $ISNS_T3 at its wildcard portal as 127.0.0.1:3623, tag 5" isns_lists 127.0.0.1:3623,5 $ISNS_T3
	ok "iSNS: $ISNS_T2 (its only portal group disabled) not offered" isns_not $ISNS_T2
	ok "iSNS: no target offered at another target's portal" \
		sh -c "[ \$(grep -c ' iqn\.' /tmp/isns-disc.txt) -eq 2 ]"
	ok "iSNS: login through the record discovery made, 1 LUN" login_wait $ISNS_T1 127.0.0.1:3621 1
	ok "iSNS: logout" logout_gone $ISNS_T1 127.0.0.1:3621
	ok "iSNS: isertd stops (and deregisters)" isertd_stop
	ok "iSNS: isertd logged the deregistration" grep -q "entity isert-vm deregistered" "$VM_WORK/isertd.log"
	ok "iSNS: discovery then finds nothing" sh -c "! iscsiadm -m discovery -t isns -p 127.0.0.1:$ISNS_PORT 2>/dev/null | grep -q iqn"
	iscsiadm -m node -o delete >/dev/null 2>&1
	kill -TERM $ISNS_PID 2>/dev/null
	wait $ISNS_PID 2>/dev/null
	return 0
}
isns_section
