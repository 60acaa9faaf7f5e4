/*
 * web.h: the web dashboard's embedded files (web.c).
 */
#ifndef GP_COORD_WEB_H
#define GP_COORD_WEB_H

#include "state.h"

/* web.c: the dashboard's embedded files (GET /, /ui/...): web_routes. */
/* The size of an embedded file (0: none); for tests. */
size_t web_asset_size(const char *url);

#endif
