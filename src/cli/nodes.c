/*
 * nodes.c: `gpupool nodes` (the nodes, their GPUs and what runs on them)
 * and `gpupool whoami`.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

/* Appends text to a comma-separated list unless it is already there. */
static void
add_unique(struct gp_buf *list, const char *text)
{
	const char *p = list->data;
	size_t n = strlen(text);

	while (p != NULL && p < list->data + list->len) {
		if (strncmp(p, text, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return;
		p = strchr(p, ',');
		if (p == NULL)
			break;
		p++;
	}
	gp_buf_printf(list, "%s%s", list->len > 0 ? "," : "", text);
}

int
gp_cli_render_nodes(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"NODE", "GROUP", "STATE", "GPUS",
	    "MODEL", "GPU-MEM", "CPUS", "MEM", "JOBS"};
	struct gp_buf models = {0}, jobs = {0};
	json_t *nodes, *node, *gpus, *gpu;
	char used[32], gpumem[32], cpus[32], mem[32], id[32];
	const char *row[9];
	struct gp_table t;
	size_t i, j, in_use;
	int64_t min_mem;
	int rc;

	nodes = json_object_get(reply, "nodes");
	if (!json_is_array(nodes))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 9, header)) != 0)
		return rc;
	t.right[3] = t.right[5] = t.right[6] = t.right[7] = 1;
	json_array_foreach(nodes, i, node)
	{
		gpus = json_object_get(node, "gpus");
		in_use = 0;
		min_mem = -1;
		json_array_foreach(gpus, j, gpu)
		{
			json_t *job = json_object_get(gpu, "job");
			int64_t m =
			    json_integer_value(json_object_get(gpu, "mem_mib"));
			if (json_is_integer(job)) {
				in_use++;
				snprintf(id, sizeof(id),
				    "%" JSON_INTEGER_FORMAT,
				    json_integer_value(job));
				add_unique(&jobs, id);
			}
			if (gp_cli_json_str(gpu, "model") != NULL)
				add_unique(&models,
				    gp_cli_json_str(gpu, "model"));
			if (min_mem < 0 || m < min_mem)
				min_mem = m;
		}
		snprintf(used, sizeof(used), "%zu/%zu", in_use,
		    json_array_size(gpus));
		if (min_mem >= 0)
			gp_cli_format_mib(min_mem, gpumem, sizeof(gpumem));
		snprintf(cpus, sizeof(cpus), "%" JSON_INTEGER_FORMAT,
		    json_integer_value(json_object_get(node, "cpus")));
		gp_cli_format_mib(json_integer_value(
		                      json_object_get(node, "mem_mib")),
		    mem, sizeof(mem));
		row[0] = gp_cli_json_str(node, "name");
		row[1] = gp_cli_json_str(node, "group");
		row[2] = gp_cli_json_str(node, "state");
		row[3] = used;
		row[4] = models.len > 0 ? models.data : NULL;
		row[5] = min_mem >= 0 ? gpumem : NULL;
		row[6] = cpus;
		row[7] = mem;
		row[8] = jobs.len > 0 ? jobs.data : NULL;
		rc = gp_table_add(&t, row);
		gp_buf_free(&models);
		gp_buf_free(&jobs);
		if (rc != 0)
			break;
	}
	if (rc == 0)
		rc = gp_table_render(&t, out);
	gp_table_fini(&t);
	return rc;
}

int
gp_cli_cmd_nodes(const struct gp_cli_args *args)
{
	return gp_cli_get_list(args, "/v1/nodes", gp_cli_render_nodes);
}

int
gp_cli_cmd_whoami(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	json_t *reply;
	int rc;

	(void)args;
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	rc = gp_cli_call(&conn, "GET", "/v1/whoami", NULL, 0, &reply, NULL);
	if (rc == 0) {
		struct gp_buf groups = {0};
		json_t *g;
		size_t i;

		json_array_foreach(json_object_get(reply, "groups"), i, g)
		    gp_buf_printf(&groups, "%s%s", i ? "," : "",
		        json_string_value(g) ? json_string_value(g) : "?");
		printf("%s (role %s, token id %" JSON_INTEGER_FORMAT
		       "%s%s) at %s\n",
		    gp_cli_json_str(reply, "name") != NULL
		        ? gp_cli_json_str(reply, "name")
		        : "?",
		    gp_cli_json_str(reply, "role") != NULL
		        ? gp_cli_json_str(reply, "role")
		        : "?",
		    json_integer_value(json_object_get(reply, "id")),
		    groups.len > 0 ? ", groups " : "",
		    groups.len > 0 ? groups.data : "", conn.cfg.url);
		gp_buf_free(&groups);
		json_decref(reply);
	}
	gp_cli_disconnect(&conn);
	return rc;
}
