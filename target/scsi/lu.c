/* placeholder until written */
typedef int placeholder_lu_t;
