/* placeholder until written */
typedef int placeholder_portal_t;
