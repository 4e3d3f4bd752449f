/* placeholder until written */
typedef int placeholder_pr_t;
