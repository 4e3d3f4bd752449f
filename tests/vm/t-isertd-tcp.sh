#!/bin/bash
# The Linux kernel initiator (open-iscsi, iscsi_tcp) against isertd over TCP:
# discovery, login without CHAP, with one-way and with mutual CHAP, every
# mapped LUN as a block device with ext4 written, checked and read back, and
# refusals (no CHAP, wrong secret, bad mutual secret, initiator without ACL);
# then live changes through the admin socket (iserctl) in one session with
# ext4 mounted: a hot-added LUN after a rescan, a grown file LUN's new size.
VM_KNOWN=$(dirname "$VM_LIB")/known-failures.txt
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
PORTAL=127.0.0.1:3260
ISERTD_SOCK=/run/isertd-vm.sock
vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	ok "isertd stops cleanly on SIGTERM" isertd_stop
}
must "isertd starts (isertd-tcp.json)" isertd_start "$(dirname "$VM_LIB")/isertd-tcp.json"
must "iscsid starts" iscsi_start
suite_tcp $PORTAL
live_changes tcp $VM_PREFIX:live $PORTAL default
ok "tcp: live: logout" live_end $VM_PREFIX:live $PORTAL default
vm_done
