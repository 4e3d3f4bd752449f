/* placeholder until written */
typedef int placeholder_vpd_t;
