/*
 * credits.h: amounts of credits as the ledger keeps them: integers of
 * micro-credits (1 credit = 1,000,000), never floating point. Shared by
 * the coordinator (prices, budgets, the ledger) and the CLI (`--max-price
 * 2.5`, the usage tables). See docs/accounting.md.
 */
#ifndef GP_CREDITS_H
#define GP_CREDITS_H

#include <stddef.h>
#include <stdint.h>

#define GP_MICRO	       1000000LL
/* The largest price: a million credits per GPU-hour. */
#define GP_PRICE_MICRO_MAX     (1000000LL * GP_MICRO)
/* The largest budget: a trillion credits. */
#define GP_AMOUNT_MICRO_MAX    (1000000000000LL * GP_MICRO)

/*
 * Parses a non-negative decimal amount of credits ("2", "2.5", "0.000001",
 * at most 6 decimals) into micro-credits. OUT: *micro, only on success.
 * Returns 0, or GP_EINVAL (not such a number, or more than max).
 */
int gp_credits_parse(const char *text, int64_t max, int64_t *micro);

/*
 * Writes micro-credits as credits without trailing zeros ("2.5", "12",
 * "-0.000001") into out (at least 32 bytes).
 */
void gp_credits_format(int64_t micro, char *out, size_t len);

#endif
