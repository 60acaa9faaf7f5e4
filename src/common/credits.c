/*
 * credits.c: parsing and printing amounts of credits exactly (see
 * credits.h): decimal text to integer micro-credits and back.
 */
#include "credits.h"

#include <stdio.h>
#include <string.h>

#include "gp.h"

int
gp_credits_parse(const char *text, int64_t max, int64_t *micro)
{
	int64_t whole = 0, frac = 0, scale = GP_MICRO;
	const char *p = text;
	int digits = 0, decimals = 0;

	if (text == NULL)
		return GP_EINVAL;
	while (*p >= '0' && *p <= '9') {
		if (whole > (INT64_MAX / GP_MICRO - (*p - '0')) / 10)
			return GP_EINVAL;
		whole = whole * 10 + (*p++ - '0');
		digits++;
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (++decimals > 6)
				return GP_EINVAL;
			scale /= 10;
			frac += (*p++ - '0') * scale;
		}
		if (decimals == 0)
			return GP_EINVAL;
	}
	if (*p != '\0' || (digits == 0 && decimals == 0))
		return GP_EINVAL;
	if (whole > (max - frac) / GP_MICRO ||
	    whole * GP_MICRO + frac > max)
		return GP_EINVAL;
	*micro = whole * GP_MICRO + frac;
	return 0;
}

void
gp_credits_format(int64_t micro, char *out, size_t len)
{
	/* INT64_MIN has no positive counterpart: go through unsigned. */
	uint64_t m = micro < 0 ? 0 - (uint64_t)micro : (uint64_t)micro;
	char frac[8];
	int n;

	snprintf(frac, sizeof(frac), "%06llu",
	    (unsigned long long)(m % (uint64_t)GP_MICRO));
	n = 6;
	while (n > 0 && frac[n - 1] == '0')
		frac[--n] = '\0';
	snprintf(out, len, "%s%llu%s%s", micro < 0 ? "-" : "",
	    (unsigned long long)(m / (uint64_t)GP_MICRO), n > 0 ? "." : "",
	    frac);
}
