/* placeholder until written */
typedef int placeholder_crc32c_t;
