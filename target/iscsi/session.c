/* placeholder until written */
typedef int placeholder_session_t;
