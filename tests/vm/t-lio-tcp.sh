#!/bin/bash
# The harness checked against a known-good target: the kernel initiator
# sequences of t-isertd-tcp.sh and t-isertd-nvme.sh against LIO in the guest.
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/lio.sh"
PORTAL=127.0.0.1:3260
vm_cleanup_hook() { iscsiadm -m node --logoutall=all >/dev/null 2>&1; }
must "nvme: $NVME_DEV present" nvme_ready
must "LIO configured through configfs" lio_setup $PORTAL
must "iscsid starts" iscsi_start
suite_tcp $PORTAL
suite_nvme $PORTAL
vm_done
