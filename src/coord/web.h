/*
 * web.h: the web dashboard's embedded files (web.c).
 */
#ifndef GP_COORD_WEB_H
#define GP_COORD_WEB_H

#include "state.h"

/* web.c: the dashboard's embedded files (GET /, /ui/...). */
int web_route_match(const char *url, const char *method);
enum MHD_Result web_handle(struct MHD_Connection *conn, const char *url);
/* The size of an embedded file (0: none); for tests. */
size_t web_asset_size(const char *url);

#endif
