/*
 * api.h: the HTTP API: routing and authentication (api.c), the agents'
 * handlers (api_agent.c).
 */
#ifndef GP_COORD_API_H
#define GP_COORD_API_H

#include "state.h"

/* api.c */
enum MHD_Result api_handle(void *cls, struct MHD_Connection *conn,
    const char *url, const char *method, const char *version,
    const char *upload_data, size_t *upload_data_size, void **con_cls);
void api_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe);
/*
 * Requests begun and not yet completed (their answer sent, or their
 * connection gone): what a stopping coordinator waits on (main.c).
 */
int api_requests_in_flight(void);

/* api_agent.c */
/*
 * Checks an agent's heartbeat, started or finished body (untrusted):
 * kind is "heartbeat", "started" or "finished". Returns 0 or GP_EINVAL
 * with err set. Fuzzed: tests/fuzz/fuzz_agent_report.c.
 */
int api_check_agent_body(const char *kind, json_t *body, char *err,
    size_t errlen);
/*
 * Checks a batch of reports (POST /v1/agent/reports, untrusted): node_id
 * and 1 to API_REPORTS_MAX reports, each {job_id, attempt, event} plus
 * what a started or finished report carries, every one valid. Returns 0
 * or GP_EINVAL with err naming the first bad report. Fuzzed:
 * tests/fuzz/fuzz_agent_reports.c.
 */
#define API_REPORTS_MAX 1024
int api_check_reports(json_t *body, char *err, size_t errlen);

#endif
