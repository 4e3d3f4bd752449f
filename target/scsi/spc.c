/* placeholder until written */
typedef int placeholder_spc_t;
