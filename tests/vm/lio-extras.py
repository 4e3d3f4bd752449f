#!/usr/bin/python3
# lio-extras.py IQN FILEIO_PATH ISER_IP OUT.json: cases lio.sh's layout does not
# have, made with rtslib-fb (the library targetcli is built on), then LIO's whole
# configuration saved with rtslib's save_to_file: what `targetcli saveconfig`
# writes.  The result is the fixture of `iserctl import lio` (tests/import/).
#   IQN tpg1: demo mode (generate_node_acls) with TPG-level CHAP, a fileio LUN
#       (write-back) in an ALUA group, a second ramdisk LUN; portals TCP
#       127.0.0.1:3261 and iSER ISER_IP:3260 (skipped when ISER_IP is "-")
#   IQN tpg2: an ACL with mapped LUN 5 -> TPG LUN 0 write-protected, non-default
#       attributes and parameters (some carried, some not); portal 127.0.0.1:3263
import sys
from rtslib_fb import (RTSRoot, FabricModule, Target, TPG, LUN, NetworkPortal, NodeACL, MappedLUN,
                       FileIOStorageObject, RDMCPStorageObject, ALUATargetPortGroup)

iqn, fpath, iser_ip, out = sys.argv[1:5]
iscsi = FabricModule('iscsi')
fio = FileIOStorageObject('file0', dev=fpath, size=32 << 20, write_back=True)
fio.set_attribute('emulate_tpu', 1)
rd = RDMCPStorageObject('ramx', size=16 << 20)
ao = ALUATargetPortGroup(fio, 'gw_a', tag=7)
ao.alua_access_type = 3
ao.alua_access_state = 1
ao.preferred = 1
ao.implicit_trans_secs = 10

t = Target(iscsi, iqn)
g1 = TPG(t, 1)
l0 = LUN(g1, 0, fio)
l0.alua_tg_pt_gp_name = 'gw_a'
LUN(g1, 1, rd)
NetworkPortal(g1, '127.0.0.1', 3261)
if iser_ip != '-':
    NetworkPortal(g1, iser_ip, 3260).iser = True
g1.set_attribute('generate_node_acls', 1)
g1.set_attribute('demo_mode_write_protect', 0)
g1.set_attribute('cache_dynamic_acls', 1)
g1.set_attribute('authentication', 1)
g1.chap_userid = 'demo-user'
g1.chap_password = 'demo-secret-0123'
g1.enable = True

g2 = TPG(t, 2)
l2 = LUN(g2, 0, rd)
NetworkPortal(g2, '127.0.0.1', 3263)
a = NodeACL(g2, 'iqn.2026-11.org.isert.vm:init2')
MappedLUN(a, 5, l2, write_protect=True)
a.set_attribute('nopin_timeout', 10)
g2.set_attribute('generate_node_acls', 0)
g2.set_attribute('authentication', 0)
g2.set_attribute('default_cmdsn_depth', 32)
g2.set_attribute('tpg_enabled_sendtargets', 0)
g2.set_parameter('MaxRecvDataSegmentLength', '65536')
g2.set_parameter('ImmediateData', 'No')
g2.set_parameter('DataPDUInOrder', 'No')
g2.enable = True

RTSRoot().save_to_file(out)
