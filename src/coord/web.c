/*
 * web.c: the web dashboard's files (web/), embedded in the binary at
 * build time with the assembler's .incbin (the Makefile rebuilds this file
 * when one of them changes), and served without a token: they are code,
 * not data; every datum the page shows comes from the API with the token
 * the user signs in with. Answers carry a strict Content-Security-Policy
 * (only this origin's script, style and API; no inline code; no frames),
 * so the page cannot load anything from elsewhere, nor be framed.
 */
#include <stdio.h>
#include <string.h>

#include "state.h"
#include "route.h"
#include "web.h"
#include "gp.h"

/* .incbin paths are relative to the build's directory: the tree's root. */
/* clang-format off */
#define EMBED(sym, path)                                                    \
	".global " #sym "\n"                                                \
	".type " #sym ", @object\n"                                         \
	".balign 16\n" #sym ":\n"                                           \
	".incbin \"" path "\"\n"                                            \
	".global " #sym "_end\n" #sym "_end:\n"                             \
	".byte 0\n"

__asm__(".pushsection .rodata\n"
	EMBED(gp_web_index_html, "web/index.html")
	EMBED(gp_web_app_js, "web/app.js")
	EMBED(gp_web_style_css, "web/style.css")
	EMBED(gp_web_icon_svg, "web/icon.svg")
	EMBED(gp_web_xterm_js, "web/vendor/xterm.js")
	EMBED(gp_web_xterm_css, "web/vendor/xterm.css")
	".popsection\n");
/* clang-format on */

extern const char gp_web_index_html[], gp_web_index_html_end[];
extern const char gp_web_app_js[], gp_web_app_js_end[];
extern const char gp_web_style_css[], gp_web_style_css_end[];
extern const char gp_web_icon_svg[], gp_web_icon_svg_end[];
extern const char gp_web_xterm_js[], gp_web_xterm_js_end[];
extern const char gp_web_xterm_css[], gp_web_xterm_css_end[];

static const struct asset {
	const char *url;
	const char *ctype;
	const char *start, *end;
} assets[] = {
    {"/", "text/html; charset=utf-8", gp_web_index_html, gp_web_index_html_end},
    {"/ui/app.js", "text/javascript; charset=utf-8", gp_web_app_js,
        gp_web_app_js_end},
    {"/ui/style.css", "text/css; charset=utf-8", gp_web_style_css,
        gp_web_style_css_end},
    {"/ui/icon.svg", "image/svg+xml", gp_web_icon_svg, gp_web_icon_svg_end},
    /* The terminal's emulator, from npm (web/vendor/, scripts/update-xterm.sh). */
    {"/ui/xterm.js", "text/javascript; charset=utf-8", gp_web_xterm_js,
        gp_web_xterm_js_end},
    {"/ui/xterm.css", "text/css; charset=utf-8", gp_web_xterm_css,
        gp_web_xterm_css_end},
};

#define CSP                                                                    \
	"default-src 'none'; script-src 'self'; style-src 'self'; "            \
	"img-src 'self'; connect-src 'self'; base-uri 'none'; "                \
	"form-action 'none'; frame-ancestors 'none'"

static const struct asset *
find(const char *url)
{
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(assets); i++)
		if (strcmp(url, assets[i].url) == 0)
			return &assets[i];
	return NULL;
}

size_t
web_asset_size(const char *url)
{
	const struct asset *a = find(url);

	return a != NULL ? (size_t)(a->end - a->start) : 0;
}

static enum MHD_Result
web_handle(struct MHD_Connection *conn, struct request *req, const char *url,
    const char *method)
{
	const struct asset *a = find(url);
	struct MHD_Response *resp;
	enum MHD_Result rc;
	static const char missing[] = "no such file\n";

	(void)req;
	(void)method;
	if (a == NULL)
		resp = MHD_create_response_from_buffer(strlen(missing),
		    (void *)missing, MHD_RESPMEM_PERSISTENT);
	else
		resp =
		    MHD_create_response_from_buffer((size_t)(a->end - a->start),
		        (void *)a->start, MHD_RESPMEM_PERSISTENT);
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type",
	    a != NULL ? a->ctype : "text/plain; charset=utf-8");
	MHD_add_response_header(resp, "Content-Security-Policy", CSP);
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(resp, "X-Frame-Options", "DENY");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Gpupool-Protocol", "1");
	/* Served over TLS (--tls-cert, or made at first start): HSTS. */
	if (state.cfg.tls_cert[0] != '\0')
		MHD_add_response_header(resp, "Strict-Transport-Security",
		    GP_HSTS);
	rc = MHD_queue_response(conn, a != NULL ? 200 : 404, resp);
	MHD_destroy_response(resp);
	return rc;
}

/* The dashboard's files are code, not data: no token needed. */
const struct api_route web_routes[] = {
    {"/", API_GET | API_HEAD, 0, NULL, 0, API_PUBLIC, web_handle, NULL},
    {"/ui/", API_GET | API_HEAD, 0, NULL, 0, API_PUBLIC, web_handle, NULL},
    {"/ui/*/**", API_GET | API_HEAD, 0, NULL, 0, API_PUBLIC, web_handle,
        NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
