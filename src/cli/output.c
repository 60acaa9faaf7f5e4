/*
 * output.c: what the CLI prints: aligned tables, elapsed times, sizes
 * and JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "gp.h"

int
gp_table_init(struct gp_table *t, int ncols, const char *const *header)
{
	memset(t, 0, sizeof(*t));
	t->ncols = ncols;
	t->right = calloc((size_t)ncols, sizeof(*t->right));
	if (t->right == NULL)
		return GP_ENOMEM;
	return gp_table_add(t, header);
}

int
gp_table_add(struct gp_table *t, const char *const *cells)
{
	char **grown;
	int i;

	grown = realloc(t->cells,
	    (size_t)(t->nrows + 1) * (size_t)t->ncols * sizeof(*grown));
	if (grown == NULL)
		return GP_ENOMEM;
	t->cells = grown;
	for (i = 0; i < t->ncols; i++) {
		grown[t->nrows * t->ncols + i] =
		    strdup(cells[i] != NULL ? cells[i] : "-");
		if (grown[t->nrows * t->ncols + i] == NULL) {
			while (i-- > 0)
				free(grown[t->nrows * t->ncols + i]);
			return GP_ENOMEM;
		}
	}
	t->nrows++;
	return 0;
}

int
gp_table_render(const struct gp_table *t, struct gp_buf *out)
{
	size_t *width;
	const char *cell;
	int r, c, last;

	width = calloc((size_t)t->ncols, sizeof(*width));
	if (width == NULL)
		return GP_ENOMEM;
	for (r = 0; r < t->nrows; r++)
		for (c = 0; c < t->ncols; c++)
			if (strlen(t->cells[r * t->ncols + c]) > width[c])
				width[c] = strlen(t->cells[r * t->ncols + c]);
	for (r = 0; r < t->nrows; r++) {
		for (c = 0; c < t->ncols; c++) {
			cell = t->cells[r * t->ncols + c];
			last = c == t->ncols - 1;
			if (c > 0 && gp_buf_append(out, "  ", 2) != 0)
				goto fail;
			if (t->right[c] &&
			    gp_buf_printf(out, "%*s", (int)width[c], cell) != 0)
				goto fail;
			if (!t->right[c] &&
			    gp_buf_printf(out, "%-*s", last ? 0 : (int)width[c],
			        cell) != 0)
				goto fail;
		}
		if (gp_buf_append(out, "\n", 1) != 0)
			goto fail;
	}
	free(width);
	return 0;
fail:
	free(width);
	return GP_ENOMEM;
}

void
gp_table_fini(struct gp_table *t)
{
	int i;

	for (i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->right);
	memset(t, 0, sizeof(*t));
}

void
gp_cli_format_elapsed(int64_t ms, char *out, size_t len)
{
	int64_t s = ms < 0 ? 0 : ms / 1000;
	long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60,
	          sec = s % 60;

	if (d > 0)
		snprintf(out, len, "%lld-%02lld:%02lld:%02lld", d, h, m, sec);
	else if (h > 0)
		snprintf(out, len, "%lld:%02lld:%02lld", h, m, sec);
	else if (m > 0)
		snprintf(out, len, "%lld:%02lld", m, sec);
	else
		snprintf(out, len, "%llds", sec);
}

void
gp_cli_format_mib(int64_t mib, char *out, size_t len)
{
	if (mib >= 1024 * 1024 && mib % (1024 * 1024) == 0)
		snprintf(out, len, "%lldT", (long long)(mib / (1024 * 1024)));
	else if (mib >= 1024 * 1024)
		snprintf(out, len, "%.1fT", (double)mib / (1024 * 1024));
	else if (mib >= 1024 && mib % 1024 == 0)
		snprintf(out, len, "%lldG", (long long)(mib / 1024));
	else if (mib >= 1024)
		snprintf(out, len, "%.1fG", (double)mib / 1024);
	else
		snprintf(out, len, "%lldM", (long long)mib);
}

int
gp_cli_print_json(json_t *value)
{
	if (json_dumpf(value, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) !=
	    0)
		return GP_EIO;
	fputc('\n', stdout);
	return 0;
}

int
gp_cli_show_list(const struct gp_cli_args *args, json_t *reply,
    int (*render)(json_t *reply, struct gp_buf *out))
{
	struct gp_buf out = {0};
	int rc;

	if (gp_cli_flag(args, "json")) {
		gp_cli_print_json(reply);
		json_decref(reply);
		return 0;
	}
	rc = render(reply, &out);
	json_decref(reply);
	if (rc != 0) {
		gp_cli_error("unexpected answer from the coordinator: %s",
		    gp_strerror(rc));
		gp_buf_free(&out);
		return GP_CLI_EXIT_FAIL;
	}
	fwrite(out.data, 1, out.len, stdout);
	gp_buf_free(&out);
	return 0;
}

int
gp_cli_get_list(const struct gp_cli_args *args, const char *path,
    int (*render)(json_t *reply, struct gp_buf *out))
{
	struct gp_cli_conn conn;
	json_t *reply;
	int rc;

	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	rc = gp_cli_call(&conn, "GET", path, NULL, 0, &reply, NULL);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	return gp_cli_show_list(args, reply, render);
}

const char *
gp_cli_json_str(json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}
