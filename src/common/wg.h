/*
 * wg.h: a gang's WireGuard overlay, for parts whose agents sit behind
 * different NATs (issue 14; docs/agent.md, "Gangs behind NATs").
 *
 * What is here so far: the agent's key pair (X25519 through libsodium,
 * in WireGuard's base64 form, as `wg genkey` and `wg pubkey` write it) and
 * the checks on what the coordinator sends of the other parts (their
 * public keys and endpoints, in the assignment's gang.overlay). Running
 * wireguard-go for a gang is not done yet.
 */
#ifndef GP_WG_H
#define GP_WG_H

#include <stddef.h>

/* A WireGuard key in base64: 44 characters and a NUL. */
#define GP_WG_KEY_LEN 45

/* One part's peer in a gang's overlay, as the coordinator sends it. */
struct gp_overlay_peer {
	char key[GP_WG_KEY_LEN]; /* its public key ("": no overlay) */
	char endpoint[264];	 /* host:port its agent listens on */
};

/*
 * Makes a key pair: priv and pub get base64 keys (the private one stays
 * with the agent that made it; wipe it with sodium_memzero when done).
 * 0, or GP_EIO when libsodium cannot start.
 */
int gp_wg_keypair(char priv[GP_WG_KEY_LEN], char pub[GP_WG_KEY_LEN]);
/* The public key of a base64 private key: 0, or GP_EINVAL. */
int gp_wg_pubkey(const char *priv, char pub[GP_WG_KEY_LEN]);
/* 1 when s is a base64 WireGuard key (44 characters, 32 bytes). */
int gp_wg_key_valid(const char *s);
/*
 * 1 when s is host:port: a host of 1 to 253 letters, digits, '.', '-',
 * '_' (no IPv6 yet) and a port 1..65535.
 */
int gp_overlay_endpoint_valid(const char *s);

#endif
