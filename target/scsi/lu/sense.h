/*
 * Sense data (SPC-4 sec. 4.5): fixed or descriptor format, as the LU's
 * control mode page (D_SENSE) selects.  Every error in target/scsi ends here.
 */
#ifndef SCSI_SENSE_H
#define SCSI_SENSE_H

#include <stdbool.h>
#include <stdint.h>

struct scsi_cmd;

enum sense_key {
	SK_NO_SENSE = 0x0, SK_RECOVERED_ERROR = 0x1, SK_NOT_READY = 0x2, SK_MEDIUM_ERROR = 0x3,
	SK_HARDWARE_ERROR = 0x4, SK_ILLEGAL_REQUEST = 0x5, SK_UNIT_ATTENTION = 0x6,
	SK_DATA_PROTECT = 0x7, SK_BLANK_CHECK = 0x8, SK_COPY_ABORTED = 0xa,
	SK_ABORTED_COMMAND = 0xb, SK_VOLUME_OVERFLOW = 0xd, SK_MISCOMPARE = 0xe,
};

/* Common ASC/ASCQ pairs, as (asc << 8 | ascq). */
#define ASC_INVALID_OPCODE            0x2000
#define ASC_LBA_OUT_OF_RANGE          0x2100
#define ASC_INVALID_FIELD_IN_CDB      0x2400
#define ASC_LUN_NOT_SUPPORTED         0x2500
#define ASC_INVALID_FIELD_IN_PARAM    0x2600
#define ASC_PARAM_LIST_LENGTH_ERROR   0x1a00
#define ASC_WRITE_PROTECTED           0x2700
#define ASC_MISCOMPARE_DURING_VERIFY  0x1d00
#define ASC_POWER_ON_RESET            0x2900
#define ASC_BUS_RESET                 0x2902
#define ASC_BUS_DEVICE_RESET          0x2903
#define ASC_NEXUS_LOSS                0x2907
#define ASC_MODE_PARAMS_CHANGED       0x2a01
#define ASC_RESERVATIONS_PREEMPTED    0x2a03
#define ASC_RESERVATIONS_RELEASED     0x2a04
#define ASC_REGISTRATIONS_PREEMPTED   0x2a05
#define ASC_CAPACITY_CHANGED          0x2a09
#define ASC_REPORTED_LUNS_CHANGED     0x3f0e
#define ASC_COMMANDS_CLEARED_BY_OTHER 0x2f00
#define ASC_SAVING_PARAMS_UNSUPPORTED 0x3900
#define ASC_MEDIUM_NOT_PRESENT        0x3a00
#define ASC_INSUFFICIENT_REG_RESOURCES 0x5504
#define ASC_READ_ERROR                0x1100
#define ASC_WRITE_ERROR               0x0c00
#define ASC_INTERNAL_TARGET_FAILURE   0x4400
#define ASC_LU_NOT_READY_STOPPED      0x0402 /* initializing command required */
#define ASC_OVERLAPPED_COMMANDS       0x4e00
#define ASC_MEDIUM_REMOVAL_PREVENTED  0x5302
#define ASC_ALUA_STATE_CHANGED        0x2a06
#define ASC_LU_NOT_ACCESSIBLE_TRANSITION  0x040a
#define ASC_LU_NOT_ACCESSIBLE_STANDBY     0x040b
#define ASC_LU_NOT_ACCESSIBLE_UNAVAILABLE 0x040c

/* CHECK CONDITION with key/asc. */
void sense_set(struct scsi_cmd *cmd, uint8_t key, uint16_t asc);
/* Same with a sense-key specific field pointer (in the CDB if cdb, else in the parameter list); bit < 0: none. */
void sense_set_field(struct scsi_cmd *cmd, uint8_t key, uint16_t asc, bool cdb, uint16_t field, int bit);
/* Same with the INFORMATION field (e.g. the miscompare offset). */
void sense_set_info(struct scsi_cmd *cmd, uint8_t key, uint16_t asc, uint64_t info);
/* Shorthands for the two most common errors. */
void sense_invalid_cdb(struct scsi_cmd *cmd, uint16_t byte, int bit);
void sense_invalid_param(struct scsi_cmd *cmd, uint16_t byte, int bit);

#endif
