#!/bin/bash
# The Linux kernel initiator against isertd serving the guest's NVMe namespace
# through the block backstore (O_DIRECT, io_uring): FUA, SYNCHRONIZE CACHE and
# UNMAP reach the namespace; ext4 with fstrim; data survives a re-login.
# APTPL (aptpl_restart): a registration and reservation made with sg_persist
# --param-aptpl survive isertd killed with SIGKILL and started again.
VM_KNOWN=$(dirname "$VM_LIB")/known-failures.txt
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
PORTAL=127.0.0.1:3260
CONFIG=$(dirname "$VM_LIB")/isertd-nvme.json
# isertd's default global.state_dir (docs/reservations.md); the guest's root is a tmpfs overlay.
STATE_DIR=/var/lib/isert
APTPL_KEY=0xa1b2c3d4

# ---- APTPL: persistent reservations across a target restart -------------------
pr_keys_are() {   # pr_keys_are DEV KEY...: READ KEYS lists exactly these keys
	local got
	got=$(sg_persist --in --read-keys "$1" 2>/dev/null) || return 1
	shift
	[ "$(echo "$got" | grep -Eo '^ +0x[0-9a-f]+$' | tr -d ' ' | tr '\n' ' ')" = "$* " ]
}
pr_out() { sg_persist --out "$@" >/dev/null; }   # quiet: sg_persist prints the INQUIRY header
pr_reserved_by() {   # pr_reserved_by DEV KEY TYPE-TEXT: READ RESERVATION shows KEY and type
	local got
	got=$(sg_persist --in --read-reservation "$1" 2>/dev/null) || return 1
	echo "$got" | grep -q "Key=$2\$" && echo "$got" | grep -q "type: $3"
}
ptpl_active() { sg_persist --in --report-capabilities "$1" 2>/dev/null | grep -q 'PTPL_A): 1'; }
state_files() { ls $STATE_DIR/pr-*.json 2>/dev/null | wc -l; }
state_files_are() { [ "$(state_files)" -eq "$1" ]; }
isertd_kill9() { kill -9 $ISERTD_PID && wait $ISERTD_PID; ISERTD_PID=; return 0; }
aptpl_restart() {
	local p=$1 t=$VM_PREFIX:nvme lun dev
	must "$t: login for APTPL" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	ok "sg_persist: register $APTPL_KEY with --param-aptpl" \
		pr_out --register --param-sark=$APTPL_KEY --param-aptpl /dev/$dev
	ok "sg_persist: reserve Write Exclusive, registrants only" \
		pr_out --reserve --param-rk=$APTPL_KEY --prout-type=5 /dev/$dev
	ok "REPORT CAPABILITIES: PTPL_A=1" ptpl_active /dev/$dev
	ok "the state is in $STATE_DIR (one file)" state_files_are 1
	sed 's/^/    /' $STATE_DIR/pr-*.json
	ok "isertd killed with SIGKILL" isertd_kill9
	must "isertd starts again" isertd_start "$CONFIG"
	grep "restored" "$VM_WORK/isertd.log" | sed 's/^/    /'
	# The kernel initiator reconnects on its own (same initiator port: the same I_T nexus).
	ok "after the restart, sg_persist -k shows $APTPL_KEY" wait_for 60 pr_keys_are /dev/$dev $APTPL_KEY
	ok "after the restart, sg_persist -r shows $APTPL_KEY holding Write Exclusive, registrants only" \
		pr_reserved_by /dev/$dev $APTPL_KEY "Write Exclusive, registrants only"
	ok "after the restart, the registrant still writes" \
		sg_dd if=/dev/zero of=/dev/$dev bs=512 count=8 seek=81920 oflag=sgio
	ok "release" pr_out --release --param-rk=$APTPL_KEY --prout-type=5 /dev/$dev
	ok "unregister without APTPL: the state file goes" \
		pr_out --register --param-rk=$APTPL_KEY --param-sark=0 /dev/$dev
	ok "no state file left" state_files_are 0
	must "$t: logout" logout_gone $t "$p"
}

vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	ok "isertd stops cleanly on SIGTERM" isertd_stop
}
must "nvme: $NVME_DEV present" nvme_ready
must "isertd starts (isertd-nvme.json)" isertd_start "$CONFIG"
must "iscsid starts" iscsi_start
suite_nvme $PORTAL
aptpl_restart $PORTAL
vm_done
