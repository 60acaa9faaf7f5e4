/*
 * web.h: the web dashboard's embedded files (web.c).
 */
#ifndef GP_COORD_WEB_H
#define GP_COORD_WEB_H

#include "state.h"

/* web.c: the dashboard's embedded files (GET /, /ui/...): web_routes. */
/*
 * Strict-Transport-Security's value on what the coordinator serves over
 * TLS: the dashboard's pages (web.c) and the job port proxy's own answers
 * (proxy.c). A year, the host alone (the proxy's job origins get it from
 * their own sign-in page).
 */
#define GP_HSTS "max-age=31536000"

/* The size of an embedded file (0: none); for tests. */
size_t web_asset_size(const char *url);

#endif
