/* status.c — the status table and the per-thread last-error message. */
#include <stdio.h>

#include "base/base.h"

static _Thread_local char ag__errbuf[1024];

const char *ag_status_name(ag_status s) {
  switch (s) {
#define AG__NAME_CASE(code, value, name, desc) \
  case code: return name;
    AG_STATUS_TABLE(AG__NAME_CASE)
#undef AG__NAME_CASE
  }
  return "AG_UNKNOWN_STATUS";
}

const char *ag_status_describe(ag_status s) {
  switch (s) {
#define AG__DESC_CASE(code, value, name, desc) \
  case code: return desc;
    AG_STATUS_TABLE(AG__DESC_CASE)
#undef AG__DESC_CASE
  }
  return "unknown status";
}

const char *ag_last_error(void) { return ag__errbuf; }

void ag_clear_error(void) { ag__errbuf[0] = '\0'; }

ag_status ag__fail(ag_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ag__errbuf, sizeof ag__errbuf, fmt, ap);
  va_end(ap);
  return s;
}
