/* placeholder until written */
typedef int placeholder_file_t;
