/* placeholder until written */
typedef int placeholder_login_t;
