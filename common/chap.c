/* placeholder until written */
typedef int placeholder_chap_t;
