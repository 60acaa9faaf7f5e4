/*
 * fuzz_acct_body.c: libFuzzer harness for the accounting request decoders
 * (acct_decode: group, members, price, budget and token bodies) and the
 * price file parser (acct_prices_parse), which take bytes from the network
 * and an admin's file. The first byte picks which; what decodes must
 * satisfy every bound the decoder promises, else abort().
 * Corpus: tests/fuzz/corpus/acct_body/.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coord/acct.h"
#include "gp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
name_ok(const char *name, int may_be_empty)
{
	return (may_be_empty && name[0] == '\0') || gp_name_valid(name);
}

static void
check_request(enum acct_body kind, const struct acct_request *r)
{
	if (r->kind != kind || !name_ok(r->name, 1) || !name_ok(r->user, 1) ||
	    !name_ok(r->group, 1) || !name_ok(r->provider, 1))
		abort();
	switch (kind) {
	case ACCT_BODY_GROUP_CREATE:
		if (!gp_name_valid(r->name))
			abort();
		/* fall through */
	case ACCT_BODY_GROUP_SET:
		if (r->weight < 1 || r->weight > ACCT_WEIGHT_MAX)
			abort();
		break;
	case ACCT_BODY_MEMBERS:
		if ((r->user[0] != '\0') == (r->provider[0] != '\0') ||
		    (r->provider[0] != '\0' &&
			r->member_op != ACCT_MEMBER_MOVE))
			abort();
		break;
	case ACCT_BODY_PRICE:
		if (!gp_name_valid(r->name) || r->amount < 0 ||
		    r->amount > GP_PRICE_MICRO_MAX ||
		    (r->remove != 0 && r->remove != 1))
			abort();
		break;
	case ACCT_BODY_BUDGET:
		if ((r->user[0] != '\0') == (r->group[0] != '\0') ||
		    r->amount < 0 || r->amount > GP_AMOUNT_MICRO_MAX ||
		    acct_period_name(r->period)[0] == '?')
			abort();
		break;
	case ACCT_BODY_TOKEN:
		if (!gp_name_valid(r->name) || gp_role_name(r->role) == NULL)
			abort();
		break;
	case ACCT_BODY_COUNT:
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct acct_price table[8];
	struct acct_request r;
	char err[256];
	json_t *body;
	size_t n, i;
	int which;

	if (size < 1)
		return 0;
	which = data[0] % (ACCT_BODY_COUNT + 1);
	data++;
	size--;
	if (which == ACCT_BODY_COUNT) {
		if (acct_prices_parse((const char *)data, size, table, 8, &n,
			err, sizeof(err)) == 0) {
			if (n > 8)
				abort();
			for (i = 0; i < n; i++)
				if (!gp_name_valid(table[i].cls) ||
				    table[i].micro < 0 ||
				    table[i].micro > GP_PRICE_MICRO_MAX)
					abort();
		} else if (err[0] == '\0') {
			abort();
		}
		return 0;
	}
	body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES,
	    NULL);
	err[0] = '\0';
	if (acct_decode((enum acct_body)which, body, &r, err, sizeof(err)) ==
	    0)
		check_request((enum acct_body)which, &r);
	else if (err[0] == '\0')
		abort(); /* a refusal always says why */
	json_decref(body);
	return 0;
}
