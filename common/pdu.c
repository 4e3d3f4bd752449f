/* placeholder until written */
typedef int placeholder_pdu_t;
