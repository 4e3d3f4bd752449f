/* placeholder until written */
typedef int placeholder_mode_t;
