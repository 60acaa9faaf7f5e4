/*
 * wg.c: WireGuard keys and the checks on a gang's overlay peers
 * (wg.h).
 */
#include "wg.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"

#define B64 sodium_base64_VARIANT_ORIGINAL

static int
key_decode(const char *s, unsigned char out[crypto_scalarmult_BYTES])
{
	size_t n = 0;

	if (strlen(s) != GP_WG_KEY_LEN - 1)
		return GP_EINVAL;
	if (sodium_base642bin(out, crypto_scalarmult_BYTES, s, strlen(s),
	        NULL, &n, NULL, B64) != 0 ||
	    n != crypto_scalarmult_BYTES)
		return GP_EINVAL;
	return 0;
}

int
gp_wg_key_valid(const char *s)
{
	unsigned char k[crypto_scalarmult_BYTES];

	return s != NULL && key_decode(s, k) == 0;
}

int
gp_wg_pubkey(const char *priv, char pub[GP_WG_KEY_LEN])
{
	unsigned char sk[crypto_scalarmult_SCALARBYTES];
	unsigned char pk[crypto_scalarmult_BYTES];
	int ret = GP_EINVAL;

	if (sodium_init() < 0)
		return GP_EIO;
	if (key_decode(priv, sk) != 0)
		goto out;
	/* WireGuard clamps the scalar (as `wg pubkey` does) */
	sk[0] &= 248;
	sk[31] = (unsigned char)((sk[31] & 127) | 64);
	if (crypto_scalarmult_base(pk, sk) != 0)
		goto out;
	sodium_bin2base64(pub, GP_WG_KEY_LEN, pk, sizeof(pk), B64);
	ret = 0;
out:
	sodium_memzero(sk, sizeof(sk));
	return ret;
}

int
gp_wg_keypair(char priv[GP_WG_KEY_LEN], char pub[GP_WG_KEY_LEN])
{
	unsigned char sk[crypto_scalarmult_SCALARBYTES];
	int ret;

	if (sodium_init() < 0)
		return GP_EIO;
	randombytes_buf(sk, sizeof(sk));
	sk[0] &= 248;
	sk[31] = (unsigned char)((sk[31] & 127) | 64);
	sodium_bin2base64(priv, GP_WG_KEY_LEN, sk, sizeof(sk), B64);
	sodium_memzero(sk, sizeof(sk));
	if ((ret = gp_wg_pubkey(priv, pub)) != 0)
		sodium_memzero(priv, GP_WG_KEY_LEN);
	return ret;
}

int
gp_overlay_endpoint_valid(const char *s)
{
	const char *colon;
	char *end;
	size_t i;
	long port;

	if (s == NULL || (colon = strrchr(s, ':')) == NULL || colon == s ||
	    (size_t)(colon - s) > 253)
		return 0;
	for (i = 0; s + i < colon; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		        (s[i] >= 'A' && s[i] <= 'Z') ||
		        (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		        s[i] == '-' || s[i] == '_'))
			return 0;
	if (colon[1] < '0' || colon[1] > '9')
		return 0;
	port = strtol(colon + 1, &end, 10);
	return *end == '\0' && port >= 1 && port <= 65535;
}
