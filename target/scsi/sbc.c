/* placeholder until written */
typedef int placeholder_sbc_t;
