/* placeholder until written */
typedef int placeholder_tmf_t;
