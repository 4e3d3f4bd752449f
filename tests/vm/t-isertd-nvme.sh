#!/bin/bash
# The Linux kernel initiator against isertd serving the guest's NVMe namespace
# through the block backstore (O_DIRECT, io_uring): FUA, SYNCHRONIZE CACHE and
# UNMAP reach the namespace; ext4 with fstrim; data survives a re-login.
VM_KNOWN=$(dirname "$VM_LIB")/known-failures.txt
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
PORTAL=127.0.0.1:3260
vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	ok "isertd stops cleanly on SIGTERM" isertd_stop
}
must "nvme: $NVME_DEV present" nvme_ready
must "isertd starts (isertd-nvme.json)" isertd_start "$(dirname "$VM_LIB")/isertd-nvme.json"
must "iscsid starts" iscsi_start
suite_nvme $PORTAL
vm_done
